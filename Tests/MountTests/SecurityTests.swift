import Foundation
import Testing
import TestSupport
import CSysShims
@testable import GrantStore
#if canImport(Glibc)
import Glibc
#endif

/// Nothing lets an app learn what it was not granted: a hidden asset is indistinguishable from
/// one that does not exist.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct Security {
    let app = "org.example.Editor"

    func limitedMount(_ f: MountFixture) throws -> String {
        try f.importPhotos(["visible.jpg", "hidden.jpg"], extra: ["--album", "Trip"])
        try f.pg("authorize", app, "--status", "limited")
        try f.pg("grant", app, "visible.jpg")
        return try f.mount(app)
    }

    @Test func hiddenAndMissingLookAlikeToEverySyscall() throws {
        let f = try MountFixture()
        let mp = try limitedMount(f)
        for name in ["hidden.jpg", "never-existed.jpg"] {
            let p = mp + "/" + name
            #expect(statErrno(p) == ENOENT, "stat \(name)")
            #expect(openErrno(p, O_RDONLY) == ENOENT, "open \(name)")
            #expect(errnoOf { rename(p, mp + "/x.jpg") } == ENOENT, "rename \(name)")
            #expect(errnoOf { link(p, mp + "/x.jpg") } == ENOENT, "link \(name)")
            #expect(errnoOf { unlink(p) } == ENOENT, "unlink \(name)")
            #expect(errnoOf { Int32(cs_getxattr(p, "user.x")) } == ENOENT, "getxattr \(name)")
            #expect(errnoOf { Int32(cs_listxattr(p)) } == ENOENT, "listxattr \(name)")
            #expect(errnoOf { cs_setxattr(p, "user.x") } == ENOENT, "setxattr \(name)")
            #expect(errnoOf { truncate(p, 0) } == ENOENT, "truncate \(name)")
            #expect(errnoOf { Int32(access(p, R_OK)) } == ENOENT)
            #expect(statErrno(mp + "/Albums/Trip/" + name) == ENOENT)
        }
        try f.unmount(mp)
    }

    @Test func linksDevicesAndXattrsAreRefused() throws {
        let f = try MountFixture()
        let mp = try limitedMount(f)
        let v = mp + "/visible.jpg"
        #expect(errnoOf { symlink("visible.jpg", mp + "/ln") } == EPERM)
        #expect(errnoOf { symlink("/etc/passwd", mp + "/ln2") } == EPERM)
        #expect(errnoOf { link(v, mp + "/hard.jpg") } == EPERM)
        #expect(errnoOf { mknod(mp + "/dev", S_IFCHR | 0o644, cs_makedev(1, 3)) } == EPERM)
        #expect(errnoOf { mknod(mp + "/fifo", S_IFIFO | 0o644, 0) } == EPERM)
        #expect(errnoOf { cs_setxattr(v, "user.tag") } == EOPNOTSUPP)
        #expect(errnoOf { Int32(cs_getxattr(v, "user.tag")) } == EOPNOTSUPP)
        #expect(errnoOf { Int32(cs_listxattr(v)) } == EOPNOTSUPP)
        try f.unmount(mp)
    }

    @Test func creatingAHiddenAssetsNameSucceedsWithoutEEXIST() throws {
        let f = try MountFixture()
        let mp = try limitedMount(f)
        let bytes = try TestMedia.jpeg(tag: "mine")
        let fd = open(mp + "/hidden.jpg", O_CREAT | O_EXCL | O_WRONLY, 0o644)
        #expect(fd >= 0, "O_EXCL create of a hidden asset's name must succeed, got errno \(errno)")
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        #expect(close(fd) == 0)
        // The app sees its own file under the name it chose, with its own bytes.
        #expect(eventually { readAll(mp + "/hidden.jpg") == bytes })
        #expect(listing(mp) == ["hidden.jpg", "visible.jpg"])
        // The library gave the new asset another display name (committed at release, which the
        // kernel sends after close returns).
        let want = ["hidden-1.jpg", "hidden.jpg", "visible.jpg"]
        #expect(eventually { (try? f.assetsJSON().compactMap { $0["name"] as? String }.sorted()) == want })
        try f.unmount(mp)
    }

    @Test func hostileNames() throws {
        let f = try MountFixture()
        let mp = try limitedMount(f)
        #expect(statErrno(mp + "/../" + (f.library as NSString).lastPathComponent) != 0 || true)
        #expect(statErrno(mp + "/.photogate/../hidden.jpg") == ENOENT)
        #expect(statErrno(mp + "/visible.jpg/..") == ENOTDIR)
        #expect(statErrno(mp + "/Albums/../hidden.jpg") == ENOENT)
        let long = String(repeating: "a", count: 300) + ".jpg"
        #expect(statErrno(mp + "/" + long) == ENAMETOOLONG)
        #expect(openErrno(mp + "/" + long, O_CREAT | O_WRONLY) == ENAMETOOLONG)
        // Non-UTF-8 names: lookups find nothing, creating is refused with EINVAL.
        let raw: [UInt8] = Array(mp.utf8) + [0x2f, 0x66, 0xff, 0xfe, 0x2e, 0x6a, 0x70, 0x67, 0]
        let st = raw.withUnsafeBufferPointer { p -> Int32 in
            p.baseAddress!.withMemoryRebound(to: CChar.self, capacity: raw.count) { c in var s = stat(); return errnoOf { stat(c, &s) } }
        }
        #expect(st == ENOENT)
        let cr = raw.withUnsafeBufferPointer { p -> Int32 in
            p.baseAddress!.withMemoryRebound(to: CChar.self, capacity: raw.count) { c in
                errnoOf { let fd = open(c, O_CREAT | O_WRONLY, 0o644); if fd >= 0 { close(fd) }; return fd }
            }
        }
        #expect(cr == EINVAL)
        // Reserved names cannot be created.
        #expect(openErrno(mp + "/.photogate", O_CREAT | O_WRONLY) != 0)
        try f.unmount(mp)
    }

    @Test func renameRules() throws {
        let f = try MountFixture()
        try f.importPhotos(["a.jpg"], extra: ["--album", "Trip"])
        try f.pg("authorize", app, "--status", "authorized")
        let mp = try f.mount(app)
        try TestMedia.write(TestMedia.jpeg(tag: "own"), to: mp + "/own.jpg")
        #expect(eventually { listing(mp).contains("own.jpg") })
        // Into an album (issue 15): the asset joins it, nothing copied or trashed; under another
        // name, or out of an album: EXDEV (mv falls back to copy and delete).
        #expect(errnoOf { rename(mp + "/own.jpg", mp + "/Albums/Trip/renamed-there.jpg") } == EXDEV)
        #expect(errnoOf { rename(mp + "/own.jpg", mp + "/Albums/Trip/own.jpg") } == 0)
        #expect(try f.pg("assets", "--album", "Trip").stdout.contains("own.jpg"))
        #expect(eventually { listing(mp).contains("own.jpg") })
        // Someone else's asset: EACCES. Onto an existing asset: EACCES (originals are not replaced).
        #expect(errnoOf { rename(mp + "/a.jpg", mp + "/b.jpg") } == EACCES)
        #expect(errnoOf { rename(mp + "/own.jpg", mp + "/a.jpg") } == EACCES)
        // Its own asset: allowed.
        #expect(rename(mp + "/own.jpg", mp + "/renamed.jpg") == 0)
        #expect(eventually { listing(mp).contains("renamed.jpg") && !listing(mp).contains("own.jpg") })
        try f.unmount(mp)
    }

    @Test func addOnlyCannotReadBackWhatItWrote() throws {
        let f = try MountFixture()
        try f.pg("authorize", "org.example.Camera", "--access", "add-only", "--status", "authorized")
        let mp = try f.mount("org.example.Camera", access: "add-only")
        let fd = open(mp + "/x.jpg", O_CREAT | O_RDWR, 0o644)
        #expect(fd >= 0)
        let bytes = try TestMedia.jpeg(tag: "rb")
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        // While writing, the bytes are the app's own, not the library's: it may read them back
        // (issue 13: ffmpeg's faststart re-opens its output). Once committed, never.
        var buf = [UInt8](repeating: 0, count: 16)
        #expect(pread(fd, &buf, 16, 0) == 16 && Array(buf) == Array(bytes.prefix(16)))
        #expect(close(fd) == 0)
        #expect(openErrno(mp + "/x.jpg", O_RDONLY) == ENOENT)
        #expect(listing(mp).isEmpty)
        try f.unmount(mp)
    }

    /// An add-only app that opens a name it wrote before for writing, without O_TRUNC, gets a new,
    /// empty file: nothing of the asset is copied in. Before, the asset's current bytes were (a
    /// file being written may be read by its writer): another app's edit over the photo, with
    /// the location the add-only app's strip-location hides, and a photo in Recently Deleted,
    /// which its close then brought back as a new asset. Found by a hostile review.
    @Test func addOnlyReopeningItsNameReadsNothingOfTheAsset() throws {
        let f = try MountFixture()
        let camera = "org.example.Camera", editor = "org.example.Editor"
        try f.pg("authorize", camera, "--access", "add-only", "--status", "authorized")
        try f.pg("options", camera, "--strip-location", "on")
        try f.pg("authorize", editor, "--status", "authorized")
        try f.pg("options", editor, "--edit-any", "on")
        let cam = try f.mount(camera, access: "add-only")
        let ed = try f.mount(editor)
        let mine = try TestMedia.jpeg(tag: "camera's own")
        #expect(cpWrite(mine, to: cam + "/p.jpg") == 0)
        #expect(cpWrite(try TestMedia.jpeg(tag: "camera's second"), to: cam + "/q.jpg") == 0)
        // The editor saves a version of p.jpg with a location; q.jpg goes to Recently Deleted.
        #expect(eventually { readAll(ed + "/p.jpg") == mine })
        let e = try TestSupport.run("exiftool", ["-q", "-overwrite_original", "-GPSLatitude=48.85", "-GPSLatitudeRef=N",
                                                 "-GPSLongitude=2.35", "-GPSLongitudeRef=E", ed + "/p.jpg"])
        #expect(e.status == 0, "\(e.stderr)")
        #expect(try TestSupport.run("exiftool", ["-s3", "-GPSLatitude", ed + "/p.jpg"]).stdout.contains("48"))
        #expect(unlink(ed + "/q.jpg") == 0)
        let assetsBefore = try f.assetsJSON().count
        for name in ["p.jpg", "q.jpg"] {
            let w = open(cam + "/" + name, O_WRONLY)
            #expect(w >= 0, "\(name): \(String(cString: strerror(errno)))")
            var st = stat()
            #expect(fstat(w, &st) == 0 && st.st_size == 0, "\(name): the reopened file has the asset's size \(st.st_size)")
            let r = open(cam + "/" + name, O_RDONLY)
            #expect(r >= 0)
            var buf = [UInt8](repeating: 0, count: 1 << 16)
            #expect(read(r, &buf, buf.count) == 0, "\(name): bytes of the asset read back")
            close(r)
            #expect(close(w) == 0)
        }
        // Closed without a write: nothing was added, and q.jpg stays in Recently Deleted.
        #expect(try f.assetsJSON().count == assetsBefore)
        #expect(try f.pg("trash").stdout.contains("q.jpg"))
        try f.unmount(ed)
        try f.unmount(cam)
    }

    @Test func inodeNumbersDifferBetweenAppsAndStayStable() throws {
        let f = try MountFixture()
        try f.importPhotos(["a.jpg"])
        try f.pg("authorize", "org.example.One", "--status", "authorized")
        try f.pg("authorize", "org.example.Two", "--status", "authorized")
        let one = try f.mount("org.example.One")
        let two = try f.mount("org.example.Two")
        let i1 = try #require(inode(one + "/a.jpg"))
        let i2 = try #require(inode(two + "/a.jpg"))
        #expect(i1 != i2)
        try f.unmount(one)
        let oneAgain = try f.mount("org.example.One")
        #expect(inode(oneAgain + "/a.jpg") == i1)
        try f.unmount(oneAgain)
        try f.unmount(two)
    }

    /// A daemon that ends unmounts its own mount, found by id, never what the path it was mounted
    /// at leads to by then. A process of the same user renames the folder holding the mount point
    /// and leaves a symlink at its name to a folder holding another mount: libfuse's unmount by
    /// path then unmounted that other mount (as root, it could be any mount of the machine),
    /// whether the daemon ended on SIGTERM or after its mount was unmounted where it went.
    @Test(arguments: ["sigterm", "umount"])
    func aDaemonEndingUnmountsOnlyItsOwnMountWhereverItWent(_ ending: String) throws {
        let f = try MountFixture()
        try f.importPhotos(["a.jpg"])
        try f.pg("authorize", "org.example.Victim", "--status", "authorized")
        try f.pg("authorize", "org.example.Moved", "--status", "authorized")
        let victim = try f.mount("org.example.Victim", at: f.dir + "/other/view")
        let mp = try f.mount("org.example.Moved", at: f.dir + "/x/view")
        let list = try #require(try JSONSerialization.jsonObject(with: Data(try f.pg("mounts", "--json").stdout.utf8)) as? [[String: Any]])
        let pid = try #require(list.first { $0["mountpoint"] as? String == mp }?["pid"] as? Int)
        #expect(rename(f.dir + "/x", f.dir + "/x.moved") == 0)
        #expect(symlink(f.dir + "/other", f.dir + "/x") == 0)
        defer { _ = unlink(f.dir + "/x"); _ = rename(f.dir + "/x.moved", f.dir + "/x") }
        #expect(isMounted(f.dir + "/x.moved/view"))
        if ending == "sigterm" {
            #expect(kill(pid_t(pid), SIGTERM) == 0)
        } else {
            #expect(umount2(f.dir + "/x.moved/view", Int32(MNT_DETACH)) == 0)
        }
        #expect(eventually { kill(pid_t(pid), 0) != 0 }, "the daemon did not end")
        #expect(!isMounted(f.dir + "/x.moved/view"), "the daemon's own mount is still mounted where it went")
        #expect(isMounted(victim), "the daemon unmounted another mount, the one its mount point's path led to")
        #expect(readAll(victim + "/a.jpg") != nil)
        try f.unmount(victim)
    }

    /// A catalog row whose store path leads out of the store (the red team served /etc/shadow
    /// through a shared mount so): the asset is in no view, and its target is never served.
    @Test func aStorePathOutOfTheStoreIsNeverServed() throws {
        let f = try MountFixture()
        try f.importPhotos(["a.jpg"])
        try f.pg("authorize", app, "--status", "authorized")
        let secret = f.dir + "/secret.jpg"   // library/store/../../secret.jpg
        let bytes = try TestMedia.jpeg(tag: "secret")
        try TestMedia.write(bytes, to: secret)
        let lib = try Library.open(at: LibraryPaths(root: f.library))
        try lib.write { db in
            try db.execute(sql: """
                INSERT INTO assets (rowid, id, display_name, media_kind, media_class, byte_size, capture_date, added_at, has_location,
                                    content_hash, store_path)
                VALUES ((SELECT COALESCE(max(rowid), 0) + 1 FROM assets), 'cccccccccccccccc', 'secret.jpg', 'jpeg', 'photo', ?, 0, 0, 0, 'sha256:00', '../../secret.jpg')
                """, arguments: [bytes.count])
        }
        let mp = try f.mount(app)
        #expect(photos(mp) == ["a.jpg"])
        #expect(openErrno(mp + "/secret.jpg", O_RDONLY) == ENOENT)
        try f.unmount(mp)
    }
}

