import Foundation
import GRDB
import Testing
import TestSupport
@testable import GrantStore
@testable import PhotoLibrary
import Redaction

/// Edits (issue 15), library side: the decision, versions, revert, requests, crash safety.
enum EditHelp {
    /// Saves `bytes` as a new version of `rowID` the way the mount does: a temp file of a
    /// StoreWriter, fsynced, then commitVersion.
    static func save(_ t: TempLibrary, _ rowID: Int64, app: AppID, _ bytes: [UInt8]) throws -> (asset: Asset, changed: Bool) {
        try save(t.library, rowID, app: app, bytes)
    }

    static func save(_ library: Library, _ rowID: Int64, app: AppID, _ bytes: [UInt8]) throws -> (asset: Asset, changed: Bool) {
        let writer = try StoreWriter(library: library, purpose: "edit-test")
        let (_, path, fd) = try writer.makeTemp()
        defer { close(fd) }
        try put(fd, bytes)
        return try library.commitVersion(rowID: rowID, app: app, tempPath: path, fd: fd)
    }

    /// An edit of a fresh "a.jpg" whose row committed but whose file never reached the store (a
    /// crash right after the commit): the file is in the temp folder `folder` of a dead process,
    /// under its file id, as the mount left it.
    static func versionLeftInTemp(_ t: TempLibrary, tag: String, folder: String)
        throws -> (original: Asset, edited: Asset, stored: String, fileID: String, dead: String) {
        let a = try t.importJPEGs(["a.jpg"])[0]
        let e = try save(t, a.rowID, app: editor, try TestMedia.jpeg(tag: tag)).asset
        let stored = try t.library.originalPath(e)
        let fileID = ((stored as NSString).lastPathComponent as NSString).deletingPathExtension
        let dead = t.library.paths.tmp + "/" + folder
        try FileManager.default.createDirectory(atPath: dead, withIntermediateDirectories: true)
        #expect(rename(stored, dead + "/\(fileID).part") == 0)
        return (a, e, stored, fileID, dead)
    }

    static func put(_ fd: Int32, _ bytes: [UInt8]) throws {
        let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        #expect(n == bytes.count)
        #expect(fsync(fd) == 0)
    }

    static func sha(_ path: String) throws -> String {
        "sha256:" + hexString(SHA256.hash([UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))))
    }

    /// A unique JPEG whose EXIF DateTimeOriginal is 2025:01:02 03:04:05 instead of the base's.
    static func jpegDated(tag: String, gps: Bool = false) throws -> [UInt8] {
        var b = try TestMedia.jpeg(tag: tag, gps: gps)
        let old = Array("2024:07:14 10:31:00".utf8), new = Array("2025:01:02 03:04:05".utf8)
        var i = 0
        while i + old.count <= b.count {
            if Array(b[i..<(i + old.count)]) == old { b.replaceSubrange(i..<(i + old.count), with: new); i += old.count } else { i += 1 }
        }
        return b
    }

    static func plan(_ t: TempLibrary, _ rowID: Int64) throws -> RedactionPlan? {
        if case .plan(let p) = try t.library.redaction(rowID: rowID) { return p }
        return nil
    }

    static func updated(_ t: TempLibrary, _ app: AppID, since: Int64) throws -> [AppChange] {
        guard case .changes(let list, _) = try t.library.changes(app, since: since) else { return [] }
        return list.filter { $0.kind == .updated }
    }
}

let viewer = AppID("org.example.Viewer")!

