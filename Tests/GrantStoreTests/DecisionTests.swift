import Foundation
import GRDB
import Testing
import TestSupport
import Synchronization
@testable import GrantStore
@testable import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

/// Issue 17 in the library: one facts reader, one decision, one source of view names, read by
/// `explain`, the history, the view and the picker's offer list alike.
@Suite(.serialized) struct OneDecision {
    /// The app's own file takes its name, so its view shows the photo of that name with a
    /// suffix: the view, `explain` and the history all say so (the history used to record the
    /// library's display name, which in this view is the app's own file).
    @Test func historyAndExplainNameAClashAsTheViewDoes() throws {
        let t = try TempLibrary()
        let photo = try #require(try t.importJPEGs(["X.jpg"]).first)
        try t.library.authorize(editor, access: .readWrite, status: .limited)
        let own = try t.appFile(editor, "X.jpg")
        #expect(own.displayName == "X-1.jpg" && own.ownerName == "X.jpg")
        try t.library.grant(editor, [photo.id])
        let view = try t.library.view(for: editor, access: .readWrite).entries
        let seen = try #require(view.first { $0.asset.rowID == photo.rowID }?.name)
        #expect(seen == "X-1.jpg")
        #expect(view.first { $0.asset.rowID == own.rowID }?.name == "X.jpg")
        #expect(try t.library.explain(editor, asset: photo.id, access: .readWrite).name == seen)
        #expect(try t.library.explain(editor, asset: own.id, access: .readWrite).name == "X.jpg")
        guard case .changes(let changes, _) = try t.library.changes(editor) else { Issue.record("expired"); return }
        let inserted = changes.last { $0.kind == .inserted && $0.assetID == photo.id }
        #expect(inserted?.name == seen)
        // Revoked: the history names what the view showed before.
        try t.library.revoke(editor, [photo.id])
        guard case .changes(let after, _) = try t.library.changes(editor) else { Issue.record("expired"); return }
        #expect(after.last { $0.kind == .removed && $0.assetID == photo.id }?.name == seen)
        #expect(try t.library.viewNames(editor)?[photo.rowID] == nil)   // no longer visible
    }

