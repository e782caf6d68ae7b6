import Foundation
import GRDB
import LibraryRun
import PhotoLibrary
import PGSystem
import Redaction
import Synchronization
import Threads
#if canImport(Glibc)
import Glibc
#endif

/// Facts about a complete, validated file that is about to become an asset.
public struct NewAssetFacts: Sendable {
    public var scan: MediaScan
    public var byteSize: UInt64
    public var contentHash: String
    public var fileDate: Date
}

/// Puts new originals into the store so that a crash at any point leaves either no asset or a
/// whole one:
///   1. the bytes go to `tmp/<purpose>-<pid>-<random>/<id>.part` and are fsynced;
///   2. the catalog row is committed and its log synced;
///   3. the file is renamed into `store/<id[0..2]>/<id>.<ext>` (no sync of its own: a lost rename
///      is redone by recovery, which finds the row).
/// Each process's temp folder is held with an exclusive `flock`; a folder whose lock can be taken
/// belongs to a dead process and is recovered: files whose row was committed are rolled forward
/// into the store, marked files are committed, all others deleted.
///
/// The store and tmp/ may be shared by several hosts (a linked library's shared folder, on NFS or
/// CephFS: issue 41), so nothing here tells a live writer from a dead one by its pid or by a lock
/// local to one host: only the folder's `flock`, which an NFSv4 server keeps for the host that
/// holds it (and lets go of once that host's lease runs out, when it died). A temp folder appears
/// under its name only with its lock already held (it is made and locked as `.new-<random>`,
/// then renamed), so no recovery, on any host, ever takes a live writer's folder for a dead one;
/// and a folder is settled only by whoever holds its lock. Names are random (64 bits), never
/// derived from the pid or the host alone.
public final class StoreWriter: @unchecked Sendable {
    public let library: Library
    public let tmpDir: String
    private var lockFD: Int32

    public init(library: Library, purpose: String) throws {
        self.library = library
        StoreWriter.recover(library)
        (tmpDir, lockFD) = try StoreWriter.makeFolder(in: library.paths.tmp, purpose: purpose)
    }

    /// The prefix of a temp folder being made (see `makeFolder`): recovery only removes one
    /// whose lock it holds, or that is empty, and `verify` does not report one.
    static let newFolderPrefix = ".new-"

    /// Tests only: runs once the lock file of a folder being made exists, before it is locked
    /// (where another host's recovery may come in).
    static let beforeFolderLock = Mutex<(@Sendable (String) -> Void)?>(nil)

    /// A temp folder of this process's, already locked when it appears under its name: made as
    /// `tmp/.new-<random>` with its `.lock`, locked, then renamed to `<purpose>-<pid>-<random>`.
    /// Made and locked in place, a recovery elsewhere (another process, another host) that came
    /// between the folder and its lock took the folder for a dead one and removed it, and this
    /// writer then held the lock of a file no longer in any folder. A recovery can still remove
    /// the folder while it is `.new-`: then the rename fails (or the lock was not ours), and a new
    /// one is made.
    static func makeFolder(in tmp: String, purpose: String) throws -> (String, Int32) {
        if mkdir(tmp, 0o700) != 0 && errno != EEXIST { throw ioError(errno, "cannot create \(tmp)") }
        for _ in 0..<16 {
            let random = randomID()
            let making = tmp + "/" + newFolderPrefix + random
            guard mkdir(making, 0o700) == 0 else {
                if errno == EEXIST { continue }
                throw ioError(errno, "cannot create \(making)")
            }
            let fd = Glibc.open(making + "/.lock", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard fd >= 0 else {
                if errno == ENOENT { continue }   // removed (empty) by a recovery: again
                throw ioError(errno, "cannot create \(making)/.lock")
            }
            beforeFolderLock.withLock { $0 }?(making)
            guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
                let e = errno
                Glibc.close(fd)
                if e == EWOULDBLOCK { continue }   // a recovery holds it, and removes the folder
                rmdirLeftover(making)
                throw LibraryError.io("cannot lock \(making)/.lock: \(String(cString: strerror(e)))" + (e == ENOLCK || e == ENOSYS || e == EOPNOTSUPP
                    ? " (the filesystem of \(tmp) has no working flock across hosts: on NFSv3 that needs lockd, see the README)" : ""))
            }
            // Who holds it, for people (`photogate verify` says so of a dead one); nothing reads
            // it to decide.
            let owner = Array("host \(hostName()) pid \(getpid())\n".utf8)
            _ = owner.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            let dir = tmp + "/\(purpose)-\(getpid())-\(random)"
            guard rename(making, dir) == 0 else {
                let e = errno
                Glibc.close(fd)
                if e == ENOENT { continue }   // a recovery got its lock first (before ours) and removed it
                rmdirLeftover(making)
                throw ioError(e, "cannot rename \(making) to \(dir)")
            }
            return (dir, fd)
        }
        throw LibraryError.io("cannot make a temp folder in \(tmp): a recovery removed each one as it was made")
    }

