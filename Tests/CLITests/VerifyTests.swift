import Foundation
import GrantStore
import PhotoLibrary
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 13: `photogate verify [--json] [--repair]`.
@Suite(.serialized) struct CLIVerify {
    static let damaged: Int32 = 76

    /// A library with three imported photos; returns the CLI and the assets' JSON.
    func library() throws -> (CLI, [[String: Any]]) {
        let c = try CLI()
        try c.ok("import", try c.photos(["a.jpg", "b.jpg", "c.jpg"]))
        let assets = try #require(try c.json("assets") as? [[String: Any]])
        return (c, assets)
    }

    func storePath(_ c: CLI, _ asset: [String: Any]) throws -> String {
        let id = try #require(asset["id"] as? String)
        let dir = TestSupport.storeFolder(of: c.library) + "/" + id.prefix(2)
        let name = try #require(try FileManager.default.contentsOfDirectory(atPath: dir).first { $0.hasPrefix(id) })
        return dir + "/" + name
    }

    func verify(_ c: CLI, _ extra: String...) throws -> (TestSupport.Output, [String: Any]) {
        let o = try c.run(["verify", "--json"] + extra)
        let obj = try #require(try JSONSerialization.jsonObject(with: Data(o.stdout.utf8)) as? [String: Any], "\(o.stdout) \(o.stderr)")
        return (o, obj)
    }

    func problems(_ report: [String: Any], _ kind: String) -> [[String: Any]] {
        ((report["problems"] as? [[String: Any]]) ?? []).filter { $0["kind"] as? String == kind }
    }

    /// Every file under the library except the database's own, with its content's hash: what
    /// "nothing changed" compares.
    func snapshot(_ c: CLI) -> [String: String] {
        var out: [String: String] = [:]
        // The library's folder, and the shared folder of a linked library (its store and temps).
        let shared = TestSupport.sharedFolder(of: c.library)
        let roots = shared == c.library ? [c.library] : [c.library, shared]
        for root in roots {
        for rel in (try? FileManager.default.subpathsOfDirectory(atPath: root)) ?? [] where !rel.hasPrefix("photogate.sqlite") && rel != "run/bell" {
            let path = root + "/" + rel
            var st = stat()
            guard lstat(path, &st) == 0 else { continue }
            if (st.st_mode & S_IFMT) == S_IFDIR { out[rel] = "dir"; continue }
            let bytes = FileManager.default.contents(atPath: path).map { [UInt8]($0) } ?? []
            out[rel] = hexString(SHA256.hash(bytes))
        }
        }
        return out
    }

    func field(_ p: [String: Any]?, _ key: String) -> String { (p?[key] as? String) ?? "" }

    func flipByte(_ path: String, at offset: off_t = 20) {
        let fd = open(path, O_RDWR)
        var b: UInt8 = 0
        _ = pread(fd, &b, 1, offset)
        b ^= 0xff
        _ = pwrite(fd, &b, 1, offset)
        close(fd)
    }