@Suite(.serialized) struct EditDecisions {
    /// own, consent, edit-any, add-only, shared, hidden, trashed: through the library, which reads
    /// the facts and asks ViewPolicy.
    @Test func decisionTable() throws {
        let t = try TempLibrary()
        let lib = t.library
        let a = try t.importJPEGs(["a.jpg", "b.jpg", "t.jpg"])
        let shared = try t.importJPEGs(["s.jpg"], shared: "Family")[0]
        try lib.authorize(editor, access: .readWrite, status: .limited)
        try lib.authorize(viewer, access: .readWrite, status: .authorized)
        try lib.grant(editor, [a[0].id, a[2].id])
        // An asset the editor created.
        let writer = try StoreWriter(library: lib, purpose: "test")
        let (id, temp, fd) = try writer.makeTemp()
        try EditHelp.put(fd, try TestMedia.jpeg(tag: "own"))
        let own = try writer.commitAppFile(tempPath: temp, fd: fd, id: id, app: editor, name: "own.jpg").asset
        close(fd)

        func d(_ app: AppID, _ asset: Asset, _ access: AccessLevel = .readWrite) throws -> String {
            try lib.editDecision(app: app, rowID: asset.rowID, access: access).label
        }
        #expect(try d(editor, own) == "allowed")
        #expect(try d(editor, a[0]) == "needs-consent")
        #expect(try d(editor, a[1]) == "never")             // not in its selection: hidden
        #expect(try d(editor, shared) == "never")           // a limited app never sees shared assets
        #expect(try d(viewer, shared) == "never")           // nobody edits a cloud-shared asset
        #expect(try d(viewer, a[1]) == "needs-consent")
        #expect(try d(editor, own, .addOnly) == "never")    // add-only edits nothing
        #expect(try d(camera, a[0]) == "never")             // unknown app
        // Per-asset consent, and taking it back.
        #expect(try lib.grantEdit(editor, [a[0].id]) == GrantOutcome(changed: 1, unchanged: 0))
        #expect(try lib.grantEdit(editor, [a[0].id]) == GrantOutcome(changed: 0, unchanged: 1))
        #expect(try d(editor, a[0]) == "allowed")
        #expect(try d(editor, a[1]) == "never")             // consent given ahead does not show it
        #expect(try lib.editConsents(editor).map(\.id) == [a[0].id])
        try lib.revokeEdit(editor, [a[0].id])
        #expect(try d(editor, a[0]) == "needs-consent")
        // edit-any: every asset the app can see, and only those.
        try lib.setOptions(editor, editAny: true)
        #expect(try lib.requireApp(editor).options.editAny)
        #expect(try d(editor, a[0]) == "allowed")
        #expect(try d(editor, a[1]) == "never")
        try lib.setOptions(editor, editAny: false)
        // Trashed assets are not editable.
        try lib.moveToTrash(rowIDs: [a[2].rowID])
        #expect(try d(editor, a[2]) == "never")
        // Shared assets refuse edit consent, all or nothing.
        #expect(throws: LibraryError.self) { try lib.grantEdit(viewer, [a[1].id, shared.id]) }
        #expect(try lib.editConsents(viewer).isEmpty)
        // explain carries the same decision.
        let e = try lib.explain(editor, asset: a[0].id, access: .readWrite)
        #expect(e.edit.label == "needs-consent")
        #expect(try lib.explain(editor, asset: own.id, access: .readWrite).edit == .allowed(reason: "the app created it"))
    }

    @Test func editRequestsAreOnePerAssetCappedAndAnsweredByGrantEdit() throws {
        let t = try TempLibrary()
        let lib = t.library
        let a = try t.importJPEGs(["a.jpg", "b.jpg"])
        try lib.authorize(editor, access: .readWrite, status: .authorized)
        try lib.recordEditRequest(app: editor, rowID: a[0].rowID)
        try lib.recordEditRequest(app: editor, rowID: a[0].rowID)
        try lib.recordEditRequest(app: editor, rowID: a[1].rowID)
        var reqs = try lib.requests()
        #expect(reqs.count == 2)
        #expect(reqs.allSatisfy { $0.kind == .edit })
        #expect(reqs.map { $0.asset?.id } == [a[0].id, a[1].id])
        // An edit request is only the library's to record (not .photogate/request's).
        #expect(throws: LibraryError.self) { try lib.recordRequest(editor, kind: .edit) }
        // grant --edit answers the request for that asset only.
        try lib.grantEdit(editor, [a[0].id])
        reqs = try lib.requests()
        #expect(reqs.map { $0.asset?.id } == [a[1].id])
        // Nothing is asked for what the app may already edit.
        try lib.recordEditRequest(app: editor, rowID: a[0].rowID)
        #expect(try lib.requests().count == 1)
        // edit-any answers them all.
        try lib.setOptions(editor, editAny: true)
        #expect(try lib.requests().isEmpty)
        try lib.setOptions(editor, editAny: false)
        // prevent-prompt: no request.
        try lib.setOptions(editor, preventPrompt: true)
        try lib.recordEditRequest(app: editor, rowID: a[1].rowID)
        #expect(try lib.requests().isEmpty)
        try lib.setOptions(editor, preventPrompt: false)
        // Capped: with the maximum pending, a new one is not recorded.
        try lib.write { db in
            for i in 0..<Library.maxEditRequestsPerApp {
                try db.execute(sql: "INSERT INTO requests (app_id, kind, reason, created_at, asset_rowid) VALUES (?, 'edit', ?, 0, ?)",
                               arguments: [editor.rawValue, "filler \(i)", a[0].rowID])
            }
        }
        try lib.recordEditRequest(app: editor, rowID: a[1].rowID)
        #expect(try lib.requests().filter { $0.asset?.id == a[1].id }.isEmpty)
        #expect(try lib.requests().count == Library.maxEditRequestsPerApp)
    }

