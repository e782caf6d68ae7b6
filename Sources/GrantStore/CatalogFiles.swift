import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The catalog's three files (`photogate.sqlite`, its write-ahead log `-wal` and its shared index
/// `-shm`) as the processes that have the library open share them.
///
/// SQLite finds the log and the index by name, once, when a connection opens; the processes that
/// have them open keep using those files whatever happens to the names. Remove one under a running
/// mount and the next process makes a new one beside it: with the index, two writers each believe
/// they are alone and write their commits over each other's frames (a grant made this way was
/// reported done, then the catalog failed SQLite's checks); with the log, the new process reads an
/// index that describes frames of a file it does not have ("disk I/O error"), or the two write two
/// logs under one index. So a process never opens the library while another holds it through files
/// that are no longer at their names: it says so, and what to do, instead (`checkNotOrphaned`).
enum CatalogFiles {
    /// SQLite's shared-lock range on the database file (`SHARED_FIRST`, `SHARED_SIZE` in its unix
    /// VFS): every connection in WAL mode holds a read lock in it for as long as it is open.
    static let sharedFirst: UInt64 = 0x4000_0002
    static let sharedLast: UInt64 = 0x4000_0002 + 510 - 1

    /// Throws `catalogFileGone` when the log or the index is missing while another process holds
    /// the database open. Reads `/proc/locks` (never opens the database file: a close of any
    /// descriptor of it would drop the locks SQLite holds in this process).
    static func checkNotOrphaned(_ paths: LibraryPaths) throws {
        var st = stat()
        let missing = ["-wal", "-shm"].filter { lstat(paths.database + $0, &st) != 0 && errno == ENOENT }
        guard let gone = missing.first else { return }
        let holders = otherHolders(of: paths.database)
        guard !holders.isEmpty else { return }
        throw LibraryError.catalogFileGone(library: paths.root, file: paths.database + gone,
                                           holders: holders.map { describe(pid: $0) })
    }

    /// The processes other than this one that hold a POSIX lock in the database's shared range.
    static func otherHolders(of database: String, locks: String? = nil) -> [Int32] {
        var st = stat()
        guard stat(database, &st) == 0 else { return [] }
        let dev = UInt64(st.st_dev)
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & ~UInt64(0xfff))
        let minor = (dev & 0xff) | ((dev >> 12) & ~UInt64(0xff))
        let device = String(format: "%02llx:%02llx:%llu", major, minor, UInt64(st.st_ino))
        guard let text = locks ?? (try? String(contentsOfFile: "/proc/locks", encoding: .utf8)) else { return [] }
        let me = getpid()
        var pids: [Int32] = []
        for line in text.split(separator: "\n") {
            // "12: POSIX  ADVISORY  READ 21083 fe:00:16293999 1073741826 1073742335"; a waiter's
            // line has "->" after the number, and is not a holder.
            let f = line.split(separator: " ", omittingEmptySubsequences: true)
            guard f.count >= 8, f[1] == "POSIX" || f[1] == "OFDLCK", f[1] != "->",
                  f[5] == device, let pid = Int32(f[4]), pid != me, !pids.contains(pid),
                  let start = UInt64(f[6]) else { continue }
            let end = f[7] == "EOF" ? UInt64.max : (UInt64(f[7]) ?? UInt64.max)
            if start <= sharedLast && end >= sharedFirst { pids.append(pid) }
        }
        return pids
    }

    /// "pid 123 (photogate mount org.example.Editor /home/a/mnt)": what a person recognises.
    static func describe(pid: Int32) -> String {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline"), !data.isEmpty else { return "pid \(pid)" }
        var words = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        if let first = words.first { words[0] = (first as NSString).lastPathComponent }
        var line = words.joined(separator: " ")
        if line.count > 120 { line = String(line.prefix(117)) + "..." }
        return "pid \(pid) (\(line.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7f ? "?" : String($0) }.joined()))"
    }
}
