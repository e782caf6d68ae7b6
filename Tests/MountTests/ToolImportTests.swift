import Foundation
import GrantStore
import PhotoLibrary
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A camera card: DCIM/100CANON and DCIM/101CANON, the same file name in both with other bytes,
/// and a movie. Returns the card folder and the SHA-256 of every file on it.
func makeCard(_ f: MountFixture, tag: String) throws -> (String, Set<String>) {
    let card = f.dir + "/card-\(tag)"
    let a = card + "/DCIM/100CANON", b = card + "/DCIM/101CANON"
    try FileManager.default.createDirectory(atPath: a, withIntermediateDirectories: true)
    try FileManager.default.createDirectory(atPath: b, withIntermediateDirectories: true)
    var hashes = Set<String>()
    for (dir, name, bytes) in [(a, "IMG_0001.JPG", try TestMedia.jpeg(tag: tag + "a1")),
                               (a, "IMG_0002.JPG", try TestMedia.jpeg(tag: tag + "a2")),
                               (b, "IMG_0001.JPG", try TestMedia.jpeg(tag: tag + "b1")),
                               (b, "MVI_0003.MP4", try TestMedia.mp4())] {
        try TestMedia.write(bytes, to: dir + "/" + name)
        hashes.insert("sha256:" + hexString(SHA256.hash(bytes)))
    }
    return (card, hashes)
}

/// The app's assets' hashes, counting duplicates.
func ownedHashes(_ f: MountFixture, _ app: String) throws -> [String] {
    let lib = try Library.open(at: LibraryPaths(root: f.library))
    return try lib.assets().filter { $0.owner?.rawValue == app }.map(\.contentHash).sorted()
}