    /// A v4 library keeps its requests through the rebuild of the requests table, and accepts
    /// edit requests afterwards; the schema refuses an edit request without an asset.
    @Test func migrationFromV4KeepsRequests() throws {
        let dir = TestSupport.tempDir("v4")
        defer { TestSupport.remove(dir) }
        let paths = LibraryPaths(root: dir + "/library")
        for d in [paths.root, paths.store, paths.tmp, paths.run] {
            try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        }
        do {
            let q = try DatabaseQueue(path: paths.database)
            try Schema.migrator.migrate(q, upTo: "v4-redaction-version")
            try q.write { db in
                try db.execute(sql: "INSERT INTO apps (id, secret, created_at) VALUES ('org.x.y', zeroblob(16), 0)")
                try db.execute(sql: "INSERT INTO requests (id, app_id, kind, reason, created_at) VALUES (7, 'org.x.y', 'picker', 'why', 5)")
            }
        }
        let lib = try Library.open(at: paths)
        let reqs = try lib.requests()
        #expect(reqs.count == 1)
        #expect(reqs.first?.id == 7 && reqs.first?.kind == .picker && reqs.first?.reason == "why" && reqs.first?.asset == nil)
        // Identical non-edit requests are still one.
        let (_, isNew) = try lib.recordRequest(AppID("org.x.y")!, kind: .picker, reason: "why")
        #expect(!isNew)
        #expect(throws: (any Error).self) {
            try lib.write { db in
                try db.execute(sql: "INSERT INTO requests (app_id, kind, reason, created_at) VALUES ('org.x.y', 'edit', '', 0)")
            }
        }
        #expect(try lib.app(AppID("org.x.y")!)?.options.editAny == false)
    }
}

extension EditDecisions {
    /// A view says, row by row, whether the app may edit the asset (a mount shows such a file
    /// 0644, issue 37): the library's edit decision, in a whole view and in the patch a running
    /// mount catches up with when consent or edit-any changes.
    @Test func theViewCarriesTheEditDecision() throws {
        let t = try TempLibrary()
        let lib = t.library
        let a = try t.importJPEGs(["a.jpg", "b.jpg"])
        try lib.authorize(editor, access: .readWrite, status: .limited)
        try lib.grant(editor, [a[0].id, a[1].id])
        func editable(_ rows: ViewRows) -> [Int64: Bool] {
            Dictionary(uniqueKeysWithValues: (0..<rows.count).map { (rows.rowIDs[$0], rows.flags[$0].contains(.editable)) })
        }
        func decided() throws -> [Int64: Bool] {
            Dictionary(uniqueKeysWithValues: try a.map { ($0.rowID, try lib.editDecision(app: editor, rowID: $0.rowID).isAllowed) })
        }
        var snap = try lib.view(for: editor, access: .readWrite, lean: true)
        #expect(editable(snap.rows) == [a[0].rowID: false, a[1].rowID: false])
        // Consent for one: a patch of that row says editable, as a whole view does.
        try lib.grantEdit(editor, [a[0].id])
        guard case .patch(let p) = try lib.viewUpdate(for: editor, access: .readWrite, since: snap.changeSeq, app: snap.app) else {
            Issue.record("an edit consent should patch the view"); return
        }
        #expect(p.affected == [a[0].rowID] && editable(p.rows) == [a[0].rowID: true])
        snap = try lib.view(for: editor, access: .readWrite, lean: true)
        #expect(editable(snap.rows) == (try decided()) && editable(snap.rows)[a[0].rowID] == true)
        // edit-any: every visible asset; taken back by a revoke and the option off.
        try lib.setOptions(editor, editAny: true)
        #expect(editable(try lib.view(for: editor, access: .readWrite, lean: true).rows) == [a[0].rowID: true, a[1].rowID: true])
        try lib.setOptions(editor, editAny: false)
        try lib.revokeEdit(editor, [a[0].id])
        #expect(editable(try lib.view(for: editor, access: .readWrite, lean: true).rows) == (try decided()))
        #expect(try decided() == [a[0].rowID: false, a[1].rowID: false])
    }
}

