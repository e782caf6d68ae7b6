import Foundation
import LibraryRun
import PGSystem
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

    /// Throws `catalogFileGone` when the log, the index or the database itself is missing or
    /// another file than the one another process holds the library open through. Reads
    /// `/proc/locks` (never opens the database file: a close of any descriptor of it would drop
    /// the locks SQLite holds in this process).
    static func checkNotOrphaned(_ paths: LibraryPaths) throws {
        var st = stat()
        let mark = markedFiles(paths)
        func fail(_ suffix: String, replaced: Bool, _ holders: [Int32]) throws -> Never {
            throw LibraryError.catalogFileGone(library: paths.root, file: paths.database + suffix, replaced: replaced,
                                               holders: holders.map { describe(pid: $0) })
        }
        // The database replaced by a rename (a restore over a running mount): its processes hold
        // the old file, whose number the mark keeps.
        if let db = mark?.db, stat(paths.database, &st) == 0, Library.identity(st) != db {
            let old = holders(device: db, range: sharedFirst...sharedLast)
            if !old.isEmpty { try fail("", replaced: true, old) }
        }
        let dbHolders = otherHolders(of: paths.database)
        guard !dbHolders.isEmpty else { return }
        for suffix in ["-wal", "-shm"] where lstat(paths.database + suffix, &st) != 0 && errno == ENOENT {
            try fail(suffix, replaced: false, dbHolders)
        }
        // A log at its name that is not the one the processes in use write (the mark says which).
        if let wal = mark?.wal, lstat(paths.database + "-wal", &st) == 0, Library.identity(st) != wal {
            try fail("-wal", replaced: true, dbHolders)
        }
        // An index at its name that is not the one they use. Each holds a read lock on its own
        // index's byte 128 (SQLite's DMS lock) while it has the library open; one that holds the
        // database's lock and not that one is either opening or closing (tens of milliseconds on
        // a busy machine: a timing window gave ordinary commands a false 69 in 2-4% of runs under
        // 25 parallel loops) or using another index. Only a process that has another file mapped
        // under the index's name counts, read from its /proc/PID/maps: deterministic.
        guard lstat(paths.database + "-shm", &st) == 0 else { return }
        let index = Library.identity(st)
        let onIndex = Set(holders(device: index, range: 128...128))
        let strangers = dbHolders.filter { !onIndex.contains($0) && mapsAnotherIndex(pid: $0, path: paths.database + "-shm", index: index) }
        if !strangers.isEmpty { try fail("-shm", replaced: true, strangers) }
    }

    /// Whether process `pid` has a file mapped under the index's name (`path`, or `path (deleted)`)
    /// whose inode is not `index`'s: the index it opened, gone from or replaced at that name.
    static func mapsAnotherIndex(pid: Int32, path: String, index: [UInt64]) -> Bool {
        guard let text = readProc("/proc/\(pid)/maps") else { return false }
        for line in text.split(separator: "\n") where line.hasSuffix(path) || line.hasSuffix(path + " (deleted)") {
            // "7f..-7f.. rw-s 00000000 fe:00 16294032   /lib/photogate.sqlite-shm"
            let f = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            guard f.count >= 6, let inode = UInt64(f[4]) else { continue }
            if inode != index[1] { return true }
        }
        return false
    }

    /// A /proc file, whole. Its size says 0, and Foundation's readers stop after a first page
    /// (4 KiB): /proc/locks on a busy machine, or a daemon's maps, were cut, and holders missed.
    static func readProc(_ path: String) -> String? {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        var out = [UInt8]()
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = Glibc.read(fd, &buf, buf.count)
            if n < 0 { if errno == EINTR { continue }; return nil }
            if n == 0 { break }
            out.append(contentsOf: buf[0..<n])
            if out.count > 64 << 20 { break }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The processes other than this one that hold a POSIX lock in the database's shared range.
    static func otherHolders(of database: String, locks: String? = nil) -> [Int32] {
        var st = stat()
        guard stat(database, &st) == 0 else { return [] }
        return holders(device: Library.identity(st), range: sharedFirst...sharedLast, locks: locks)
    }

    /// The processes other than this one holding a POSIX (or OFD) lock over `range` of the file
    /// `device` (its device and inode, `Library.identity`), from `/proc/locks`.
    static func holders(device identity: [UInt64], range: ClosedRange<UInt64>, locks: String? = nil) -> [Int32] {
        guard identity.count == 2 else { return [] }
        let dev = identity[0]
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & ~UInt64(0xfff))
        let minor = (dev & 0xff) | ((dev >> 12) & ~UInt64(0xff))
        let device = String(format: "%02llx:%02llx:%llu", major, minor, identity[1])
        guard let text = locks ?? readProc("/proc/locks") else { return [] }
        let me = getpid()
        var pids: [Int32] = []
        for line in text.split(separator: "\n") {
            // "12: POSIX  ADVISORY  READ 21083 fe:00:16293999 1073741826 1073742335"; a waiter's
            // line has "->" after the number, and is not a holder.
            let f = line.split(separator: " ", omittingEmptySubsequences: true)
            guard f.count >= 8, f[1] == "POSIX" || f[1] == "OFDLCK",
                  f[5] == device, let pid = Int32(f[4]), pid != me, !pids.contains(pid),
                  let start = UInt64(f[6]) else { continue }
            let end = f[7] == "EOF" ? UInt64.max : (UInt64(f[7]) ?? UInt64.max)
            if start <= range.upperBound && end >= range.lowerBound { pids.append(pid) }
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

/// The log's commits that are not yet in the database file (issue 34: "the catalog lives only in
/// the WAL"). Once the last process lets go, the database file holds everything (its close
/// checkpoints the log and empties it). Until then, a log removed or replaced with no process
/// holding it (after a kill, a crash, a power cut: what it held was never checkpointed) leaves
/// SQLite the older catalog in the database file, and every command would carry on over it as if
/// nothing had happened: a revoke undone, photos in the store that no asset names.
///
/// So before its first commit a process marks the library in use (`run/catalog-in-use`, holding
/// the log's device and inode, synced), and the last process to let go removes the mark once the
/// log is empty. A process that opens the library and finds the mark while the log at its name is
/// missing or another file, and nobody holds the library open, says that changes may have been
/// lost (exit 75) until the person accepts it (`photogate verify --accept-lost-log`). A log
/// truncated in place (same inode) after a kill is not told apart from one emptied by a
/// checkpoint: docs/guide.md ("Backups, and a damaged catalog") says so.
extension CatalogFiles {
    static let markName = RunFolder.catalogInUse

    /// What the mark records: the log's identity (device, inode) and the database's, or nil when
    /// there is no mark. A mark is written whole or not at all (`mark`): one that is not two or
    /// four numbers was not written by photogate and counts as none.
    struct Mark: Equatable { var wal: [UInt64]; var db: [UInt64]?; var folder: [UInt64]? = nil }

    static func markedFiles(_ paths: LibraryPaths) -> Mark? {
        let fd = pg_open_in_folder(paths.run, nil, markName, O_RDONLY, 0)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        var buf = [UInt8](repeating: 0, count: 256)
        let n = Glibc.read(fd, &buf, buf.count)
        let words = String(decoding: buf.prefix(max(0, n)), as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" })
        let values = words.compactMap { UInt64($0) }
        guard values.count == words.count else { return nil }
        switch values.count {
        case 2: return Mark(wal: values, db: nil)
        case 4: return Mark(wal: Array(values[0..<2]), db: Array(values[2..<4]))
        case 6:
            // A mark of another folder (the library copied with cp -a, or moved to another disk,
            // while it was in use): its numbers name that folder's files, not these.
            let folder = Array(values[4..<6])
            var st = stat()
            guard stat(paths.root, &st) == 0, Library.identity(st) == folder else { return nil }
            return Mark(wal: Array(values[0..<2]), db: Array(values[2..<4]), folder: folder)
        default: return nil
        }
    }

    /// The mark this process would write now, for comparing with the one there.
    static func currentMark(_ paths: LibraryPaths, log: [UInt64]) -> Mark {
        var st = stat()
        let db = stat(paths.database, &st) == 0 ? Library.identity(st) : nil
        let folder = stat(paths.root, &st) == 0 ? Library.identity(st) : nil
        return Mark(wal: log, db: db, folder: folder)
    }

    static func markedLog(_ paths: LibraryPaths) -> [UInt64]? { markedFiles(paths)?.wal }

    /// Marks the library in use by a log and a database of these identities: written to a temp
    /// file, synced, and renamed into place (a kill or a full disk never leaves half a mark), the
    /// folder synced, before the commit it comes before.
    static func mark(_ paths: LibraryPaths, log: [UInt64]) throws {
        let m = currentMark(paths, log: log)
        var numbers = log
        if let db = m.db {
            numbers += db
            if let folder = m.folder { numbers += folder }
        }
        let text = Array((numbers.map(String.init).joined(separator: " ") + "\n").utf8)
        // A name of its own: processes starting together each write theirs (one shared temp name
        // was renamed away under another process, ENOENT).
        let temp = markName + ".\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp"
        func failure(_ e: Int32) -> LibraryError {
            e == ENOSPC || e == EDQUOT ? .noSpace("cannot write \(paths.run)/\(markName), the library's in-use mark")
                : .io("cannot write \(paths.run)/\(markName), the library's in-use mark: \(String(cString: strerror(e)))"
                      + (e == ENOTDIR || e == ELOOP ? " (the library's run folder must be a folder, not a link)" : ""))
        }
        let fd = pg_open_in_folder(paths.run, nil, temp, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw failure(errno) }
        let ok = Glibc.write(fd, text, text.count) == text.count && fsync(fd) == 0
        let e = errno
        Glibc.close(fd)
        guard ok else { unlinkat(AT_FDCWD, paths.run + "/" + temp, 0); throw failure(e) }
        let dir = Glibc.open(paths.run, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)
        guard dir >= 0 else { unlinkat(AT_FDCWD, paths.run + "/" + temp, 0); throw failure(errno) }
        defer { Glibc.close(dir) }
        guard renameat(dir, temp, dir, markName) == 0 else {
            let e = errno
            unlinkat(dir, temp, 0)
            throw failure(e)
        }
        _ = fsync(dir)
        // Temp marks of processes killed while writing theirs: clutter, removed.
        for (name, _) in Directory.entries(paths.run) where name.hasPrefix(markName + ".") && name.hasSuffix(".tmp") {
            let parts = name.split(separator: ".")
            if parts.count >= 3, let pid = Int32(parts[1]), pid != getpid(), kill(pid, 0) != 0 && errno == ESRCH {
                unlinkat(dir, name, 0)
            }
        }
    }

    /// At the end of the last process (its pool closed, the log emptied by the close's
    /// checkpoint): the mark goes. Should another process have opened the library meanwhile (and
    /// seen the mark, so not made its own), the mark is put back for it.
    static func unmark(_ paths: LibraryPaths) { unlinkat(AT_FDCWD, paths.run + "/" + markName, 0) }

    /// `logSaved`: the log this process held had been removed or replaced, and all it held went
    /// into the database (`Library.rescueLog`): no log at the name is left to check.
    static func unmarkIfLast(_ paths: LibraryPaths, logSaved: Bool = false) {
        guard let log = markedLog(paths), otherHolders(of: paths.database).isEmpty else { return }
        var st = stat()
        let present = lstat(paths.database + "-wal", &st) == 0
        if !logSaved {
            guard present, st.st_size == 0, Library.identity(st) == log else { return }
        }
        unlinkat(AT_FDCWD, paths.run + "/" + markName, 0)
        if !otherHolders(of: paths.database).isEmpty {
            if present { try? mark(paths, log: Library.identity(st)) } else { try? mark(paths, log: log) }
        }
    }

    /// Throws when the mark names a log that is no longer at its name while no process holds the
    /// library (see above). `accept`: the person accepts the loss; the mark goes, with a warning.
    static func checkLogNotLost(_ paths: LibraryPaths, accept: Bool) throws {
        guard let log = markedLog(paths) else { return }
        var st = stat()
        let present = lstat(paths.database + "-wal", &st) == 0
        if present && Library.identity(st) == log { return }
        // Held open by running processes: their log, wherever it is (checkNotOrphaned).
        guard otherHolders(of: paths.database).isEmpty else { return }
        if accept {
            unlinkat(AT_FDCWD, paths.run + "/" + markName, 0)
            FileHandle.standardError.write(Data("photogate: warning: the catalog's write-ahead log was \(present ? "replaced" : "removed") after photogate last ran without closing the library; accepted: the catalog is what the database file held at its last checkpoint, with what the log now at its name holds\n".utf8))
            return
        }
        throw LibraryError.catalogLogLost(library: paths.root, replaced: present)
    }
}