    /// Removes a folder being made that this process gives up on (its lock file, then it).
    private static func rmdirLeftover(_ making: String) {
        unlink(making + "/.lock")
        rmdir(making)
    }

    static func hostName() -> String {
        var buf = [UInt8](repeating: 0, count: 256)
        guard gethostname(&buf, buf.count - 1) == 0 else { return "?" }
        return String(decoding: buf.prefix { $0 != 0 }, as: UTF8.self)
    }

    deinit { shutDown() }

    /// The process is done writing (a mount's daemon at its unmount; any writer when it goes).
    /// Its temp folder goes the way of a dead process's (`recover`) now rather than at the next
    /// start, where until then `photogate verify` reported it: files whose row committed roll
    /// forward, marked files (their close had succeeded; the database was unavailable) are
    /// committed, or kept for a later recovery if it still is, and the rest, incomplete, are
    /// deleted. Other processes' folders are left to the next start.
    /// Settled while this writer still holds the folder's lock, and let go of after: letting go
    /// first and taking it again failed whenever a child forked by another thread (any spawn,
    /// until its exec) held a copy of the lock's descriptor, and the folder was left as if live.
    public func shutDown() {
        guard lockFD >= 0 else { return }
        StoreWriter.recover(library, only: (tmpDir as NSString).lastPathComponent, locked: true)
        Glibc.close(lockFD)   // lets go of the lock
        lockFD = -1
        // Removed once let go of (see `recover`), when nothing is left in it; else it waits for
        // the next recovery, its lock free.
        if Directory.entries(tmpDir).allSatisfy({ $0.0 == ".lock" }) { StoreWriter.removeSettled(tmpDir) }
    }

    public static func randomID() -> String {
        var rng = SystemRandomNumberGenerator()
        return String(format: "%016llx", UInt64.random(in: 0...UInt64.max, using: &rng))
    }

    static func storeRelativePath(id: String, kind: MediaKind) -> String {
        LibraryLayout.storeRelativePath(id: id, ext: kind.preferredExtension)
    }

