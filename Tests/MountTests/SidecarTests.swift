import Foundation
import GrantStore
import PhotoLibrary
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 37, "Sidecars are refused": photo tools keep edit history and metadata beside the photo
/// (`photo.jpg.xmp`, `IMG_1.XMP`, `.pp3`, `.THM`...). Before, `cp photo.jpg.xmp M/` failed at its
/// close (EINVAL), `rawtherapee-cli -O` lost its `.pp3` while exiting 0, and `rclone copy` of a
/// card with `.XMP`, `.THM` and `.txt` files exited 1 after retrying everything 3 times. Through
/// real mounts with the real tools (scripts/setup installs them): a sidecar is kept with the
/// photo whose name it shares, shown exactly where the photo is, versioned and consented as an
/// edit of it, redacted for strip-location apps (exiftool judges), and carried by backup and
/// verify; a file whose name says it is not media is refused at its create.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct Sidecars {
    let editor = "org.example.Darkroom"
    let viewer = "org.example.Frame"
    let stripper = "org.example.Social"
    let other = "org.example.Stranger"

    func tool(_ program: String, _ args: [String], cwd: String? = nil) throws -> TestSupport.Output {
        try TestSupport.run(program, args, cwd: cwd)
    }

    func json(_ o: TestSupport.Output) throws -> Any { try JSONSerialization.jsonObject(with: Data(o.stdout.utf8)) }

    /// The sidecar versions `photogate versions ASSET --json` lists, every photo version's.
    func sidecarVersions(_ f: MountFixture, _ ref: String) throws -> [[String: Any]] {
        let versions = try #require(try json(try f.pg("versions", ref, "--json")) as? [[String: Any]])
        return versions.flatMap { ($0["sidecars"] as? [[String: Any]]) ?? [] }
    }

    /// exiftool's GPS and location tags of a file (none: the empty list).
    func location(_ path: String) throws -> [String] {
        let o = try tool("exiftool", ["-a", "-G1", "-s", "-GPS*", "-XMP-exif:GPS*", "-Location*", path])
        return o.stdout.split(separator: "\n").map(String.init).filter { $0.localizedCaseInsensitiveContains("gps") || $0.contains("Location") }
    }

    /// An XMP sidecar of a photo, written by exiftool from the photo's own metadata (its GPS too).
    func xmpSidecar(of photo: String, to path: String) throws -> [UInt8] {
        let o = try tool("exiftool", ["-q", "-o", path, photo])
        try #require(o.status == 0, "exiftool -o: \(o.stderr)")
        return try #require(readAll(path))
    }

    @Test func aSidecarIsKeptBesideItsPhotoAndShownExactlyWhereThePhotoIs() throws {
        let f = try MountFixture()
        let src = try f.importPhotos(["photo.jpg"], gps: true)
        let xmp = try xmpSidecar(of: src + "/photo.jpg", to: f.dir + "/photo.jpg.xmp")
        #expect(try !location(f.dir + "/photo.jpg.xmp").isEmpty, "the sidecar fixture holds no GPS")
        for app in [editor, viewer, stripper, other] { try f.pg("authorize", app, "--status", "limited") }
        try f.pg("grant", editor, "photo.jpg")
        try f.pg("grant", editor, "--edit", "photo.jpg")
        try f.pg("grant", viewer, "photo.jpg")
        try f.pg("grant", stripper, "--strip-location", "photo.jpg")
        let mE = try f.mount(editor), mV = try f.mount(viewer), mS = try f.mount(stripper), mO = try f.mount(other)

        // cp, the photo's edit consent given: kept beside it (before: EINVAL at the close).
        var o = try tool("cp", [f.dir + "/photo.jpg.xmp", mE + "/"])
        #expect(o.status == 0, "cp: \(o.stderr)")
        #expect(listing(mE).contains("photo.jpg.xmp"), "\(listing(mE))")
        #expect(readAll(mE + "/photo.jpg.xmp") == xmp)

        // Another app that sees the photo sees its sidecar, read-only without consent.
        #expect(eventually { listing(mV).contains("photo.jpg.xmp") }, "\(listing(mV))")
        #expect(readAll(mV + "/photo.jpg.xmp") == xmp)
        var st = stat()
        #expect(stat(mV + "/photo.jpg.xmp", &st) == 0 && st.st_mode & 0o777 == 0o444)
        // Writing it is an edit of the person's photo: refused at the create without consent
        // (EACCES, and an edit request for the person), as an edit's open is.
        try TestMedia.write(Array("<x:xmpmeta xmlns:x='adobe:ns:meta/'/>".utf8), to: f.dir + "/other.xmp")
        o = try tool("cp", [f.dir + "/other.xmp", mV + "/photo.jpg.xmp"])
        #expect(o.status != 0 && o.stderr.contains("Permission denied"), "cp: \(o.status) \(o.stderr)")
        #expect(openErrno(mV + "/photo.jpg.xmp", O_WRONLY | O_TRUNC) == EACCES)
        #expect(readAll(mE + "/photo.jpg.xmp") == xmp, "a write without consent changed the sidecar")
        let requests = try #require(try json(try f.pg("requests", "--json")) as? [[String: Any]])
        #expect(requests.contains { $0["app"] as? String == viewer && $0["kind"] as? String == "edit" }, "\(requests)")

        // An app that does not see the photo does not see its sidecar, and cannot tell it from
        // a name that has nothing: ENOENT for both.
        #expect(!listing(mO).contains("photo.jpg.xmp"))
        #expect(statErrno(mO + "/photo.jpg.xmp") == ENOENT && statErrno(mO + "/nothing.jpg.xmp") == ENOENT)

        // Strip-location: the app reads the XMP with every location property removed, the
        // packet still XMP (exiftool reads it), the size the same.
        #expect(eventually { listing(mS).contains("photo.jpg.xmp") })
        let stripped = try #require(readAll(mS + "/photo.jpg.xmp"))
        #expect(stripped.count == xmp.count)
        let left = try location(mS + "/photo.jpg.xmp")
        #expect(left.isEmpty, "GPS left for a strip-location app: \(left)")
        #expect(try !location(mV + "/photo.jpg.xmp").isEmpty, "the plain reader lost the GPS")
        o = try tool("exiftool", ["-s3", "-XMP-x:XMPToolkit", mS + "/photo.jpg.xmp"])
        #expect(o.status == 0 && !o.stdout.isEmpty, "the redacted sidecar is no longer XMP: \(o.stdout)\(o.stderr)")

        // The library: a sidecar version by the editor, of the original; explain names it.
        let versions = try sidecarVersions(f, "photo.jpg")
        #expect(versions.count == 1 && versions.first?["name"] as? String == "photo.jpg.xmp"
                && versions.first?["app"] as? String == editor && versions.first?["current"] as? Bool == true, "\(versions)")
        let explained = try #require(try json(try f.pg("explain", stripper, "photo.jpg", "--json")) as? [String: Any])
        let sidecars = explained["sidecars"] as? [[String: Any]] ?? []
        #expect(sidecars.first?["name"] as? String == "photo.jpg.xmp" && sidecars.first?["redaction"] as? String == "location removed", "\(explained)")
        // A new sidecar is an update of the photo in the history of every app that sees it.
        let changes = try f.pg("changes", viewer, "--since", "0").stdout
        #expect(changes.contains("updated") && changes.contains("photo.jpg"), "\(changes)")
        for m in [mE, mV, mS, mO] { try f.unmount(m) }
        try verifyClean(f)
    }

    /// An app shown a sidecar with its location removed learns nothing of the stored sidecar
    /// from a save past its daily limit: writing back the stored bytes (the true location
    /// guessed) and writing a wrong guess are both refused (EDQUOT). Were "the same content as the
    /// stored sidecar" answered before the limit is asked, the right guess alone would save.
    @Test func aStripLocationAppAtItsDailyLimitCannotTestAGuessedLocation() throws {
        let f = try MountFixture()
        f.extraEnvironment["PHOTOGATE_DAILY_LIMIT_MB"] = "1"
        let src = try f.importPhotos(["photo.jpg"], gps: true)
        let xmp = try xmpSidecar(of: src + "/photo.jpg", to: f.dir + "/photo.jpg.xmp")
        try #require(try !location(f.dir + "/photo.jpg.xmp").isEmpty, "the sidecar fixture holds no GPS")
        for app in [editor, stripper] { try f.pg("authorize", app, "--status", "limited") }
        try f.pg("grant", editor, "photo.jpg")
        try f.pg("grant", editor, "--edit", "photo.jpg")
        try f.pg("grant", stripper, "--strip-location", "photo.jpg")
        try f.pg("grant", stripper, "--edit", "photo.jpg")
        let mE = try f.mount(editor)
        defer { try? f.unmount(mE) }
        #expect(try tool("cp", [f.dir + "/photo.jpg.xmp", mE + "/"]).status == 0)
        try #require(try sidecarVersions(f, "photo.jpg").count == 1, "the editor's sidecar was not kept")
        let mS = try f.mount(stripper)
        defer { try? f.unmount(mS) }
        #expect(eventually { readAll(mS + "/photo.jpg.xmp").map { $0.count == xmp.count && $0 != xmp } == true },
                "the strip-location app does not read the sidecar redacted")
        // The app fills its day's room but for less than a sidecar.
        let head = try TestMedia.jpeg(tag: "filler")
        #expect(cpWrite(head + [UInt8](repeating: 0x5a, count: (1 << 20) - head.count - xmp.count / 2), to: mS + "/filler.jpg") == 0)
        var wrong = xmp
        if let i = wrong.firstIndex(where: { $0 >= UInt8(ascii: "1") && $0 <= UInt8(ascii: "8") }) { wrong[i] += 1 }
        #expect(cpWrite(xmp, to: mS + "/photo.jpg.xmp") == EDQUOT, "the stored sidecar's bytes were taken past the limit")
        #expect(cpWrite(wrong, to: mS + "/photo.jpg.xmp") == EDQUOT)
        // The same through a temp name renamed over it (rsync's and editors' way of saving).
        func renamedOver(_ bytes: [UInt8]) -> Int32 {
            let temp = mS + "/.photo.jpg.xmp.a1B2c3"
            guard cpWrite(bytes, to: temp) == 0 else { return -1 }
            return rename(temp, mS + "/photo.jpg.xmp") == 0 ? 0 : errno
        }
        #expect(renamedOver(xmp) == EDQUOT, "the stored sidecar's bytes, renamed over it, were taken past the limit")
        #expect(renamedOver(wrong) == EDQUOT)
        // What the app reads, renamed back over it, is no save: the stored sidecar keeps its location.
        let redacted = try #require(readAll(mS + "/photo.jpg.xmp"))
        #expect(renamedOver(redacted) == 0)
        #expect(readAll(mE + "/photo.jpg.xmp") == xmp, "the stored sidecar changed")
    }

    /// Its own photo's sidecar the app writes, rewrites and removes: each a version of it; the
    /// photo's name renamed carries the sidecar along.
    @Test func aSidecarIsVersionedAsAnEditOfItsPhoto() throws {
        let f = try MountFixture()
        try f.pg("authorize", editor, "--status", "limited")
        let m = try f.mount(editor)
        #expect(cpWrite(try TestMedia.jpeg(tag: "own"), to: m + "/own.jpg") == 0)
        let first = Array("<x:xmpmeta xmlns:x='adobe:ns:meta/'><!-- 1 --></x:xmpmeta>\n".utf8)
        let second = Array("<x:xmpmeta xmlns:x='adobe:ns:meta/'><!-- second --></x:xmpmeta>\n".utf8)
        #expect(cpWrite(first, to: m + "/own.jpg.xmp") == 0)
        #expect(cpWrite(first, to: m + "/own.jpg.xmp") == 0)    // the same bytes: no version
        #expect(cpWrite(second, to: m + "/own.jpg.xmp") == 0)
        #expect(readAll(m + "/own.jpg.xmp") == second)
        // RawTherapee's and Lightroom's forms: a `.pp3` after the whole name, an XMP replacing the extension.
        #expect(cpWrite(Array("[Version]\nAppVersion=5.9\n".utf8), to: m + "/own.jpg.pp3") == 0)
        #expect(cpWrite(first, to: m + "/own.xmp") == 0)
        #expect(Set(listing(m)).isSuperset(of: ["own.jpg", "own.jpg.xmp", "own.jpg.pp3", "own.xmp"]), "\(listing(m))")
        // exiftool edits it in place: a temp file renamed over it, the next version.
        let o = try tool("exiftool", ["-q", "-overwrite_original", "-XMP-dc:Title=edited", m + "/own.jpg.xmp"])
        #expect(o.status == 0, "exiftool: \(o.stdout)\(o.stderr)")
        #expect(try tool("exiftool", ["-s3", "-XMP-dc:Title", m + "/own.jpg.xmp"]).stdout.contains("edited"))
        #expect(unlink(m + "/own.jpg.xmp") == 0)
        #expect(statErrno(m + "/own.jpg.xmp") == ENOENT && !listing(m).contains("own.jpg.xmp"))
        let versions = try sidecarVersions(f, "own.jpg").filter { $0["name"] as? String == "own.jpg.xmp" }
        #expect(versions.map { $0["version"] as? Int } == [1, 2, 3, 4], "\(versions)")
        #expect(versions.map { $0["removed"] as? Bool } == [false, false, false, true], "\(versions)")
        // Its photo renamed: the sidecars follow its name.
        #expect(rename(m + "/own.jpg", m + "/kept.jpg") == 0)
        #expect(eventually { Set(listing(m)).isSuperset(of: ["kept.jpg", "kept.jpg.pp3", "kept.xmp"]) }, "\(listing(m))")
        #expect(readAll(m + "/kept.xmp") == first)
        try f.unmount(m)
        try verifyClean(f)
    }

    /// cp, rsync and rclone copy a card's `IMG_1.XMP` before `IMG_1.JPG` as often as after: the
    /// sidecar waits for its photo (its close returns 0) and is kept with it once written. One
    /// whose photo never comes is dropped at the unmount, and `refused` says so; a hidden photo
    /// is no different from none.
    @Test func aSidecarWaitsForItsPhoto() throws {
        let f = try MountFixture()
        try f.importPhotos(["hidden.jpg"])
        try f.pg("authorize", editor, "--status", "limited")
        let m = try f.mount(editor)
        let xmp = Array("<x:xmpmeta xmlns:x='adobe:ns:meta/'><!-- card --></x:xmpmeta>\n".utf8)
        #expect(cpWrite(xmp, to: m + "/IMG_0001.XMP") == 0)
        #expect(listing(m).contains("IMG_0001.XMP"))
        #expect(cpWrite(try TestMedia.jpeg(tag: "card1"), to: m + "/IMG_0001.JPG") == 0)
        #expect(eventually { (try? sidecarVersions(f, "IMG_0001.JPG").count) == 1 })
        #expect(readAll(m + "/IMG_0001.XMP") == xmp)
        // No photo of that name, and a photo the app cannot see: the same answers.
        #expect(cpWrite(xmp, to: m + "/lonely.jpg.xmp") == 0)
        #expect(cpWrite(xmp, to: m + "/hidden.jpg.xmp") == 0)
        #expect(listing(m).contains("lonely.jpg.xmp") && listing(m).contains("hidden.jpg.xmp"))
        try f.unmount(m)
        let refused = try f.pg("refused", editor).stdout
        for name in ["lonely.jpg.xmp", "hidden.jpg.xmp"] { #expect(refused.contains(name), "\(name): \(refused)") }
        #expect(try sidecarVersions(f, "hidden.jpg").isEmpty, "a hidden photo got a sidecar")
        try verifyClean(f)
    }

    /// A camera card: JPEGs with `.XMP` sidecars, a video with its `.THM`, and a `.txt`.
    func card(_ f: MountFixture) throws -> String {
        let card = f.dir + "/card-\(UUID().uuidString.prefix(6))"
        let dcim = card + "/DCIM/100CANON"
        try FileManager.default.createDirectory(atPath: dcim, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: card + "/MISC", withIntermediateDirectories: true)
        for n in ["IMG_0001", "IMG_0002"] {
            try TestMedia.write(try TestMedia.jpeg(tag: n + UUID().uuidString, gps: true), to: dcim + "/\(n).JPG")
            _ = try xmpSidecar(of: dcim + "/\(n).JPG", to: dcim + "/\(n).XMP")
        }
        try TestMedia.write(try TestMedia.mp4(), to: dcim + "/MVI_0003.MP4")
        try TestMedia.write(try TestMedia.jpeg(tag: "thumbnail" + UUID().uuidString), to: dcim + "/MVI_0003.THM")
        try TestMedia.write(Array("camera notes\n".utf8), to: card + "/MISC/readme.txt")
        return card
    }

    /// The card's two photos and video are the app's assets, each with its one sidecar, named
    /// after the photo's display name (a second app's copies have names of their own).
    func cardIsKept(_ f: MountFixture, owner: String) throws {
        let mine = try f.assetsJSON().filter { $0["owner"] as? String == owner }
        let names = mine.compactMap { $0["name"] as? String }.map { DisplayName.split($0) }
        #expect(names.map { $0.ext }.sorted() == [".JPG", ".JPG", ".MP4"], "\(mine)")
        for (stem, ext) in names {
            let expected = ext == ".MP4" ? ["MVI_0003"] : ["IMG_0001", "IMG_0002"]
            #expect(expected.contains { stem == $0 || stem.hasPrefix($0 + "-") }, "\(stem)\(ext)")
        }
        for a in mine {
            let (stem, ext) = DisplayName.split(a["name"] as? String ?? "")
            let v = try sidecarVersions(f, a["id"] as? String ?? "")
            #expect(v.count == 1 && v.first?["name"] as? String == stem + (ext == ".MP4" ? ".THM" : ".XMP"), "\(stem)\(ext): \(v)")
        }
    }

    /// rclone copies a card (before: exit 1 after retrying all 3 times, the `.XMP` and `.THM`
    /// refused at their close). With the card's `.txt` filtered out it exits 0, photos and
    /// sidecars kept, and again without duplicates. An add-only app's copy keeps the sidecars
    /// too; rsync's temp-then-rename flow as well.
    @Test func rcloneAndRsyncCopyACameraCardWithItsSidecars() throws {
        let f = try MountFixture()
        let card = try card(f)
        try f.pg("authorize", editor, "--status", "limited")
        let m = try f.mount(editor)
        var o = try tool("rclone", ["copy", card, m + "/", "--ignore-case", "--exclude", "*.txt"])
        #expect(o.status == 0, "rclone: \(o.stderr)")
        try cardIsKept(f, owner: editor)
        #expect(Set(listing(m + "/DCIM/100CANON")) == ["IMG_0001.JPG", "IMG_0001.XMP", "IMG_0002.JPG", "IMG_0002.XMP", "MVI_0003.MP4", "MVI_0003.THM"],
                "\(listing(m + "/DCIM/100CANON"))")
        #expect(Set(listing(m)).isSuperset(of: ["IMG_0001.JPG", "IMG_0001.XMP", "MVI_0003.THM"]), "\(listing(m))")
        // Again: nothing new, nothing to fix.
        o = try tool("rclone", ["copy", card, m + "/", "--ignore-case", "--exclude", "*.txt", "-v"])
        #expect(o.status == 0 && !o.stderr.contains("Copied"), "rclone again: \(o.stderr)")
        try cardIsKept(f, owner: editor)
        try f.unmount(m)

        // An add-only app (a camera importer): the sidecars come with its photos.
        let camera = "org.example.Importer"
        try f.pg("authorize", camera, "--access", "add-only", "--status", "authorized")
        let a = try f.mount(camera, access: "add-only")
        let card2 = try self.card(f)
        o = try tool("rclone", ["copy", card2, a + "/", "--ignore-case", "--exclude", "*.txt"])
        #expect(o.status == 0, "rclone add-only: \(o.stderr)")
        try f.unmount(a)
        try cardIsKept(f, owner: camera)

        // rsync: temp names, then a rename into place, twice.
        let rsyncer = "org.example.Backup"
        try f.pg("authorize", rsyncer, "--status", "limited")
        let r = try f.mount(rsyncer)
        let card3 = try self.card(f)
        for _ in 0..<2 {
            o = try tool("rsync", ["-a", "--exclude", "*.txt", card3 + "/", r + "/"])
            #expect(o.status == 0, "rsync: \(o.stderr)")
        }
        try f.unmount(r)
        try cardIsKept(f, owner: rsyncer)
        try verifyClean(f)
    }

    /// rawtherapee-cli writes its processing profile beside what it exports (before: lost while
    /// exiting 0).
    @Test func rawtherapeeKeepsItsProcessingProfile() throws {
        try #require(TestSupport.which("rawtherapee-cli"), "rawtherapee-cli is not installed (scripts/setup installs it)")
        let f = try MountFixture()
        let work = f.dir + "/rt"
        try FileManager.default.createDirectory(atPath: work + "/local", withIntermediateDirectories: true)
        try TestMedia.write(try TestMedia.jpeg(tag: "raw"), to: work + "/in.jpg")
        try f.pg("authorize", editor, "--status", "limited")
        let m = try f.mount(editor)
        var o = try tool("rawtherapee-cli", ["-O", m + "/out.jpg", "-c", "in.jpg"], cwd: work)
        #expect(o.status == 0, "rawtherapee-cli: \(o.stdout)\(o.stderr)")
        o = try tool("rawtherapee-cli", ["-O", work + "/local/out.jpg", "-c", "in.jpg"], cwd: work)
        #expect(o.status == 0, "rawtherapee-cli (local): \(o.stdout)\(o.stderr)")
        let profile = try #require(readAll(m + "/out.jpg.pp3"), "the .pp3 is not beside out.jpg: \(listing(m))")
        #expect(String(decoding: profile.prefix(9), as: UTF8.self) == "[Version]")
        #expect(profile == readAll(work + "/local/out.jpg.pp3"))
        let v = try sidecarVersions(f, "out.jpg")
        #expect(v.count == 1 && v.first?["name"] as? String == "out.jpg.pp3", "\(v)")
        try f.unmount(m)
        try verifyClean(f)
    }

    /// `photogate backup` copies every sidecar version's file, the backup verifies and lists them;
    /// `verify` hashes them, and a damaged one is reported.
    @Test func backupAndVerifyCarrySidecars() throws {
        let f = try MountFixture()
        try f.pg("authorize", editor, "--status", "limited")
        let m = try f.mount(editor)
        #expect(cpWrite(try TestMedia.jpeg(tag: "b"), to: m + "/b.jpg") == 0)
        let xmp = Array("<x:xmpmeta xmlns:x='adobe:ns:meta/'><!-- kept --></x:xmpmeta>\n".utf8)
        #expect(cpWrite(Array("<x:xmpmeta xmlns:x='adobe:ns:meta/'/>\n".utf8), to: m + "/b.jpg.xmp") == 0)
        #expect(cpWrite(xmp, to: m + "/b.jpg.xmp") == 0)
        try f.unmount(m)
        let dest = f.dir + "/backup"
        try f.pg("backup", dest)
        let lib = try Library.open(at: LibraryPaths(root: f.library))
        let stored = try lib.sidecarVersions("b.jpg").compactMap(\.storePath)
        #expect(stored.count == 2)
        for rel in stored { #expect(readAll(TestSupport.storeFolder(of: dest) + "/" + rel) == readAll(TestSupport.storeFolder(of: f.library) + "/" + rel), "\(rel) not in the backup") }
        var o = try TestSupport.run(TestSupport.photogateBinary, ["verify"], environment: f.env.merging(["PHOTOGATE_LIBRARY": dest]) { $1 })
        #expect(o.status == 0, "verify of the backup: \(o.stdout)\(o.stderr)")
        o = try TestSupport.run(TestSupport.photogateBinary, ["versions", "b.jpg", "--json"], environment: f.env.merging(["PHOTOGATE_LIBRARY": dest]) { $1 })
        #expect(o.stdout.contains("b.jpg.xmp"), "\(o.stdout)")
        // A sidecar's stored file damaged in place: verify hashes it and says so.
        let current = try #require(stored.last)
        var bytes = try #require(readAll(TestSupport.storeFolder(of: f.library) + "/" + current))
        bytes[bytes.count - 2] ^= 0x20
        try TestMedia.write(bytes, to: TestSupport.storeFolder(of: f.library) + "/" + current)
        o = try f.pgStatus("verify")
        #expect(o.status == 76 && o.stdout.contains("damaged") && o.stdout.contains("sidecar"), "verify: \(o.status) \(o.stdout)")
    }

    /// A name that says the file is not media is refused at its create (EPERM), before any byte
    /// is sent (before: at its close, EINVAL, after the whole file was written): cp says so and
    /// goes on, `refused` lists it; rclone fails that file alone and exits 1 (`--exclude` leaves
    /// it out, and then it exits 0: see rcloneAndRsyncCopyACameraCardWithItsSidecars).
    @Test func aNameThatSaysNotMediaIsRefusedAtItsCreate() throws {
        let f = try MountFixture()
        try f.pg("authorize", editor, "--status", "limited")
        let m = try f.mount(editor)
        try TestMedia.write(Array("notes\n".utf8), to: f.dir + "/notes.txt")
        #expect(openErrno(m + "/notes.txt", O_WRONLY | O_CREAT | O_TRUNC) == EPERM)
        #expect(openErrno(m + "/.notes.txt.a1B2c3", O_WRONLY | O_CREAT | O_EXCL) == EPERM)   // rsync's temp name for it
        var o = try tool("cp", [f.dir + "/notes.txt", m + "/"])
        #expect(o.status != 0 && o.stderr.contains("Operation not permitted"), "cp: \(o.status) \(o.stderr)")
        #expect(!listing(m).contains("notes.txt"))
        #expect(try f.pg("refused", editor).stdout.contains("notes.txt"))
        // rclone: only the .txt fails, at its open; every other file of the card is kept.
        let card = try card(f)
        o = try tool("rclone", ["copy", card, m + "/", "--retries", "1"])
        #expect(o.status == 1, "rclone with the .txt: \(o.status)")
        let errors = o.stderr.split(separator: "\n").filter { $0.contains("ERROR") }
        #expect(!errors.isEmpty && errors.allSatisfy { $0.contains("readme.txt") && $0.contains("operation not permitted") }, "\(errors)")
        try f.unmount(m)
        try cardIsKept(f, owner: editor)
        try verifyClean(f)
    }
}