extension EditDecisions {
    /// A file time an app sets on its own file after its close (issue 37: rclone) is the capture
    /// date of a photo with none of its own, as one set while writing; the photo's own date wins,
    /// an edited asset keeps its original's, and only the app that made it, while it may name it,
    /// sets it.
    @Test func aFileTimeAfterCloseIsTheCaptureDateOfADatelessOwnFile() throws {
        let t = try TempLibrary()
        let lib = t.library
        try lib.authorize(editor, access: .readWrite, status: .limited)
        let dateless = t.dir + "/dateless.jpg"
        try #require(try TestSupport.run("convert", ["-size", "40x30", "xc:teal", dateless]).status == 0)
        let writer = try StoreWriter(library: lib, purpose: "test")
        func own(_ bytes: [UInt8], _ name: String) throws -> Asset {
            let (id, temp, fd) = try writer.makeTemp(extension: "jpg")
            defer { close(fd) }
            try EditHelp.put(fd, bytes)
            return try writer.commitAppFile(tempPath: temp, fd: fd, id: id, app: editor, name: name).asset
        }
        let plain = try own([UInt8](try Data(contentsOf: URL(fileURLWithPath: dateless))), "plain.jpg")
        let dated = try own(try TestMedia.jpeg(tag: "dated"), "dated.jpg")
        let when = Date(timeIntervalSince1970: 1_551_675_967)
        #expect(try lib.setOwnFileDate(rowID: plain.rowID, app: editor, access: .readWrite, to: when))
        #expect(try lib.asset(rowID: plain.rowID)?.captureDate == when)
        #expect(try !lib.setOwnFileDate(rowID: plain.rowID, app: editor, access: .readWrite, to: when), "the same date again changed it")
        // The photo's own date wins.
        #expect(try !lib.setOwnFileDate(rowID: dated.rowID, app: editor, access: .readWrite, to: when))
        #expect(try lib.asset(rowID: dated.rowID)?.captureDate == dated.captureDate)
        // Only its app; the person's photo refuses.
        let person = try t.importJPEGs(["p.jpg"])[0]
        #expect(throws: LibraryError.self) { try lib.setOwnFileDate(rowID: plain.rowID, app: viewer, access: .readWrite, to: when) }
        #expect(throws: LibraryError.self) { try lib.setOwnFileDate(rowID: person.rowID, app: editor, access: .readWrite, to: when) }
        // An app denied since may no longer name it.
        try lib.authorize(editor, access: .readWrite, status: .denied)
        #expect(throws: LibraryError.self) { try lib.setOwnFileDate(rowID: plain.rowID, app: editor, access: .readWrite, to: .now) }
        try lib.authorize(editor, access: .readWrite, status: .limited)
        // Edited: its original's date stays (as an edit's own times set none).
        _ = try EditHelp.save(t, plain.rowID, app: editor, [UInt8](try Data(contentsOf: URL(fileURLWithPath: dateless))) + [0])
        #expect(try !lib.setOwnFileDate(rowID: plain.rowID, app: editor, access: .readWrite, to: .now))
        #expect(try lib.asset(rowID: plain.rowID)?.captureDate == when)
    }
}

extension EditDecisions {
    /// A save that deletes the file first (jhead's rotation) takes the app's own asset back from
    /// Recently Deleted: only its own, only one it sent there itself.
    @Test func anAppTakesBackOnlyItsOwnAssetItDeleted() throws {
        let t = try TempLibrary()
        let lib = t.library
        try lib.authorize(editor, access: .readWrite, status: .limited)
        try lib.authorize(viewer, access: .readWrite, status: .authorized)
        let writer = try StoreWriter(library: lib, purpose: "test")
        let (id, temp, fd) = try writer.makeTemp(extension: "jpg")
        try EditHelp.put(fd, try TestMedia.jpeg(tag: "own"))
        let own = try writer.commitAppFile(tempPath: temp, fd: fd, id: id, app: editor, name: "own.jpg").asset
        close(fd)
        let person = try t.importJPEGs(["p.jpg"])[0]
        // Not in Recently Deleted, or another app's: refused.
        #expect(throws: LibraryError.self) { try lib.restoreOwnAsset(rowID: own.rowID, app: editor) }
        try lib.moveToTrash(rowIDs: [own.rowID], by: editor)
        #expect(throws: LibraryError.self) { try lib.restoreOwnAsset(rowID: own.rowID, app: viewer) }
        // The person's photo, deleted by an authorized app: never this way.
        try lib.moveToTrash(rowIDs: [person.rowID], by: viewer)
        #expect(throws: LibraryError.self) { try lib.restoreOwnAsset(rowID: person.rowID, app: viewer) }
        // Its own, deleted by the person: not the app's to take back.
        try lib.restoreOwnAsset(rowID: own.rowID, app: editor)
        #expect(try lib.asset(rowID: own.rowID)?.isTrashed == false)
        try lib.moveToTrash(rowIDs: [own.rowID])
        #expect(throws: LibraryError.self) { try lib.restoreOwnAsset(rowID: own.rowID, app: editor) }
    }
}

