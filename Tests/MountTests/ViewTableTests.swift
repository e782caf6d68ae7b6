import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Every row of the README's "What a mount shows" table, through real mounts and ordinary tools.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct ViewTable {
    let app = "org.example.Editor"

    @Test func authorizedSeesEverythingWithAlbumsAndShared() throws {
        let f = try MountFixture()
        try f.importPhotos(["a.jpg", "b.jpg"], extra: ["--album", "Trip"])
        try f.importPhotos(["s.jpg"], extra: ["--shared", "Family"])
        try f.pg("authorize", app, "--status", "authorized")
        let mp = try f.mount(app)
        #expect(listing(mp) == ["Albums", "Shared", "a.jpg", "b.jpg", "s.jpg"])
        #expect(listing(mp + "/Albums") == ["Trip"])
        #expect(listing(mp + "/Albums/Trip") == ["a.jpg", "b.jpg"])
        #expect(listing(mp + "/Shared/Family") == ["s.jpg"])
        // find walks the whole view: top level, albums and shared albums.
        let found = try TestSupport.run("find", [mp, "-name", "*.jpg", "-type", "f"]).stdout
            .split(separator: "\n").map { String($0.dropFirst(mp.count + 1)) }.sorted()
        #expect(found == ["Albums/Trip/a.jpg", "Albums/Trip/b.jpg", "Shared/Family/s.jpg", "a.jpg", "b.jpg", "s.jpg"])
        // Same bytes as the original, through cat-like reads.
        let src = try #require(f.assetsJSON().first { $0["name"] as? String == "a.jpg" })
        #expect(readAll(mp + "/a.jpg")?.count == src["size"] as? Int)
        #expect(readAll(mp + "/Albums/Trip/a.jpg") == readAll(mp + "/a.jpg"))
        // mkdir Albums/X creates an album; rmdir of an empty one removes it.
        #expect(mkdir(mp + "/Albums/New", 0o755) == 0)
        let albums = try f.pg("albums").stdout
        #expect(albums.contains("New"))
        #expect(rmdir(mp + "/Albums/New") == 0)
        #expect(!(try f.pg("albums").stdout.contains("New")))
        #expect(errnoOf { rmdir(mp + "/Albums/Trip") } == ENOTEMPTY)
        // mkdir in Shared/ is refused; at the top it makes an upload folder (issue 13: `cp -r DCIM/`),
        // which is not an album.
        #expect(errnoOf { mkdir(mp + "/Shared/X", 0o755) } == EACCES)
        #expect(errnoOf { mkdir(mp + "/folder", 0o755) } == 0)
        #expect(!(try f.pg("albums").stdout.contains("folder")))
        #expect(errnoOf { rmdir(mp + "/folder") } == 0)
        // New files become assets owned by the app; files created in an album join it.
        try TestMedia.write(TestMedia.jpeg(tag: "made-here"), to: mp + "/Albums/Trip/made.jpg")
        #expect(eventually { listing(mp).contains("made.jpg") })
        let made = try #require(f.assetsJSON("--album", "Trip").first { $0["name"] as? String == "made.jpg" })
        #expect(made["owner"] as? String == app)
        try f.unmount(mp)
    }

    @Test func limitedSeesSelectionOwnAndPickedNeverShared() throws {
        let f = try MountFixture()
        try f.importPhotos(["a.jpg", "b.jpg", "c.jpg", "p.jpg"], extra: ["--album", "Trip"])
        try f.importPhotos(["s.jpg"], extra: ["--shared", "Family"])
        try f.pg("authorize", app, "--status", "limited")
        try f.pg("grant", app, "a.jpg")
        try f.pg("grant", app, "--picked", "p.jpg")
        // A shared asset could never show in a limited view: picking it for this app is refused.
        #expect(try f.pgStatus("grant", app, "--picked", "s.jpg").status == 68)
        let mp = try f.mount(app)
        #expect(listing(mp) == ["a.jpg", "p.jpg"])
        #expect(statErrno(mp + "/Albums") == ENOENT)
        #expect(statErrno(mp + "/s.jpg") == ENOENT)
        #expect(statErrno(mp + "/b.jpg") == ENOENT)
        #expect(errnoOf { mkdir(mp + "/Albums", 0o755) } == EACCES)
        // A file may not take a reserved name either: EINVAL, as the README says (was EEXIST).
        #expect(openErrno(mp + "/Albums", O_CREAT | O_WRONLY | O_EXCL) == EINVAL)
        #expect(openErrno(mp + "/Shared", O_CREAT | O_WRONLY) == EINVAL)
        // Creating works and stays visible; it is owned by the app.
        try Data(try TestMedia.jpeg(tag: "own")).write(to: URL(fileURLWithPath: mp + "/own.jpg"))
        #expect(eventually { listing(mp) == ["a.jpg", "own.jpg", "p.jpg"] })
        // rm: only its own assets; others EACCES.
        #expect(errnoOf { unlink(mp + "/a.jpg") } == EACCES)
        #expect(unlink(mp + "/own.jpg") == 0)
        #expect(eventually { !listing(mp).contains("own.jpg") })
        let trash = try f.pg("trash", "--json").stdout
        #expect(trash.contains("own.jpg"))
        try f.pg("restore", "own.jpg")
        #expect(eventually { listing(mp).contains("own.jpg") })
        try f.unmount(mp)
    }

    @Test(arguments: ["denied", "restricted", "not-determined"])
    func picksOnlyAndNoWrites(status: String) throws {
        let f = try MountFixture()
        try f.importPhotos(["a.jpg", "p.jpg"])
        try f.pg("authorize", app, "--status", status)
        try f.pg("grant", app, "a.jpg")      // a selection does not count without limited access
        try f.pg("grant", app, "--picked", "p.jpg")
        let mp = try f.mount(app)
        #expect(listing(mp) == ["p.jpg"])
        #expect(openErrno(mp + "/new.jpg", O_CREAT | O_WRONLY) == EACCES)
        #expect(errnoOf { unlink(mp + "/p.jpg") } == EACCES)
        #expect(errnoOf { mkdir(mp + "/Albums", 0o755) } == EACCES)
        #expect(readAll(mp + "/p.jpg") != nil)
        try f.unmount(mp)
    }

    @Test func addOnlyShowsNothingButAcceptsNewPhotos() throws {
        let f = try MountFixture()
        try f.importPhotos(["a.jpg"])
        try f.pg("authorize", "org.example.Camera", "--access", "add-only", "--status", "authorized")
        let mp = try f.mount("org.example.Camera", access: "add-only")
        #expect(listing(mp).isEmpty)
        #expect(openErrno(mp + "/a.jpg", O_RDONLY) == ENOENT)
        let bytes = try TestMedia.jpeg(tag: "shot")
        try Data(bytes).write(to: URL(fileURLWithPath: mp + "/shot.jpg"))
        #expect(listing(mp).isEmpty)
        // Even a name it wrote a moment ago cannot be opened for reading.
        #expect(openErrno(mp + "/shot.jpg", O_RDONLY) == ENOENT)
        let shot = try #require(try f.assetsJSON().first { $0["name"] as? String == "shot.jpg" })
        #expect(shot["owner"] as? String == "org.example.Camera")
        #expect(shot["size"] as? Int == bytes.count)
        try f.unmount(mp)
    }

    @Test func addOnlyWithoutAuthorizationCannotCreate() throws {
        let f = try MountFixture()
        try f.pg("authorize", "org.example.Camera", "--access", "add-only", "--status", "denied")
        let mp = try f.mount("org.example.Camera", access: "add-only")
        #expect(openErrno(mp + "/x.jpg", O_CREAT | O_WRONLY) == EACCES)
        try f.unmount(mp)
    }

    @Test func statusFileDescribesTheMount() throws {
        let f = try MountFixture()
        try f.pg("authorize", app, "--status", "limited")
        try f.pg("options", app, "--strip-location", "on")
        let mp = try f.mount(app)
        let text = try String(contentsOfFile: mp + "/.photogate/status", encoding: .utf8)
        let obj = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(obj["app"] as? String == app)
        #expect(obj["access"] as? String == "read-write")
        #expect(obj["status"] as? String == "limited")
        #expect((obj["options"] as? [String: Any])?["stripLocation"] as? Bool == true)
        #expect(openErrno(mp + "/.photogate/status", O_WRONLY) == EACCES)
        #expect(openErrno(mp + "/.photogate/new", O_CREAT | O_WRONLY) == EACCES)
        // The read path in effect, as `photogate mounts` says it.
        let mounts = try #require(try JSONSerialization.jsonObject(with: Data(try f.pg("mounts", "--json").stdout.utf8)) as? [[String: Any]])
        let me = try #require(mounts.first { $0["mountpoint"] as? String == mp })
        #expect(obj["readPath"] as? String == me["readPath"] as? String)
        #expect((obj["options"] as? [String: Any])?["editAny"] as? Bool == false)
        // Requests: an edit request names an asset (the mount records those), and a reason with
        // a bidi override or a C1 control is refused like one with ESC.
        func request(_ text: String) -> Int32 {
            let fd = open(mp + "/.photogate/request", O_WRONLY)
            if fd < 0 { return errno }
            let b = Array(text.utf8)
            if write(fd, b, b.count) < 0 { let e = errno; close(fd); return e }
            return close(fd) == 0 ? 0 : errno
        }
        #expect(request("edit\n") == EINVAL)
        #expect(request("read-write\nplease \u{202E}gpj.exe\n") == EINVAL)
        #expect(request("read-write\nbad \u{9B}31m\n") == EINVAL)
        #expect(request("read-write\nplease\n") == 0)
        try f.unmount(mp)
    }

    @Test func mountsListAndUnmountWithFusermount() throws {
        let f = try MountFixture()
        let mp = try f.mount(app)
        let o = try f.pg("mounts", "--json")
        let list = try #require(try JSONSerialization.jsonObject(with: Data(o.stdout.utf8)) as? [[String: Any]])
        let me = try #require(list.first { $0["mountpoint"] as? String == mp })
        #expect(me["app"] as? String == app)
        #expect(me["access"] as? String == "read-write")
        #expect((me["pid"] as? Int ?? 0) > 0)
        #expect(["daemon", "passthrough"].contains(me["readPath"] as? String ?? ""))
        // The readahead it reports is the kernel's for this mount; as root it was raised to 512 KiB.
        var st = stat()
        #expect(stat(mp, &st) == 0)
        let dev = UInt64(st.st_dev)
        let bdi = "/sys/class/bdi/\(((dev >> 8) & 0xfff) | ((dev >> 32) & ~0xfff)):\((dev & 0xff) | ((dev >> 12) & ~0xff))/read_ahead_kb"
        let kernel = try Int(String(contentsOfFile: bdi, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(me["readaheadKiB"] as? Int == kernel)
        if geteuid() == 0 { #expect((kernel ?? 0) >= 512) }
        #expect(try TestSupport.run("fusermount3", ["-u", mp]).status == 0)
        #expect(eventually { !isMounted(mp) })
        #expect(eventually { (try? f.pg("mounts", "--json").stdout.contains(mp)) == false })
    }

    @Test func mountFailuresAreClear() throws {
        let f = try MountFixture()
        let missing = try f.pgStatus("mount", app, f.dir + "/no-such-dir")
        #expect(missing.status == 72)
        #expect(missing.stderr.contains("does not exist"))
        let bad = try f.pgStatus("mount", "not-an-app", f.dir)
        #expect(bad.status == 64)
        let mp = try f.mount(app)
        let busy = try f.pgStatus("mount", app, mp)
        #expect(busy.status == 72)
        #expect(busy.stderr.contains("busy"))
        let nolib = try TestSupport.run(TestSupport.photogateBinary, ["mount", app, f.dir, "--library", f.dir + "/nolib"])
        #expect(nolib.status == 67)
        try f.unmount(mp)
    }

    @Test func staleMountOfAKilledDaemonIsCleared() throws {
        let f = try MountFixture()
        try f.importPhotos(["a.jpg"])
        try f.pg("authorize", app, "--status", "authorized")
        let mp = try f.mount(app)
        let list = try #require(try JSONSerialization.jsonObject(with: Data(try f.pg("mounts", "--json").stdout.utf8)) as? [[String: Any]])
        let pid = try #require(list.first { $0["mountpoint"] as? String == mp }?["pid"] as? Int)
        #expect(kill(pid_t(pid), SIGKILL) == 0)
        #expect(eventually { errnoOf { var s = statvfs(); return statvfs(mp, &s) } == ENOTCONN })
        #expect(isMounted(mp))
        // The next mount on the same folder clears the stale one.
        _ = try f.mount(app, at: mp)
        #expect(listing(mp) == ["Albums", "Shared", "a.jpg"])
        try f.unmount(mp)
        #expect(!isMounted(mp))
    }

    @Test func sigtermUnmountsCleanly() throws {
        let f = try MountFixture()
        let mp = try f.mount(app)
        let list = try #require(try JSONSerialization.jsonObject(with: Data(try f.pg("mounts", "--json").stdout.utf8)) as? [[String: Any]])
        let pid = try #require(list.first { $0["mountpoint"] as? String == mp }?["pid"] as? Int)
        kill(pid_t(pid), SIGTERM)
        #expect(eventually { !isMounted(mp) })
    }
}