/// Issue 13: the ways people import photos into a camera's (add-only) or an editor's (limited)
/// mount, through the real tools. Each must exit 0 and produce exactly the card's assets, and
/// running it again must make no duplicates.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct ToolImports {
    func mount(_ f: MountFixture, _ app: String, _ mode: String) throws -> String {
        if mode == "add-only" {
            try f.pg("authorize", app, "--access", "add-only", "--status", "authorized")
            return try f.mount(app, access: "add-only")
        }
        try f.pg("authorize", app, "--status", "limited")
        return try f.mount(app)
    }

    static let tools: [(String, [String])] = [
        ("cp -r", ["cp", "-r", "{CARD}/DCIM", "{M}/"]),
        ("cp -a", ["cp", "-a", "{CARD}/DCIM", "{M}/"]),
        ("rsync -a", ["rsync", "-a", "{CARD}/DCIM", "{M}/"]),
        ("rsync -av --progress", ["rsync", "-av", "--progress", "{CARD}/DCIM", "{M}/"]),
        ("rsync --inplace", ["rsync", "-a", "--inplace", "{CARD}/DCIM", "{M}/"]),
        ("tar x", ["sh", "-c", "tar c -C '{CARD}' DCIM | tar x -C '{M}'"]),
    ]

    @Test(arguments: ["add-only", "limited"], [0, 1, 2, 3, 4, 5])
    func importsExitZeroWithExactlyTheCardsAssets(_ mode: String, _ tool: Int) throws {
        let (label, argv) = ToolImports.tools[tool]
        let f = try MountFixture()
        let app = "org.example.Camera"
        let mp = try mount(f, app, mode)
        let (card, hashes) = try makeCard(f, tag: "t\(tool)")
        let args = argv.dropFirst().map { $0.replacingOccurrences(of: "{CARD}", with: card).replacingOccurrences(of: "{M}", with: mp) }
        let o = try TestSupport.run(argv[0], Array(args))
        #expect(o.status == 0, "\(label) into \(mode): exit \(o.status): \(o.stderr)")
        #expect(try ownedHashes(f, app) == hashes.sorted(), "\(label) into \(mode)")
        #expect(try storeMismatches(f.library) == [])
        if mode == "add-only" {
            #expect(listing(mp) == [], "add-only lists nothing")
            // Again in the same mount: exit 0, no duplicates.
            let again = try TestSupport.run(argv[0], Array(args))
            #expect(again.status == 0, "\(label) again: \(again.stderr)")
            #expect(try ownedHashes(f, app) == hashes.sorted(), "\(label) again made duplicates")
        } else {
            // The files are flattened into the library: the app sees them at the top too.
            let top = listing(mp)
            #expect(top.contains("IMG_0002.JPG") && top.contains("MVI_0003.MP4"), "\(top)")
            #expect(readAll(mp + "/DCIM/100CANON/IMG_0002.JPG") == readAll(card + "/DCIM/100CANON/IMG_0002.JPG") ? true : false)
            // Again in the same mount (cp and rsync: the reruns): the app's own files get
            // the same bytes, which changes nothing. (tar x unlinks before it writes: in a limited
            // mount that moves the app's earlier file to Recently Deleted, as rm does.)
            if !label.hasPrefix("tar") {
                let again = try TestSupport.run(argv[0], Array(args))
                #expect(again.status == 0, "\(label) again: \(again.stderr)")
                #expect(try ownedHashes(f, app) == hashes.sorted(), "\(label) again made duplicates")
            }
        }
        try f.unmount(mp)
        // After a remount the same import makes no duplicates either.
        if mode == "add-only" {
            let mp2 = try f.mount(app, access: "add-only")
            let args2 = argv.dropFirst().map { $0.replacingOccurrences(of: "{CARD}", with: card).replacingOccurrences(of: "{M}", with: mp2) }
            let third = try TestSupport.run(argv[0], Array(args2))
            #expect(third.status == 0, "\(label) after remount: \(third.stderr)")
            #expect(try ownedHashes(f, app) == hashes.sorted(), "\(label) after remount made duplicates")
            try f.unmount(mp2)
        }
    }

    @Test(arguments: ["add-only", "limited"])
    func mvOfACardFolderImportsIt(_ mode: String) throws {
        let f = try MountFixture()
        let app = "org.example.Mover"
        let mp = try mount(f, app, mode)
        let (card, hashes) = try makeCard(f, tag: "mv")
        let o = try TestSupport.run("mv", [card + "/DCIM/100CANON", card + "/DCIM/101CANON", mp + "/"])
        #expect(o.status == 0, "mv into \(mode): \(o.stderr)")
        #expect(try ownedHashes(f, app) == hashes.sorted())
        #expect(!FileManager.default.fileExists(atPath: card + "/DCIM/100CANON"), "mv removed the source")
        try f.unmount(mp)
    }

    /// Folders an app makes: rmdir of one still holding a file being written is ENOTEMPTY; an
    /// empty one goes; a name a visible asset has is EEXIST; a hidden asset's name is free.
    @Test func foldersFollowTheRules() throws {
        let f = try MountFixture()
        try f.importPhotos(["hidden.jpg", "shown.jpg"])
        let app = "org.example.Folders"
        try f.pg("authorize", app, "--status", "limited")
        try f.pg("grant", app, "shown.jpg")
        let mp = try f.mount(app)
        #expect(errnoOf { mkdir(mp + "/shown.jpg", 0o755) } == EEXIST)
        #expect(errnoOf { mkdir(mp + "/hidden.jpg", 0o755) } == 0, "a hidden asset's name must be free")
        #expect(errnoOf { mkdir(mp + "/d", 0o755) } == 0)
        #expect(errnoOf { mkdir(mp + "/d/e", 0o755) } == 0)
        let fd = open(mp + "/d/e/x.jpg", O_CREAT | O_WRONLY | O_EXCL, 0o644)
        #expect(fd >= 0)
        #expect(errnoOf { rmdir(mp + "/d/e") } == ENOTEMPTY)
        let bytes = try TestMedia.jpeg(tag: "folder")
        #expect(bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count)
        #expect(close(fd) == 0)
        #expect(readAll(mp + "/d/e/x.jpg") == bytes ? true : false)
        #expect(readAll(mp + "/x.jpg") == bytes ? true : false, "flattened to the top")
        #expect(errnoOf { rmdir(mp + "/d/e") } == 0)
        #expect(errnoOf { rmdir(mp + "/d") } == 0)
        #expect(statErrno(mp + "/d") == ENOENT)
        // Denied apps make no folders.
        try f.pg("authorize", app, "--status", "denied")
        #expect(eventually { (readAll(mp + "/.photogate/status").map { String(decoding: $0, as: UTF8.self) } ?? "").contains("\"denied\"") })
        #expect(errnoOf { mkdir(mp + "/z", 0o755) } == EACCES)
        try f.unmount(mp)
    }
}

/// Backups and tools reading a mount: they exit 0, and an asset listed at the top and in an
/// album is one inode whose link count says so.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct Backups {
    @Test(arguments: ["authorized", "limited"])
    func backupToolsExitZero(_ status: String) throws {
        let f = try MountFixture()
        try f.importPhotos(["a.jpg", "b.jpg", "c.jpg"], extra: ["--album", "Trip"])
        let app = "org.example.Backup"
        try f.pg("authorize", app, "--status", status)
        if status == "limited" { try f.pg("grant", app, "a.jpg", "b.jpg") }
        let mp = try f.mount(app)
        let want = status == "limited" ? ["a.jpg", "b.jpg"] : ["a.jpg", "b.jpg", "c.jpg"]
        for (label, argv) in [("rsync -a", ["rsync", "-a", mp + "/", f.dir + "/rs/"]),
                              ("cp -a", ["cp", "-a", mp + "/.", f.dir + "/cp"]),
                              ("tar c", ["sh", "-c", "tar c -C '\(mp)' . > '\(f.dir)/b.tar'"])] {
            let o = try TestSupport.run(argv[0], Array(argv.dropFirst()))
            #expect(o.status == 0, "\(label) of a \(status) mount: \(o.stderr)")
        }
        #expect(listing(f.dir + "/rs").filter { $0.hasSuffix(".jpg") } == want)
        #expect(readAll(f.dir + "/cp/a.jpg") == readAll(mp + "/a.jpg") ? true : false)
        #expect(!FileManager.default.fileExists(atPath: f.dir + "/rs/.photogate"), "control files are not backed up")
        // .photogate stays reachable by path.
        #expect(readAll(mp + "/.photogate/status") != nil)
        if status == "authorized" {
            var top = stat(), inAlbum = stat()
            #expect(stat(mp + "/a.jpg", &top) == 0 && stat(mp + "/Albums/Trip/a.jpg", &inAlbum) == 0)
            #expect(top.st_ino == inAlbum.st_ino)
            #expect(top.st_nlink == 2, "one inode in two folders: nlink \(top.st_nlink)")
            // rsync -H keeps them one file.
            let h = try TestSupport.run("rsync", ["-aH", mp + "/", f.dir + "/rsH/"])
            #expect(h.status == 0, "\(h.stderr)")
            var x = stat(), y = stat()
            #expect(stat(f.dir + "/rsH/a.jpg", &x) == 0 && stat(f.dir + "/rsH/Albums/Trip/a.jpg", &y) == 0 && x.st_ino == y.st_ino)
        }
        try f.unmount(mp)
    }
}

