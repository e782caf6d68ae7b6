import Foundation
import GrantStore
import PhotoLibrary
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 37: a photographer's command-line tools through real mounts (scripts/setup installs
/// them), each running its ordinary workflow, exiting 0, and leaving the library as a user
/// expects: `photogate assets`, `versions` and `verify` are asserted after each.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct PhotographerTools {
    let app = "org.example.Darkroom"

    func tool(_ program: String, _ args: [String], cwd: String? = nil) throws -> TestSupport.Output {
        try TestSupport.run(program, args, cwd: cwd)
    }

    func versions(_ f: MountFixture, _ ref: String) throws -> [[String: Any]] {
        let o = try f.pg("versions", ref, "--json")
        return (try JSONSerialization.jsonObject(with: Data(o.stdout.utf8)) as? [[String: Any]]) ?? []
    }

    /// The library's assets of this name (`photogate assets --json`).
    func assets(_ f: MountFixture, named name: String) throws -> [[String: Any]] {
        try f.assetsJSON().filter { $0["name"] as? String == name }
    }

    func exif(_ path: String, _ tag: String) throws -> String {
        try TestSupport.run("exiftool", ["-s3", "-" + tag, path]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `photogate verify` (the CLI, exit 0) and its check in process.
    func verified(_ f: MountFixture) throws {
        let o = try f.pgStatus("verify")
        #expect(o.status == 0, "verify: \(o.stdout)\(o.stderr)")
        try verifyClean(f)
    }

    /// A unique JPEG (EXIF date 2024-07-14) whose EXIF says to rotate it (Orientation 6), as a
    /// camera held upright writes it: what `jhead -autorot` and `exiftran -ai` act on.
    func uprightJPEG(_ f: MountFixture, _ tag: String) throws -> [UInt8] {
        let path = f.dir + "/upright-\(UUID().uuidString.prefix(6)).jpg"
        try TestMedia.write(try TestMedia.jpeg(tag: tag), to: path)
        try #require(try tool("exiftool", ["-q", "-overwrite_original", "-n", "-Orientation=6", path]).status == 0)
        return try #require(readAll(path))
    }

    func mode(_ path: String) -> mode_t {
        var st = stat()
        return stat(path, &st) == 0 ? st.st_mode & 0o7777 : 0
    }

    func writable(_ path: String) -> Int32 { errnoOf { access(path, W_OK) } }

    /// jhead and exiftran look at the mode or ask `access(W_OK)` before they save. The mount
    /// reports a file writable exactly where the app may save over it (its own files, the person's
    /// photos it has edit consent for), read-only elsewhere, and follows consent as it changes.
    /// Before, every file was 0444 and `access(W_OK)` EACCES, even for root: both tools exited 1
    /// and edited nothing.
    @Test func jheadAndExiftranSaveWhereTheAppMayEditAndOnlyThere() throws {
        let f = try MountFixture()
        let src = f.dir + "/camera"
        try FileManager.default.createDirectory(atPath: src, withIntermediateDirectories: true)
        for name in ["consented.jpg", "readonly.jpg", "later.jpg"] {
            try TestMedia.write(try uprightJPEG(f, name), to: src + "/" + name)
        }
        try f.pg("import", src)
        try f.pg("authorize", app, "--status", "limited")
        try f.pg("grant", app, "consented.jpg", "readonly.jpg", "later.jpg")
        try f.pg("grant", app, "--edit", "consented.jpg")
        let mp = try f.mount(app)
        #expect(cpWrite(try uprightJPEG(f, "own"), to: mp + "/own.jpg") == 0)
        // The modes and access(2) say what the app may do.
        for name in ["own.jpg", "consented.jpg"] {
            #expect(mode(mp + "/" + name) == 0o644, "\(name): \(String(mode(mp + "/" + name), radix: 8))")
            #expect(writable(mp + "/" + name) == 0, "\(name): access(W_OK)")
        }
        for name in ["readonly.jpg", "later.jpg"] {
            #expect(mode(mp + "/" + name) == 0o444, "\(name): \(String(mode(mp + "/" + name), radix: 8))")
            #expect(writable(mp + "/" + name) == EACCES, "\(name): access(W_OK)")
        }
        func orientation(_ name: String) throws -> String { try tool("exiftool", ["-s3", "-n", "-Orientation", mp + "/" + name]).stdout.trimmingCharacters(in: .whitespacesAndNewlines) }
        // jhead on the person's photo it may edit, exiftran on its own file: saved.
        var o = try tool("jhead", ["-autorot", "consented.jpg"], cwd: mp)
        #expect(o.status == 0, "jhead: \(o.stdout)\(o.stderr)")
        #expect(try orientation("consented.jpg") == "1", "jhead did not rotate the photo")
        o = try tool("exiftran", ["-ai", "own.jpg"], cwd: mp)
        #expect(o.status == 0, "exiftran: \(o.stdout)\(o.stderr)")
        #expect(try orientation("own.jpg") == "1", "exiftran did not rotate the file")
        // Read-only: both refuse before touching anything, as on any read-only file.
        o = try tool("jhead", ["-autorot", "readonly.jpg"], cwd: mp)
        #expect(o.status != 0 && o.stdout.contains("Skipping readonly file"), "jhead: \(o.status) \(o.stdout)\(o.stderr)")
        o = try tool("exiftran", ["-ai", "readonly.jpg"], cwd: mp)
        #expect(o.status != 0 && o.stderr.contains("Permission denied"), "exiftran: \(o.status) \(o.stdout)\(o.stderr)")
        #expect(try orientation("readonly.jpg") == "6")
        // Consent given while mounted: writable at once, and exiftran saves.
        try f.pg("grant", app, "--edit", "later.jpg")
        #expect(eventually { mode(mp + "/later.jpg") == 0o644 && writable(mp + "/later.jpg") == 0 }, "consent given: still read-only")
        o = try tool("exiftran", ["-ai", "later.jpg"], cwd: mp)
        #expect(o.status == 0, "exiftran: \(o.stdout)\(o.stderr)")
        #expect(try orientation("later.jpg") == "1")
        // Consent taken back: read-only at once, and the open for writing is refused whatever the
        // mode said (it asks the library itself).
        try f.pg("revoke", app, "--edit", "consented.jpg")
        #expect(eventually { mode(mp + "/consented.jpg") == 0o444 && writable(mp + "/consented.jpg") == EACCES }, "consent taken back: still writable")
        #expect(openErrno(mp + "/consented.jpg", O_WRONLY) == EACCES)
        o = try tool("jhead", ["-autorot", "consented.jpg"], cwd: mp)
        #expect(o.status != 0 && o.stdout.contains("Skipping readonly file"), "jhead: \(o.status) \(o.stdout)\(o.stderr)")
        // edit-any: every photo the app sees is writable while it is on.
        try f.pg("options", app, "--edit-any", "on")
        #expect(eventually { mode(mp + "/readonly.jpg") == 0o644 && mode(mp + "/consented.jpg") == 0o644 })
        try f.pg("options", app, "--edit-any", "off")
        #expect(eventually { mode(mp + "/readonly.jpg") == 0o444 && mode(mp + "/consented.jpg") == 0o444 })
        // The library: the same four assets, the person's still the person's; a version for each
        // save, none where nothing was saved.
        let all = try f.assetsJSON()
        #expect(Set(all.compactMap { $0["name"] as? String }) == ["consented.jpg", "readonly.jpg", "later.jpg", "own.jpg"], "\(all)")
        for name in ["consented.jpg", "readonly.jpg", "later.jpg"] {
            #expect(try assets(f, named: name).first?["owner"] is NSNull, "\(name) changed hands")
        }
        // jhead -autorot saves twice (the rotated image, then its EXIF orientation reset).
        #expect(try versions(f, "consented.jpg").count == 3)
        #expect(try versions(f, "later.jpg").count == 2)
        #expect(try versions(f, "readonly.jpg").count == 1)
        let own = try #require(try assets(f, named: "own.jpg").first?["id"] as? String)
        #expect(try versions(f, own).count == 2)
        try verified(f)
        try f.unmount(mp)
    }

    /// The app's own files show writable, so tools that save by backup take that path for them:
    /// mogrify renames the file to `X~`, writes `X` anew and unlinks `X~`; jhead's rotation
    /// writes a temp file, unlinks `X` and renames the temp to `X`, then its EXIF save renames
    /// `X` to `X.t`, writes `X` and unlinks `X.t`. Each is one photo saved: a new version of the
    /// same asset (same id), nothing in Recently Deleted, at the top as in a folder. Without
    /// this, each save made a new asset and sent the photo to Recently Deleted. A backup that is
    /// kept is a file of its own.
    @Test func savesByBackupMakeVersionsOfTheAppsOwnFiles() throws {
        let f = try MountFixture()
        try f.pg("authorize", app, "--status", "limited")
        let mp = try f.mount(app)
        #expect(mkdir(mp + "/folder", 0o755) == 0)
        #expect(cpWrite(try uprightJPEG(f, "top"), to: mp + "/top.jpg") == 0)
        #expect(cpWrite(try uprightJPEG(f, "inside"), to: mp + "/folder/inside.jpg") == 0)
        let top = try #require(try assets(f, named: "top.jpg").first?["id"] as? String)
        let inside = try #require(try assets(f, named: "inside.jpg").first?["id"] as? String)
        for (dir, name) in [(mp, "top.jpg"), (mp + "/folder", "inside.jpg")] {
            var o = try tool("jhead", ["-autorot", name], cwd: dir)
            #expect(o.status == 0, "jhead \(name): \(o.stdout)\(o.stderr)")
            #expect(try tool("exiftool", ["-s3", "-n", "-Orientation", dir + "/" + name]).stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "1")
            o = try tool("mogrify", ["-resize", "50%", name], cwd: dir)
            #expect(o.status == 0, "mogrify \(name): \(o.stdout)\(o.stderr)")
            #expect(try tool("identify", ["-format", "%w", dir + "/" + name]).stdout == "24", "mogrify did not save \(name)")
            #expect(!listing(dir).contains { $0.hasSuffix("~") || $0.hasSuffix(".t") }, "\(listing(dir))")
        }
        // Same assets, same ids; the rotation, its EXIF and the resize are versions 1 to 3.
        #expect(try assets(f, named: "top.jpg").first?["id"] as? String == top)
        #expect(try assets(f, named: "inside.jpg").first?["id"] as? String == inside)
        #expect(try f.assetsJSON().count == 2, "\((try? f.assetsJSON()) ?? [])")
        #expect(try versions(f, top).count == 4 && versions(f, inside).count == 4)
        let trash = try JSONSerialization.jsonObject(with: Data(try f.pg("trash", "--json").stdout.utf8)) as? [Any]
        #expect(trash?.isEmpty == true, "Recently Deleted: \(trash ?? [])")
        // A backup kept is a file of its own: the photo renamed, a new one under its name.
        #expect(rename(mp + "/top.jpg", mp + "/top.jpg~") == 0)
        #expect(cpWrite(try TestMedia.jpeg(tag: "written after"), to: mp + "/top.jpg") == 0)
        #expect(try assets(f, named: "top.jpg~").first?["id"] as? String == top)
        #expect(try f.assetsJSON().count == 3)
        try verified(f)
        try f.unmount(mp)
    }

    /// A JPEG without a capture date of its own (no EXIF date), its file time `epoch`.
    func datelessJPEG(_ path: String, color: String, epoch: Int) throws {
        try #require(try tool("convert", ["-size", "40x30", "xc:" + color, path]).status == 0)
        try #require(try tool("exiftool", ["-s3", "-DateTimeOriginal", "-CreateDate", path]).stdout.isEmpty)
        try #require(try tool("touch", ["-d", "@\(epoch)", path]).status == 0)
    }

    func captureDate(_ f: MountFixture, _ name: String) throws -> String? {
        try assets(f, named: name).first?["captureDate"] as? String
    }

    /// rclone sets a file's time after closing it. A time an app sets on a file it created takes
    /// effect as one set while writing: the capture date of a photo without one of its own (as with
    /// `cp -a`), in a read-write mount and in an add-only one. Before, it was ignored after the
    /// commit and such a photo took the day of the copy. A second `rclone copy` finds nothing to do.
    @Test func rcloneKeepsTheDateOfAPhotoWithoutOne() throws {
        let f = try MountFixture()
        let src = f.dir + "/card"
        try FileManager.default.createDirectory(atPath: src, withIntermediateDirectories: true)
        let epoch = 1_551_675_967   // 2019-03-04T05:06:07Z
        try datelessJPEG(src + "/nodate.jpg", color: "purple", epoch: epoch)
        try TestMedia.write(try TestMedia.jpeg(tag: "dated"), to: src + "/dated.jpg")
        try #require(try tool("touch", ["-d", "@\(epoch)", src + "/dated.jpg"]).status == 0)
        try f.pg("authorize", app, "--status", "limited")
        let mp = try f.mount(app)
        var o = try tool("rclone", ["copy", src, mp + "/"])
        #expect(o.status == 0, "rclone: \(o.stdout)\(o.stderr)")
        #expect(try captureDate(f, "nodate.jpg") == "2019-03-04T05:06:07Z", "\((try? f.assetsJSON()) ?? [])")
        // A date in the photo wins over the file's, as at import.
        let dated = try captureDate(f, "dated.jpg")
        #expect(dated?.hasPrefix("2024-07-14") == true, "\(dated ?? "-")")
        var st = stat()
        #expect(stat(mp + "/nodate.jpg", &st) == 0 && st.st_mtim.tv_sec == epoch)
        let id = try #require(try assets(f, named: "nodate.jpg").first?["id"] as? String)
        let saved = try versions(f, id)
        #expect(saved.count == 1 && saved.first?["captureDate"] as? String == "2019-03-04T05:06:07Z", "\(saved)")
        // Again: nothing to copy, nothing new.
        o = try tool("rclone", ["copy", "-v", src, mp + "/"])
        #expect(o.status == 0 && !(o.stderr.contains("Copied")), "rclone again: \(o.stdout)\(o.stderr)")
        #expect(try f.assetsJSON().count == 2 && versions(f, id).count == 1)
        // `touch -d` on its own file later (an open for writing, and the time set through it): the same.
        #expect(try tool("touch", ["-d", "@\(epoch + 60)", mp + "/nodate.jpg"]).status == 0)
        #expect(try captureDate(f, "nodate.jpg") == "2019-03-04T05:06:07Z".replacingOccurrences(of: "05:06:07", with: "05:07:07"))
        try verified(f)
        try f.unmount(mp)
        // An add-only mount: the same.
        try f.pg("authorize", "org.example.Camera", "--access", "add-only", "--status", "authorized")
        let card = f.dir + "/card2"
        try FileManager.default.createDirectory(atPath: card, withIntermediateDirectories: true)
        try datelessJPEG(card + "/upload.jpg", color: "orange", epoch: epoch - 86_400)
        let ao = try f.mount("org.example.Camera", access: "add-only")
        o = try tool("rclone", ["copy", card, ao + "/"])
        #expect(o.status == 0, "rclone: \(o.stdout)\(o.stderr)")
        #expect(try captureDate(f, "upload.jpg") == "2019-03-03T05:06:07Z", "\((try? f.assetsJSON()) ?? [])")
        try verified(f)
        try f.unmount(ao)
    }

    /// Times set on the person's photos: accepted without effect where the app may save over the
    /// photo (its dates are the person's), refused where it may not (a read-only file).
    @Test func timesOnThePersonsPhotosChangeNothing() throws {
        let f = try MountFixture()
        let src = f.dir + "/photos"
        try FileManager.default.createDirectory(atPath: src, withIntermediateDirectories: true)
        try datelessJPEG(src + "/mine.jpg", color: "navy", epoch: 1_400_000_000)
        try datelessJPEG(src + "/shown.jpg", color: "olive", epoch: 1_400_000_000)
        try f.pg("import", src)
        try f.pg("authorize", app, "--status", "limited")
        try f.pg("grant", app, "mine.jpg", "shown.jpg")
        try f.pg("grant", app, "--edit", "mine.jpg")
        let before = try f.assetsJSON()
        let mp = try f.mount(app)
        #expect(try tool("touch", ["-d", "@1551675967", mp + "/mine.jpg"]).status == 0)
        #expect(try tool("chmod", ["600", mp + "/mine.jpg"]).status == 0)
        #expect(try tool("touch", ["-d", "@1551675967", mp + "/shown.jpg"]).status != 0)
        #expect(try f.assetsJSON().map { $0["captureDate"] as? String } == before.map { $0["captureDate"] as? String })
        try f.unmount(mp)
    }

    /// Renaming a photo the app did not create stays refused (EACCES), even with edit consent or
    /// full access and edit-any: the name is the person's (see `ViewPolicy.renameRefusal`).
    /// `explain` says so and why; the app's own files rename as before. (`find -exec mv {} ... \;`
    /// exits 0 whatever mv does: find's `\;` takes a command's status as a test, not an error.)
    @Test func renamingThePersonsPhotoIsRefusedAndExplainSaysWhy() throws {
        let f = try MountFixture()
        try f.importPhotos(["p.jpg", "q.jpg"])
        let limited = "org.example.Organizer", full = "org.example.Manager"
        try f.pg("authorize", limited, "--status", "limited")
        try f.pg("grant", limited, "p.jpg", "q.jpg")
        try f.pg("grant", limited, "--edit", "p.jpg", "q.jpg")
        try f.pg("authorize", full, "--status", "authorized")
        try f.pg("options", full, "--edit-any", "on")
        for a in [limited, full] {
            let mp = try f.mount(a)
            let o = try tool("mv", [mp + "/p.jpg", mp + "/renamed.jpg"])
            #expect(o.status != 0 && o.stderr.contains("Permission denied"), "\(a): mv \(o.status) \(o.stderr)")
            let found = try tool("find", [mp, "-maxdepth", "1", "-name", "q.jpg", "-exec", "mv", "{}", mp + "/q2.jpg", ";"])
            #expect(found.status == 0 && found.stderr.contains("Permission denied"), "\(a): find \(found.status) \(found.stderr)")
            #expect(listing(mp).contains("p.jpg") && listing(mp).contains("q.jpg") && !listing(mp).contains("renamed.jpg"))
            // explain: the same answer, and why.
            let e = try #require(try JSONSerialization.jsonObject(with: Data(try f.pg("explain", a, "p.jpg", "--json").stdout.utf8)) as? [String: Any])
            #expect(e["rename"] as? Bool == false && (e["edit"] as? [String: Any])?["decision"] as? String == "allowed")
            #expect((e["renameReason"] as? String)?.contains("only the app that created a photo renames it") == true, "\(e)")
            let text = try f.pg("explain", a, "p.jpg").stdout
            #expect(text.contains("rename: no (EACCES) (only the app that created a photo renames it"), "\(text)")
            // Its own file renames.
            #expect(cpWrite(try TestMedia.jpeg(tag: "own of \(a)"), to: mp + "/own-\(a).jpg") == 0)
            #expect(try tool("mv", [mp + "/own-\(a).jpg", mp + "/mine-\(a).jpg"]).status == 0)
            #expect(try assets(f, named: "mine-\(a).jpg").first?["owner"] as? String == a)
            try f.unmount(mp)
        }
        // The library: the person's photos keep their names, unedited.
        for name in ["p.jpg", "q.jpg"] {
            #expect(try assets(f, named: name).count == 1)
            #expect(try versions(f, name).count == 1)
        }
        #expect(try f.assetsJSON().count == 4)
        try verified(f)
    }

    /// A file the app wrote into a folder it made is edited as often as at the top: exiv2's
    /// in-place save (`open(O_RDWR|O_CREAT|O_TRUNC)`) three times, then `cp` over it three times.
    /// Before, the second save failed with EACCES: a new version has a new inode, the folder's
    /// name kept the old one, and the truncate of the open reached the daemon through it.
    @Test func aFileInAFolderTheAppMadeIsEditedAnyNumberOfTimes() throws {
        let f = try MountFixture()
        try f.pg("authorize", app, "--status", "limited")
        let mp = try f.mount(app)
        #expect(mkdir(mp + "/folder", 0o755) == 0)
        let path = mp + "/folder/own.jpg"
        #expect(cpWrite(try TestMedia.jpeg(tag: "own in a folder"), to: path) == 0)
        let id = try #require(try assets(f, named: "own.jpg").first?["id"] as? String)
        for k in 1...3 {
            let o = try tool("exiv2", ["-M", "set Exif.Image.Artist artist \(k)", path])
            #expect(o.status == 0, "exiv2 save \(k): \(o.stdout)\(o.stderr)")
            #expect(try exif(path, "Artist") == "artist \(k)")
        }
        var last: [UInt8] = []
        for k in 1...3 {
            last = try TestMedia.jpeg(tag: "cp over it, \(k)")
            #expect(cpWrite(last, to: path) == 0, "cp \(k)")
        }
        #expect(readAll(path) == last)
        #expect(readAll(mp + "/own.jpg") == last, "the top does not show the saved version")
        // The folder's name and the top's name are one file (the current version's inode, once
        // the kernel has the mount's word that the old one's names are gone).
        #expect(eventually {
            var a = stat(), b = stat()
            return stat(path, &a) == 0 && stat(mp + "/own.jpg", &b) == 0 && a.st_ino == b.st_ino
        }, "the folder's name keeps an older version's inode")
        // One asset, the app's, with its original and six saved versions, the last current.
        let listed = try assets(f, named: "own.jpg")
        #expect(listed.count == 1 && listed.first?["id"] as? String == id && listed.first?["owner"] as? String == app, "\(listed)")
        #expect(try f.assetsJSON().count == 1)
        let saved = try versions(f, id)
        #expect(saved.count == 7, "\(saved.count) versions")
        #expect(saved.last?["current"] as? Bool == true && saved.last?["hash"] as? String == "sha256:" + hexString(SHA256.hash(last)))
        try verified(f)
        try f.unmount(mp)
    }

    /// darktable-cli exporting into a folder the app made: it writes the JPEG, then saves its EXIF
    /// and then its XMP into the file with exiv2 (two in-place saves). Before, the second failed
    /// (the cause above), darktable said so on stderr and exited 0 with the XMP lost.
    @Test func darktableExportsIntoAFolderWithItsXMP() throws {
        let f = try MountFixture()
        try f.pg("authorize", app, "--status", "limited")
        let mp = try f.mount(app)
        #expect(mkdir(mp + "/thumbs", 0o755) == 0)
        let src = f.dir + "/in.jpg"
        try #require(try tool("convert", ["-size", "320x240", "gradient:red-blue", src]).status == 0)
        let o = try tool("darktable-cli", [src, mp + "/thumbs/", "--core", "--configdir", f.dir + "/darktable", "--library", ":memory:"])
        #expect(o.status == 0, "\(o.stdout)\(o.stderr)")
        #expect(!(o.stdout + o.stderr).contains("exception"), "darktable could not save into its export: \(o.stdout)\(o.stderr)")
        let exported = mp + "/thumbs/in.jpg"
        #expect(try exif(exported, "XMP-xmpMM:DerivedFrom") == "in.jpg", "the export has no XMP")
        #expect(try exif(exported, "XMP-darktable:Xmp_version").isEmpty == false, "the export has no darktable XMP")
        let listed = try assets(f, named: "in.jpg")
        #expect(listed.count == 1 && listed.first?["owner"] as? String == app, "\(listed)")
        let id = try #require(listed.first?["id"] as? String)
        // The export, then its EXIF and its XMP: each save a version.
        #expect(try versions(f, id).count == 3)
        #expect(readAll(mp + "/in.jpg") == readAll(exported))
        try verified(f)
        try f.unmount(mp)
    }
}