extension Security {
    /// A referenced original (import --reference) lives in a folder its owner may change: a folder
    /// on its path swapped for a link to a private folder holding a file of the same size and an
    /// older date made the daemon serve that file (root's mount with allow_other served
    /// /etc/shadow). The path was recorded with no link in it, and the daemon opens it so or not
    /// at all.
    @Test func aReferencedOriginalsFolderSwappedForALinkServesNothing() throws {
        let f = try MountFixture()
        let pics = f.dir + "/user-pics", secretDir = f.dir + "/private"
        for d in [pics, secretDir] { try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true) }
        let secret = try TestMedia.jpeg(tag: "private: served to no app, whatever a folder on the way becomes")
        var decoy = try TestMedia.jpeg(tag: "decoy")
        #expect(decoy.count < secret.count)
        decoy += [UInt8](repeating: 0, count: secret.count - decoy.count)   // bytes after the JPEG's end
        try TestMedia.write(secret, to: secretDir + "/p.jpg")
        try TestMedia.write(decoy, to: pics + "/p.jpg")
        // The private file older than the import, so that size and date both match.
        var old = [timespec(tv_sec: 946_684_800, tv_nsec: 0), timespec(tv_sec: 946_684_800, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, secretDir + "/p.jpg", &old, 0) == 0)
        try f.pg("import", "--reference", pics)
        try f.pg("authorize", "org.example.Frame", "--status", "authorized")
        let mp = try f.mount("org.example.Frame")
        #expect(readAll(mp + "/p.jpg") == decoy)
        #expect(rename(pics, pics + ".old") == 0 && symlink(secretDir, pics) == 0)
        let served = readAll(mp + "/p.jpg")
        #expect(served != secret, "the private file behind the swapped folder was served")
        #expect(served == nil, "a read through the swapped folder did not fail")
        try f.unmount(mp)
    }

    /// A referenced original that changed after its import is refused to an edit as to a read:
    /// before, an open for writing (edit consent given) copied whatever the file held now, and the
    /// app read it through that descriptor, bytes the catalog never described (any file saved
    /// at that path). A FIFO put in its place is refused too, without holding the daemon (its
    /// open used to block until a writer came). Found by a hostile review.
    @Test func aReferencedOriginalChangedAfterImportIsRefusedToAnEdit() throws {
        let f = try MountFixture()
        let pics = f.dir + "/user-pics"
        try FileManager.default.createDirectory(atPath: pics, withIntermediateDirectories: true)
        let imported = try TestMedia.jpeg(tag: "as imported")
        try TestMedia.write(imported, to: pics + "/r.jpg")
        try TestMedia.write(try TestMedia.jpeg(tag: "fifo's"), to: pics + "/s.jpg")
        try f.pg("import", "--reference", pics)
        try f.pg("authorize", app, "--status", "limited")
        try f.pg("grant", app, "r.jpg", "s.jpg")
        try f.pg("grant", app, "--edit", "r.jpg", "s.jpg")
        let mp = try f.mount(app)
        #expect(readAll(mp + "/r.jpg") == imported)
        // Another file saved at the original's path, newer and of another size.
        let later = try TestMedia.jpeg(tag: "saved there later, never imported: \(UUID().uuidString)")
        #expect(later.count != imported.count)
        try TestMedia.write(later, to: pics + "/r.jpg")
        var future = [timespec(tv_sec: time(nil) + 5, tv_nsec: 0), timespec(tv_sec: time(nil) + 5, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, pics + "/r.jpg", &future, 0) == 0)
        #expect(readAll(mp + "/r.jpg") == nil, "a read of the changed original was served")
        for flags in [O_RDWR, O_WRONLY, O_RDWR | O_TRUNC] {
            let fd = open(mp + "/r.jpg", flags)
            let e = errno
            if fd >= 0 {
                var buf = [UInt8](repeating: 0, count: later.count + 16)
                let n = pread(fd, &buf, buf.count, 0)
                close(fd)
                Issue.record("an edit open (flags \(flags)) of the changed original succeeded; read \(n) bytes, the new file's: \(n == later.count && Array(buf.prefix(n)) == later)")
            } else {
                #expect(e == EACCES, "flags \(flags): \(String(cString: strerror(e)))")
            }
        }
        // A FIFO in place of s.jpg: both opens are refused, in a child that the test can release
        // (by opening the FIFO's other end) should the daemon block on it.
        #expect(unlink(pics + "/s.jpg") == 0 && mkfifo(pics + "/s.jpg", 0o644) == 0)
        let py = """
        import errno, os, sys
        for flags in (os.O_RDONLY, os.O_RDWR):
            try:
                os.close(os.open(sys.argv[1], flags)); print("opened")
            except OSError as e:
                print(errno.errorcode[e.errno])
        """
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        child.arguments = ["-c", py, mp + "/s.jpg"]
        let out = Pipe()
        child.standardOutput = out
        try child.run()
        let done = eventually(20) { !child.isRunning }
        if !done {
            // Release the daemon: a writer on the FIFO lets each blocked open return.
            _ = eventually(60) {
                let w = open(pics + "/s.jpg", O_WRONLY | O_NONBLOCK)
                if w >= 0 { close(w) }
                return !child.isRunning
            }
            if child.isRunning { child.terminate() }
            child.waitUntilExit()
        }
        #expect(done, "an open of a FIFO in a referenced original's place held the daemon")
        let answers = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(answers.split(separator: "\n") == ["EACCES", "EACCES"], "\(answers)")
        try f.unmount(mp)
    }
}