    /// A temp folder left by a process that died mid-import: its lock file is held by nobody.
    func deadTempFolder(_ c: CLI, holding bytes: [UInt8]) throws -> String {
        let dir = TestSupport.sharedFolder(of: c.library) + "/tmp/import-999999-dead00"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: dir + "/.lock", contents: nil)
        try TestMedia.write(bytes, to: dir + "/0123456789abcdef.jpg")
        return dir
    }

    @Test func aCleanLibraryVerifies() throws {
        let (c, _) = try library()
        try c.ok("import", "--reference", try c.photos(["ref.jpg"]))
        let (o, r) = try verify(c)
        #expect(o.status == 0, "\(o.stderr)")
        #expect(r["ok"] as? Bool == true)
        #expect(r["assets"] as? Int == 4)
        #expect(r["filesHashed"] as? Int == 4)
        #expect((r["problems"] as? [Any])?.isEmpty == true)
        for key in ["ok", "repair", "assets", "filesHashed", "bytesHashed", "seconds", "lostAndFound", "counts", "problems"] {
            #expect(r[key] != nil, "missing \(key)")
        }
        let text = try c.run("verify")
        #expect(text.status == 0)
        #expect(text.stdout.contains("checked 4 assets") && text.stdout.contains("no problems"), "\(text.stdout)")
        #expect(text.stderr.isEmpty, "no progress without a terminal: \(text.stderr)")
    }

    @Test func aFlippedByteIsReportedAndNothingChanges() throws {
        let (c, assets) = try library()
        let path = try storePath(c, assets[0])
        flipByte(path)
        let before = snapshot(c)
        let (o, r) = try verify(c)
        #expect(o.status == Self.damaged)
        let d = problems(r, "damaged")
        #expect(d.count == 1)
        #expect(d.first?["id"] as? String == assets[0]["id"] as? String)
        #expect(d.first?["repaired"] as? Bool == false)
        #expect(field(d.first, "action").contains("cannot restore"), "\(d)")
        #expect(snapshot(c) == before)
        // Text: one line naming the problem, exit 70 too.
        let text = try c.run("verify")
        #expect(text.status == Self.damaged)
        // Piped, the problem is a tab-separated row (issue 16); this parsed the old padding.
        #expect(text.stdout.contains("damaged\tstore/"), "\(text.stdout)")
    }

    @Test func aDeletedStoreFileIsReportedAndNothingChanges() throws {
        let (c, assets) = try library()
        #expect(unlink(try storePath(c, assets[1])) == 0)
        let before = snapshot(c)
        let (o, r) = try verify(c)
        #expect(o.status == Self.damaged)
        #expect(problems(r, "missing").map { $0["id"] as? String } == [assets[1]["id"] as? String])
        #expect(snapshot(c) == before)
    }

    @Test func anOrphanStoreFileIsReportedAndNothingChanges() throws {
        let (c, _) = try library()
        try FileManager.default.createDirectory(atPath: TestSupport.storeFolder(of: c.library) + "/zz", withIntermediateDirectories: true)
        try TestMedia.write(TestMedia.jpeg(tag: "nobody's"), to: TestSupport.storeFolder(of: c.library) + "/zz/abababababababab.jpg")
        let before = snapshot(c)
        let (o, r) = try verify(c)
        #expect(o.status == Self.damaged)
        #expect(problems(r, "orphan").map { $0["path"] as? String } == ["store/zz/abababababababab.jpg"])
        #expect(snapshot(c) == before)
    }

    @Test func aDeadTempFolderIsReportedAndNothingChanges() throws {
        let (c, _) = try library()
        _ = try deadTempFolder(c, holding: Array(try TestMedia.jpeg(tag: "partial").prefix(100)))
        let before = snapshot(c)
        let (o, r) = try verify(c)
        #expect(o.status == Self.damaged)
        let d = problems(r, "dead-temp")
        #expect(d.map { $0["path"] as? String } == ["tmp/import-999999-dead00"])
        #expect(field(d.first, "detail").contains("1 incomplete"), "\(d)")
        #expect(snapshot(c) == before)
        // A live process's temp folder (its lock held) is not a problem.
        let live = TestSupport.sharedFolder(of: c.library) + "/tmp/import-\(getpid())-live00"
        try FileManager.default.createDirectory(atPath: live, withIntermediateDirectories: true)
        let fd = open(live + "/.lock", O_RDWR | O_CREAT, 0o600)
        #expect(flock(fd, LOCK_EX) == 0)
        defer { close(fd) }
        let (_, again) = try verify(c)
        #expect(problems(again, "dead-temp").count == 1)
    }

    @Test func anEditedOrVanishedReferencedOriginalIsReported() throws {
        let c = try CLI()
        let src = try c.photos(["keep.jpg", "edit.jpg", "gone.jpg"])
        try c.ok("import", "--reference", src)
        flipByte(src + "/edit.jpg", at: 30)
        #expect(unlink(src + "/gone.jpg") == 0)
        let (o, r) = try verify(c)
        #expect(o.status == Self.damaged)
        #expect(problems(r, "reference-changed").map { $0["name"] as? String } == ["edit.jpg"])
        #expect(problems(r, "reference-missing").map { $0["name"] as? String } == ["gone.jpg"])
        #expect(problems(r, "reference-changed").first?["path"] as? String == src + "/edit.jpg")
        // Repair never writes outside the library: still reported, still not ok.
        let (ro, rr) = try verify(c, "--repair")
        #expect(ro.status == Self.damaged)
        #expect(problems(rr, "reference-changed").first?["repaired"] as? Bool == false)
        #expect(FileManager.default.fileExists(atPath: src + "/edit.jpg"))
    }

    @Test func repairFixesWhatItDocumentsAndASecondVerifyIsClean() throws {
        let (c, assets) = try library()
        let photos = try assets.map { try storePath(c, $0) }
        let good0 = try #require(FileManager.default.contents(atPath: photos[0]))
        let good1 = try #require(FileManager.default.contents(atPath: photos[1]))
        // a: a flipped byte, its good bytes still in the store under another name (an orphan).
        try good0.write(to: URL(fileURLWithPath: (photos[0] as NSString).deletingLastPathComponent + "/copy-of-a.jpg"))
        flipByte(photos[0])
        // b: deleted, its bytes left in a dead temp folder (an interrupted second import).
        #expect(unlink(photos[1]) == 0)
        let dead = try deadTempFolder(c, holding: [UInt8](good1))
        // An orphan nobody needs, a stray file in tmp/, and a store file others could read.
        try TestMedia.write(TestMedia.jpeg(tag: "stray"), to: TestSupport.storeFolder(of: c.library) + "/orphan.jpg")
        try TestMedia.write([1, 2, 3], to: TestSupport.sharedFolder(of: c.library) + "/tmp/stray")
        chmod(photos[2], 0o644)
        let (o, r) = try verify(c)
        #expect(o.status == Self.damaged)
        for k in ["damaged", "missing", "orphan", "dead-temp", "stray-temp", "too-open"] { #expect(!problems(r, k).isEmpty, "\(k) not reported") }

        let (ro, rr) = try verify(c, "--repair")
        #expect(ro.status == 0, "\(ro.stdout) \(ro.stderr)")
        #expect(rr["ok"] as? Bool == true)
        #expect(((rr["problems"] as? [[String: Any]]) ?? []).allSatisfy { $0["repaired"] as? Bool == true }, "\(rr)")
        // The originals are back, byte for byte; the dead folder is gone; nothing was deleted that
        // held an asset's bytes; the rest is in lost+found/.
        #expect(FileManager.default.contents(atPath: photos[0]) == good0)
        #expect(FileManager.default.contents(atPath: photos[1]) == good1)
        #expect(!FileManager.default.fileExists(atPath: dead))
        let lost = (try? FileManager.default.subpathsOfDirectory(atPath: TestSupport.sharedFolder(of: c.library) + "/lost+found")) ?? []
        #expect(lost.contains { $0.hasSuffix("store/orphan.jpg") }, "\(lost)")
        #expect(lost.contains { $0.hasSuffix("tmp/stray") }, "\(lost)")
        #expect(lost.contains { $0.hasSuffix((photos[0] as NSString).lastPathComponent) }, "the damaged copy: \(lost)")
        #expect(rr["lostAndFound"] as? Int == 3)
        var st = stat()
        #expect(stat(photos[2], &st) == 0 && st.st_mode & 0o777 == 0o600)

        let (o2, r2) = try verify(c)
        #expect(o2.status == 0, "\(o2.stdout)")
        #expect((r2["problems"] as? [Any])?.isEmpty == true, "\(r2)")
        #expect(try c.json("assets") as? [[String: Any]] != nil)
    }

    @Test func repairLeavesADamagedAssetWithoutACopyReported() throws {
        let (c, assets) = try library()
        let path = try storePath(c, assets[2])
        flipByte(path)
        let damagedBytes = FileManager.default.contents(atPath: path)
        let (o, r) = try verify(c, "--repair")
        #expect(o.status == Self.damaged)
        let d = problems(r, "damaged")
        #expect(d.first?["repaired"] as? Bool == false)
        #expect(field(d.first, "action").contains("stays damaged"), "\(d)")
        // Left where it is (the asset keeps serving what it has), never deleted.
        #expect(FileManager.default.contents(atPath: path) == damagedBytes)
    }

    @Test func repairRestoresFromLostAndFound() throws {
        let c = try CLI()
        let src = try c.photos(["same.jpg"])
        try c.ok("import", src)
        let assets = try #require(try c.json("assets") as? [[String: Any]])
        let path = try storePath(c, assets[0])
        let good = FileManager.default.contents(atPath: path)
        #expect(unlink(path) == 0)
        // The only copy left is in lost+found/ (kept there by an earlier repair, say).
        let lost = TestSupport.sharedFolder(of: c.library) + "/lost+found/earlier"
        try FileManager.default.createDirectory(atPath: lost, withIntermediateDirectories: true)
        try good?.write(to: URL(fileURLWithPath: lost + "/kept.jpg"))
        let (o, r) = try verify(c, "--repair")
        #expect(o.status == 0, "\(r)")
        #expect(field(problems(r, "missing").first, "action").contains("lost+found/earlier/kept.jpg"))
        #expect(FileManager.default.contents(atPath: path) == good)
    }

    @Test func progressGoesToATerminalOnly() throws {
        guard TestSupport.which("script") else { print("progressGoesToATerminalOnly: SKIPPED — no script(1)"); return }
        let (c, _) = try library()
        // script(1) gives photogate a terminal for stdout and stderr alike.
        let o = try TestSupport.run("script", ["-qec", "'\(TestSupport.photogateBinary)' verify --library '\(c.library)'", "/dev/null"])
        #expect(o.status == 0, "\(o.stdout)")
        #expect(o.stdout.contains("verifying 3/3 files"), "\(o.stdout)")
        #expect(o.stdout.contains("\u{1B}[K"), "the progress line is cleared")
        let plain = try c.run("verify")
        #expect(!plain.stderr.contains("verifying") && !plain.stdout.contains("verifying"))
    }

    @Test func verifyHelpHasAnExampleAndExitCode() throws {
        let c = try CLI(initialize: false)
        let o = try c.run("help", "verify")
        #expect(o.status == 0)
        #expect(o.stdout.contains("Example"))
        #expect(o.stdout.contains("76"))
        #expect(try c.run("verify").status == Code.missing)
    }

    /// The red team's row: the bytes of an asset that verifies, under a store path that leads out
    /// of the store ("../../escaped.jpg"). Repair restored "missing" files by copying a verified
    /// original there, i.e. wrote chosen bytes at a chosen path: now the asset is reported
    /// missing (its store path is not one photogate makes), never repaired, and nothing is written.
    @Test func aStorePathOutOfTheStoreIsReportedAndNeverRepaired() throws {
        let (c, assets) = try library()
        let a = assets[0]
        let size = try #require(a["size"] as? Int), hash = try #require(a["hash"] as? String)
        #expect(hash.allSatisfy { $0.isLetter || $0.isNumber || $0 == ":" })
        let escaped = c.dir + "/escaped.jpg"   // library/store/../../escaped.jpg
        try c.sql("""
            INSERT INTO assets (rowid, id, display_name, media_kind, media_class, byte_size, capture_date, added_at, has_location,
                                content_hash, store_path)
            VALUES ((SELECT COALESCE(max(rowid), 0) + 1 FROM assets), 'bbbbbbbbbbbbbbbb', 'b-copy.jpg', 'jpeg', 'photo', \(size), 0, 0, 0, '\(hash)', '../../escaped.jpg')
            """)
        for repair in [false, true] {
            let (o, report) = repair ? try verify(c, "--repair") : try verify(c)
            #expect(o.status == Self.damaged, "\(o.stderr)")
            #expect(!FileManager.default.fileExists(atPath: escaped), "verify (repair: \(repair)) wrote outside the library")
            let p = problems(report, "missing").first { $0["id"] as? String == "bbbbbbbbbbbbbbbb" }
            #expect(field(p, "detail").contains("'../../escaped.jpg'") && field(p, "detail").contains("not a path photogate makes"), "\(report)")
            #expect(p?["repaired"] as? Bool == false)
            #expect(field(p, "path") == "")
            #expect((report["problems"] as? [[String: Any]])?.count == 1, "\(report)")
        }
    }

}
