import Foundation
import Testing
import TestSupport
@testable import GrantStore
import GRDB
import PhotoLibrary

/// Recently Deleted (issue 38): the person's own delete, who deleted what, emptying it, and the
/// automatic purge (off unless turned on, recorded in the change log).
@Suite struct RecentlyDeletedStore {
    let t: TempLibrary
    var library: Library { t.library }
    let app = AppID("org.example.Cleaner")!
    let assets: [String: Asset]

    init() throws {
        t = try TempLibrary()
        assets = Dictionary(uniqueKeysWithValues: try t.importJPEGs(["a.jpg", "b.jpg", "c.jpg"]).map { ($0.displayName, $0) })
        _ = try library.authorize(app, access: .readWrite, status: .authorized)
    }

    func by() throws -> [String: DeletedBy] {
        Dictionary(uniqueKeysWithValues: try library.trashEntries().map { ($0.asset.displayName, $0.deletedBy) })
    }

    /// Moves an asset's deletion `days` into the past.
    func backdate(_ name: String, days: Double) throws {
        try library.write { db in
            try db.execute(sql: "UPDATE assets SET trashed_at = trashed_at - ? WHERE display_name = ?", arguments: [days * 86_400, name])
        }
    }

    func logged(_ kind: String) throws -> [GrantStore.Row] {
        try library.read { db in try Row.fetchAll(db, sql: "SELECT app_id, asset_rowid, detail FROM changes WHERE kind = ? ORDER BY seq", arguments: [kind]) }
    }

    @Test func thePersonsDeleteIsRecordedAsTheirs() throws {
        let a = try #require(assets["a.jpg"]), b = try #require(assets["b.jpg"])
        try library.moveToTrash(rowIDs: [a.rowID], by: app)
        let r = try library.delete([b.id, a.id])
        #expect(r.deleted.map(\.displayName) == ["b.jpg"] && r.already.map(\.displayName) == ["a.jpg"])
        #expect(try by() == ["a.jpg": .app(app), "b.jpg": .person])
        // The change log says it too: the app's delete names it, the person's names no app.
        let trashes = try logged("trash")
        #expect(trashes.map { $0[0] as String? } == [app.rawValue, nil])
        #expect(trashes.map { $0[1] as Int64 } == [a.rowID, b.rowID])
        // Gone from every view at once, as an app's rm: the app's history says removed.
        #expect(try library.view(for: app, access: .readWrite).entries.map(\.asset.displayName) == ["c.jpg"])
        // Restored and deleted again: who is the last one.
        try library.restore([a.id])
        #expect(try by() == ["b.jpg": .person])
        try library.delete([a.id])
        #expect(try by() == ["a.jpg": .person, "b.jpg": .person])
        // An unknown reference deletes nothing.
        #expect(throws: LibraryError.self) { try library.delete(["c.jpg", "ghost.jpg"]) }
        #expect(try library.assets().map(\.displayName) == ["c.jpg"])
    }

    @Test func emptyingDeletesForGoodWhatIsOldEnoughAndLogsIt() throws {
        for n in ["a.jpg", "b.jpg"] { try library.delete([n]) }
        try backdate("a.jpg", days: 10)
        #expect(try library.emptyTrash(olderThanDays: 5).map(\.displayName) == ["a.jpg"])
        #expect(try library.trash().map(\.displayName) == ["b.jpg"])
        #expect(try library.emptyTrash().map(\.displayName) == ["b.jpg"])
        #expect(try library.trash().isEmpty)
        #expect(try library.assets().map(\.displayName) == ["c.jpg"])
        let purges = try logged("purge")
        #expect(purges.count == 2)
        #expect((purges.first?[2] as String?)?.hasPrefix("\(assets["a.jpg"]!.id) a.jpg: emptied: deleted more than 5 days ago") == true, "\(purges)")
        #expect(throws: LibraryError.self) { try library.emptyTrash(olderThanDays: -1) }
    }

    @Test func theAutomaticPurgeIsOffUntilTurnedOnAndRunsHourly() throws {
        for n in ["a.jpg", "b.jpg"] { try library.delete([n]) }
        try backdate("a.jpg", days: 31)
        // Off by default: nothing goes, however old.
        #expect(try library.trashSettings().purgeAfterDays == nil)
        #expect(try library.purgeRecentlyDeleted(force: true) == nil)
        #expect(try library.trash().count == 2)
        #expect(try library.trashEntries().allSatisfy { $0.purgeDate == nil })
        #expect(throws: LibraryError.self) { try library.setTrashPurge(afterDays: 0) }
        #expect(throws: LibraryError.self) { try library.setTrashPurge(afterDays: 3651) }

        try library.setTrashPurge(afterDays: 30)
        let entries = try library.trashEntries()
        for e in entries {
            #expect(e.purgeDate == e.asset.trashedDate?.addingTimeInterval(30 * 86_400))
        }
        let now = Date().timeIntervalSince1970
        let first = try #require(try library.purgeRecentlyDeleted(now: now))
        #expect(first.days == 30 && first.assets.map(\.displayName) == ["a.jpg"])
        #expect(try library.trash().map(\.displayName) == ["b.jpg"])
        let purge = try #require(try logged("purge").first)
        #expect((purge[2] as String?)?.contains("a.jpg: automatic: in Recently Deleted for more than 30 days") == true, "\(purge)")
        // Within the hour it does not run again (unless forced); after it, it does.
        try backdate("b.jpg", days: 31)
        #expect(try library.purgeRecentlyDeleted(now: now + 60) == nil)
        #expect(try library.trash().map(\.displayName) == ["b.jpg"])
        #expect(try library.purgeRecentlyDeleted(now: now + 3_601)?.assets.map(\.displayName) == ["b.jpg"])
        // Nothing old enough: it ran, deleted nothing.
        try library.delete(["c.jpg"])
        #expect(try library.purgeRecentlyDeleted(force: true)?.assets.isEmpty == true)
        #expect(try library.trash().map(\.displayName) == ["c.jpg"])
        // Off again.
        try library.setTrashPurge(afterDays: nil)
        try backdate("c.jpg", days: 400)
        #expect(try library.purgeRecentlyDeleted(force: true) == nil)
        #expect(try library.trash().map(\.displayName) == ["c.jpg"])
    }

    /// A library made before v10: who deleted what in Recently Deleted comes from the change log.
    @Test(.disabled(if: TestSupport.onPostgres, "an SQLite migration: a PostgreSQL catalog is made whole"))
    func theMigrationFillsInWhoFromTheLog() throws {
        let a = try #require(assets["a.jpg"]), b = try #require(assets["b.jpg"])
        try library.moveToTrash(rowIDs: [a.rowID], by: app)
        try library.moveToTrash(rowIDs: [a.rowID], by: nil)   // already there: no second entry
        try library.delete([b.id])
        try library.restore([b.id])
        try library.moveToTrash(rowIDs: [b.rowID], by: app)
        // Back to v9: no column, no setting, no migration.
        try library.write { db in
            try db.execute(sql: """
                ALTER TABLE assets DROP COLUMN trashed_by;
                DROP TABLE trash_settings;
                DELETE FROM grdb_migrations WHERE identifier = 'v10-recently-deleted';
                """)
        }
        let reopened = try Library.open(at: library.paths)
        let by = Dictionary(uniqueKeysWithValues: try reopened.trashEntries().map { ($0.asset.displayName, $0.deletedBy) })
        #expect(by == ["a.jpg": .app(app), "b.jpg": .app(app)])
        #expect(try reopened.trashSettings() == TrashSettings(purgeAfterDays: nil, lastPurge: nil))
    }
}

