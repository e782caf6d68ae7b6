import Foundation
import Synchronization
import Testing
import TestSupport
@testable import GrantStore
@testable import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

/// `photogate backup` of a library whose catalog is on a server (issue 41, "every command works on
/// both"): the backup is an SQLite library of its own, holding the server's catalog as of one
/// moment (one snapshot, while other writers go on) and every store file that catalog names; it
/// numbers on past every number the server gave, so that no asset row or history entry of the
/// server's is given again by it.
@Suite(.serialized, .enabled(if: TestSupport.onPostgres, "a library whose catalog is on a server needs the run's PostgreSQL (PHOTOGATE_TEST_PG)"))
struct LinkedLibraryBackup {
    static let viewer = AppID("org.example.Viewer")!

    /// What a library holds, as its own listings say it: assets, albums, Recently Deleted, apps,
    /// requests, refusals, and per asset its versions, per app its grants, set grants and history.
    static func listing(_ l: Library, apps: [AppID]) throws -> [String] {
        var out = ["assets \(try l.assets())", "albums \(try l.albums())", "trash \(try l.trash())",
                   "apps \(try l.apps())", "requests \(try l.requests())", "refusals \(try l.refusals())"]
        for a in try l.assets() + l.trash() {
            out.append("versions \(a.id) \(try l.versions(a.id).versions)")
            out.append("albums of \(a.id) \(try l.albums().filter { try l.assets(album: $0.name).contains(a) }.map(\.name))")
        }
        for app in apps {
            out.append("grants \(app) \(try l.grants(app))")
            out.append("sets \(app) \(try l.setGrants(app))")
            out.append("history \(app) \(try l.changes(app))")
        }
        return out
    }

    /// The highest asset row number, change log number and app history entry number (the token
    /// behind each app's own) a catalog has given, deleted ones included.
    func highest(_ l: Library) throws -> (asset: Int64, change: Int64, token: Int64) {
        try l.read { db in
            (try Int64.fetchOne(db, sql: "SELECT \(Library.nextAssetRowIDSQL)")! - 1,
             try Int64.fetchOne(db, sql: "SELECT COALESCE(max(seq), 0) FROM changes")!,
             try Int64.fetchOne(db, sql: "SELECT COALESCE(max(token), 0) FROM app_changes")!)
        }
    }

    /// Backed up while imports, grants, an edit, an album, a revoke and a delete for good commit
    /// (inside the backup's read of the catalog): the backup is the catalog as it was when that
    /// read began, to the letter of every listing; `verify` finds it whole; it is an SQLite
    /// library with no link to the server; and its next asset, change and history token are
    /// numbered past every one the server gave, those committed during the backup included.
    @Test func aBackupIsTheCatalogAsOfOneMomentAndNumbersPastTheServers() throws {
        let t = try TempLibrary()
        let apps = [editor, camera, Self.viewer]
        let imported = try t.importJPEGs(["a.jpg", "b.jpg", "c.jpg", "d.jpg"], gps: true, album: "Trip")
        _ = try t.library.authorize(editor, access: .readWrite, status: .limited)
        _ = try t.library.authorize(Self.viewer, access: .readWrite, status: .authorized)
        _ = try t.library.authorize(camera, access: .addOnly, status: .authorized)
        _ = try t.library.grant(editor, ["a.jpg", "b.jpg"], stripLocation: true)
        _ = try t.library.grant(editor, ["c.jpg"], picked: true)
        _ = try t.library.grantEdit(editor, ["a.jpg"])
        _ = try EditHelp.save(t, imported[0].rowID, app: editor, try TestMedia.jpeg(tag: "edited-\(UUID())"))
        _ = try t.library.grantSet(Self.viewer, SetGrant(album: "Trip"))
        _ = try t.appFile(editor, "own.jpg")
        try t.library.recordRefusal(editor, name: "notes.jpg", reason: "not a photo or video")
        _ = try t.library.delete(["d.jpg"])
        // The newest asset deleted for good: its number is never given again (asset_rowid_high).
        let gone = try t.importJPEGs(["gone.jpg"])[0]
        _ = try t.library.delete([gone.id])
        _ = try t.library.deleteForGood([gone.id])

        let atTheMoment = Mutex<[String]?>(nil)
        let during = Mutex<String?>(nil)
        let (library, dir, edited) = (t.library, t.dir, imported[0].rowID)
        let root = t.library.paths.root
        Library.duringBackupRead.withLock { hook in
            hook = { backedUp in
                guard backedUp == root else { return }   // another suite's backup
                do {
                    let now = try Self.listing(library, apps: apps)
                    atTheMoment.withLock { $0 = now }
                    // Writers go on while the backup reads: none of this is in it.
                    let e = try EditHelp.importInto(library, dir: dir, "e.jpg", album: "Later")
                    let f = try EditHelp.importInto(library, dir: dir, "f.jpg")
                    _ = try library.grant(editor, [e.id, f.id])
                    _ = try library.revoke(editor, ["b.jpg"])
                    _ = try EditHelp.save(library, edited, app: editor, try TestMedia.jpeg(tag: "again-\(UUID())"))
                    _ = try library.delete([f.id])
                    _ = try library.deleteForGood([f.id])
                } catch {
                    during.withLock { $0 = "\(error)" }
                }
            }
        }
        defer { Library.duringBackupRead.withLock { $0 = nil } }
        let dest = t.dir + "/backup"
        let report = try t.library.backup(to: dest)
        #expect(during.withLock { $0 } == nil, "the writes during the backup: \(during.withLock { $0 } ?? "")")
        let expected = try #require(atTheMoment.withLock { $0 }, "the backup never read the server's catalog")
        #expect(report.missing.isEmpty && report.filesCopied > 0, "\(report)")

        // An SQLite library of its own, laid out as `init` makes one: its catalog a file, no link
        // to the server (catalog.conf), no shared folder's marker (CATALOG).
        #expect(try FileManager.default.contentsOfDirectory(atPath: dest).sorted() == ["LIBRARY", "photogate.sqlite", "run", "store", "tmp"])
        var st = stat()
        #expect(stat(dest, &st) == 0 && st.st_mode & 0o777 == 0o700)
        let backup = try Library.open(at: LibraryPaths(root: dest))
        #expect(backup.paths.link == nil && backup.server == nil)
        #expect(backup.paths.store == dest + "/store")

        // The catalog as it was when the backup's read began, every listing the same.
        let got = try Self.listing(backup, apps: apps)
        for (e, g) in zip(expected, got) where e != g { Issue.record("the backup differs:\n  at the moment: \(e)\n  backed up:     \(g)") }
        #expect(got.count == expected.count)
        #expect(report.assets == (try backup.assets().count + backup.trash().count))
        let verified = try Verifier(library: backup).run()
        #expect(verified.problems.isEmpty, "verify of the backup: \(verified.problems)")
        // What committed during the backup is in the server's catalog, not in the backup (its
        // files neither).
        let later = try #require(try t.library.assets().first { $0.displayName == "e.jpg" }, "the import during the backup did not commit")
        #expect(try !backup.assets().contains { $0.id == later.id })
        #expect(access(dest + "/store/" + (later.storePath ?? "-"), F_OK) != 0, "a file named after the moment was copied")

        // Numbered past everything the server gave, during the backup too.
        let server = try highest(t.library)
        let made = try EditHelp.importInto(backup, dir: t.dir, "new.jpg")
        #expect(made.rowID > server.asset, "the backup's next asset is number \(made.rowID); the server gave up to \(server.asset)")
        _ = try backup.grant(editor, ["new.jpg"])
        let copy = try highest(backup)
        #expect(copy.change > server.change, "the backup's next change is number \(copy.change); the server gave up to \(server.change)")
        #expect(copy.token > server.token, "the backup's next history token is \(copy.token); the server gave up to \(server.token)")
        #expect(try Verifier(library: backup).run().problems.isEmpty)
    }

