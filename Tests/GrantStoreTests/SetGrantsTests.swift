import Foundation
import Testing
import TestSupport
@testable import GrantStore
@testable import PhotoLibrary

/// Grants that follow a set (issue 38): an album, a capture date range, a kind. The app sees the
/// set's members as they change; what it sees is what its view, `explain` and its history say.
@Suite(.serialized) struct SetGrants {
    let frame = AppID("org.example.Frame")!

    func visible(_ t: TempLibrary, _ app: AppID) throws -> Set<String> {
        Set(try t.library.view(for: app, access: .readWrite).entries.map(\.asset.displayName))
    }

    func limited(_ t: TempLibrary) throws {
        try t.library.authorize(frame, access: .readWrite, status: .limited)
    }

    @Test func anAlbumGrantFollowsTheAlbum() throws {
        let t = try TempLibrary()
        try t.importJPEGs(["a.jpg", "b.jpg"], album: "Summer")
        try t.importJPEGs(["c.jpg"])
        try limited(t)
        let r = try t.library.grantSet(frame, SetGrant(album: "Summer"))
        #expect(r.members == 2)
        #expect(try visible(t, frame) == ["a.jpg", "b.jpg"])
        // Added to the album later: seen; removed: gone; imported into it: seen.
        try t.library.addToAlbum("Summer", ["c.jpg"])
        #expect(try visible(t, frame) == ["a.jpg", "b.jpg", "c.jpg"])
        try t.library.removeFromAlbum("Summer", ["a.jpg"])
        #expect(try visible(t, frame) == ["b.jpg", "c.jpg"])
        try t.importJPEGs(["d.jpg"], album: "Summer")
        #expect(try visible(t, frame) == ["b.jpg", "c.jpg", "d.jpg"])
        // The app's history says so, as for any grant.
        guard case .changes(let changes, _) = try t.library.changes(frame) else { Issue.record("history expired"); return }
        #expect(changes.contains { $0.kind == .inserted && $0.name == "d.jpg" })
        #expect(changes.contains { $0.kind == .removed && $0.name == "a.jpg" })
        // Explain names the set.
        let e = try t.library.explain(frame, asset: "d.jpg", access: .readWrite)
        #expect(e.visible && e.reason.contains("album 'Summer'"), "\(e.reason)")
        // Deleting the album takes what it alone granted.
        try t.library.deleteAlbum("Summer", onlyIfEmpty: false)
        #expect(try visible(t, frame).isEmpty)
        #expect(try t.library.setGrants(frame).isEmpty)
    }

    @Test func aDateAndKindGrantTakesPhotosImportedLater() throws {
        let t = try TempLibrary()
        try t.importJPEGs(["july.jpg"])                                   // 2024-07-14 (TestMedia's date)
        let utc = TimeZone(identifier: "UTC")!
        var cal = Calendar(identifier: .gregorian); cal.timeZone = utc
        let jan1 = cal.date(from: DateComponents(year: 2025, month: 1, day: 1))!
        let feb1 = cal.date(from: DateComponents(year: 2025, month: 2, day: 1))!
        try limited(t)
        let r = try t.library.grantSet(frame, SetGrant(takenAfter: jan1, takenBefore: feb1, mediaClass: .photo))
        #expect(r.members == 0)
        // A photo taken on 2025-01-02, imported after the grant: seen at once.
        let src = t.dir + "/later"
        try FileManager.default.createDirectory(atPath: src, withIntermediateDirectories: true)
        try TestMedia.write(EditHelp.jpegDated(tag: "jan"), to: src + "/jan.jpg")
        _ = try Importer(library: t.library, options: ImportOptions()).run([src])
        #expect(try visible(t, frame) == ["jan.jpg"])
        // A file another app writes with that date joins too (every new asset is asked).
        _ = try t.appFile(camera, "cam.jpg", bytes: try EditHelp.jpegDated(tag: "cam"))
        #expect(try visible(t, frame) == ["jan.jpg", "cam.jpg"])
        // A new version whose date leaves the range leaves the set.
        let cam = try #require(try t.library.assets().first { $0.displayName == "cam.jpg" })
        try t.library.authorize(camera, access: .readWrite, status: .authorized)
        _ = try EditHelp.save(t, cam.rowID, app: camera, try TestMedia.jpeg(tag: "now-july"))
        #expect(try visible(t, frame) == ["jan.jpg"])
    }

