import Foundation
import GrantStore
import PhotoLibrary
import Testing
import TestSupport

/// The CLI of edits (issue 15): grant/revoke --edit, options --edit-any, requests, explain,
/// versions and revert. Versions are saved in process, as a mount's close does.
@Suite(.serialized) struct CLIEdits {
    func library(_ c: CLI) throws -> Library { try Library.open(at: LibraryPaths(root: c.library)) }

    func save(_ lib: Library, _ rowID: Int64, _ app: String, _ bytes: [UInt8]) throws -> Asset {
        let writer = try StoreWriter(library: lib, purpose: "cli-edit")
        let (_, path, fd) = try writer.makeTemp()
        defer { close(fd) }
        _ = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        #expect(fsync(fd) == 0)
        return try lib.commitVersion(rowID: rowID, app: AppID(app)!, tempPath: path, fd: fd).asset
    }

    func asset(_ c: CLI, _ name: String) throws -> [String: Any] {
        let list = try #require(try c.json("assets") as? [[String: Any]])
        return try #require(list.first { $0["name"] as? String == name })
    }

    @Test func consentOptionsRequestsAndExplain() throws {
        let c = try CLI()
        try c.ok("import", try c.photos(["a.jpg", "b.jpg"]))
        try c.ok("import", try c.photos(["s.jpg"]), "--shared", "Family")
        try c.ok("authorize", "org.example.Editor", "--access", "read-write", "--status", "authorized")
        func decision(_ name: String) throws -> String? {
            let e = try #require(try c.json("explain", "org.example.Editor", name) as? [String: Any])
            return (e["edit"] as? [String: Any])?["decision"] as? String
        }
        #expect(try decision("a.jpg") == "needs-consent")
        #expect(try decision("s.jpg") == "never")
        #expect(try c.run("explain", "org.example.Editor", "a.jpg").stdout.contains("edit: needs-consent ("))
        #expect(try decision("a.jpg") == "needs-consent")

        // The mount records edit requests; requests lists them with the asset.
        let lib = try library(c)
        let a = try #require(try lib.resolve(["a.jpg"]).first), b = try #require(try lib.resolve(["b.jpg"]).first)
        try lib.recordEditRequest(app: AppID("org.example.Editor")!, rowID: a.rowID)
        try lib.recordEditRequest(app: AppID("org.example.Editor")!, rowID: b.rowID)
        let reqs = try #require(try c.json("requests") as? [[String: Any]])
        #expect(reqs.map { $0["kind"] as? String } == ["edit", "edit"])
        #expect(reqs.map { ($0["asset"] as? [String: Any])?["id"] as? String } == [a.id, b.id])
        #expect(try c.ok("requests").stdout.contains("\(a.id) a.jpg"))

        // grant --edit answers one; the decision follows.
        #expect(try c.ok("grant", "org.example.Editor", "--edit", "a.jpg").stdout.contains("may edit 1"))
        #expect(try decision("a.jpg") == "allowed")
        let left = try #require(try c.json("requests") as? [[String: Any]])
        #expect(left.map { ($0["asset"] as? [String: Any])?["name"] as? String } == ["b.jpg"])
        #expect(try c.ok("revoke", "org.example.Editor", "--edit", "a.jpg").stdout.contains("may no longer edit 1"))
        #expect(try decision("a.jpg") == "needs-consent")

        // Usage and rule errors.
        #expect(try c.run("grant", "org.example.Editor", "--edit", "s.jpg").status == Code.conflict)
        #expect(try c.run("grant", "org.example.Editor", "--edit", "--picked", "a.jpg").status == Code.usage)
        #expect(try c.run("grant", "org.example.Editor", "--edit", "nope.jpg").status == Code.notFound)
        #expect(try c.run("revoke", "org.example.Editor", "--edit", "--all").status == Code.usage)

        // edit-any: shown, stored, answers the rest.
        let o = try #require(try c.json("options", "org.example.Editor", "--edit-any", "on") as? [String: Any])
        #expect(o["editAny"] as? Bool == true)
        #expect(try c.ok("options", "org.example.Editor").stdout.contains("edit-any: on"))
        let st = try #require(try c.json("status", "org.example.Editor") as? [String: Any])
        #expect((st["options"] as? [String: Any])?["editAny"] as? Bool == true)
        #expect(try decision("b.jpg") == "allowed")
        #expect((try c.json("requests") as? [[String: Any]])?.isEmpty == true)
        #expect(try c.run("options", "org.example.Editor", "--edit-any", "maybe").status == Code.usage)
    }