    /// An asset's number on the server is the highest committed one plus one, given inside its
    /// writer's transaction (not a sequence, which no transaction rolls back): a writer that has
    /// given one and not committed yet when the backup reads the server's numbers is waited for,
    /// and the backup numbers past its asset too (it read the numbers in a snapshot, and gave
    /// that number again).
    @Test func aBackupNumbersPastAnAssetBeingCommittedAsItReads() throws {
        let t = try TempLibrary()
        _ = try t.importJPEGs(["a.jpg", "b.jpg"])
        let server = try #require(t.library.server)
        let inserted = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let held = Mutex<Int64?>(nil)
        let writerError = Mutex<String?>(nil)
        let writer = Thread {
            do {
                try server.write(notify: false) { db in
                    try db.execute(sql: """
                        INSERT INTO assets (rowid, id, display_name, media_kind, media_class, byte_size, capture_date, added_at,
                            has_location, content_hash, reference_path)
                        VALUES (\(Library.nextAssetRowIDSQL), 'ffffffffffffffff', 'held.jpg', 'jpeg', 'photo', 1, 0, 0, 0, 'x', '/nonexistent/held.jpg')
                        """)
                    let rowID = try Int64.fetchOne(db, sql: "SELECT rowid FROM assets WHERE id = 'ffffffffffffffff'")
                    held.withLock { $0 = rowID }
                    inserted.signal()
                    release.wait()
                }
            } catch {
                writerError.withLock { $0 = "\(error)" }
                inserted.signal()
            }
        }
        writer.start()
        inserted.wait()
        let rowID = try #require(held.withLock { $0 }, "the writer: \(writerError.withLock { $0 } ?? "")")

        let dest = t.dir + "/backup"
        let done = DispatchSemaphore(value: 0)
        let backupError = Mutex<String?>(nil)
        let library = t.library
        Thread {
            do { _ = try library.backup(to: dest) } catch { backupError.withLock { $0 = "\(error)" } }
            done.signal()
        }.start()
        // The backup ends, or waits for the writer (its commit is then let go).
        let waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        var finished = false
        #expect(eventually {
            if done.wait(timeout: .now()) == .success { finished = true; return true }
            return ((try? t.library.read { db in try Int.fetchOne(db, sql: waiting) }) ?? 0) > 0
        })
        release.signal()
        if !finished { done.wait() }
        #expect(backupError.withLock { $0 } == nil, "\(backupError.withLock { $0 } ?? "")")
        #expect(writerError.withLock { $0 } == nil, "\(writerError.withLock { $0 } ?? "")")

        let backup = try Library.open(at: LibraryPaths(root: dest))
        let made = try EditHelp.importInto(backup, dir: t.dir, "new.jpg")
        #expect(made.rowID > rowID, "the backup's next asset is number \(made.rowID); the server gave \(rowID) to an asset committed as the backup read")
    }
}

extension EditHelp {
    /// A unique JPEG named `name` imported into `library` (into `album`).
    static func importInto(_ library: Library, dir: String, _ name: String, album: String? = nil) throws -> Asset {
        let src = dir + "/src-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: src, withIntermediateDirectories: true)
        try TestMedia.write(TestMedia.jpeg(tag: "\(name)-\(UUID())"), to: src + "/" + name)
        return try #require(try Importer(library: library, options: ImportOptions(album: album)).run([src]).imported.first)
    }
}
