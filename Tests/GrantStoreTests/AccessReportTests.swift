import Foundation
import Testing
import TestSupport
@testable import GrantStore
import GRDB
import PhotoLibrary

/// The access report's store (issue 36): tallies add up per (app, asset, kind, day), retention
/// drops old days from disk, clearing forgets, and a report never names another photo.
@Suite struct AccessReportStore {
    let t: TempLibrary
    var library: Library { t.library }
    let app = AppID("org.example.Reader")!
    let other = AppID("org.example.Other")!
    let rows: [Int64]

    init() throws {
        t = try TempLibrary()
        rows = try t.importJPEGs(["one.jpg", "two.jpg"]).sorted { $0.displayName < $1.displayName }.map(\.rowID)
        _ = try library.authorize(app, access: .readWrite, status: .authorized)
        _ = try library.authorize(other, access: .readWrite, status: .authorized)
    }

    func rowCount() throws -> Int {
        try library.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM access_report")! }
    }

    var today: Int64 { Library.reportDay(Int64(Date().timeIntervalSince1970)) }

    @Test func batchesAddUpToOneRowPerAssetKindAndDay() throws {
        let now = Int64(Date().timeIntervalSince1970)
        try library.recordAccess(app, [AccessTally(rowID: rows[0], kind: .read, day: today, first: now - 10, last: now - 5, count: 3)], prune: false)
        try library.recordAccess(app, [AccessTally(rowID: rows[0], kind: .read, day: today, first: now - 20, last: now - 1, count: 2),
                                       AccessTally(rowID: rows[1], kind: .deleted, day: today, first: now, last: now, count: 1)], prune: true)
        try library.recordAccess(other, [AccessTally(rowID: rows[0], kind: .read, day: today, first: now, last: now, count: 7)], prune: false)
        #expect(try rowCount() == 3)
        let mine = try library.accessReport(app: app)
        #expect(mine.count == 2)
        let read = try #require(mine.first { $0.kind == .read })
        #expect(read.count == 5 && read.days == 1 && read.name == "one.jpg")
        #expect(Int64(read.first.timeIntervalSince1970) == now - 20 && Int64(read.last.timeIntervalSince1970) == now - 1)
        #expect(mine.first?.kind == .deleted, "newest first")
        // Per photo: which apps did what.
        let byAsset = try library.accessReport(asset: rows[0])
        #expect(Set(byAsset.map(\.app)) == [app, other])
        #expect(try library.accessReport(app: app, since: Date(timeIntervalSince1970: Double(now - 2))).map(\.kind) == [.deleted, .read])
        #expect(try library.accessReport(app: app, since: Date(timeIntervalSince1970: Double(now + 5))).isEmpty)
        #expect(throws: LibraryError.unknownApp("org.example.Nobody")) { try library.accessReport(app: AppID("org.example.Nobody")!) }
        // Clearing one app's leaves the other's.
        #expect(try library.clearReport(app: app) == 2)
        #expect(try library.accessReport().map(\.app) == [other])
    }

