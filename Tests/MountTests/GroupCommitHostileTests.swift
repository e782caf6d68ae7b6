import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// What the hostile review of a group commit found (issue 39, 2026-11-29): rows that go away on
/// purpose right after a save (a purge, a file dissolved by a rename over a photo) or that never
/// were (a copy kept as the same asset) must come out of a kill, or an unmount, as they were when
/// the closes returned. The group commit failed all of these (its recovery committed the saves'
/// marked temps again) and was taken out; they hold for the write path as it is, and for any
/// later attempt at one sync per batch.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct GroupCommitHostile {
    let app = "org.example.Editor"

    enum End { case kill, unmount }

    func daemonPID(_ f: MountFixture, _ mp: String) throws -> pid_t {
        let list = try #require(try JSONSerialization.jsonObject(with: Data(try f.pg("mounts", "--json").stdout.utf8)) as? [[String: Any]])
        return pid_t(try #require(list.first { $0["mountpoint"] as? String == mp }?["pid"] as? Int))
    }

    /// Ends the mount: SIGKILL, or a clean unmount.
    func end(_ f: MountFixture, _ mp: String, _ how: End) throws {
        switch how {
        case .kill:
            let pid = try daemonPID(f, mp)
            #expect(kill(pid, SIGKILL) == 0)
            #expect(eventually { kill(pid, 0) != 0 })
        case .unmount:
            try f.unmount(mp)
        }
    }

    func names(_ f: MountFixture) throws -> [String] {
        try f.assetsJSON().compactMap { $0["name"] as? String }.sorted()
    }

    /// The person deletes for good a photo an app has just saved, while its batch is held back:
    /// its marked temp is still in tmp/, and recovery (at the daemon's own unmount, or the next
    /// mount after a kill) finds no row for it and commits it again. A photo deleted for good
    /// comes back, in the app's view and the library.
    func deletedForGood(_ how: End) throws {
        let f = try MountFixture()
        try f.pg("authorize", app, "--status", "authorized", "--access", "add-only")
        let mp = try f.mount(app, access: "add-only")
        #expect(cpWrite(try TestMedia.jpeg(tag: "deleted for good"), to: mp + "/x.jpg") == 0)
        let id = try #require(try f.assetsJSON().first { $0["name"] as? String == "x.jpg" }?["id"] as? String)
        try f.pg("delete", id)
        try f.pg("trash", "--empty")
        #expect(try names(f).isEmpty)
        try end(f, mp, how)
        let again = try f.mount(app, access: "add-only")
        #expect(try names(f).isEmpty, "a photo deleted for good came back")
        try f.unmount(again)
    }

    @Test func aPhotoDeletedForGoodWhileItsSaveIsPendingStaysDeletedAfterAKill() throws {
        try deletedForGood(.kill)
    }

    @Test func aPhotoDeletedForGoodWhileItsSaveIsPendingStaysDeletedAfterAnUnmount() throws {
        try deletedForGood(.unmount)
    }

    /// exiftool -overwrite_original and rsync save a photo by writing a temp name and renaming it
    /// over the photo: the new file's asset is dissolved into the photo's new version. With its
    /// batch held back, its marked temp is still in tmp/ and recovery commits it again: the
    /// temp name comes back as an asset of its own.
    func renamedOver(_ how: End) throws {
        let f = try MountFixture()
        try f.pg("authorize", app, "--status", "authorized")
        let first = try f.mount(app)
        #expect(cpWrite(try TestMedia.jpeg(tag: "the app's photo"), to: first + "/t.jpg") == 0)
        try f.unmount(first)
        let mp = try f.mount(app)
        let saved = try TestMedia.jpeg(tag: "saved by rename")
        #expect(cpWrite(saved, to: mp + "/t.jpg_exiftool_tmp") == 0)
        #expect(rename(mp + "/t.jpg_exiftool_tmp", mp + "/t.jpg") == 0)
        #expect(try names(f) == ["t.jpg"])
        try end(f, mp, how)
        let again = try f.mount(app)
        #expect(try names(f) == ["t.jpg"], "a file renamed over a photo (dissolved into it) came back")
        #expect(readAll(again + "/t.jpg") == saved)
        try verifyClean(f)
        try f.unmount(again)
    }

    @Test func aFileRenamedOverAPhotoIsNotBroughtBackAfterAKill() throws {
        try renamedOver(.kill)
    }

    @Test func aFileRenamedOverAPhotoIsNotBroughtBackAfterAnUnmount() throws {
        try renamedOver(.unmount)
    }

    /// An add-only app copies bytes it saved before under another name: the mount keeps the
    /// asset it has (reuse by content, any name) and adds nothing. The marked temp waits for its
    /// batch; recovery commits it with the name-sensitive rule and adds a second asset.
    func keptAsTheSameAsset(_ how: End) throws {
        let f = try MountFixture()
        try f.pg("authorize", app, "--status", "authorized", "--access", "add-only")
        let photo = try TestMedia.jpeg(tag: "one shot")
        let first = try f.mount(app, access: "add-only")
        #expect(cpWrite(photo, to: first + "/a.jpg") == 0)
        try f.unmount(first)
        let mp = try f.mount(app, access: "add-only")
        #expect(cpWrite(photo, to: mp + "/b.jpg") == 0)
        #expect(try names(f) == ["a.jpg"])
        try end(f, mp, how)
        let again = try f.mount(app, access: "add-only")
        #expect(try names(f) == ["a.jpg"], "a copy the mount kept as the app's existing asset was added after all")
        try f.unmount(again)
    }

    @Test func aCopyKeptAsTheSameAssetIsNotAddedAfterAKill() throws {
        try keptAsTheSameAsset(.kill)
    }
}