@Suite(.serialized) struct VersionTests {
    /// An edit that adds GPS: new hash, size, location and plan; same id, name, albums, grants;
    /// the original's stored bytes never change; every app that sees it gets `updated`.
    /// Consent was checked when the mount decided to save, and the version committed in another
    /// transaction: consent withdrawn in between still got the version saved. The commit of a
    /// mount's save asks again, in its own transaction (issue 34).
    @Test func aSaveWhoseConsentWasWithdrawnBeforeItsCommitIsRefused() throws {
        let t = try TempLibrary()
        let lib = t.library
        let a = try t.importJPEGs(["a.jpg"])[0]
        try lib.authorize(editor, access: .readWrite, status: .limited)
        try lib.grant(editor, [a.id])
        try lib.grantEdit(editor, [a.id])
        #expect(try lib.editDecision(app: editor, rowID: a.rowID).isAllowed)   // the mount's check
        _ = try lib.revokeEdit(editor, [a.id])                                  // the person, meanwhile
        let writer = try StoreWriter(library: t.library, purpose: "edit-test")
        let (_, path, fd) = try writer.makeTemp()
        defer { close(fd) }
        try EditHelp.put(fd, try TestMedia.jpeg(tag: "withdrawn"))
        #expect(throws: LibraryError.self) {
            try lib.commitVersion(rowID: a.rowID, app: editor, tempPath: path, fd: fd, requireConsent: true)
        }
        #expect(try lib.versions(a.id).versions.count <= 1, "a version was saved without consent")
        #expect(try lib.currentOriginal(rowID: a.rowID).path == lib.originalPath(a))
    }

    /// Two apps edit one photo. The second's view has not seen the first's save yet (its model
    /// is refreshed after the bell), so only the commit's own transaction can tell that its bytes
    /// were made from the version before: they would undo the first app's edit. Refused, nothing
    /// saved; a save made from the current version commits (issue 34).
    @Test func anEditMadeFromAVersionAnotherAppReplacedMeanwhileIsRefused() throws {
        let t = try TempLibrary()
        let lib = t.library
        let a = try t.importJPEGs(["a.jpg"])[0]
        let other = try #require(AppID("org.example.OtherEditor"))
        for app in [editor, other] {
            try lib.authorize(app, access: .readWrite, status: .authorized)
            try lib.grantEdit(app, [a.id])
        }
        let base = try lib.originalPath(a)                      // what both views show
        let first = try EditHelp.save(t, a.rowID, app: other, try TestMedia.jpeg(tag: "first")).asset
        let writer = try StoreWriter(library: t.library, purpose: "edit-test")
        let (_, path, fd) = try writer.makeTemp()
        defer { close(fd) }
        try EditHelp.put(fd, try TestMedia.jpeg(tag: "second"))
        #expect(throws: LibraryError.self) {
            try lib.commitVersion(rowID: a.rowID, app: editor, tempPath: path, fd: fd, requireConsent: true, basedOn: base)
        }
        #expect(try lib.versions(a.id).versions.count == 2, "the stale edit was saved over the other app's")
        #expect(try lib.currentOriginal(rowID: a.rowID).path == lib.originalPath(first))
        // Made from the current version: saved.
        let saved = try lib.commitVersion(rowID: a.rowID, app: editor, tempPath: path, fd: fd, requireConsent: true,
                                          basedOn: try lib.originalPath(first))
        #expect(saved.changed)
        #expect(try lib.versions(a.id).versions.count == 3)
    }

    @Test func commitVersionChangesContentAndKeepsIdentity() throws {
        let t = try TempLibrary()
        let lib = t.library
        let a = try t.importJPEGs(["a.jpg", "other.jpg"], album: "Trip")[0]
        try lib.authorize(editor, access: .readWrite, status: .limited)
        try lib.authorize(viewer, access: .readWrite, status: .authorized)
        try lib.authorize(camera, access: .readWrite, status: .limited)   // does not see it
        try lib.grant(editor, [a.id], stripLocation: true)
        try lib.grantEdit(editor, [a.id])
        let originalPath = try lib.originalPath(a)
        let originalHash = try EditHelp.sha(originalPath)
        #expect(originalHash == a.contentHash)
        #expect(!a.hasLocation)
        #expect(try EditHelp.plan(t, a.rowID)?.isEmpty == true)
        let tokens = (try lib.latestChangeToken(editor), try lib.latestChangeToken(viewer), try lib.latestChangeToken(camera))

        let edited = try EditHelp.jpegDated(tag: "edit-1", gps: true)
        let (after, changed) = try EditHelp.save(t, a.rowID, app: editor, edited)
        #expect(changed)
        #expect(after.rowID == a.rowID && after.id == a.id && after.displayName == a.displayName)
        #expect(after.contentHash == "sha256:" + hexString(SHA256.hash(edited)))
        #expect(after.byteSize == UInt64(edited.count))
        #expect(after.hasLocation)
        #expect(after.captureDate == ISO8601DateFormatter().date(from: "2025-01-02T03:04:05Z"))
        #expect(after.storePath != a.storePath)
        #expect(after.addedDate == a.addedDate)
        let current = try lib.currentOriginal(rowID: a.rowID).path
        #expect(try current == lib.originalPath(after))
        #expect(try EditHelp.sha(current) == after.contentHash)
        // The strip-location plan covers the new GPS.
        let plan = try #require(try EditHelp.plan(t, a.rowID))
        #expect(!plan.isEmpty)
        // Albums and grants are the asset's still.
        #expect(try lib.assets(album: "Trip").contains { $0.id == a.id })
        let g = try lib.grants(editor)
        #expect(g.count == 1 && g[0].asset.id == a.id && g[0].stripLocation)
        #expect(try lib.editConsents(editor).map(\.id) == [a.id])
        let v = try lib.view(for: editor, access: .readWrite)
        #expect(v.entries.first { $0.asset.id == a.id }?.asset.byteSize == UInt64(edited.count))
        // The original is untouched.
        #expect(try EditHelp.sha(originalPath) == originalHash)
        // History: updated for both apps that see it, nothing for the one that does not.
        #expect(try EditHelp.updated(t, editor, since: tokens.0).map(\.assetID) == [a.id])
        #expect(try EditHelp.updated(t, viewer, since: tokens.1).map(\.name) == ["a.jpg"])
        #expect(try EditHelp.updated(t, camera, since: tokens.2).isEmpty)
        // The change log says `version` for the asset (mounts patch that row).
        let kinds = try lib.read { db in try String.fetchAll(db, sql: "SELECT kind FROM changes WHERE asset_rowid = ?", arguments: [a.rowID]) }
        #expect(kinds.last == "version")
        // A view catching up patches the row instead of reloading everything.
        let before = try lib.lastChange()
        let snap = try lib.view(for: viewer, access: .readWrite, lean: true)
        _ = try EditHelp.save(t, a.rowID, app: editor, try TestMedia.jpeg(tag: "edit-2"))
        guard case .patch(let p) = try lib.viewUpdate(for: viewer, access: .readWrite, since: before, app: snap.app) else {
            Issue.record("a version change should patch the view"); return
        }
        #expect(p.affected == [a.rowID])
        // The patched row is what a full recomputation shows (the new version's size and path).
        let full = try lib.view(for: viewer, access: .readWrite, lean: true).rows
        let pi = try #require(p.rows.index(ofRowID: a.rowID)), fi = try #require(full.index(ofRowID: a.rowID))
        #expect(p.rows.asset(pi) == full.asset(fi))
        #expect(try p.rows.asset(pi).storePath == lib.asset(rowID: a.rowID)?.storePath)
        // A revert patches too.
        let before2 = try lib.lastChange()
        try lib.revert(a.id)
        guard case .patch(let p2) = try lib.viewUpdate(for: viewer, access: .readWrite, since: before2, app: snap.app) else {
            Issue.record("a revert should patch the view"); return
        }
        #expect(p2.rows.asset(try #require(p2.rows.index(ofRowID: a.rowID))).storePath == a.storePath)
    }

    @Test func sameContentIsANoOpAndInvalidMediaIsRefused() throws {
        let t = try TempLibrary()
        let lib = t.library
        let a = try t.importJPEGs(["a.jpg"])[0]
        let original = try [UInt8](Data(contentsOf: URL(fileURLWithPath: try lib.originalPath(a))))
        let seq = try lib.lastChange()
        let (same, changed) = try EditHelp.save(t, a.rowID, app: editor, original)
        #expect(!changed)
        #expect(same == a)
        #expect(try lib.lastChange() == seq)
        #expect(try lib.versions(a.id).versions.count == 1)
        // Not media: refused, the current version stays, the temp stays the caller's.
        let writer = try StoreWriter(library: lib, purpose: "edit-test")
        let (_, path, fd) = try writer.makeTemp()
        defer { close(fd) }
        try EditHelp.put(fd, Array("this is not a photo".utf8))
        #expect(throws: LibraryError.self) { try lib.commitVersion(rowID: a.rowID, app: editor, tempPath: path, fd: fd) }
        #expect(FileManager.default.fileExists(atPath: path))
        #expect(try lib.asset(rowID: a.rowID) == a)
        #expect(try lib.versions(a.id).versions.count == 1)
        // A truncated JPEG too.
        let (_, path2, fd2) = try writer.makeTemp()
        defer { close(fd2) }
        try EditHelp.put(fd2, Array(original.prefix(original.count / 2)))
        #expect(throws: LibraryError.self) { try lib.commitVersion(rowID: a.rowID, app: editor, tempPath: path2, fd: fd2) }
        #expect(try lib.asset(rowID: a.rowID) == a)
        // Another media kind is fine: a PNG saved over a JPEG.
        let (png, pngChanged) = try EditHelp.save(t, a.rowID, app: editor, try TestMedia.png())
        #expect(pngChanged)
        #expect(png.mediaKind == "png" && png.displayName == a.displayName)
        #expect(png.storePath?.hasSuffix(".png") == true)
        #expect(png.captureDate == a.captureDate)    // no date of its own: the original's
    }

    @Test func versionsListingAndRevertRestoreTheOriginal() throws {
        let t = try TempLibrary()
        let lib = t.library
        let a = try t.importJPEGs(["a.jpg"])[0]
        try lib.authorize(viewer, access: .readWrite, status: .authorized)
        let originalHash = try EditHelp.sha(try lib.originalPath(a))
        // Never edited: the original alone, current.
        var list = try lib.versions(a.id).versions
        #expect(list.count == 1 && list[0].isOriginal && list[0].isCurrent && list[0].contentHash == a.contentHash && list[0].app == nil)
        #expect(try lib.revert(a.id).changed == false)

        let e1 = try EditHelp.save(t, a.rowID, app: editor, try EditHelp.jpegDated(tag: "e1", gps: true)).asset
        let e2 = try EditHelp.save(t, a.rowID, app: viewer, try TestMedia.jpeg(tag: "e2")).asset
        list = try lib.versions(a.displayName).versions
        #expect(list.map(\.version) == [0, 1, 2])
        #expect(list.map(\.isCurrent) == [false, false, true])
        #expect(list.map(\.app) == [nil, editor, viewer])
        #expect(list.map(\.contentHash) == [a.contentHash, e1.contentHash, e2.contentHash])
        #expect(list.map(\.byteSize) == [a.byteSize, e1.byteSize, e2.byteSize])
        #expect(list[1].hasLocation && !list[0].hasLocation)

        let token = try lib.latestChangeToken(viewer)
        let (reverted, changed) = try lib.revert(a.id)
        #expect(changed)
        #expect(reverted.contentHash == a.contentHash && reverted.byteSize == a.byteSize && reverted.storePath == a.storePath)
        #expect(reverted.captureDate == a.captureDate && reverted.hasLocation == a.hasLocation && reverted.mediaKind == a.mediaKind)
        #expect(try lib.currentOriginal(rowID: a.rowID).path == lib.originalPath(a))
        #expect(try EditHelp.plan(t, a.rowID)?.isEmpty == true)
        #expect(try EditHelp.updated(t, viewer, since: token).map(\.assetID) == [a.id])
        // The edits stay listed; the original is current.
        list = try lib.versions(a.id).versions
        #expect(list.map(\.isCurrent) == [true, false, false])
        #expect(try lib.revert(a.id).changed == false)
        // Back to edit 1: its location and plan again.
        let again = try lib.revert(a.id, to: 1).asset
        #expect(again.contentHash == e1.contentHash && again.hasLocation)
        #expect(try EditHelp.plan(t, a.rowID)?.isEmpty == false)
        #expect(throws: LibraryError.self) { try lib.revert(a.id, to: 9) }
        // Every stored version is intact, the original above all.
        #expect(try EditHelp.sha(try lib.originalPath(a)) == originalHash)
        #expect(try EditHelp.sha(try lib.originalPath(e1)) == e1.contentHash)
        #expect(try EditHelp.sha(try lib.originalPath(e2)) == e2.contentHash)
        // The schema refuses a current version that does not exist.
        #expect(throws: (any Error).self) {
            try lib.write { db in try db.execute(sql: "UPDATE assets SET current_version = 42 WHERE rowid = ?", arguments: [a.rowID]) }
        }
    }

    /// A referenced original (indexed in place) is never written: the edit goes into the store,
    /// and a revert points at the reference again.
    @Test func editsOfReferencedOriginalsGoIntoTheStore() throws {
        let t = try TempLibrary()
        let lib = t.library
        let src = t.dir + "/ref"
        try FileManager.default.createDirectory(atPath: src, withIntermediateDirectories: true)
        try TestMedia.write(TestMedia.jpeg(tag: "ref"), to: src + "/r.jpg")
        let a = try #require(try Importer(library: lib, options: ImportOptions(reference: true)).run([src]).imported.first)
        #expect(a.referencePath != nil)
        let before = try EditHelp.sha(src + "/r.jpg")
        let e = try EditHelp.save(t, a.rowID, app: editor, try TestMedia.jpeg(tag: "ref-edit")).asset
        #expect(e.referencePath == nil && e.storePath != nil)
        #expect(try EditHelp.sha(src + "/r.jpg") == before)
        let r = try lib.revert(a.id).asset
        #expect(r.referencePath == src + "/r.jpg" && r.storePath == nil)
    }
}

