import Foundation
import GrantStore
import PhotoLibrary
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 15 through real mounts and real tools: every way tools save makes one new version, the
/// original stays, consent is asked for, and every mount sees the edit.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct Editing {
    let editor = "org.example.Editor"

    func versions(_ f: MountFixture, _ ref: String) throws -> [[String: Any]] {
        let o = try f.pg("versions", ref, "--json")
        let obj = try JSONSerialization.jsonObject(with: Data(o.stdout.utf8))
        if let list = obj as? [[String: Any]] { return list }
        return (obj as? [String: Any])?["versions"] as? [[String: Any]] ?? []
    }

    func assetID(_ f: MountFixture, _ name: String) throws -> String {
        try #require(try f.assetsJSON().first { $0["name"] as? String == name }?["id"] as? String)
    }


    /// `names` imported with GPS; the editor (limited) granted them with consent to edit and
    /// strip-location on; a viewer that reads every stored byte. Their mounts.
    func stripLocationEditorAndViewer(_ f: MountFixture, _ names: [String]) throws -> (editor: String, viewer: String) {
        try f.importPhotos(names, gps: true)
        try f.pg("authorize", editor, "--status", "limited")
        try f.pg(["grant", editor] + names)
        try f.pg("options", editor, "--strip-location", "on")
        try f.pg(["grant", editor, "--edit"] + names)
        try f.pg("authorize", "org.example.Viewer", "--status", "authorized")
        return (try f.mount(editor), try f.mount("org.example.Viewer"))
    }

    func exif(_ path: String, _ tag: String) throws -> String {
        try TestSupport.run("exiftool", ["-s3", "-" + tag, path]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The app's own file, saved over by each kind of tool: one new version each, same id and
    /// name, the original's bytes kept in the store.
    @Test func everyWayToolsSaveMakesANewVersionOfAnOwnFile() throws {
        let f = try MountFixture()
        try f.pg("authorize", editor, "--status", "limited")
        let mp = try f.mount(editor)
        let original = try TestMedia.jpeg(tag: "own original")
        #expect(cpWrite(original, to: mp + "/own.jpg") == 0)
        let id = try assetID(f, "own.jpg")
        var expectedVersions = 1
        func saved(_ label: String, _ body: () throws -> Bool) throws {
            let before = readAll(mp + "/own.jpg")
            #expect(try body(), "\(label) failed")
            expectedVersions += 1
            #expect(try assetID(f, "own.jpg") == id, "\(label): the id changed")
            #expect(readAll(mp + "/own.jpg") != before, "\(label): the content did not change")
            let count = try versions(f, id).count
            #expect(count == expectedVersions, "\(label): \(count) versions")
            try verifyClean(f)
        }
        // truncate and write (cp over it)
        try saved("O_TRUNC") { cpWrite(try TestMedia.jpeg(tag: "rewritten"), to: mp + "/own.jpg") == 0 }
        // an in-place writer: O_RDWR, change bytes inside the comment segment
        try saved("O_RDWR") {
            let fd = open(mp + "/own.jpg", O_RDWR)
            guard fd >= 0 else { return false }
            let n = pwrite(fd, Array("XY".utf8), 2, 6)
            return n == 2 && close(fd) == 0
        }
        // exiftool: a temp file, then rename over
        try saved("exiftool") {
            try TestSupport.run("exiftool", ["-q", "-overwrite_original", "-Artist=photogate", mp + "/own.jpg"]).status == 0
        }
        #expect(try exif(mp + "/own.jpg", "Artist") == "photogate")
        // ImageMagick
        try saved("mogrify") { try TestSupport.run("mogrify", ["-resize", "50%", mp + "/own.jpg"]).status == 0 }
        // Pillow
        try saved("Pillow") {
            let py = "from PIL import Image; im = Image.open('\(mp)/own.jpg'); im.load(); im.rotate(90, expand=True).save('\(mp)/own.jpg')"
            let o = try TestSupport.run("/usr/bin/python3", ["-c", py])
            if o.status != 0 { print(o.stderr) }
            return o.status == 0
        }
        // The original is version 0, byte for byte.
        let v0 = try #require(try versions(f, id).first)
        #expect(v0["hash"] as? String == "sha256:" + hexString(SHA256.hash(original)))
        // Saving the same bytes again changes nothing.
        let current = try #require(readAll(mp + "/own.jpg"))
        #expect(cpWrite(current, to: mp + "/own.jpg") == 0)
        #expect(try versions(f, id).count == expectedVersions)
        // Not media: refused at close, the current version stays.
        #expect(cpWrite(Array("not a photo".utf8), to: mp + "/own.jpg") == EINVAL)
        #expect(readAll(mp + "/own.jpg") == current ? true : false)
        // rsync's changed-file flow (temp name, rename over).
        let src = f.dir + "/own.jpg"
        try TestMedia.write(try TestMedia.jpeg(tag: "from rsync, a longer comment"), to: src)
        let r = try TestSupport.run("rsync", ["-a", src, mp + "/"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(readAll(mp + "/own.jpg") == readAll(src) ? true : false)
        #expect(try assetID(f, "own.jpg") == id)
        #expect(!listing(mp).contains { $0.hasPrefix(".own.jpg") }, "\(listing(mp))")
        try verifyClean(f)
        // Revert: back to the original, everywhere.
        try f.pg("revert", id)
        #expect(eventually { readAll(mp + "/own.jpg") == original })
        try f.unmount(mp)
    }

    /// Another's photo: EACCES and an edit request without consent; with `grant --edit` the save
    /// works and another app's running mount sees the new version at once.
    @Test func othersPhotosNeedConsentAndEveryMountSeesTheEdit() throws {
        let f = try MountFixture()
        try f.importPhotos(["p.jpg"])
        let viewer = "org.example.Viewer"
        // A limited editor with the photo in its selection (an authorized app may delete, so a
        // refused save could fall back to delete-and-create: Recently Deleted keeps the photo).
        try f.pg("authorize", editor, "--status", "limited")
        try f.pg("grant", editor, "p.jpg")
        try f.pg("authorize", viewer, "--status", "authorized")
        let mp = try f.mount(editor)
        let other = try f.mount(viewer)
        let before = try #require(readAll(other + "/p.jpg"))
        #expect(openErrno(mp + "/p.jpg", O_WRONLY) == EACCES)
        #expect(try TestSupport.run("exiftool", ["-q", "-overwrite_original", "-Artist=x", mp + "/p.jpg"]).status != 0)
        let requests = try f.pg("requests", "--json").stdout
        #expect(requests.contains("\"edit\"") && requests.contains("p.jpg"), "\(requests)")
        #expect(readAll(other + "/p.jpg") == before ? true : false)
        try f.pg("grant", editor, "--edit", "p.jpg")
        let e = try TestSupport.run("exiftool", ["-q", "-overwrite_original", "-Artist=consented", mp + "/p.jpg"])
        #expect(e.status == 0, "\(e.stderr)")
        #expect(try exif(mp + "/p.jpg", "Artist") == "consented")
        #expect(eventually { (try? exif(other + "/p.jpg", "Artist")) == "consented" }, "the other mount did not see the edit")
        #expect(try f.assetsJSON().count == 1, "the save made another asset")
        try verifyClean(f)
        try f.unmount(other)
        try f.unmount(mp)
    }

    /// An edit that adds GPS is redacted for strip-location readers; a handle opened before the
    /// edit keeps reading the version it opened.
    @Test func anEditAddingGPSIsRedactedAndOldHandlesKeepTheirVersion() throws {
        let f = try MountFixture()
        try f.importPhotos(["q.jpg"])
        let reader = "org.example.Reader"
        try f.pg("authorize", editor, "--status", "authorized")
        try f.pg("options", editor, "--edit-any", "on")
        try f.pg("authorize", reader, "--status", "authorized")
        try f.pg("options", reader, "--strip-location", "on")
        let mp = try f.mount(editor)
        let rd = try f.mount(reader)
        let old = try #require(readAll(mp + "/q.jpg"))
        let held = open(mp + "/q.jpg", O_RDONLY)
        #expect(held >= 0)
        let e = try TestSupport.run("exiftool", ["-q", "-overwrite_original", "-GPSLatitude=48.85", "-GPSLatitudeRef=N",
                                                 "-GPSLongitude=2.35", "-GPSLongitudeRef=E", mp + "/q.jpg"])
        #expect(e.status == 0, "\(e.stderr)")
        #expect(try exif(mp + "/q.jpg", "GPSLatitude") != "")
        #expect(eventually { (try? exif(rd + "/q.jpg", "ImageWidth")) != "" && (try? exif(rd + "/q.jpg", "GPSLatitude")) == "" && readAll(rd + "/q.jpg")?.count == readAll(mp + "/q.jpg")?.count },
                "a strip-location reader sees the edit's GPS")
        var buf = [UInt8](repeating: 0, count: old.count)
        #expect(pread(held, &buf, old.count, 0) == old.count && buf == old, "an old handle changed version")
        close(held)
        try f.unmount(rd)
        try f.unmount(mp)
    }

    /// mv into Albums/X/ adds to the album (nothing copied, nothing trashed); rm inside an album
    /// removes from the album only.
    /// An app's own file renamed over another of its files (an editor's save through a temp file)
    /// is dissolved only while nobody has touched it: one the person put in an album or granted
    /// to another app goes to Recently Deleted, album and grant kept, as an `rm` would send it.
    /// Before, it was deleted for good with its album membership and the other app's grant.
    /// Found by a hostile review.
    @Test func renamingAnOrganizedOwnFileOverAnotherKeepsItInRecentlyDeleted() throws {
        let f = try MountFixture()
        let viewer = "org.example.Viewer"
        try f.pg("authorize", editor, "--status", "authorized")
        try f.pg("authorize", viewer, "--status", "limited")
        let mp = try f.mount(editor)
        #expect(cpWrite(try TestMedia.jpeg(tag: "keeper"), to: mp + "/keeper.jpg") == 0)
        #expect(cpWrite(try TestMedia.jpeg(tag: "other"), to: mp + "/other.jpg") == 0)
        #expect(cpWrite(try TestMedia.jpeg(tag: "temp"), to: mp + "/temp.jpg") == 0)
        let keeper = try #require(try f.assetsJSON().first { $0["name"] as? String == "keeper.jpg" }?["id"] as? String)
        try f.pg("album", "create", "Best")
        try f.pg("album", "add", "Best", keeper)
        try f.pg("grant", viewer, keeper)
        #expect(rename(mp + "/keeper.jpg", mp + "/other.jpg") == 0)
        #expect(eventually { !listing(mp).contains("keeper.jpg") })
        // In Recently Deleted, still in the album and granted; restored, all of it is back.
        #expect(try f.pg("trash", "--json").stdout.contains(keeper), "the organized file was deleted for good")
        try f.pg("restore", keeper)
        #expect(try f.pg("assets", "--album", "Best", "--json").stdout.contains(keeper))
        #expect(try f.pg("grants", viewer).stdout.contains("keeper.jpg"))
        // An untouched temp file renamed over is dissolved: nothing in Recently Deleted.
        let temp = try #require(try f.assetsJSON().first { $0["name"] as? String == "temp.jpg" }?["id"] as? String)
        #expect(rename(mp + "/temp.jpg", mp + "/other.jpg") == 0)
        #expect(!(try f.pg("trash", "--json").stdout.contains(temp)))
        #expect(!(try f.assetsJSON().contains { $0["id"] as? String == temp }))
        try f.unmount(mp)
    }

    @Test func moveIntoAnAlbumAddsItAndRmThereOnlyRemovesIt() throws {
        let f = try MountFixture()
        try f.importPhotos(["m.jpg"])
        try f.pg("album", "create", "Trip")
        try f.pg("authorize", editor, "--status", "authorized")
        let mp = try f.mount(editor)
        let id = try assetID(f, "m.jpg")
        let o = try TestSupport.run("mv", [mp + "/m.jpg", mp + "/Albums/Trip/"])
        #expect(o.status == 0, "\(o.stderr)")
        #expect(try f.pg("assets", "--album", "Trip", "--json").stdout.contains(id))
        #expect(try f.assetsJSON().count == 1, "mv copied")
        #expect(!(try f.pg("trash").stdout.contains("m.jpg")), "mv trashed the original")
        #expect(eventually { listing(mp).contains("m.jpg") })
        #expect(unlink(mp + "/Albums/Trip/m.jpg") == 0)
        #expect(!(try f.pg("assets", "--album", "Trip", "--json").stdout.contains(id)))
        #expect(try f.assetsJSON().count == 1)
        // ln into the album works the same.
        #expect(link(mp + "/m.jpg", mp + "/Albums/Trip/m.jpg") == 0)
        #expect(try f.pg("assets", "--album", "Trip", "--json").stdout.contains(id))
        try f.unmount(mp)
    }

    /// A save gives the file a new inode (a new version): every path that reached the old one,
    /// its name and its entries in albums, finds the saved file at once, never ENOENT. The album's
    /// entry is the check that does not depend on timing: nothing else makes the kernel look it
    /// up again.
    @Test func aSavedFileIsThereByEveryPathItHad() throws {
        let f = try MountFixture()
        try f.pg("album", "create", "Trip")
        try f.pg("authorize", editor, "--status", "authorized")
        let mp = try f.mount(editor)
        #expect(cpWrite(try TestMedia.jpeg(tag: "first"), to: mp + "/own.jpg") == 0)
        #expect(link(mp + "/own.jpg", mp + "/Albums/Trip/own.jpg") == 0, "ln into the album: errno \(errno)")
        let oldIno = try #require(inode(mp + "/Albums/Trip/own.jpg"))
        #expect(readAll(mp + "/Albums/Trip/own.jpg") != nil)
        let saved = try TestMedia.jpeg(tag: "second, a longer comment than the first")
        #expect(cpWrite(saved, to: mp + "/own.jpg") == 0)
        // The name itself, right after the close.
        var st = stat()
        #expect(stat(mp + "/own.jpg", &st) == 0 && st.st_size == saved.count, "own.jpg right after the save: errno \(errno)")
        #expect(readAll(mp + "/own.jpg") == saved ? true : false)
        // Once the kernel has learnt of the new inode by the name, the album's entry answers too.
        #expect(eventually { inode(mp + "/own.jpg").map { $0 != oldIno } ?? false })
        st = stat()
        #expect(stat(mp + "/Albums/Trip/own.jpg", &st) == 0 && st.st_size == saved.count,
                "Albums/Trip/own.jpg after the save: errno \(errno), size \(st.st_size)")
        #expect(readAll(mp + "/Albums/Trip/own.jpg") == saved ? true : false, "Albums/Trip/own.jpg does not read the saved file")
        try f.unmount(mp)
    }

    /// A daemon killed during a save leaves the old version or the new one, never a mix, and
    /// `photogate verify` agrees: here the save had not closed, so the old version stays.
    @Test func aDaemonKilledDuringASaveLeavesTheOldVersion() throws {
        let f = try MountFixture()
        try f.pg("authorize", editor, "--status", "limited")
        let mp = try f.mount(editor)
        let original = try TestMedia.jpeg(tag: "before the crash")
        #expect(cpWrite(original, to: mp + "/k.jpg") == 0)
        let id = try assetID(f, "k.jpg")
        let fd = open(mp + "/k.jpg", O_WRONLY | O_TRUNC)
        #expect(fd >= 0)
        let next = try TestMedia.jpeg(tag: "never closed")
        #expect(next.withUnsafeBytes { write(fd, $0.baseAddress, $0.count / 2) } == next.count / 2)
        let list = try #require(try JSONSerialization.jsonObject(with: Data(try f.pg("mounts", "--json").stdout.utf8)) as? [[String: Any]])
        let pid = try #require(list.first { $0["mountpoint"] as? String == mp }?["pid"] as? Int)
        #expect(kill(pid_t(pid), SIGKILL) == 0)
        close(fd)
        #expect(eventually { statErrno(mp + "/k.jpg") == ENOTCONN })
        #expect(try TestSupport.run("fusermount3", ["-u", "-z", mp]).status == 0)
        let again = try f.mount(editor, at: mp)
        #expect(readAll(again + "/k.jpg") == original ? true : false, "the half-written save became the asset")
        #expect(try versions(f, id).count <= 1)
        try verifyClean(f)
        let temps = ((try? FileManager.default.subpathsOfDirectory(atPath: f.library + "/tmp")) ?? []).filter { $0.hasSuffix(".part") }
        #expect(temps.isEmpty, "\(temps)")
        try f.unmount(again)
    }

    /// Reads through a handle open for writing are the app's reads too: with strip-location on,
    /// an edit starts from the redacted bytes the app reads (in place or mapped), so no version it
    /// saves holds a location it never saw. (A copy of the original with reads redacted let the
    /// app cut the GPS block off from its pointer with a two-byte write, save, and read the
    /// location back from its own version, which the scanner no longer found.)
    @Test func anEditByAStripLocationAppNeverReadsTheLocation() throws {
        let f = try MountFixture()
        let (mp, vw) = try stripLocationEditorAndViewer(f, ["p.jpg"])
        let shown = try #require(readAll(mp + "/p.jpg"))
        let original = try #require(readAll(vw + "/p.jpg"))
        #expect(shown != original && shown.count == original.count, "the plain read is not redacted in place")
        let fd = open(mp + "/p.jpg", O_RDWR)
        #expect(fd >= 0, "open O_RDWR: errno \(errno)")
        var got = [UInt8](repeating: 0, count: original.count + 4096)
        let n = pread(fd, &got, got.count, 0)
        #expect(n == shown.count && Array(got.prefix(max(n, 0))) == shown, "a read through the edit is not the redacted file")
        let dump = f.dir + "/through-edit.jpg"
        try TestMedia.write(Array(got.prefix(max(n, 0))), to: dump)
        #expect(try StripLocation.locationLeft(in: dump).isEmpty, "the edit's handle reads the location")
        // The attack: IFD0's GPSInfo entry (tag 0x8825, not itself redacted) renamed 0x8826, so
        // that a scanner of the saved version finds no GPS block to redact.
        let tagAt = try #require(Self.gpsInfoEntry(in: shown), "no GPSInfo entry in the test photo")
        var edited = shown
        let renamed: [UInt8] = shown[tagAt] == 0x88 ? [0x88, 0x26] : [0x26, 0x88]
        edited.replaceSubrange(tagAt..<tagAt + 2, with: renamed)
        #expect(renamed.withUnsafeBytes { pwrite(fd, $0.baseAddress, 2, off_t(tagAt)) } == 2)
        #expect(close(fd) == 0, "the save failed: errno \(errno)")
        // The saved version is what the editor read plus what it wrote: no byte of the location.
        #expect(eventually { readAll(vw + "/p.jpg") == edited }, "the saved version holds bytes the editor never read")
        #expect(try versions(f, try assetID(f, "p.jpg")).count == 2)
        let saved = try #require(readAll(mp + "/p.jpg"))
        #expect(saved == edited, "the editor reads its own save differently from what it wrote")
        try f.unmount(vw)
        try f.unmount(mp)
    }

    /// A strip-location app that saves back exactly the bytes it read (cp over the photo, or an
    /// editor's write-then-rename) changes nothing: no new version, and the photo keeps the
    /// location that app never saw. A real change still makes a version, without the location.
    @Test func aStripLocationAppSavingWhatItReadChangesNothing() throws {
        let f = try MountFixture()
        let (mp, vw) = try stripLocationEditorAndViewer(f, ["p.jpg"])
        let id = try assetID(f, "p.jpg")
        let original = try #require(readAll(vw + "/p.jpg"))
        let shown = try #require(readAll(mp + "/p.jpg"))
        #expect(shown != original, "the editor's read is not redacted")
        // cp over the photo (open O_TRUNC, write, close).
        #expect(cpWrite(shown, to: mp + "/p.jpg") == 0)
        #expect(try versions(f, id).count <= 1, "writing back the redacted bytes made a version")
        #expect(readAll(vw + "/p.jpg") == original ? true : false, "the photo lost what the editor never saw")
        // An editor's save: a new file with the same bytes, renamed over the photo.
        #expect(cpWrite(shown, to: mp + "/p.jpg.tmp.jpg") == 0)
        #expect(rename(mp + "/p.jpg.tmp.jpg", mp + "/p.jpg") == 0, "rename over: errno \(errno)")
        #expect(try versions(f, id).count <= 1, "renaming the redacted bytes over the photo made a version")
        #expect(readAll(vw + "/p.jpg") == original ? true : false, "the photo lost what the editor never saw")
        #expect(!(try f.assetsJSON().contains { $0["name"] as? String == "p.jpg.tmp.jpg" }), "the renamed file stayed an asset")
        #expect(readAll(mp + "/p.jpg") == shown ? true : false)
        let dump = f.dir + "/viewer.jpg"
        try TestMedia.write(try #require(readAll(vw + "/p.jpg")), to: dump)
        #expect(!(try StripLocation.locationLeft(in: dump).isEmpty), "the person's photo has no location left")
        // A real edit is saved, from the redacted bytes.
        var edited = shown
        edited.append(contentsOf: Array("trailing".utf8))
        #expect(cpWrite(edited, to: mp + "/p.jpg") == 0)
        #expect(try versions(f, id).count == 2, "a changed save made no version")
        #expect(eventually { readAll(vw + "/p.jpg") == edited }, "the changed save does not read back")
        try verifyClean(f)
        try f.unmount(vw)
        try f.unmount(mp)
    }

    /// A strip-location app that writes the photo's stored bytes (a location guessed right) gets
    /// the same answer as for any other change: a new version. Were it "unchanged", the app would
    /// learn that its guess is the photo's location. Likewise for a file renamed over the photo.
    @Test func aStripLocationAppCannotConfirmAGuessedLocation() throws {
        let f = try MountFixture()
        let (mp, vw) = try stripLocationEditorAndViewer(f, ["p.jpg", "q.jpg"])
        for (name, byRename) in [("p.jpg", false), ("q.jpg", true)] {
            let id = try assetID(f, name)
            let stored = try #require(readAll(vw + "/" + name))
            #expect(readAll(mp + "/" + name) != stored, "\(name): the editor's read is not redacted")
            if byRename {
                #expect(cpWrite(stored, to: mp + "/guess.jpg") == 0)
                #expect(rename(mp + "/guess.jpg", mp + "/" + name) == 0, "rename over: errno \(errno)")
            } else {
                #expect(cpWrite(stored, to: mp + "/" + name) == 0)
            }
            #expect(try versions(f, id).count == 2, "\(name): the stored bytes written back made no version: the app learns its guess was right")
            #expect(readAll(vw + "/" + name) == stored ? true : false, "\(name): the photo's bytes changed")
        }
        try verifyClean(f)
        try f.unmount(vw)
        try f.unmount(mp)
    }

    /// A strip-location app whose own photo another app gave a location (an edit it reads
    /// redacted) cannot confirm a guess of that location by writing the guess as a new file under
    /// the photo's name, which the same app writing the same bytes again would turn into its
    /// existing asset: the right guess and a wrong one both make a new asset, in an upload folder
    /// (limited), in Albums/X/ (authorized), and through an add-only mount of the same app (whose
    /// read-write view would show the difference). Its own bytes written again make no duplicate.
    @Test func aNewFileCannotConfirmAGuessedLocationOfAnOwnPhotoEditedByAnother() throws {
        let f = try MountFixture()
        let other = "org.example.Other"
        try f.pg("authorize", other, "--status", "authorized")
        try f.pg("options", other, "--edit-any", "on")
        let om = try f.mount(other)
        func owned(_ app: String) throws -> Int { try f.assetsJSON().filter { $0["owner"] as? String == app }.count }
        for (i, (status, addOnly)) in [("limited", false), ("authorized", false), ("limited", true)].enumerated() {
            let app = "org.example.guesser\(i)", photo = "photo\(i).jpg", mine = "mine\(i).jpg"
            try f.pg("authorize", app, "--status", status)
            try f.pg("options", app, "--strip-location", "on")
            let mp = try f.mount(app)
            // Its own photos: one it gave a location itself, one without.
            let mineBytes = try TestMedia.jpeg(tag: "mine \(i)", gps: true)
            let plain = try TestMedia.jpeg(tag: "plain \(i)")
            #expect(cpWrite(mineBytes, to: mp + "/" + mine) == 0)
            #expect(cpWrite(plain, to: mp + "/" + photo) == 0)
            // The other app adds a location to the plain one (exiftool: a temp renamed over it).
            #expect(eventually { readAll(om + "/" + photo) == plain }, "\(app): the other app does not see \(photo)")
            let e = try TestSupport.run("exiftool", ["-q", "-overwrite_original", "-GPSLatitude=48.8584", "-GPSLatitudeRef=N",
                                                     "-GPSLongitude=2.2945", "-GPSLongitudeRef=E", om + "/" + photo])
            #expect(e.status == 0, "\(e.stderr)")
            let truth = try #require(readAll(om + "/" + photo))
            #expect(truth != plain)
            #expect(eventually { readAll(mp + "/" + photo).map { $0.count == truth.count && $0 != truth } ?? false },
                    "\(app): its read of \(photo) is not the other app's edit, redacted")
            // A wrong guess: the edit with another location.
            let wrongPath = f.dir + "/wrong\(i).jpg"
            try TestMedia.write(truth, to: wrongPath)
            #expect(try TestSupport.run("exiftool", ["-q", "-overwrite_original", "-GPSLatitude=40.0", "-GPSLatitudeRef=N",
                                                     "-GPSLongitude=3.0", "-GPSLongitudeRef=E", wrongPath]).status == 0)
            let wrong = try #require(readAll(wrongPath))
            #expect(wrong != truth)
            let before = try owned(app)
            if addOnly {
                try f.pg("authorize", app, "--access", "add-only", "--status", "authorized")
                let am = try f.mount(app, access: "add-only")
                #expect(cpWrite(wrong, to: am + "/guess-wrong.jpg") == 0)
                #expect(cpWrite(truth, to: am + "/guess-right.jpg") == 0)
                #expect(cpWrite(mineBytes, to: am + "/again.jpg") == 0)
                try f.unmount(am)
            } else {
                let dirs = status == "limited" ? ["/up-wrong", "/up-right", "/up-again"] : ["/Albums/Wrong", "/Albums/Right", "/Albums/Again"]
                for d in dirs { #expect(mkdir(mp + d, 0o755) == 0, "mkdir \(d): errno \(errno)") }
                #expect(cpWrite(wrong, to: mp + dirs[0] + "/" + photo) == 0)
                #expect(cpWrite(truth, to: mp + dirs[1] + "/" + photo) == 0)
                #expect(cpWrite(mineBytes, to: mp + dirs[2] + "/" + mine) == 0)
                // What each folder holds (an album lists the asset under its display name).
                func held(_ d: String) -> UInt64? {
                    let names = listing(mp + d)
                    return names.count == 1 ? inode(mp + d + "/" + names[0]) : nil
                }
                let own = try #require(inode(mp + "/" + photo))
                #expect(held(dirs[0]).map { $0 != own } == true, "\(app): the wrong guess is its photo")
                #expect(held(dirs[1]).map { $0 != own } == true,
                        "\(app): the right guess is its photo: the app learns the location it reads stripped")
                #expect(held(dirs[2]) == inode(mp + "/" + mine), "\(app): its own bytes again made a duplicate")
            }
            let added = try owned(app) - before
            #expect(added == 2, "\(app)\(addOnly ? " (add-only)" : ""): \(added) new assets, not one for each guess: a guess is confirmed, or its own bytes made a duplicate")
            try f.unmount(mp)
        }
        try verifyClean(f)
        try f.unmount(om)
    }

    /// Where IFD0's GPSInfo entry (tag 0x8825, type LONG, count 1) starts in a JPEG's Exif, in
    /// either byte order.
    static func gpsInfoEntry(in bytes: [UInt8]) -> Int? {
        let big: [UInt8] = [0x88, 0x25, 0x00, 0x04, 0x00, 0x00, 0x00, 0x01]
        let little: [UInt8] = [0x25, 0x88, 0x04, 0x00, 0x01, 0x00, 0x00, 0x00]
        guard bytes.count >= 8 else { return nil }
        for i in 0...(bytes.count - 8) where bytes[i] == 0x88 || bytes[i] == 0x25 {
            let window = Array(bytes[i..<i + 8])
            if window == big || window == little { return i }
        }
        return nil
    }

    /// A revoke (of the photo, or of the consent to edit it) reaches a handle already open for
    /// writing: reads and writes fail once the photo is gone, and the close saves nothing.
    @Test func anEditOpenBeforeARevokeSavesNothing() throws {
        let f = try MountFixture()
        try f.importPhotos(["p.jpg", "q.jpg"])
        try f.pg("authorize", editor, "--status", "limited")
        try f.pg("grant", editor, "p.jpg", "q.jpg")
        try f.pg("grant", editor, "--edit", "p.jpg", "q.jpg")
        let mp = try f.mount(editor)
        let extra = Array("written before the revoke".utf8)
        // The photo revoked while open.
        let size = try #require(readAll(mp + "/p.jpg")).count
        let fd = open(mp + "/p.jpg", O_RDWR)
        #expect(fd >= 0, "open O_RDWR: errno \(errno)")
        #expect(extra.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(size)) } == extra.count)
        try f.pg("revoke", editor, "p.jpg")
        #expect(eventually { statErrno(mp + "/p.jpg") == ENOENT })
        var buf = [UInt8](repeating: 0, count: 64)
        #expect(pread(fd, &buf, buf.count, 0) == -1 && errno == EACCES, "a revoked photo still reads through an edit")
        #expect(extra.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) } == -1 && errno == EACCES, "a revoked photo still takes writes")
        #expect(close(fd) == -1 && errno == EACCES, "the close of an edit of a revoked photo did not fail")
        #expect(try versions(f, try assetID(f, "p.jpg")).count <= 1, "an edit of a revoked photo was saved")
        // The consent to edit withdrawn while open: the photo stays visible, the save is refused.
        let qsize = try #require(readAll(mp + "/q.jpg")).count
        let fq = open(mp + "/q.jpg", O_RDWR)
        #expect(fq >= 0, "open O_RDWR: errno \(errno)")
        #expect(extra.withUnsafeBytes { pwrite(fq, $0.baseAddress, $0.count, off_t(qsize)) } == extra.count)
        try f.pg("revoke", editor, "--edit", "q.jpg")
        #expect(close(fq) == -1 && errno == EACCES, "the close of an edit whose consent was withdrawn did not fail")
        #expect(try versions(f, try assetID(f, "q.jpg")).count <= 1, "an edit without consent was saved")
        #expect(readAll(mp + "/q.jpg")?.count == qsize)
        #expect(try f.pg("refused", editor).stdout.contains("q.jpg"))
        try verifyClean(f)
        try f.unmount(mp)
    }

    /// An app denied while it writes a new file: the close fails and nothing is added.
    @Test func aFileWrittenAcrossADenialIsNotAdded() throws {
        let f = try MountFixture()
        let camera = "org.example.Camera"
        try f.pg("authorize", camera, "--access", "add-only", "--status", "authorized")
        let mp = try f.mount(camera, access: "add-only")
        let photo = try TestMedia.jpeg(tag: "across a denial")
        let fd = open(mp + "/late.jpg", O_CREAT | O_WRONLY | O_EXCL, 0o644)
        #expect(fd >= 0, "create: errno \(errno)")
        let half = photo.count / 2
        #expect(photo.withUnsafeBytes { write(fd, $0.baseAddress, half) } == half)
        try f.pg("authorize", camera, "--access", "add-only", "--status", "denied")
        #expect(eventually { String(decoding: readAll(mp + "/.photogate/status") ?? [], as: UTF8.self).contains("denied") })
        _ = photo.withUnsafeBytes { write(fd, $0.baseAddress! + half, photo.count - half) }
        #expect(close(fd) == -1 && errno == EACCES, "the close of a file written across a denial did not fail")
        #expect(try f.assetsJSON().isEmpty, "a file written across a denial was added")
        try f.unmount(mp)
    }

    /// A descriptor kept past the close that saved a photo (a dup, a forked child's copy) belongs
    /// to that save's edit, not to the next one: with the same bytes saved (an unchanged commit
    /// keeps the inode) and the photo opened for editing again, its write and truncate fail with
    /// EACCES and reach nothing, and the new edit is saved at its opener's close, not held back
    /// until the stale descriptor goes. (Edits were found by inode: the stale write landed in the
    /// new edit, and its commit waited for the stale release.)
    @Test func aDescriptorKeptPastASaveNeverReachesTheNextEdit() throws {
        let f = try MountFixture()
        try f.pg("authorize", editor, "--status", "limited")
        let mp = try f.mount(editor)
        let path = mp + "/own.jpg"
        let original = try TestMedia.jpeg(tag: "kept past a save")
        #expect(cpWrite(original, to: path) == 0)
        let id = try assetID(f, "own.jpg")
        let before = inode(path)
        let fd = open(path, O_RDWR)
        try #require(fd >= 0, "open: errno \(errno)")
        let stale = dup(fd)   // the same open: what a forked child keeps
        var held = [fd, stale]
        defer { held.filter { $0 >= 0 }.forEach { close($0) } }
        // Save the same bytes: an unchanged commit at this close (the opener's), same inode.
        #expect(pwrite(fd, original, 10, 0) == 10)
        #expect(close(fd) == 0)
        held[0] = -1
        #expect(try versions(f, id).count <= 1, "saving the same bytes made a version")
        #expect(inode(path) == before, "an unchanged save changed the inode")
        // A new edit of the photo, and a stale write and truncate through the kept descriptor.
        let edit = open(path, O_RDWR)
        try #require(edit >= 0, "open again: errno \(errno)")
        held.append(edit)
        let junk = Array("STALE-WRITE-THROUGH-A-KEPT-DESCRIPTOR".utf8)
        #expect(errnoOf { Int32(pwrite(stale, junk, junk.count, 200)) } == EACCES, "a stale write was not refused")
        #expect(errnoOf { ftruncate(stale, 100) } == EACCES, "a stale truncate was not refused")
        var shown = [UInt8](repeating: 0, count: original.count + 4096)
        let n = pread(edit, &shown, shown.count, 0)
        #expect(n == original.count && Array(shown[0..<max(n, 0)]) == original, "the new edit does not start from the photo")
        // The new edit's own save, committed at its close, with the stale descriptor still open.
        let replacement = try TestMedia.jpeg(tag: "the next edit, a longer comment than before")
        #expect(ftruncate(edit, 0) == 0)
        #expect(pwrite(edit, replacement, replacement.count, 0) == replacement.count)
        #expect(close(edit) == 0)
        held.removeLast()
        let saved = try versions(f, id)
        #expect(saved.count == 2, "the edit was not saved at its close: \(saved.count) versions")
        #expect(saved.last?["hash"] as? String == "sha256:" + hexString(SHA256.hash(replacement)), "the saved version is not the edit's bytes")
        #expect(readAll(path) == replacement ? true : false)
        // The stale descriptor's close changes nothing.
        #expect(close(stale) == 0)
        held[1] = -1
        #expect(try versions(f, id).count == 2)
        #expect(readAll(path) == replacement ? true : false)
        try verifyClean(f)
        try f.unmount(mp)
    }
}
