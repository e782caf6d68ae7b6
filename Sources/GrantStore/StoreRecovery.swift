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
    /// `locked`: the caller holds the lock of `folder` (its own; see `shutDown`), and lets go of
    /// it, then calls `removeSettled`.
    ///
    /// tmp/ may be shared by several hosts (issue 41): a folder is settled only by whoever holds
    /// its lock, whichever host it is on; a folder whose lock is held, by a process of this host
    /// or of another, is left alone (a dead host's locks are let go of by the file server once
    /// its lease runs out, and the next recovery anywhere settles its folders).
    @discardableResult
    public static func recover(_ library: Library, only folder: String? = nil, locked: Bool = false) -> Int {
        let fm = FileManager.default
        guard let dirs = folder.map({ [$0] }) ?? (try? fm.contentsOfDirectory(atPath: library.paths.tmp)) else { return 0 }
        var kept = 0
        for d in dirs {
            let dir = library.paths.tmp + "/" + d
            if d.hasPrefix(newFolderPrefix) || d.hasPrefix(goneFolderPrefix) {
                removeAbandoned(library.paths.tmp, d)
                continue
            }
            var fd: Int32 = -1
            if !locked {   // (a caller's own folder is locked already)
                guard let held = takeLock(dir) else { continue }   // alive, or cannot be told
                fd = held
            }
            let settled = settle(library, dir, own: locked, kept: &kept)
            if locked { continue }
            // Let go of first, then removed: the folder holds nothing else now, so a recovery that
            // takes the lock in between finds it empty. (Removed while held, the lock file of an
            // open descriptor is renamed to .nfsXXXX by an NFS client, and the folder stays.)
            Glibc.close(fd)
            if settled { removeSettled(dir) }
        }
        return kept
    }

    /// Settles the files of a temp folder whose lock the caller holds; true when none is left.
    /// `own`: the caller's own folder (at its writer's end), else a dead writer's.
    private static func settle(_ library: Library, _ dir: String, own: Bool, kept: inout Int) -> Bool {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        var later = false
        for name in names where name.hasPrefix(".nfs") {
            // A file its writer removed while a descriptor of it was open on its host (the NFS
            // client's stand-in, which goes with the last descriptor): never one to keep. A dead
            // host's stay for ever unless removed; this process's own go when it closes them.
            if !own { unlink(dir + "/" + name) }
        }
        for name in names where name != ".lock" && !name.hasSuffix(".ready") && !name.hasPrefix(".nfs") {
            let path = dir + "/" + name
            switch recoverFile(library, path: path, id: String(name.prefix { $0 != "." })) {
            case .kept: kept += 1
            case .discard: unlink(path)
            case .later: later = true
            }
        }
        if later { return false }
        for name in names where name.hasSuffix(".ready") { unlink(dir + "/" + name) }
        return true
    }

    /// Removes a settled temp folder (its lock let go of): its lock file, then it.
    static func removeSettled(_ dir: String) {
        unlink(dir + "/.lock")
        rmdir(dir)
    }

    /// Where a folder being made goes once a recovery takes it away from its (dead) maker.
    static let goneFolderPrefix = ".gone-"

    /// The lock of a temp folder, taken (an open descriptor) when nobody holds it: its writer is
    /// gone, on whichever host it ran. Nil when it is held, or when that cannot be told.
    static func takeLock(_ dir: String) -> Int32? {
        let lock = dir + "/.lock"
        var fd = Glibc.open(lock, O_RDWR | O_CLOEXEC)
        if fd < 0 && errno == ENOENT {
            // No lock file: a writer never shows such a folder (`makeFolder`), so it is one an
            // earlier photogate left, or one a recovery is removing. Locked with a lock file of
            // its own, so that two recoveries never settle it at once.
            fd = Glibc.open(lock, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            if fd < 0 && errno == EEXIST { fd = Glibc.open(lock, O_RDWR | O_CLOEXEC) }
        }
        // A lock that cannot be opened now (out of descriptors, not a file) may be held.
        guard fd >= 0 else { return nil }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { Glibc.close(fd); return nil }
        // Still the folder's lock: another recovery may have settled the folder and removed this
        // file between our open and our lock (a new lock file there is someone else's).
        var held = stat(), named = stat()
        guard fstat(fd, &held) == 0, stat(lock, &named) == 0, held.st_ino == named.st_ino, held.st_dev == named.st_dev else {
            Glibc.close(fd)
            return nil
        }
        return fd
    }

    /// A folder being made (`makeFolder`) whose maker is gone, or that was taken from it: moved
    /// out of its maker's way (to `.gone-<random>`) once its lock is ours, or when it has no lock
    /// file yet, then removed. A live maker then fails to lock it or to rename it, and makes
    /// another. Nothing of a writer's is ever in one: it gets files only once renamed.
    static func removeAbandoned(_ tmp: String, _ name: String) {
        let dir = tmp + "/" + name
        if name.hasPrefix(newFolderPrefix) {
            let fd = Glibc.open(dir + "/.lock", O_RDWR | O_CLOEXEC)
            if fd < 0 && errno != ENOENT { return }
            if fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0 { Glibc.close(fd); return }   // its maker holds it
            let gone = tmp + "/" + goneFolderPrefix + randomID()
            let moved = rename(dir, gone) == 0
            if fd >= 0 { Glibc.close(fd) }
            guard moved else { return }
            clearGone(gone)
        } else {
            clearGone(dir)
        }
    }

    /// Removes a folder taken from its maker: nothing is in it but its lock file (or the name an
    /// NFS client gave it, while its maker still had it open).
    private static func clearGone(_ dir: String) {
        for (n, _) in Directory.entries(dir) where n == ".lock" || n.hasPrefix(".nfs") { unlink(dir + "/" + n) }
        rmdir(dir)
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
