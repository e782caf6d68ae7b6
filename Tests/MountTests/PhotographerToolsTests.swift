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