    @Test func aDirectGrantOutlivesItsSetAndARevokeOfASetMemberSaysItStays() throws {
        let t = try TempLibrary()
        try t.importJPEGs(["a.jpg", "b.jpg"], album: "Trip")
        try limited(t)
        try t.library.grant(frame, ["a.jpg"])                              // direct
        let set = try t.library.grantSet(frame, SetGrant(album: "Trip"))
        #expect(try visible(t, frame) == ["a.jpg", "b.jpg"])
        // A revoke by name of a photo the set covers: it stays, and the outcome says so.
        let r = try t.library.revoke(frame, ["b.jpg"])
        #expect(r.stillInSets == 1)
        #expect(try visible(t, frame) == ["a.jpg", "b.jpg"])
        // The set goes: what it alone selected goes, the direct grant stays.
        let gone = try t.library.revokeSet(frame, id: set.id)
        #expect(gone.sets == 1 && gone.removed == 1)
        #expect(try visible(t, frame) == ["a.jpg"])
        // revoke --all takes the sets too: a later album change brings nothing back.
        _ = try t.library.grantSet(frame, SetGrant(album: "Trip"))
        _ = try t.library.revokeAll(frame)
        try t.importJPEGs(["c.jpg"], album: "Trip")
        #expect(try visible(t, frame).isEmpty)
        #expect(try t.library.setGrants(frame).isEmpty)
    }

    @Test func sharedAssetsAndOtherAppsAreNeverInASet() throws {
        let t = try TempLibrary()
        try t.importJPEGs(["mine.jpg"], album: "Mixed")
        try t.importJPEGs(["cloud.jpg"], shared: "Family")
        try limited(t)
        try t.library.authorize(editor, access: .readWrite, status: .limited)
        _ = try t.library.grantSet(frame, SetGrant(mediaClass: .photo))
        #expect(try visible(t, frame) == ["mine.jpg"])                    // the shared photo never
        #expect(try visible(t, editor).isEmpty)                            // another app's set is not this one's
    }

    @Test func aSetGrantOfStripLocationStripsUnlessAnotherRouteDoesNot() throws {
        let t = try TempLibrary()
        try t.importJPEGs(["g.jpg"], gps: true, album: "Places")
        try limited(t)
        _ = try t.library.grantSet(frame, SetGrant(album: "Places", stripLocation: true))
        #expect(try t.library.explain(frame, asset: "g.jpg", access: .readWrite).stripLocation)
        _ = try t.library.grantSet(frame, SetGrant(mediaClass: .photo))     // a second set without stripping
        #expect(try !t.library.explain(frame, asset: "g.jpg", access: .readWrite).stripLocation)
    }

    /// A set number is never reused: a `revoke APP --set N` copied from an old listing must not
    /// take back another set (a red-team finding: after revoke --all the next set got 4 again).
    @Test func setNumbersAreNeverReused() throws {
        let t = try TempLibrary()
        try t.importJPEGs(["a.jpg"], album: "Trip")
        try limited(t)
        let first = try t.library.grantSet(frame, SetGrant(album: "Trip")).id
        _ = try t.library.revokeAll(frame)
        let second = try t.library.grantSet(frame, SetGrant(album: "Trip")).id
        #expect(second != first)
    }

    /// An editor's temp file that another app's set took in (a kind, a date range) is still
    /// dissolved into the version it saved: a set is not the person's touch (it went to Recently
    /// Deleted, a full copy of the photo kept there).
    @Test func anEditorsTempFileInAnotherAppsSetIsStillDissolved() throws {
        let t = try TempLibrary()
        try limited(t)
        _ = try t.library.grantSet(frame, SetGrant(mediaClass: .photo))
        let temp = try t.appFile(editor, "tmp1.jpg")
        #expect(try visible(t, frame).contains("tmp1.jpg"))
        try t.library.dissolveOwnAsset(rowID: temp.rowID, app: editor)
        #expect(try t.library.trash().isEmpty, "the temp file went to Recently Deleted")
        #expect(try !visible(t, frame).contains("tmp1.jpg"))
    }

    @Test func aSetNeedsAConditionAndAKnownAlbumAndApp() throws {
        let t = try TempLibrary()
        try limited(t)
        #expect(throws: LibraryError.self) { try t.library.grantSet(frame, SetGrant()) }
        #expect(throws: LibraryError.unknownAlbum("Nope")) { try t.library.grantSet(frame, SetGrant(album: "Nope")) }
        #expect(throws: LibraryError.unknownApp("org.example.Nobody")) {
            try t.library.grantSet(AppID("org.example.Nobody")!, SetGrant(mediaClass: .video))
        }
        #expect(throws: LibraryError.self) { try t.library.revokeSet(frame, id: 42) }
    }
}
