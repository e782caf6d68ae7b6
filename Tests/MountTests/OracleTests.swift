import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A hostile app watching its own mount while the person imports photos it was not granted
/// (red team): nothing of such an import reaches it, not through its own files either.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct PersonsImports {
    let app = "org.example.Editor"
    let viewer = "org.example.Viewer"

    /// `.photogate/changes`, opened now and read as it grows: its lines as `KIND NAME`.
    final class Feed {
        private(set) var fd: Int32
        private var text = ""
        init(_ mp: String) { fd = open(mp + "/.photogate/changes", O_RDONLY) }
        deinit { close() }
        /// Before the mount's unmount (an open file keeps it busy).
        func close() {
            if fd >= 0 { _ = Glibc.close(fd) }
            fd = -1
        }
        var lines: [String] {
            var buf = [UInt8](repeating: 0, count: 4096)
            while fd >= 0 {
                let n = read(fd, &buf, buf.count)
                if n <= 0 { break }
                text += String(decoding: buf.prefix(n), as: UTF8.self)
            }
            return text.split(separator: "\n").map { $0.split(separator: " ", maxSplits: 1).dropFirst().first.map(String.init) ?? "" }
        }
    }

    /// Creates a file of the app's through its mount and waits until it is an asset.
    func writeOwn(_ f: MountFixture, _ mp: String, _ name: String, _ bytes: [UInt8]) throws {
        let fd = open(mp + "/" + name, O_CREAT | O_EXCL | O_WRONLY, 0o644)
        #expect(fd >= 0, "create \(name): errno \(errno)")
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        #expect(close(fd) == 0)
        #expect(eventually { (try? f.assetsJSON().contains { $0["owner"] as? String == app && $0["name"] as? String == name }) == true })
    }

    /// The app names a file like a photo the person has not imported yet and watches its feed:
    /// the person's import of that name moves the app's file to another display name, which the
    /// app never sees (it sees the name it chose). Its feed gets no line, its listing and the
    /// file's attributes stay as they were; an app that sees everything sees the rename.
    @Test func theOwnersFeedSaysNothingWhenThePersonImportsItsFilesName() throws {
        let f = try MountFixture()
        try f.importPhotos(["granted.jpg", "later.jpg"])
        try f.pg("authorize", app, "--status", "limited")
        try f.pg("grant", app, "granted.jpg")
        try f.pg("authorize", viewer, "--status", "authorized")
        let mp = try f.mount(app)
        let mv = try f.mount(viewer)
        try writeOwn(f, mp, "IMG_0002.jpg", try TestMedia.jpeg(tag: "bait-\(UUID())"))
        let feed = Feed(mp), seen = Feed(mv)
        #expect(feed.fd >= 0 && seen.fd >= 0)
        var before = stat()
        #expect(stat(mp + "/IMG_0002.jpg", &before) == 0)
        // The person imports a photo of that name and grants it to no one.
        try f.importPhotos(["IMG_0002.jpg"])
        #expect(try f.assetsJSON().contains { $0["owner"] as? String == app && $0["name"] as? String == "IMG_0002-1.jpg" })
        // A change the app does see, after it: once its line is in, the mount has caught up
        // with the import too (it applies changes in order).
        try f.pg("grant", app, "later.jpg")
        #expect(eventually { feed.lines.contains("inserted later.jpg") })
        // The app's own create may be in (the feed was opened as the mount caught up with it).
        #expect(feed.lines.filter { $0 != "inserted IMG_0002.jpg" } == ["inserted later.jpg"])
        #expect(listing(mp) == ["IMG_0002.jpg", "granted.jpg", "later.jpg"])
        var after = stat()
        #expect(stat(mp + "/IMG_0002.jpg", &after) == 0)
        #expect(after.st_ino == before.st_ino && after.st_size == before.st_size)
        #expect(after.st_mtim.tv_sec == before.st_mtim.tv_sec && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec)
        #expect(after.st_ctim.tv_sec == before.st_ctim.tv_sec && after.st_ctim.tv_nsec == before.st_ctim.tv_nsec)
        // The app that sees everything: the app's file renamed, the photo arrived.
        #expect(eventually { seen.lines.contains("updated IMG_0002-1.jpg") })
        #expect(eventually { listing(mv).contains("IMG_0002-1.jpg") && listing(mv).contains("IMG_0002.jpg") })
        feed.close(); seen.close()
        try f.unmount(mv)
        try f.unmount(mp)
    }

    /// The app stores a photo it and the person both have, deletes it, and watches its feed: the
    /// person's `photogate import` of those bytes is a new photo of the person's under its own
    /// name ("1 imported"), not the app's file brought back from Recently Deleted, and the app's
    /// feed and listing say nothing of it.
    @Test func thePersonsImportOfBytesAnAppDeletedStaysThePersons() throws {
        let f = try MountFixture()
        try f.importPhotos(["granted.jpg", "later.jpg"])
        try f.pg("authorize", app, "--status", "limited")
        try f.pg("grant", app, "granted.jpg")
        let mp = try f.mount(app)
        let bytes = try TestMedia.jpeg(tag: "holiday-\(UUID())")
        try writeOwn(f, mp, "bait.jpg", bytes)
        #expect(unlink(mp + "/bait.jpg") == 0)
        #expect(eventually { (try? f.pg("trash", "--json").stdout.contains("bait.jpg")) == true })
        let feed = Feed(mp)
        #expect(feed.fd >= 0)
        let src = f.dir + "/person"
        try FileManager.default.createDirectory(atPath: src, withIntermediateDirectories: true)
        try TestMedia.write(bytes, to: src + "/holiday.jpg")
        let o = try f.pg("import", src + "/holiday.jpg")
        #expect(o.stdout.contains("1 imported, 0 already in the library") || o.stderr.contains("1 imported, 0 already in the library"),
                "\(o.stdout) \(o.stderr)")
        let assets = try f.assetsJSON()
        #expect(assets.contains { $0["name"] as? String == "holiday.jpg" && $0["owner"] is NSNull })
        #expect(!assets.contains { $0["name"] as? String == "bait.jpg" })
        #expect(try f.pg("trash", "--json").stdout.contains("bait.jpg"))
        // A change the app does see, after it: once its line is in, the mount caught up.
        try f.pg("grant", app, "later.jpg")
        #expect(eventually { feed.lines.contains("inserted later.jpg") })
        // Its own delete may be in (the feed was opened as the mount caught up with it).
        #expect(feed.lines.filter { $0 != "removed bait.jpg" } == ["inserted later.jpg"])
        #expect(listing(mp) == ["granted.jpg", "later.jpg"])
        // Two assets with the same bytes: the library checks out.
        #expect(try f.pgStatus("verify").status == 0)
        feed.close()
        try f.unmount(mp)
    }
}
