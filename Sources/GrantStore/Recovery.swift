import PGSystem
import Foundation
import Synchronization
import GRDB
import LibraryRun
import PhotoLibrary
import Redaction
#if canImport(Glibc)
import Glibc
#endif

/// A consistent copy of a library, and a catalog rebuilt from the store when it was lost.
///
/// A library's catalog is `photogate.sqlite` (with its write-ahead log while processes use it);
/// its photos are the files in `store/`, which are never changed once written (an edit is a new
/// file). So a consistent copy is the catalog as of one moment, by SQLite's online backup (safe
/// while mounts and commands write), then every store file that catalog names. A library whose
/// catalog is on a server is copied the same way into an SQLite library of its own: the server's
/// catalog as of one moment (one snapshot), then the files of the shared store it names.
public struct BackupReport: Sendable {
    public var assets = 0
    public var filesCopied = 0
    public var bytesCopied: UInt64 = 0
    /// Store files the catalog named that were gone by the time they were copied (an asset
    /// deleted for good meanwhile), relative to the library.
    public var missing: [String] = []
    /// Assets whose original is a `--reference` file outside the library: not copied.
    public var referenced = 0
    /// Where the backup is.
    public var folder = ""
}

public struct RebuildReport: Sendable {
    /// Where the damaged catalog was moved (nil: it opened and was kept).
    public var damagedCatalog: String?
    public var assets: [(id: String, path: String)] = []
    public var skipped: [(path: String, why: String)] = []
    /// Store files an asset already named.
    public var alreadyNamed = 0
}

extension Library {
    /// Tests only: runs after a backup is complete, before it is renamed into place.
    /// It is given the backup's folder: a test's hook acts on its own backup only (other suites
    /// back up at the same time, in the same process).
    static let beforeBackupRename = Mutex<(@Sendable (String) -> Void)?>(nil)

    /// Copies the library into `final`, a folder that must not exist yet (made 0700): a library
    /// of its own there, whose catalog is SQLite's (also for a library whose catalog is on a
    /// server), which `--library DEST` opens as it is. Made as `DEST.partial` and renamed
    /// into place once all of it is durable: a backup killed or out of space is never a folder
    /// that opens as a complete library (the partial one is removed on an error).
    public func backup(to final: String) throws -> BackupReport {
        let fm = FileManager.default
        // Anything there is there, a symbolic link that leads nowhere too (fileExists follows it).
        func there(_ path: String) -> Bool { var st = stat(); return lstat(path, &st) == 0 }
        if there(final) { throw LibraryError.conflict("\(final) already exists: name a new folder for the backup") }
        let dest = final + ".partial"
        // Making DEST.partial is the claim: a second backup to the same DEST at the same time
        // finds it there and stops, and never removes the first one's (it did, from its error
        // path, and the first then wrote into a folder that was gone).
        guard mkdir(dest, 0o700) == 0 else {
            if errno == EEXIST {
                throw LibraryError.conflict("\(dest) is there (another backup to it is running, or an earlier one did not finish: remove it first)")
            }
            throw StoreWriter.ioError(errno, "cannot make \(dest)")
        }
        do {
            var report = try backupInto(dest)
            Library.beforeBackupRename.withLock { $0 }?(final)
            // Never over a DEST made meanwhile (rename(2) would replace an empty folder).
            guard pg_rename_noreplace(dest, final) == 0 else {
                if errno == EEXIST || errno == ENOTEMPTY { throw LibraryError.conflict("\(final) appeared while the backup ran: the backup is in \(dest)") }
                throw StoreWriter.ioError(errno, "cannot rename \(dest) to \(final)")
            }
            fsyncDirectory(of: final)
            report.folder = final
            return report
        } catch let e as LibraryError {
            if case .conflict = e, there(final) { throw e }   // complete: kept for the person
            try? fm.removeItem(atPath: dest)
            throw e
        } catch {
            try? fm.removeItem(atPath: dest)
            throw error
        }
    }