extension Security {
    /// An app looping opens of a file it is refused (here a referenced original changed after its
    /// import) made the daemon write a log line per open: 25 MB in 5 s in the library's
    /// run/logs/, on the owner's disk. Repeats of a line are counted, not written, past a few,
    /// and the first refusal still says why. Found by a hostile review.
    @Test func refusedOpensInALoopKeepTheLogSmall() throws {
        let f = try MountFixture()
        let pics = f.dir + "/user-pics"
        try FileManager.default.createDirectory(atPath: pics, withIntermediateDirectories: true)
        try TestMedia.write(try TestMedia.jpeg(tag: "as imported"), to: pics + "/r.jpg")
        try f.pg("import", "--reference", pics)
        try f.pg("authorize", app, "--status", "authorized")
        let mp = try f.mount(app)
        // Another file saved at the original's path, newer and of another size: every open is refused.
        try TestMedia.write(try TestMedia.jpeg(tag: "saved there later, never imported: \(UUID().uuidString)"), to: pics + "/r.jpg")
        var future = [timespec(tv_sec: time(nil) + 5, tv_nsec: 0), timespec(tv_sec: time(nil) + 5, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, pics + "/r.jpg", &future, 0) == 0)
        let log = f.library + "/run/logs/\(app).read-write.log"
        func size() -> Int { ((try? FileManager.default.attributesOfItem(atPath: log))?[.size] as? Int) ?? -1 }
        let before = size()
        var refused = 0
        for _ in 0..<5000 {
            let fd = open(mp + "/r.jpg", O_RDONLY)
            if fd >= 0 { close(fd) } else if errno == EACCES { refused += 1 }
        }
        #expect(refused == 5000, "only \(refused) opens were refused")
        let grown = size() - before
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(grown >= 0 && grown < 16 << 10, "5,000 refused opens grew the daemon's log by \(grown) bytes")
        #expect(text.contains("refused r.jpg to \(app): its original at \(pics)/r.jpg changed after it was imported"), "\(text)")
        try f.unmount(mp)
        // At the end, how many were not written.
        func end() -> String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
        #expect(eventually { end().contains("more times in the") }, "\(end().suffix(2000))")
    }
}
