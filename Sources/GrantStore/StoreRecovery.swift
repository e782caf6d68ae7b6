import Foundation
import GRDB
import LibraryRun
import PhotoLibrary
import PGSystem
import Redaction
#if canImport(Glibc)
import Glibc
#endif

/// Recovery of the temp folders of dead processes (and of a writer's own folder at its end), and
/// the ready marker a temp file carries when its close succeeded while the catalog could not take
/// it: what recovery commits after a crash. Kept apart from StoreWriter's commit path, which
/// writes what this reads.
extension StoreWriter {
    /// Recovers temp folders of dead processes. Returns how many files were kept (rolled forward
    /// into the store, or committed from a "ready" marker).
    ///
    /// A temp file has one of three fates: its catalog row was committed (rename it into the
    /// store); it has a `.ready` marker, written when the app's close(2) succeeded (commit it now,
    /// as the app's asset); or neither (an incomplete write: delete it). A file whose fate cannot
    /// be settled now, because the database cannot be read or refuses the commit for another
    /// reason than the file itself (busy, failing, full), stays with its folder for a later
    /// recovery: a file whose close returned 0 is never deleted for want of the database.
    /// `locked`: the caller holds the lock of `folder` (its own; see `shutDown`).
    @discardableResult
    public static func recover(_ library: Library, only folder: String? = nil, locked: Bool = false) -> Int {
        let fm = FileManager.default
        guard let dirs = folder.map({ [$0] }) ?? (try? fm.contentsOfDirectory(atPath: library.paths.tmp)) else { return 0 }
        var kept = 0
        for d in dirs {
            let dir = library.paths.tmp + "/" + d
            var fd: Int32 = -1
            if !locked {   // (a caller's own folder is locked already)
                fd = Glibc.open(dir + "/.lock", O_RDWR | O_CLOEXEC)
                if fd >= 0 {
                    if flock(fd, LOCK_EX | LOCK_NB) != 0 { Glibc.close(fd); continue }   // alive
                } else if errno != ENOENT {
                    continue   // a lock that cannot be opened now (out of descriptors) may be held
                }
            }
            defer { if fd >= 0 { Glibc.close(fd) } }
            let names = (try? fm.contentsOfDirectory(atPath: dir)) ?? []
            var later = false
            for name in names where name != ".lock" && !name.hasSuffix(".ready") {
                let path = dir + "/" + name
                switch recoverFile(library, path: path, id: String(name.prefix { $0 != "." })) {
                case .kept: kept += 1
                case .discard: unlink(path)
                case .later: later = true
                }
            }
            if later { continue }
            for name in names where name.hasSuffix(".ready") { unlink(dir + "/" + name) }
            unlink(dir + "/.lock")
            rmdir(dir)
        }
        return kept
    }

    private enum Recovered { case kept, discard, later }