    @Test func versionsAndRevert() throws {
        let c = try CLI()
        try c.ok("import", try c.photos(["a.jpg"]))
        let original = try asset(c, "a.jpg")
        // Never edited: the original alone.
        var vs = try #require(try c.json("versions", "a.jpg") as? [[String: Any]])
        #expect(vs.count == 1)
        #expect(vs[0]["version"] as? Int == 0 && vs[0]["original"] as? Bool == true && vs[0]["current"] as? Bool == true)
        #expect(try c.ok("revert", "a.jpg").stdout.contains("nothing changed"))

        let lib = try library(c)
        let a = try #require(try lib.resolve(["a.jpg"]).first)
        let edited = try save(lib, a.rowID, "org.example.Editor", try TestMedia.jpeg(tag: "cli-edit", gps: true))
        vs = try #require(try c.json("versions", a.id) as? [[String: Any]])
        #expect(vs.map { $0["version"] as? Int } == [0, 1])
        #expect(vs.map { $0["current"] as? Bool } == [false, true])
        #expect(vs[1]["app"] as? String == "org.example.Editor")
        #expect(vs[0]["app"] is NSNull)
        #expect(vs[1]["hash"] as? String == edited.contentHash && vs[0]["hash"] as? String == original["hash"] as? String)
        for key in ["version", "original", "current", "app", "date", "size", "type", "hash", "captureDate", "hasLocation"] {
            #expect(vs[1][key] != nil, "missing \(key)")
        }
        let table = try c.ok("versions", "a.jpg").stdout
        #expect(table.contains("0 original") && table.contains("org.example.Editor"))
        var now = try asset(c, "a.jpg")
        #expect(now["hash"] as? String == edited.contentHash && now["hasLocation"] as? Bool == true)
        #expect(now["id"] as? String == original["id"] as? String)

        // Revert: the original's facts again; the edit stays listed.
        let r = try #require(try c.json("revert", "a.jpg") as? [String: Any])
        #expect(r["changed"] as? Bool == true && r["version"] as? Int == 0)
        now = try asset(c, "a.jpg")
        for key in ["hash", "size", "hasLocation", "captureDate", "type", "id", "name"] {
            #expect(String(describing: now[key]!) == String(describing: original[key]!), "\(key)")
        }
        vs = try #require(try c.json("versions", "a.jpg") as? [[String: Any]])
        #expect(vs.map { $0["current"] as? Bool } == [true, false])
        // The history of an app that sees it records the change.
        try c.ok("authorize", "org.example.Viewer", "--access", "read-write", "--status", "authorized")
        try c.ok("revert", "a.jpg", "--to", "1")
        let h = try #require(try c.json("changes", "org.example.Viewer") as? [String: Any])
        let kinds = (h["changes"] as? [[String: Any]] ?? []).compactMap { $0["kind"] as? String }
        #expect(kinds.contains("updated"))
        #expect(try c.run("revert", "a.jpg", "--to", "7").status == Code.usage)
        #expect(try c.run("revert", "nope.jpg").status == Code.notFound)
        #expect(try c.run("versions", "nope.jpg").status == Code.notFound)
        for cmd in ["versions", "revert"] {
            #expect(try c.run("help", cmd).stdout.contains("Example"), "help \(cmd) has no example")
        }
    }
}