    @Test func retentionDropsOldDaysFromDisk() throws {
        let now = Int64(Date().timeIntervalSince1970)
        let tallies = [40, 10, 2, 0].map { ago in
            AccessTally(rowID: rows[0], kind: .read, day: today - ago, first: now - ago * 86_400, last: now - ago * 86_400, count: 1)
        }
        try library.recordAccess(app, tallies, prune: false)
        #expect(try rowCount() == 4)
        // The default keeps 30 days: the report never shows the 40-day-old one, and a batch that
        // prunes removes it from the disk.
        #expect(try library.accessReport(app: app).first?.days == 3)
        try library.recordAccess(app, [], prune: true)
        #expect(try rowCount() == 3)
        try library.setReportSettings(retentionDays: 3, recording: nil)
        #expect(try rowCount() == 2)
        #expect(try library.reportSettings() == ReportSettings(retentionDays: 3, recording: true))
        #expect(throws: LibraryError.invalid("the report's retention is 1 to 3650 days, not 0")) {
            try library.setReportSettings(retentionDays: 0, recording: nil)
        }
    }

    @Test func recordingOffRecordsNothing() throws {
        try library.setReportSettings(retentionDays: nil, recording: false)
        let now = Int64(Date().timeIntervalSince1970)
        let on = try library.recordAccess(app, [AccessTally(rowID: rows[0], kind: .read, day: today, first: now, last: now, count: 1)], prune: false)
        #expect(on == false)
        #expect(try rowCount() == 0)
        #expect(try library.recordAccess(app, [], prune: false) == false)
    }

    /// A photo deleted for good stays in the report, without a name, and its row number is
    /// never given to another photo (v7), so the entry never comes to name one.
    @Test func aPhotoDeletedForGoodIsNeverAnother() throws {
        let now = Int64(Date().timeIntervalSince1970)
        try library.recordAccess(app, [AccessTally(rowID: rows[1], kind: .read, day: today, first: now, last: now, count: 1)], prune: false)
        try library.write { db in try db.execute(sql: "DELETE FROM assets WHERE rowid = ?", arguments: [rows[1]]) }
        try t.importJPEGs(["three.jpg"])
        let entry = try #require(try library.accessReport(app: app).first)
        #expect(entry.assetID == nil && entry.name == nil)
    }
}

/// Recently Deleted's "delete for good" (issue 35): only what is in Recently Deleted, its rows and
/// its stored files, never a file another asset still names, never a referenced original.
@Suite struct DeleteForGood {
    @Test func onlyTrashedAssetsGoWithTheirFiles() throws {
        let t = try TempLibrary()
        let assets = try t.importJPEGs(["keep.jpg", "gone.jpg"])
        let keep = try #require(assets.first { $0.displayName == "keep.jpg" })
        let gone = try #require(assets.first { $0.displayName == "gone.jpg" })
        let gonePath = try t.library.originalPath(gone)
        #expect(throws: LibraryError.self) { try t.library.deleteForGood([gone.id]) }   // not in Recently Deleted
        #expect(FileManager.default.fileExists(atPath: gonePath))
        // Their thumbnails (the web app's cache) go with them; others stay.
        func thumb(_ a: Asset) -> String {
            let h = String(a.contentHash.split(separator: ":").last!)
            return "\(t.library.paths.root)/thumbs/\(h.prefix(2))/\(h)-small.jpg"
        }
        for a in [keep, gone] {
            try FileManager.default.createDirectory(atPath: (thumb(a) as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try TestMedia.write([0xFF, 0xD8], to: thumb(a))
        }
        try t.library.moveToTrash(rowIDs: [gone.rowID], by: nil)
        #expect(throws: LibraryError.self) { try t.library.deleteForGood([gone.id, keep.id]) }   // one is not: nothing goes
        #expect(try t.library.trash().map(\.id) == [gone.id])
        try t.library.deleteForGood([gone.id])
        #expect(try t.library.trash().isEmpty)
        #expect(try t.library.assets().map(\.id) == [keep.id])
        #expect(!FileManager.default.fileExists(atPath: gonePath), "the stored file stays")
        #expect(FileManager.default.fileExists(atPath: try t.library.originalPath(keep)))
        #expect(!FileManager.default.fileExists(atPath: thumb(gone)), "the thumbnail of a photo deleted for good stays")
        #expect(FileManager.default.fileExists(atPath: thumb(keep)))
        #expect(throws: LibraryError.self) { try t.library.deleteForGood([gone.id]) }   // unknown now
    }

    @Test func aReferencedOriginalIsNeverTouched() throws {
        let t = try TempLibrary()
        let src = t.dir + "/mine.jpg"
        try TestMedia.write(TestMedia.jpeg(tag: "referenced"), to: src)
        _ = try Importer(library: t.library, options: ImportOptions(reference: true)).run([src])
        let a = try #require(try t.library.assets().first)
        try t.library.moveToTrash(rowIDs: [a.rowID], by: nil)
        try t.library.deleteForGood([a.id])
        #expect(FileManager.default.fileExists(atPath: src), "the person's own file was deleted")
        #expect(try t.library.assets().isEmpty)
    }
}