    private func backupInto(_ dest: String) throws -> BackupReport {
        var report = BackupReport()
        let fm = FileManager.default
        do {
            for d in [LibraryLayout.store, LibraryLayout.tmp, LibraryLayout.run] {
                try fm.createDirectory(atPath: dest + "/" + d, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            }
        } catch {
            throw LibraryError.io("cannot make \(dest): \(error.localizedDescription)")
        }
        chmod(dest, 0o700)
        let target = LibraryPaths(root: dest)
        try "photogate library\n".write(toFile: target.marker, atomically: true, encoding: .utf8)
        chmod(target.marker, 0o600)
        let fd = Glibc.open(target.database, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw LibraryError.io("cannot create \(target.database): \(String(cString: strerror(errno)))") }
        Glibc.close(fd)
        do {
            let copy = try DatabaseQueue(path: target.database)
            if let pool {
                // The catalog as of one moment (SQLite's online backup: pages copied under a read
                // transaction; concurrent writers go on), then the store files it names.
                try pool.backup(to: copy)
                try copyStoreFiles(try copy.read { db in try String.fetchAll(db, sql: Migration.storePathsSQL) }, to: target, &report)
            } else if let server {
                try backUpCatalog(of: server, into: copy, storeFilesTo: target, &report)
            }
            try copy.read { db in
                report.assets = try Int.fetchOne(db, sql: "SELECT count(*) FROM assets") ?? 0
                report.referenced = try Int.fetchOne(db, sql: "SELECT count(*) FROM assets WHERE store_path IS NULL AND reference_path IS NOT NULL") ?? 0
            }
            try copy.close()
        } catch let e as DatabaseError {
            throw Library.map(e, paths: self.paths)
        }
        fsyncDirectory(of: target.database)
        return report
    }

    /// Tests only: runs in the read of a linked library's catalog for a backup, once its snapshot
    /// is taken (what commits from then on is not in the backup).
    /// It is given the library's folder: a test's hook acts on its own library's backup only
    /// (other suites back up libraries at the same time, in the same process).
    static let duringBackupRead = Mutex<(@Sendable (String) -> Void)?>(nil)

    /// A linked library's catalog (on a server) backed up into `copy`, a new SQLite catalog: the
    /// backup is a library of its own, with no link to the server or the shared folder. Every
    /// table is read in one transaction on one snapshot of the server's catalog (REPEATABLE READ,
    /// READ ONLY: writers go on), as `migrate` reads SQLite's the other way; the store files that
    /// snapshot names are copied from the shared folder; then the rows go into SQLite's own
    /// schema, ids as they are. The numbers the server gives (asset rows, the change log, apps'
    /// history) are read again last, under the write lock, and the copy numbers on past them: it
    /// never gives one that the server gave, also to a change committed while the files were
    /// copied or being committed as they are read (apps hold change tokens). The catalog's identity (a comment on the server's schema table) is not copied:
    /// it names the server's catalog, and this one is not it.
    private func backUpCatalog(of server: ServerCatalog, into copy: DatabaseQueue, storeFilesTo target: LibraryPaths,
                               _ report: inout BackupReport) throws {
        var (snapshot, named) = try server.read { db -> (Migration.Snapshot, [String]) in
            // The transaction's snapshot is taken by its first statement.
            let named = try String.fetchAll(db, sql: Migration.storePathsSQL)
            Library.duringBackupRead.withLock { $0 }?(paths.root)
            return (try Library.migrationSnapshot(db), named)
        }
        try copyStoreFiles(named, to: target, &report)
        // Under the write lock (nothing is written): an asset's number is not a sequence's but the
        // highest committed one plus one, given in its writer's transaction, so a writer that had
        // given one and not committed yet is waited for, and its number counted (a read's
        // snapshot did not see it, and the copy then gave it again).
        let (marks, nextAsset) = try server.write(notify: false) { db in
            (try Library.highMarks(db), try Int64.fetchOne(db, sql: "SELECT \(Library.nextAssetRowIDSQL)") ?? 1)
        }
        snapshot.sequences.merge(marks) { max($0, $1) }
        try Schema.migrator.migrate(copy)
        try copy.write { g in
            let db = Database(sqlite: g)
            _ = try Library.load(snapshot, into: db)
            try db.execute(sql: "UPDATE asset_rowid_high SET high = max(high, ?) WHERE one = 1", arguments: [nextAsset - 1])
        }
    }

    /// Copies the store files `paths` names (relative to the store; never changed once written)
    /// into the backup's store, each synced; one that is gone is reported missing.
    private func copyStoreFiles(_ paths: [String], to target: LibraryPaths, _ report: inout BackupReport) throws {
        for rel in paths where StorePath.isValid(rel) {
            let src = self.paths.store + "/" + rel
            let dst = target.store + "/" + rel
            let dir = (dst as NSString).deletingLastPathComponent
            if mkdir(dir, 0o700) != 0 && errno != EEXIST { throw StoreWriter.ioError(errno, "cannot make \(dir)") }
            let s = pg_open_original(src, 0)
            guard s >= 0 else {
                if errno == ENOENT { report.missing.append("store/" + rel); continue }
                throw StoreWriter.ioError(errno, "cannot open \(src)")
            }
            defer { Glibc.close(s) }
            let d = Glibc.open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard d >= 0 else { throw StoreWriter.ioError(errno, "cannot create \(dst)") }
            let n = pg_copy_fd(s, d)
            let synced = n >= 0 && fsync(d) == 0
            let e = errno
            Glibc.close(d)
            guard synced else { throw StoreWriter.ioError(e, "cannot copy \(src) to \(dst)") }
            report.filesCopied += 1
            report.bytesCopied += UInt64(n)
        }
        for d in Set(paths.map { (target.store + "/" + $0 as NSString).deletingLastPathComponent }) { fsyncDirectory(of: d + "/x") }
    }

    /// Makes every regular file in the store that no asset (nor version) names an asset of the
    /// person's again, named after its store file: a catalog that lost its rows gets the photos
    /// back (their grants, albums, names and history are not in the files, and stay lost). When
    /// the catalog cannot be opened (missing, empty, without its schema, damaged), it is moved
    /// to lost+found/<time>/ first and a new one made. Refused while mounts of the library run.
    public static func rebuild(at paths: LibraryPaths, event: (String) -> Void = { _ in }) throws -> RebuildReport {
        try LibraryOwnership.check(paths)
        var report = RebuildReport()
        // A catalog whose log was lost after a kill is the best there is: kept (with a warning),
        // and the photos whose rows were in the log come back below.
        Library.acceptLostLog.store(true, ordering: .relaxed)
        defer { Library.acceptLostLog.store(false, ordering: .relaxed) }
        var opened: Library?
        do {
            opened = try Library.open(at: paths)
            // One that opens may still fail SQLite's checks (a damaged page that a command
            // reads only later): damaged all the same.
            if let l = opened, try !l.passesQuickCheck() { l.letGo(); opened = nil }
        } catch LibraryError.catalogDamaged, LibraryError.libraryDamaged {
            opened = nil
        }
        let library: Library
        if let opened {
            library = opened
        } else {
            let stamp = Library.stampNow()
            let aside = paths.root + "/" + LostAndFound.folder + "/" + stamp
            do {
                try FileManager.default.createDirectory(atPath: aside, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw LibraryError.io("cannot make \(aside): \(error.localizedDescription)")
            }
            for suffix in ["", "-wal", "-shm"] where access(paths.database + suffix, F_OK) == 0 {
                guard rename(paths.database + suffix, aside + "/photogate.sqlite" + suffix) == 0 else {
                    throw LibraryError.io("cannot move \(paths.database + suffix) aside: \(String(cString: strerror(errno)))")
                }
            }
            fsyncDirectory(of: paths.database)
            report.damagedCatalog = aside + "/photogate.sqlite"
            let fd = Glibc.open(paths.database, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw LibraryError.io("cannot create \(paths.database): \(String(cString: strerror(errno)))") }
            Glibc.close(fd)
            library = try Library(paths: paths, creating: true)
        }
        let named = try library.read { db in
            Set(try String.fetchAll(db, sql: """
                SELECT store_path FROM assets WHERE store_path IS NOT NULL
                UNION SELECT store_path FROM versions WHERE store_path IS NOT NULL
                UNION \(Library.sidecarStorePathsSQL)
                """))
        }
        var files: [String] = []
        for (d, k) in Directory.entries(paths.store) where k == .directory {
            for (f, fk) in Directory.entries(paths.store + "/" + d) {
                let rel = d + "/" + f
                if fk == .file { files.append(rel) } else { report.skipped.append(("store/" + rel, "not a regular file")) }
            }
        }
        for rel in files.sorted() {
            if named.contains(rel) { report.alreadyNamed += 1; continue }
            guard StorePath.isValid(rel) else { report.skipped.append(("store/" + rel, "not a name photogate gives store files")); continue }
            let id = String((rel as NSString).lastPathComponent.prefix { $0 != "." })
            let fd = pg_open_original(paths.store + "/" + rel, 0)
            guard fd >= 0 else { report.skipped.append(("store/" + rel, String(cString: strerror(errno)))); continue }
            defer { Glibc.close(fd) }
            do {
                let (scan, size, date) = try StoreWriter.scan(fd: fd)
                let hash = try StoreWriter.hash(fd: fd, size: size)
                let facts = NewAssetFacts(scan: scan, byteSize: size, contentHash: hash, fileDate: date)
                let name = (rel as NSString).lastPathComponent
                let done: Bool = try library.write { db in
                    guard try Bool.fetchOne(db, sql: "SELECT 1 FROM assets WHERE id = ?", arguments: [id]) == nil else { return false }
                    _ = try StoreWriter.insertRow(db, id: id, name: name, owner: nil, ownerName: nil, facts: facts,
                                                  storePath: rel, referencePath: nil, shared: false)
                    return true
                }
                if done {
                    report.assets.append((id, rel))
                    event("rebuilt \(id)  store/\(rel)")
                } else {
                    report.skipped.append(("store/" + rel, "its id \(id) is another asset's"))
                }
            } catch {
                report.skipped.append(("store/" + rel, "\(error)"))
            }
        }
        return report
    }

    /// A time stamp for lost+found/ folders (UTC, with the pid: two runs in one second differ).
    static func stampNow() -> String {
        var t = time_t(Date().timeIntervalSince1970)
        var tmv = tm()
        gmtime_r(&t, &tmv)
        return String(format: "%04d%02d%02dT%02d%02d%02dZ-%d", tmv.tm_year + 1900, tmv.tm_mon + 1, tmv.tm_mday,
                      tmv.tm_hour, tmv.tm_min, tmv.tm_sec, getpid())
    }
}

extension Library {
    /// SQLite's quick_check of the catalog (every page and its structure, not index contents).
    public func passesQuickCheck() throws -> Bool {
        do {
            if server != nil { return true }   // the server checks its own pages
            return try read { db in try String.fetchAll(db, sql: "PRAGMA quick_check") } == ["ok"]
        } catch LibraryError.libraryDamaged {
            return false
        }
    }
}

extension Library {
    /// A file for a desktop viewer to open the current original of `asset` from: a private copy
    /// in run/preview/, named by the asset's id and media kind, made through the one checked open
    /// of originals, cut to the catalog's size and kept only if it hashes to the catalog's bytes.
    /// The viewer (run as the picker's user, root say) never gets a referenced original's path,
    /// which someone else's folder could have swapped for a symlink or an HTML, SVG or .desktop
    /// file, nor a store file, which an editor's "save" would rewrite in place. The copies go
    /// with `clearPreviews` (the picker's end).
    public func previewFile(of asset: Asset) throws -> String {
        let (path, reference) = try currentOriginal(rowID: asset.rowID)
        let fd = pg_open_original(path, reference ? 1 : 0)
        guard fd >= 0 else { throw LibraryError.io("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { Glibc.close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0,
              OriginalCheck.check(st, inStore: !reference, size: asset.byteSize, added: Int(asset.addedDate.timeIntervalSince1970)) == .same else {
            throw LibraryError.conflict("its original at \(path) changed after it was imported (photogate verify reports it)")
        }
        let folder = paths.run + "/" + RunFolder.preview
        if mkdir(folder, 0o700) != 0 && errno != EEXIST { throw StoreWriter.ioError(errno, "cannot make \(folder)") }
        let ext = MediaKind(rawValue: asset.mediaKind)?.preferredExtension ?? "bin"
        let name = "\(asset.id).\(ext)"
        let out = pg_open_in_folder(paths.run, RunFolder.preview, name, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        guard out >= 0 else { throw StoreWriter.ioError(errno, "cannot create \(folder)/\(name)") }
        defer { Glibc.close(out) }
        // Bytes appended after the stat (by whoever writes the referenced folder) are cut off:
        // the copy is the catalog's size, and hashed whole.
        guard pg_copy_fd(fd, out) >= 0, ftruncate(out, off_t(asset.byteSize)) == 0,
              try StoreWriter.hash(fd: out, size: asset.byteSize) == asset.contentHash else {
            unlink(folder + "/" + name)
            throw LibraryError.conflict("its original at \(path) does not hold the bytes it was imported with")
        }
        return folder + "/" + name
    }

    /// Removes the preview copies (run/preview/).
    public func clearPreviews() {
        let folder = paths.run + "/" + RunFolder.preview
        for (name, kind) in Directory.entries(folder) where kind == .file { unlink(folder + "/" + name) }
    }
}