    /// One file of a dead process's temp folder (see `recover`).
    private static func recoverFile(_ library: Library, path: String, id: String) -> Recovered {
        func moveIntoStore(_ rel: String) -> Recovered {
            // A row naming a store path photogate never writes (a damaged catalog): the file is
            // moved nowhere by it, nor deleted; `photogate verify` reports both.
            guard StorePath.isValid(rel) else { return .later }
            // Already there (a rename that did happen): this is a leftover link or copy.
            guard Glibc.access(library.paths.store + "/" + rel, F_OK) != 0 else { return .discard }
            return (try? install(library, tempPath: path, storePath: rel, durable: true)) != nil ? .kept : .later
        }
        if id.count == 16 {
            let committed: (asset: String?, version: String?, sidecar: String?)
            do {
                committed = try library.read { db in
                    (try String.fetchOne(db, sql: "SELECT store_path FROM assets WHERE id = ?", arguments: [id]),
                     try String.fetchOne(db, sql: "SELECT store_path FROM versions WHERE file_id = ?", arguments: [id]),
                     try String.fetchOne(db, sql: "SELECT store_path FROM sidecars WHERE file_id = ?", arguments: [id]))
                }
            } catch {
                return .later
            }
            if let rel = committed.asset { return moveIntoStore(rel) }
            // A committed version of an asset (an edit): rolled forward like a new asset.
            if let rel = committed.version { return moveIntoStore(rel) }
            // A committed sidecar version (issue 37): the same.
            if let rel = committed.sidecar { return moveIntoStore(rel) }
        }
        let marker: ReadyMarker
        switch ReadyMarker.probe(temp: path) {
        case .marked(let m): marker = m
        case .unmarked: return .discard   // incomplete
        case .unknown: return .later      // a marker that cannot be read now is not no marker
        }
        let tfd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard tfd >= 0 else { return .later }
        defer { Glibc.close(tfd) }
        do {
            if let edited = marker.edit {
                // An edit whose close succeeded: it becomes the asset's new version.
                guard let rowID = try library.resolve([edited]).first?.rowID else { return .discard }
                _ = try library.commitVersion(rowID: rowID, app: marker.app, tempPath: path, fd: tfd)
            } else {
                _ = try commit(library: library, tempPath: path, fd: tfd, id: id, app: marker.app,
                               name: marker.name, album: marker.album)
            }
        } catch {
            switch error as? LibraryError {
            // The file itself is refused (not media), or the asset it edits is gone: nothing to keep.
            case .badInput?, .unknownAssets?: return .discard
            default: return .later
            }
        }
        unlink(path + ".ready")
        // Committed. Its move into the store failed if it is still here: its row names it, and
        // the next recovery moves it (and counts it then).
        return Glibc.access(path, F_OK) == 0 ? .later : .kept
    }

}

/// The sidecar of a temp file whose close succeeded: who wrote it and under which name.
struct ReadyMarker: Codable {
    var app: AppID
    var name: String
    var album: String?
    /// Set for an edit: the id of the asset the file is a new version of.
    var edit: String? = nil

    func write(_ path: String) throws {
        let data = try JSONEncoder().encode(self)
        let tmp = path + ".tmp"
        let fd = Glibc.open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StoreWriter.ioError(errno, "create \(tmp)") }
        defer { Glibc.close(fd) }
        let n = data.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        guard n == data.count else { let e = errno; unlink(tmp); throw StoreWriter.ioError(n < 0 ? e : ENOSPC, "write \(tmp)") }
        guard fsync(fd) == 0 else { let e = errno; unlink(tmp); throw StoreWriter.ioError(e, "fsync") }
        guard rename(tmp, path) == 0 else { throw StoreWriter.ioError(errno, "rename \(tmp)") }
        fsyncDirectory(of: path)
    }

    static let xattr = "user.photogate.ready"

    static func read(_ path: String) -> ReadyMarker? { decoded(FileManager.default.contents(atPath: path)) }

    static func decoded(_ data: Data?) -> ReadyMarker? { data.flatMap { try? JSONDecoder().decode(ReadyMarker.self, from: $0) } }

    /// The marker of a temp file: its extended attribute, else its sidecar file.
    static func find(temp path: String) -> ReadyMarker? {
        if case .marked(let m) = probe(temp: path) { return m }
        return nil
    }

    enum Probe { case marked(ReadyMarker), unmarked, unknown }

    /// Whether a temp file is marked: `unknown` when a marker may be there but cannot be read now
    /// (an error other than "none"), so that recovery never takes it for an incomplete file.
    static func probe(temp path: String) -> Probe {
        var buf = [UInt8](repeating: 0, count: 4096)
        let n = buf.withUnsafeMutableBytes { pg_getxattr(path, xattr, $0.baseAddress, UInt($0.count)) }
        if n > 0 {
            guard let m = try? JSONDecoder().decode(ReadyMarker.self, from: Data(buf[0..<n])) else { return .unknown }
            return .marked(m)
        }
        if n < 0 && errno != ENODATA && errno != ENOTSUP && errno != EOPNOTSUPP { return .unknown }
        // Opened once: "none" (ENOENT) told from "unreadable", and read from that descriptor.
        let fd = Glibc.open(path + ".ready", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return errno == ENOENT ? .unmarked : .unknown }
        let file = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        guard let m = decoded(try? file.readToEnd()) else { return .unknown }
        return .marked(m)
    }
}