@Suite(.serialized) struct VersionCrashSafety {
    /// The row committed but the rename into the store was lost (a crash right after the commit):
    /// recovery finds the version by its file id and moves the temp into the store.
    @Test func committedVersionTempIsRolledForward() throws {
        let t = try TempLibrary()
        let lib = t.library
        let (a, e, stored, _, dead) = try EditHelp.versionLeftInTemp(t, tag: "crash", folder: "mount-999999-dead")
        // An uncommitted temp next to it (a save that never reached its commit) goes.
        try TestMedia.write(TestMedia.jpeg(tag: "uncommitted"), to: dead + "/0123456789abcdef.part")
        #expect(StoreWriter.recover(lib) == 1)
        #expect(try EditHelp.sha(stored) == e.contentHash)
        #expect(!FileManager.default.fileExists(atPath: dead))
        #expect(try lib.asset(rowID: a.rowID) == e)
    }

    /// `photogate verify` tells such a temp (it holds the asset's current version, named by that
    /// version's file id, not the asset's id) as recovery does: to roll forward, not incomplete,
    /// and says the missing store file comes from it.
    @Test func verifyReportsACommittedVersionTempAsRecoveryTreatsIt() throws {
        let t = try TempLibrary()
        let lib = t.library
        let (_, e, _, fileID, _) = try EditHelp.versionLeftInTemp(t, tag: "verify", folder: "mount-999998-dead")
        #expect(fileID != e.id, "the current version is named by its own file id")
        let report = try Verifier(library: lib).run()
        let temp = try #require(report.problems.first { $0.kind == .deadTemp })
        #expect(temp.detail.contains("1 file to roll forward") && temp.detail.contains("0 incomplete"), "\(temp.detail)")
        let missing = try #require(report.problems.first { $0.kind == .missing })
        #expect(missing.action?.contains("rolls it forward") == true, "\(missing.action ?? "no action")")
    }