    /// A change's history is each app's view before and after, read for every app at once in
    /// steps of a few rows (`ViewDelta.visibilityRows`, lowered here so that a grant of 11 assets
    /// among 3 apps takes six): every asset of the grant, and only those, is inserted for the
    /// app granted, removed at the revoke; an app that sees everything is told nothing.
    @Test func aChangeReadInStepsTellsEachAppExactlyWhatItsViewGainedAndLost() throws {
        let t = try TempLibrary()
        let viewer = AppID("org.example.Viewer")!, other = AppID("org.example.Other")!
        let photos = try t.importJPEGs((0..<13).map { "p\($0).jpg" })
        try t.library.authorize(editor, access: .readWrite, status: .limited)
        try t.library.authorize(other, access: .readWrite, status: .limited)
        try t.library.authorize(viewer, access: .readWrite, status: .authorized)
        let saved = ViewDelta.visibilityRows.exchange(7, ordering: .relaxed)
        defer { ViewDelta.visibilityRows.store(saved, ordering: .relaxed) }
        func token(_ app: AppID) throws -> Int64 { try t.library.latestChangeToken(app) }
        func changes(_ app: AppID, since: Int64) throws -> [(AppChangeKind, String?)] {
            guard case .changes(let list, _) = try t.library.changes(app, since: since) else { Issue.record("expired"); return [] }
            return list.map { ($0.kind, $0.assetID) }
        }
        let granted = Array(photos[1..<12])
        let (e0, v0, o0) = (try token(editor), try token(viewer), try token(other))
        _ = try t.library.grant(editor, granted.map(\.id))
        #expect(try changes(editor, since: e0).filter { $0.0 == .inserted }.map(\.1).sorted { ($0 ?? "") < ($1 ?? "") }
                == granted.map(\.id).sorted())
        #expect(try changes(viewer, since: v0).isEmpty)
        #expect(try changes(other, since: o0).isEmpty)
        let e1 = try token(editor)
        _ = try t.library.revoke(editor, granted.map(\.id))
        #expect(try changes(editor, since: e1).filter { $0.0 == .removed }.map(\.1).sorted { ($0 ?? "") < ($1 ?? "") }
                == granted.map(\.id).sorted())
        #expect(try changes(viewer, since: v0).isEmpty)
    }

    /// The picker offers what the library would grant: never a shared asset for a selection, nor
    /// for a pick to a limited app; an authorized app may be handed one.
    @Test func thePickersOfferIsTheDecisions() throws {
        let t = try TempLibrary()
        try t.importJPEGs(["mine.jpg"])
        try t.importJPEGs(["cloud.jpg"], shared: "Family")
        try t.library.authorize(editor, access: .readWrite, status: .authorized)
        var items = try t.library.pickerCatalog(for: editor).items
        #expect(items.filter(\.selectable).map(\.displayName) == ["mine.jpg"])
        #expect(Set(items.filter(\.pickable).map(\.displayName)) == ["mine.jpg", "cloud.jpg"])
        try t.library.authorize(editor, access: .readWrite, status: .limited)
        items = try t.library.pickerCatalog(for: editor).items
        #expect(items.filter(\.pickable).map(\.displayName) == ["mine.jpg"])
        // And the library refuses exactly what is not offered.
        let cloud = try #require(items.first { $0.displayName == "cloud.jpg" })
        #expect(throws: LibraryError.self) { try t.library.grant(editor, [cloud.id], picked: true) }
        #expect(throws: LibraryError.self) { try t.library.grant(editor, [cloud.id]) }
        // An app the library does not know yet: the same rule.
        let unknown = try t.library.pickerCatalog(for: camera).items
        #expect(unknown.filter(\.selectable).map(\.displayName) == ["mine.jpg"])
    }

    /// An asset imported again as cloud-shared keeps exactly the grants the library would make
    /// of it now (`grantRefusal`): no selection, whoever holds it; no pick for a limited app; the
    /// pick of an app that sees picked assets only stays. Each removal is in the change log.
    @Test func markingSharedKeepsWhatTheDecisionWouldGrant() throws {
        let t = try TempLibrary()
        let src = t.dir + "/again"
        try FileManager.default.createDirectory(atPath: src, withIntermediateDirectories: true)
        try TestMedia.write(try TestMedia.jpeg(tag: "again-\(UUID())"), to: src + "/a.jpg")
        let a = try #require(try Importer(library: t.library, options: ImportOptions()).run([src]).imported.first)
        let viewer = AppID("org.example.Viewer")!, full = AppID("org.example.Full")!
        try t.library.authorize(editor, access: .readWrite, status: .limited)
        try t.library.authorize(camera, access: .readWrite, status: .limited)
        try t.library.authorize(viewer, access: .readWrite, status: .denied)
        try t.library.authorize(full, access: .readWrite, status: .authorized)
        try t.library.grant(editor, [a.id])
        try t.library.grant(camera, [a.id], picked: true)
        try t.library.grant(viewer, [a.id], picked: true)
        try t.library.grant(full, [a.id])
        try t.library.grant(full, [a.id], picked: true)
        _ = try Importer(library: t.library, options: ImportOptions(sharedAlbum: "Family")).run([src])
        func kept(_ app: AppID) throws -> [String] { try t.library.grants(app).map { "\($0.kind)" } }
        #expect(try kept(editor) == [])
        #expect(try kept(camera) == [])                  // a limited app's pick could never show
        #expect(try kept(viewer) == ["picked"])
        #expect(try kept(full) == ["picked"])
        let removed = try t.library.read { db in
            try Row.fetchAll(db, sql: "SELECT kind, app_id FROM changes WHERE detail = 'shared' ORDER BY seq").map { "\($0[0] as String) \($0[1] as String)" }
        }
        #expect(removed == ["revoke \(editor)", "revoke \(full)", "unpick \(camera)"])
        // What went is what the library now refuses to grant again; what stayed it would grant.
        #expect(throws: LibraryError.self) { try t.library.grant(camera, [a.id], picked: true) }
        #expect(throws: LibraryError.self) { try t.library.grant(full, [a.id]) }
        #expect(try t.library.grant(viewer, [a.id], picked: true).unchanged == 1)
        #expect(try t.library.view(for: viewer, access: .readWrite).rows.rowIDs == [a.rowID])
        // Nor may anyone be given it to edit (the same decision).
        #expect(throws: LibraryError.conflict("refused: 'a.jpg' (\(a.id)) is in a shared album, and no app edits a cloud-shared asset; nothing was changed")) {
            try t.library.grantEdit(full, [a.id])
        }
    }

    /// The one reader: the facts it reads for one asset are those the view build reads for all.
    @Test func oneAssetsFactsAreThoseOfTheWholeRead() throws {
        let t = try TempLibrary()
        let a = try t.importJPEGs(["a.jpg", "b.jpg", "c.jpg"], gps: true)
        try t.library.authorize(editor, access: .readWrite, status: .limited)
        try t.library.grant(editor, [a[0].id], stripLocation: true)
        try t.library.grant(editor, [a[1].id], picked: true)
        try t.library.grantEdit(editor, [a[1].id])
        let own = try t.appFile(editor, "own.jpg")
        try t.library.read { db in
            let all = try Library.facts(db, app: editor, rowIDs: nil)
            #expect(all.count == 4)
            for (asset, facts) in all {
                #expect(try Library.facts(db, app: editor, rowID: asset.rowID) == facts)
                #expect(try Library.factsOnly(db, app: editor, rowIDs: [asset.rowID])[asset.rowID]?.isSelected == facts.isSelected)
            }
            let byRow = Dictionary(uniqueKeysWithValues: all.map { ($0.asset.rowID, $0.facts) })
            #expect(byRow[a[0].rowID] == AssetFacts(isSelected: true, selectionStripsLocation: true, hasLocation: true))
            #expect(byRow[a[1].rowID] == AssetFacts(isPicked: true, editConsent: true, hasLocation: true))
            #expect(byRow[a[2].rowID] == AssetFacts(hasLocation: true))
            #expect(byRow[own.rowID]?.isOwned == true)
        }
        let view = try t.library.view(for: editor, access: .readWrite).entries
        #expect(view.map(\.asset.rowID).sorted() == [a[0].rowID, a[1].rowID, own.rowID].sorted())
        #expect(view.first { $0.asset.rowID == a[0].rowID }?.stripLocation == true)
        #expect(view.first { $0.asset.rowID == a[1].rowID }?.stripLocation == false)
    }

    /// The names of a few clashing assets, computed without the rest of the view, are those of
    /// the whole view's assignment (random clashes: app files named like photos, like each
    /// other, and like the suffixed names the clashes produce).
    @Test(arguments: [7, 8, 9] as [UInt64])
    func renamedInViewIsTheWholeViewsNaming(seed: UInt64) throws {
        var state = seed
        func next(_ n: Int) -> Int { state = state &* 6364136223846793005 &+ 1442695040888963407; return Int((state >> 33) % UInt64(n)) }
        let t = try TempLibrary()
        let pool = ["P.jpg", "P-1.jpg", "P-2.jpg", "Q.jpg", "Q-1.jpg", "R.jpg"]
        try t.importJPEGs(pool.filter { _ in next(3) > 0 })
        for app in [editor, camera] {
            for _ in 0..<(2 + next(4)) { _ = try t.appFile(app, pool[next(pool.count)]) }
            try t.library.authorize(app, access: .readWrite, status: next(2) == 0 ? .authorized : .limited)
        }
        for a in try t.library.assets() where next(2) == 0 { try t.library.grant(editor, [a.id]) }
        for app in [editor, camera] {
            let rows = try t.library.view(for: app, access: .readWrite).rows
            var whole: [Int64: String] = [:]
            for i in 0..<rows.count { if let n = rows.ownViewName(i) { whole[rows.rowIDs[i]] = n } }
            let few = try t.library.read { db in try Library.renamedInView(db, app: Library.requireApp(db, app), access: .readWrite) }
            #expect((few ?? [:]) == whole, "seed \(seed) \(app)")
            // Name resolution reads every name of the view back as its asset.
            try t.library.read { db in
                let names = try Library.AppNames(db, Library.requireApp(db, app))
                for i in 0..<rows.count { #expect(try names.lookup(db, rows.viewName(i)) == rows.rowIDs[i], "seed \(seed) \(app) \(rows.viewName(i))") }
            }
        }
    }
}