/// Video the way tools write it, and files mapped while written (issue 13).
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct VideoAndMapping {
    @Test func ffmpegWritesMatroskaWebMAndFaststartMP4() throws {
        let f = try MountFixture()
        let app = "org.example.Recorder"
        try f.pg("authorize", app, "--status", "limited")
        let mp = try f.mount(app)
        let src = try TestMedia.write(try TestMedia.mp4(), to: f.dir + "/in.mp4")
        for (out, extra) in [("remux.mkv", ["-c", "copy"]), ("clip.webm", ["-c:v", "libvpx", "-b:v", "100k", "-an"]),
                             ("fast.mp4", ["-c", "copy", "-movflags", "+faststart"])] {
            let o = try TestSupport.run("ffmpeg", ["-v", "error", "-y", "-i", src] + extra + [mp + "/" + out])
            #expect(o.status == 0, "\(out): \(o.stderr)")
        }
        let assets = try f.assetsJSON()
        let types = Dictionary(uniqueKeysWithValues: assets.compactMap { a in (a["name"] as? String).map { ($0, a["type"] as? String ?? "") } })
        #expect(types["remux.mkv"] == "mkv", "\(types)")
        #expect(types["clip.webm"] == "webm", "\(types)")
        #expect(types["fast.mp4"] == "mp4", "\(types)")
        // faststart rewrote the file after writing it: the asset is the rewritten, complete file.
        let probe = try TestSupport.run("ffprobe", ["-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", mp + "/fast.mp4"])
        #expect(probe.status == 0 && !probe.stdout.isEmpty, "\(probe.stderr)")
        try verifyClean(f)
        try f.unmount(mp)
    }

    /// A camera app (add-only) recording with ffmpeg: faststart re-opens the file it is writing to
    /// move the index forward; the result is one complete asset the app can no longer read.
    @Test func ffmpegFaststartIntoAnAddOnlyMount() throws {
        let f = try MountFixture()
        let app = "org.example.Camera"
        try f.pg("authorize", app, "--access", "add-only", "--status", "authorized")
        let mp = try f.mount(app, access: "add-only")
        let o = try TestSupport.run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=duration=1:size=64x48:rate=5",
                                               "-pix_fmt", "yuv420p", "-movflags", "+faststart", mp + "/fast.mp4"])
        #expect(o.status == 0 && o.stderr.isEmpty, "\(o.stderr)")
        let a = try #require(try f.assetsJSON().first { $0["name"] as? String == "fast.mp4" }, "faststart stored nothing")
        #expect(a["type"] as? String == "mp4")
        #expect(openErrno(mp + "/fast.mp4", O_RDONLY) == ENOENT)
        #expect(try f.pg("refused", app).stdout.split(separator: "\n").count <= 1, "a refusal was recorded")
        try f.unmount(mp)
    }

    /// mmap(MAP_SHARED) of a file being written works (direct I/O with the kernel's consent).
    @Test func aFileBeingWrittenCanBeMappedShared() throws {
        let f = try MountFixture()
        let app = "org.example.Mapper"
        try f.pg("authorize", app, "--status", "limited")
        let mp = try f.mount(app)
        let bytes = try TestMedia.jpeg(tag: "mapped")
        let fd = open(mp + "/m.jpg", O_CREAT | O_RDWR | O_EXCL, 0o644)
        #expect(fd >= 0)
        #expect(ftruncate(fd, off_t(bytes.count)) == 0)
        let p = mmap(nil, bytes.count, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
        #expect(p != MAP_FAILED, "mmap: errno \(errno)")
        if let p, p != MAP_FAILED {
            bytes.withUnsafeBytes { p.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
            #expect(msync(p, bytes.count, MS_SYNC) == 0)
            munmap(p, bytes.count)
        }
        #expect(close(fd) == 0)
        #expect(readAll(mp + "/m.jpg") == bytes ? true : false)
        try f.unmount(mp)
    }

}
