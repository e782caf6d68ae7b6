import Foundation
import GRDB
import Testing
import TestSupport
@testable import GrantStore
@testable import PhotoLibrary

/// A catalog's store paths are text in a file: photogate builds a path from one only when it has
/// the shape photogate writes (`StorePath`), so a row saying "../../x" never leads out of the store.
@Suite struct StorePaths {
    @Test func onlyTheShapePhotogateWritesIsValid() {
        #expect(StorePath.isValid("ab/abcdef0123456789.jpg"))
        #expect(StorePath.isValid("00/0011223344556677.heic"))
        #expect(StorePath.isValid(StoreWriter.storeRelativePath(id: StoreWriter.randomID(), kind: .webm)))
        for bad in ["../../../../etc/ld.so.preload", "/etc/shadow", "ab/../../../../etc/x.jpg", "ab/abcdef0123456789.jpg\0",
                    "ab/abcdef012345678.jpg", "ab/abcdef01234567890.jpg", "ac/abcdef0123456789.jpg", "AB/ABCDEF0123456789.jpg",
                    "ab/abcdef0123456789.sh", "ab/abcdef0123456789", "ab/abcdef0123456789.jpg/..", "ab//bcdef0123456789.jpg",
                    "abcdef0123456789.jpg", "", "ab/abcdef0123456789.jpg "] {
            #expect(!StorePath.isValid(bad), "\(bad)")
        }
    }

    /// The red team's rows: a "committed" file in a dead temp folder whose row names a path out of
    /// the store (crash recovery renamed it there), an app's own asset whose file would be deleted
    /// there, a view that would serve it. Nothing outside the store is renamed over, read, served or
    /// deleted; the asset is damaged (a clear error), and missing from views.
    @Test func aRowNamingAPathOutsideTheStoreIsNeverFollowed() throws {
        let t = try TempLibrary()
        let app = AppID("org.example.Editor")!
        try t.library.authorize(app, access: .readWrite, status: .authorized)
        try t.importJPEGs(["a.jpg"])
        // store/../../victim.jpg: beside the library folder, outside it.
        let victim = t.dir + "/victim.jpg"
        let victimBytes = try TestMedia.jpeg(tag: "victim")
        try TestMedia.write(victimBytes, to: victim)
        let id = "1111111111111111"
        try t.library.write { db in
            try db.execute(sql: """
                INSERT INTO assets (rowid, id, display_name, owner_app, owner_name, media_kind, media_class, byte_size, capture_date,
                                    added_at, has_location, content_hash, store_path)
                VALUES ((SELECT COALESCE(max(rowid), 0) + 1 FROM assets), ?, 'x.jpg', ?, 'x.jpg', 'jpeg', 'photo', ?, 0, 0, 0, 'sha256:00', '../../victim.jpg')
                """, arguments: [id, app.rawValue, victimBytes.count])
        }
        let rowID = try #require(try t.library.read { db in try Int64.fetchOne(db, sql: "SELECT rowid FROM assets WHERE id = ?", arguments: [id]) })
        let dead = t.library.paths.tmp + "/import-999999-dead"
        try FileManager.default.createDirectory(atPath: dead, withIntermediateDirectories: true)
        try TestMedia.write(Array("not the victim's bytes".utf8), to: dead + "/\(id).jpg")

        // Crash recovery moves it nowhere (and keeps it: its fate is for verify to report).
        #expect(StoreWriter.recover(t.library) == 0)
        #expect(FileManager.default.contents(atPath: victim).map { [UInt8]($0) } == victimBytes, "recovery renamed over a file outside the store")
        #expect(FileManager.default.fileExists(atPath: dead + "/\(id).jpg"))
        #expect(throws: LibraryError.self) {
            try StoreWriter.install(t.library, tempPath: dead + "/\(id).jpg", storePath: "../../victim.jpg", durable: false)
        }

        // No view shows it; every path the library hands out for it is an error naming it.
        let view = try t.library.view(for: app, access: .readWrite)
        #expect(view.entries.map(\.name) == ["a.jpg"])
        #expect(!view.rows.rowIDs.contains(rowID))
        func damaged(_ body: () throws -> Void) {
            do {
                try body()
                Issue.record("no error")
            } catch LibraryError.libraryDamaged(let m) {
                #expect(m.contains(id) && m.contains("../../victim.jpg"), "\(m)")
            } catch {
                Issue.record("\(error)")
            }
        }
        damaged { _ = try t.library.currentOriginal(rowID: rowID).path }
        damaged { _ = try t.library.redaction(rowID: rowID) }
        let asset = try #require(try t.library.asset(rowID: rowID))
        damaged { _ = try t.library.originalPath(asset) }

        // The app's own asset dissolved: its row goes, the file outside the store stays.
        try t.library.dissolveOwnAsset(rowID: rowID, app: app)
        #expect(FileManager.default.fileExists(atPath: victim), "dissolving the asset deleted a file outside the store")
    }
}