    /// A retry of a commit whose row committed but whose rename failed moves the file, rather
    /// than dropping it as "same content".
    @Test func retryAfterAFailedRenameMovesTheFile() throws {
        let t = try TempLibrary()
        let lib = t.library
        let a = try t.importJPEGs(["a.jpg"])[0]
        let writer = try StoreWriter(library: lib, purpose: "edit-test")
        let (_, path, fd) = try writer.makeTemp()
        defer { close(fd) }
        try EditHelp.put(fd, try TestMedia.jpeg(tag: "retry"))
        let e = try lib.commitVersion(rowID: a.rowID, app: editor, tempPath: path, fd: fd).asset
        // As if the rename had failed: the file is back where it was.
        #expect(rename(try lib.originalPath(e), path) == 0)
        let again = try lib.commitVersion(rowID: a.rowID, app: editor, tempPath: path, fd: fd)
        #expect(!again.changed)
        #expect(try EditHelp.sha(try lib.originalPath(e)) == e.contentHash)
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    /// A temp whose name is not a file id gets one before its row commits (recovery finds temps by
    /// name); a commit that fails leaves it where the caller put it.
    @Test func tempsWithOtherNamesAreRenamedFirstAndGivenBackOnFailure() throws {
        let t = try TempLibrary()
        let lib = t.library
        let a = try t.importJPEGs(["a.jpg"])[0]
        let writer = try StoreWriter(library: lib, purpose: "edit-test")
        let scratch = writer.tmpDir + "/scratch.jpg"
        let fd = open(scratch, O_RDWR | O_CREAT | O_EXCL, 0o600)
        #expect(fd >= 0)
        defer { close(fd) }
        try EditHelp.put(fd, try TestMedia.jpeg(tag: "scratch"))
        #expect(throws: LibraryError.self) { try lib.commitVersion(rowID: 987654, app: editor, tempPath: scratch, fd: fd) }
        #expect(FileManager.default.fileExists(atPath: scratch))
        let e = try lib.commitVersion(rowID: a.rowID, app: editor, tempPath: scratch, fd: fd)
        #expect(e.changed)
        #expect(!FileManager.default.fileExists(atPath: scratch))
        #expect(try EditHelp.sha(try lib.originalPath(e.asset)) == e.asset.contentHash)
        let fileID = try lib.read { db in try String.fetchOne(db, sql: "SELECT file_id FROM versions WHERE asset_rowid = ? AND version = 1", arguments: [a.rowID]) }
        #expect(fileID.map(Library.isFileID) == true)
        #expect(e.asset.storePath?.contains(fileID ?? "-") == true)
    }

    /// A save whose close succeeded but whose commit never ran (the daemon died): marked ready as an
    /// edit, recovery commits it as the asset's new version, not as a new asset.
    @Test func readyMarkedEditOfADeadMountBecomesAVersion() throws {
        let t = try TempLibrary()
        let lib = t.library
        let a = try t.importJPEGs(["a.jpg"])[0]
        let writer = try StoreWriter(library: lib, purpose: "test")
        let bytes = try TestMedia.jpeg(tag: "ready-edit", gps: true)
        let (_, temp, fd) = try writer.makeTemp()
        try EditHelp.put(fd, bytes)
        try writer.markVersionReady(tempPath: temp, fd: fd, app: editor, rowID: a.rowID)
        close(fd)
        let dead = lib.paths.tmp + "/mount-999998-dead"
        #expect(rename(writer.tmpDir, dead) == 0)
        try "".write(toFile: dead + "/.lock", atomically: true, encoding: .utf8)
        #expect(StoreWriter.recover(lib) == 1)
        let now = try #require(try lib.asset(rowID: a.rowID))
        #expect(now.contentHash == "sha256:" + hexString(SHA256.hash(bytes)) && now.hasLocation)
        #expect(try lib.assets().count == 1)
        #expect(try lib.versions(a.id).versions.map(\.app) == [nil, editor])
        #expect(try EditHelp.sha(try lib.originalPath(now)) == now.contentHash)
        #expect(try EditHelp.sha(try lib.originalPath(a)) == a.contentHash)
    }
}
