import Foundation
import Testing
import TestSupport

/// Issue 38: who deleted each photo in Recently Deleted, through a real mount.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct RecentlyDeletedMountTests {
    @Test func trashSaysWhichAppOrThePersonDeletedEachPhoto() throws {
        let f = try MountFixture()
        try f.importPhotos(["byapp.jpg", "byme.jpg", "kept.jpg"])
        let app = "org.example.Cleaner"
        try f.pg("authorize", app, "--status", "authorized")
        let mp = try f.mount(app)
        // The app's rm, and the person's delete, which a running mount shows at once (the command
        // returns once the mounts applied it).
        #expect(unlink(mp + "/byapp.jpg") == 0, "rm through the mount: \(String(cString: strerror(errno)))")
        try f.pg("delete", "byme.jpg")
        #expect(!FileManager.default.fileExists(atPath: mp + "/byme.jpg"))
        #expect(FileManager.default.fileExists(atPath: mp + "/kept.jpg"))
        let list = try #require(try JSONSerialization.jsonObject(with: Data(try f.pg("trash", "--json").stdout.utf8)) as? [[String: Any]])
        let by = Dictionary(uniqueKeysWithValues: list.map { ($0["name"] as? String ?? "", $0["deletedBy"] as? String ?? "?") })
        #expect(by == ["byapp.jpg": app, "byme.jpg": "person"], "\(list)")
        try f.unmount(mp)
    }
}