    /// A new temp file in this process's folder, for an asset id chosen now.
    public func makeTemp(extension ext: String = "part") throws -> (id: String, path: String, fd: Int32) {
        let id = StoreWriter.randomID()
        let path = tmpDir + "/\(id).\(ext)"
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StoreWriter.ioError(errno, "cannot create \(path)") }
        return (id, path, fd)
    }

    static func ioError(_ e: Int32, _ what: String) -> LibraryError {
        if e == ENOSPC || e == EDQUOT { return .noSpace(what) }
        return .io("\(what): \(String(cString: strerror(e)))")
    }

    /// Scans a complete file, refusing what is not a photo or a video.
    public static func scan(fd: Int32) throws -> (MediaScan, UInt64, Date) {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw ioError(errno, "stat") }
        let size = UInt64(st.st_size)
        let scan: MediaScan
        do {
            scan = try MediaScanner.scan(fd: fd, size: size)
        } catch {
            switch error {
            case .notMedia: throw LibraryError.badInput("not a photo or video")
            case .truncated(let m): throw LibraryError.badInput("truncated: \(m)")
            case .malformed(let m): throw LibraryError.badInput("malformed: \(m)")
            case .io(let e): throw ioError(e, "read")
            }
        }
        let date = Date(timeIntervalSince1970: Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9)
        return (scan, size, date)
    }

    /// Hashes a file from its start (SHA-256, "sha256:<hex>").
    public static func hash(fd: Int32, size: UInt64) throws -> String {
        let h = SHA256()
        let chunk = 1 << 20
        let buf = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buf.deallocate() }
        var off: UInt64 = 0
        while off < size {
            let n = pread(fd, buf.baseAddress, min(chunk, Int(size - off)), off_t(off))
            if n < 0 { if errno == EINTR { continue }; throw ioError(errno, "read") }
            if n == 0 { break }
            h.update(UnsafeRawBufferPointer(rebasing: buf[0..<n]))
            off += UInt64(n)
        }
        return "sha256:" + hexString(h.finalize())
    }

    /// Inserts the catalog row (inside the caller's transaction), choosing a unique display name.
    static func insertRow(_ db: Database, id: String, name wanted: String, owner: AppID?, ownerName: String?,
                          facts: NewAssetFacts, storePath: String?, referencePath: String?, shared: Bool) throws -> Asset {
        let taken = try db.cachedStatement(sql: "SELECT 1 FROM assets WHERE display_name = ?")
        let name = DisplayName.unique(DisplayName.sanitize(Array(wanted.utf8))) { candidate in
            (try? Bool.fetchOne(taken, arguments: [candidate])) != nil
        }
        let scan = facts.scan
        var redaction: [UInt8]? = nil
        var refusal: String? = nil
        switch scan.redaction {
        case .plan(let p): redaction = p.serialized()
        case .refuse(let why): refusal = why
        }
        let now = Library.now()
        let capture = (scan.captureDate ?? facts.fileDate).timeIntervalSince1970
        try db.cachedStatement(sql: """
            INSERT INTO assets (rowid, id, display_name, owner_app, owner_name, media_kind, media_class, byte_size, capture_date,
                added_at, has_location, content_hash, is_shared, store_path, reference_path, redaction, redaction_refusal,
                redaction_version)
            VALUES (\(Library.nextAssetRowIDSQL), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """).execute(arguments: [id, name, owner?.rawValue, ownerName, scan.kind.rawValue,
                             scan.kind.isVideo ? "video" : "photo", Int64(facts.byteSize), capture, now,
                             scan.hasLocation, facts.contentHash, shared, storePath, referencePath,
                             redaction.map { Data($0) }, refusal, MediaScanner.version])
        let rowID = db.lastInsertedRowID
        try Library.record(db, .insert, app: owner?.rawValue, asset: rowID)
        // A set grant (a date range, a kind) that covers the new asset selects it (issue 38).
        try Library.refreshSetSelections(db, [rowID])
        return Library.asset(try Row.fetchOne(db.cachedStatement(sql: "SELECT \(Library.assetColumns) FROM assets WHERE rowid = ?"), arguments: [rowID])!)
    }

    /// Moves a committed temp file into the store; durably unless the caller syncs a batch itself.
    func install(tempPath: String, storePath rel: String, durable: Bool = true) throws {
        try StoreWriter.install(library, tempPath: tempPath, storePath: rel, durable: durable)
    }

    /// Moves a temp file whose row is committed into the store (its folder made owner-only, as
    /// the library on disk is private to its owner). Once the row is committed it names the file,
    /// so a caller that cannot move it now (no room for a new folder, an I/O error) leaves it in
    /// the temp folder under its id, where recovery (at the process's end, or the next start)
    /// moves it: deleting it, as a failed commit's caller does, would leave a row without a file.
    static func install(_ library: Library, tempPath: String, storePath rel: String, durable: Bool) throws {
        let dest = try library.storeFile(rel, of: (tempPath as NSString).lastPathComponent)
        let dir = (dest as NSString).deletingLastPathComponent
        if mkdir(dir, 0o700) != 0 && errno != EEXIST { throw StoreWriter.ioError(errno, "mkdir \(dir)") }
        guard rename(tempPath, dest) == 0 else { throw StoreWriter.ioError(errno, "rename into store") }
        if durable { fsyncDirectory(of: dest) }
    }

    /// Writes back the filesystem of the store (syncfs): every file and rename so far is durable.
    func syncFilesystem() throws {
        let fd = Glibc.open(library.paths.store, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw StoreWriter.ioError(errno, "open \(library.paths.store)") }
        defer { Glibc.close(fd) }
        guard pg_syncfs(fd) == 0 else { throw StoreWriter.ioError(errno, "syncfs") }
    }

    /// Turns a complete temp file (written by an app through its mount) into an asset owned by the
    /// app. Validates the content first: what is not a photo or video is refused and nothing stays.
    /// Makes the data durable before the catalog row commits. When the app already owns an asset
    /// with the same content (and, for `.sameName`, under the same name) whose current bytes it
    /// knows (`reusableAsset`), that asset is the answer and the temp file is deleted: copying the
    /// same files again makes no duplicates.
    /// `knownHash`: asked once the file is found to be media, the file's content hash computed
    /// while it was written, or nil (no closure, or nil from it: hashed here).
    public func commitAppFile(tempPath: String, fd: Int32, id: String, app: AppID, name: String,
                              album: String? = nil, reuseSameContent: ReuseRule = .sameName,
                              knownHash: (() -> String?)? = nil, dailyLimit: DailyLimit? = nil) throws -> AppFileCommit {
        let scanned = try StoreWriter.syncWhileScanning(fd: fd)
        return try StoreWriter.commit(library: library, tempPath: tempPath, fd: fd, id: id, app: app, name: name,
                                      album: album, reuse: reuseSameContent, knownHash: knownHash, dailyLimit: dailyLimit,
                                      scanned: scanned)
    }

    /// The file made durable (fsync) and scanned (`scan`) at once: the sync waits on the disk,
    /// the scan reads the file from the page cache (a JPEG's markers through its whole image
    /// data), and one after the other a close of one writer spent 0.5 of its 10 ms scanning after
    /// its sync had ended. The sync on a thread of its own, the scan on the caller's; both ended
    /// when this returns, the sync's failure first.
    static func syncWhileScanning(fd: Int32) throws -> (MediaScan, UInt64, Date) {
        let failed = Mutex<Int32>(0)
        let syncer = NativeThread.spawn(name: "photogate-fsync") {
            if fsync(fd) != 0 { let e = errno; failed.withLock { $0 = e } }
        }
        let scanned = Result { try StoreWriter.scan(fd: fd) }
        if let syncer {
            syncer.join()
        } else if fsync(fd) != 0 {
            let e = errno
            failed.withLock { $0 = e }
        }
        let e = failed.withLock { $0 }
        guard e == 0 else { throw StoreWriter.ioError(e, "fsync") }
        CloseTrace.mark("fsync")
        return try scanned.get()
    }

    /// `dailyLimit`: asked in the transaction that adds the row (`AppFileWriter.commitAppFile`),
    /// not in one of its own before it: each close of eight writers waited its turn for the
    /// writer twice (a close's "checks" were 11 of its 74 ms).
    static func commit(library: Library, tempPath: String, fd: Int32, id: String, app: AppID, name: String,
                       album: String?, reuse: ReuseRule = .sameName, knownHash: (() -> String?)? = nil,
                       dailyLimit: DailyLimit? = nil, scanned: (MediaScan, UInt64, Date)? = nil) throws -> AppFileCommit {
        // The data is durable already (fsynced by the caller, or by markReady before a crash).
        let (scan, size, date) = try scanned ?? StoreWriter.scan(fd: fd)
        CloseTrace.mark("scan")
        let hash = try knownHash.flatMap { $0() } ?? StoreWriter.hash(fd: fd, size: size)
        CloseTrace.mark("hash")
        let rel = StoreWriter.storeRelativePath(id: id, kind: scan.kind)
        let facts = NewAssetFacts(scan: scan, byteSize: size, contentHash: hash, fileDate: date)
        let (asset, reused) = try library.write { db -> (Asset, Bool) in
            CloseTrace.mark("queue")
            // This very file committed already: an earlier try whose commit went through but
            // whose answer was lost (a server's connection cut at COMMIT), so its close was kept
            // to be committed again. It is that asset, and still has to move into the store: were
            // it taken for a copy of it (the reuse below), the file would be deleted under its row.
            if let a = try Row.fetchOne(db.cachedStatement(sql: StoreWriter.assetByIDSQL), arguments: [id]).map(Library.asset),
               a.storePath == rel, a.owner == app {
                return (a, false)
            }
            try Library.ensureApp(db, app)
            if reuse != .never, let a = try StoreWriter.reusableAsset(db, app: app, hash: hash, size: size, name: name,
                                                                     reuse: reuse) {
                if let album, let albumID = try? Library.userAlbumID(db, album) {
                    _ = try Library.addToAlbum(db, albumID, [a.rowID])
                }
                return (a, true)
            }
            try Library.askDailyLimit(db, dailyLimit, app: app, size: size)
            let a = try StoreWriter.insertRow(db, id: id, name: name, owner: app, ownerName: name, facts: facts,
                                              storePath: rel, referencePath: nil, shared: false)
            if let album, let albumID = try? Library.userAlbumID(db, album) {
                _ = try Library.addToAlbum(db, albumID, [a.rowID])
            }
            let apps = try ViewDelta.apps(db)
            try ViewDelta.record(db, before: [:], after: ViewDelta.visibility(db, [a.rowID], apps: apps), apps: apps)
            return (a, false)
        }
        // The row is durable before the file moves (the database syncs its log lazily otherwise),
        // so a power cut can never leave a file in the store that the catalog lost; and before
        // the app's close is told it is saved (a log removed under the daemon: EIO, the temp file
        // kept as it was). The rename needs no sync of its own: if it is lost, recovery finds the
        // row and renames again.
        CloseTrace.mark("catalog")
        try library.syncLog()
        CloseTrace.mark("logsync")
        _ = pg_fremovexattr(fd, ReadyMarker.xattr)
        if reused {
            unlink(tempPath)
            return AppFileCommit(asset: asset, reused: true)
        }
        try? StoreWriter.install(library, tempPath: tempPath, storePath: asset.storePath ?? rel, durable: false)   // else recovery moves it
        CloseTrace.mark("store")
        return AppFileCommit(asset: asset, reused: false)
    }

    /// The app's asset that a new file of this content (and, for `.sameName`, this name) turns
    /// out to be, or nil for a new asset. Only an asset whose current bytes the app knows as they
    /// are: bytes it wrote itself (the current version is the app's own: the original it created,
    /// or a version it saved), or, in a read-write view, bytes it reads unredacted (location not
    /// stripped for it, or nothing in them to strip). Any other match would be an oracle: a
    /// strip-location app whose photo another app gave a location (an edit) could write guesses
    /// of the hidden bytes under its name and learn from "same asset" against "new asset" which
    /// guess is right; an add-only app, which reads nothing, could test guesses of another app's
    /// edit of its photo. Such an app gets a new asset whatever its bytes, as its saves over the
    /// photo get a new version (`commitVersion`'s `alwaysNew`).
    static func reusableAsset(_ db: Database, app: AppID, hash: String, size: UInt64, name: String,
                              reuse: ReuseRule) throws -> Asset? {
        let rows = try Row.fetchAll(db.cachedStatement(sql: reusableAssetSQL), arguments: [app.rawValue, hash, Int64(size), reuse == .anyName, name])
        for row in rows {
            let a = Library.asset(row)
            if try knowsCurrentBytes(db, app: app, rowID: a.rowID, reads: reuse == .sameName) { return a }
        }
        return nil
    }

    /// Statements every close runs are prepared once per connection (cached): preparing one
    /// costs SQLite's parse and GRDB's authorizer a call per column, ~3% of a mount daemon's
    /// CPU under `cp` when each close prepared its own.
    static let assetByIDSQL = "SELECT \(Library.assetColumns) FROM assets WHERE id = ?"

    /// The app's assets of a content (`reusableAsset`): every close of a new photo asks, through
    /// the index on (owner, hash), never by reading every asset of the app (v13).
    static let reusableAssetSQL = """
        SELECT \(Library.assetColumns) FROM assets
        WHERE owner_app = ? AND content_hash = ? AND byte_size = ? AND trashed_at IS NULL
          AND (? = 1 OR owner_name = ?) ORDER BY rowid
        """

    /// Whether the app knows the asset's current bytes as they are (see `reusableAsset`):
    /// `reads`, it has a read-write view (an add-only one reads nothing).
    static func knowsCurrentBytes(_ db: Database, app id: AppID, rowID: Int64, reads: Bool) throws -> Bool {
        guard let row = try Row.fetchOne(db.cachedStatement(sql: """
            SELECT CASE WHEN a.current_version = 0 THEN a.owner_app ELSE v.app_id END,
                   a.redaction, a.redaction_refusal, a.redaction_version
            FROM assets a LEFT JOIN versions v ON v.asset_rowid = a.rowid AND v.version = a.current_version
            WHERE a.rowid = ?
            """), arguments: [rowID]) else { return false }
        // Its own bytes: the original it created (version 0 is the owner's), or a version it saved.
        if (row[0] as String?) == id.rawValue { return true }
        guard reads, let record = try Library.fetchApp(db, id), let facts = try Library.facts(db, app: id, rowID: rowID) else { return false }
        let context = Library.context(record, .readWrite)
        guard context.isVisible(facts) else { return false }
        if !context.stripsLocation(facts) { return true }
        // Stripped: known only when the view strips nothing from these bytes (a plan of the
        // current scanners, with no range; a refused or older plan is not known to be empty).
        guard (row[2] as String?) == nil, (row[3] as Int? ?? 0) >= MediaScanner.version, let blob = row[1] as Data?,
              let plan = try? RedactionPlan(serialized: [UInt8](blob)) else { return false }
        return plan.isEmpty
    }

    /// Marks a validated, fsynced temp file as complete: if this process dies before committing
    /// it, recovery commits it as the app's asset. Written when the app's close(2) succeeds.
    /// The marker is an extended attribute of the temp file, made durable with its data by one
    /// fsync (each fsync costs milliseconds on real disks: this is on the app's close(2)); where
    /// the filesystem has no user xattrs, a sidecar file.
    public func markReady(tempPath: String, fd: Int32, app: AppID, name: String, album: String?) throws {
        _ = try StoreWriter.scan(fd: fd)
        try StoreWriter.markDurably(fd: fd, tempPath: tempPath, ReadyMarker(app: app, name: name, album: album))
    }

    static func markDurably(fd: Int32, tempPath: String, _ marker: ReadyMarker) throws {
        let data = try JSONEncoder().encode(marker)
        let tagged = data.withUnsafeBytes { pg_fsetxattr(fd, ReadyMarker.xattr, $0.baseAddress, UInt($0.count)) } == 0
        if !tagged && errno != ENOTSUP && errno != EOPNOTSUPP && errno != EPERM { throw StoreWriter.ioError(errno, "mark \(tempPath)") }
        guard fsync(fd) == 0 else { throw StoreWriter.ioError(errno, "fsync") }
        if !tagged { try marker.write(tempPath + ".ready") }
    }

    /// `markReady` for an edit of asset `rowID`: if this process dies before committing it,
    /// recovery commits the file as the asset's new version (`Library.commitVersion`).
    public func markVersionReady(tempPath: String, fd: Int32, app: AppID, rowID: Int64) throws {
        _ = try StoreWriter.scan(fd: fd)
        guard let asset = try library.asset(rowID: rowID) else { throw LibraryError.unknownAssets([String(rowID)]) }
        try StoreWriter.markDurably(fd: fd, tempPath: tempPath, ReadyMarker(app: app, name: asset.displayName, album: nil, edit: asset.id))
    }

    public func clearReady(tempPath: String) {
        _ = pg_removexattr(tempPath, ReadyMarker.xattr)
        unlink(tempPath + ".ready")
    }
}


func fsyncDirectory(of path: String) {
    let dir = (path as NSString).deletingLastPathComponent
    let fd = Glibc.open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    if fd >= 0 { fsync(fd); Glibc.close(fd) }
}
