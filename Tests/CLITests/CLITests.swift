import Foundation
import Testing
import TestSupport

/// Runs the built `photogate` binary against a temp library and checks stdout, --json, stderr
/// and exit codes.
final class CLI: @unchecked Sendable {
    let dir: String
    let library: String
    init(initialize: Bool = true) throws {
        dir = TestSupport.tempDir("cli")
        library = dir + "/library"
        if initialize { try ok(["init", library] + TestSupport.initArguments(for: library)) }
    }
    deinit { TestSupport.remove(dir) }

    @discardableResult
    func run(_ args: String..., stdin: String? = nil, env: [String: String] = [:]) throws -> TestSupport.Output {
        try run(args, stdin: stdin, env: env)
    }

    @discardableResult
    func run(_ args: [String], stdin: String? = nil, env: [String: String] = [:]) throws -> TestSupport.Output {
        var e = ["PHOTOGATE_LIBRARY": library]
        for (k, v) in env { e[k] = v }
        return try TestSupport.run(TestSupport.photogateBinary, args, stdin: stdin, environment: e)
    }

    @discardableResult
    func ok(_ args: String..., stdin: String? = nil) throws -> TestSupport.Output {
        try ok(args, stdin: stdin)
    }

    @discardableResult
    func ok(_ args: [String], stdin: String? = nil) throws -> TestSupport.Output {
        let o = try run(args, stdin: stdin)
        #expect(o.status == 0, "photogate \(args.joined(separator: " ")) -> \(o.status): \(o.stderr)")
        return o
    }

    func json(_ args: String...) throws -> Any {
        let o = try run(args + ["--json"])
        #expect(o.status == 0, "\(o.stderr)")
        return try JSONSerialization.jsonObject(with: Data(o.stdout.utf8))
    }

    func photos(_ names: [String], gps: Bool = false) throws -> String {
        let src = dir + "/src-\(UUID().uuidString.prefix(6))"
        try FileManager.default.createDirectory(atPath: src, withIntermediateDirectories: true)
        for n in names { try TestMedia.write(TestMedia.jpeg(tag: n + UUID().uuidString, gps: gps), to: src + "/" + n) }
        return src
    }
}

enum Code {
    static let usage: Int32 = 64, badInput: Int32 = 65, notFound: Int32 = 66, missing: Int32 = 67, conflict: Int32 = 68, tooNew: Int32 = 70,
        notOwner: Int32 = 74
}

@Suite(.serialized) struct CLIBasics {
    @Test func initCreatesAndRefusesTwice() throws {
        let c = try CLI()
        // Its catalog: an SQLite file, or a link to the server's (the PostgreSQL run).
        #expect(FileManager.default.fileExists(atPath: c.library + (TestSupport.onPostgres ? "/catalog.conf" : "/photogate.sqlite")))
        #expect(FileManager.default.fileExists(atPath: TestSupport.storeFolder(of: c.library)))
        let again = try c.run("init", c.library)
        #expect(again.status == Code.conflict)
        #expect(again.stderr.hasPrefix("photogate: error: "))
    }

    @Test func missingLibraryHasItsOwnExitCode() throws {
        let c = try CLI(initialize: false)
        let o = try c.run("assets")
        #expect(o.status == Code.missing)
        #expect(o.stderr.contains("no photogate library"))
        #expect(o.stdout.isEmpty)
    }

    @Test func libraryFlagAndXDGDefault() throws {
        let c = try CLI(initialize: false)
        let xdg = c.dir + "/xdg"
        let o = try TestSupport.run(TestSupport.photogateBinary, ["init"], environment: ["XDG_DATA_HOME": xdg, "PHOTOGATE_LIBRARY": ""])
        #expect(o.status == 0, "\(o.stderr)")
        #expect(FileManager.default.fileExists(atPath: xdg + "/photogate/photogate.sqlite"))
        let other = c.dir + "/other"
        try c.ok("init", "--library", other)
        #expect(try c.run("assets", "--library", other).status == 0)
    }

    @Test func exitCodesAreDocumented() throws {
        let c = try CLI(initialize: false)
        let o = try c.run("help", "exit-codes")
        #expect(o.status == 0)
        for code in ["64", "65", "66", "67", "68", "69", "70", "71", "72", "73", "74", "75", "76"] { #expect(o.stdout.contains(code), "\(code)") }
        // Issue 38: problems verify finds have a code of their own, not "written by a newer photogate".
        let lines = try c.run("exit-codes").stdout.split(separator: "\n")
        #expect(lines.first { $0.hasPrefix("70 ") }.map { !$0.contains("verify") } == true, "\(o.stdout)")
        #expect(lines.first { $0.hasPrefix("76 ") }?.contains("verify found a problem") == true, "\(o.stdout)")
    }

    /// Issue 38: a word that names no command is "no such command", not argument-parser's
    /// "2 unexpected arguments" (it read the words as arguments of the root command).
    @Test func anUnknownCommandIsNamed() throws {
        let c = try CLI()
        for (args, word) in [(["delet", "a.jpg", "b.jpg"], "delet"), (["frobnicate"], "frobnicate"), (["help", "frobnicate"], "frobnicate"),
                             (["frobnicate", "--json"], "frobnicate")] {
            let o = try c.run(args)
            #expect(o.status == Code.usage, "\(args)")
            #expect(o.stderr.hasPrefix("photogate: error: no such command: \(word)"), "\(args): \(o.stderr)")
            #expect(o.stderr.contains("photogate --help"), "\(args): \(o.stderr)")
            #expect(!o.stderr.contains("unexpected") && !o.stderr.contains("Unknown option"), "\(args): \(o.stderr)")
            #expect(o.stdout.isEmpty)
        }
        #expect(try c.run("grnat", "org.example.A", "x").stderr.contains("did you mean 'grant'?"))
        // Commands, help of a command, flags and the mount helper's form still parse as before.
        #expect(try c.run("help", "grant").status == 0)
        #expect(try c.run("--version").status == 0)
        #expect(try c.run("assets").status == 0)
        #expect(try c.run("--bogus").status == Code.usage)
    }

    @Test func everySubcommandHasHelpWithAnExample() throws {
        let c = try CLI(initialize: false)
        for cmd in ["init", "import", "assets", "albums", "apps", "authorize", "status", "grant", "revoke", "grants",
                    "options", "requests", "delete", "trash", "restore"] {
            let o = try c.run("help", cmd)
            #expect(o.status == 0, "\(cmd)")
            #expect(o.stdout.contains("Example"), "help \(cmd) has no example")
        }
    }
}

@Suite(.serialized) struct CLIImport {
    @Test func importReportsAndListsWithJSON() throws {
        let c = try CLI()
        let src = try c.photos(["a.jpg", "b.jpg"], gps: true)
        let o = try c.ok("import", src, "--album", "Trip")
        #expect(o.stdout.contains("2 imported"))
        let list = try #require(try c.json("assets") as? [[String: Any]])
        #expect(list.count == 2)
        let first = try #require(list.first)
        for key in ["id", "name", "type", "mediaClass", "size", "captureDate", "hasLocation", "hash", "shared", "owner"] {
            #expect(first[key] != nil, "missing \(key)")
        }
        #expect(first["type"] as? String == "jpeg")
        #expect(first["hasLocation"] as? Bool == true)
        #expect(first["captureDate"] as? String == "2024-07-14T10:31:00Z")
        let albums = try #require(try c.json("albums") as? [[String: Any]])
        #expect(albums.first?["name"] as? String == "Trip")
        #expect(albums.first?["count"] as? Int == 2)
        let inAlbum = try #require(try c.json("assets", "--album", "Trip") as? [[String: Any]])
        #expect(inAlbum.count == 2)
    }

    @Test func badInputsAreSkippedByNameWithExitCode() throws {
        let c = try CLI()
        let src = try c.photos(["good.jpg"])
        try "text".write(toFile: src + "/readme.txt", atomically: true, encoding: .utf8)
        let jpeg = try TestMedia.jpeg(tag: "cut")
        try TestMedia.write(Array(jpeg.prefix(30)), to: src + "/truncated.jpg")
        try TestMedia.write(try TestMedia.jpeg(tag: "locked"), to: src + "/unreadable.jpg")
        chmod(src + "/unreadable.jpg", 0)
        let o = try c.run("import", src, c.dir + "/missing.jpg")
        #expect(o.status == Code.badInput)
        #expect(o.stderr.contains("readme.txt"))
        #expect(o.stderr.contains("truncated.jpg"))
        #expect(o.stderr.contains("missing.jpg"))
        if getuid() != 0 { #expect(o.stderr.contains("unreadable.jpg")) }   // root reads anything
        #expect(o.stdout.contains("good.jpg"))
    }

    /// A link to the folder itself: inside the folder it is skipped (links there are not
    /// followed); named as well on the command line, it is followed and found to loop.
    @Test func symlinkLoopInAFolder() throws {
        let c = try CLI()
        let src = try c.photos(["x.jpg"])
        try FileManager.default.createSymbolicLink(atPath: src + "/loop", withDestinationPath: src)
        let o = try c.run("import", src, src + "/loop")
        #expect(o.status == Code.badInput)
        #expect(o.stderr.contains("skipped \(src)/loop: a symbolic link inside a folder"), "\(o.stderr)")
        #expect(o.stderr.contains("skipped \(src)/loop: symbolic link loop"), "\(o.stderr)")
        #expect(o.stdout.contains("1 imported"))
    }

    /// F4: walking a folder follows no symbolic link (a folder someone else writes, imported by
    /// root, could link to a file only root may read): it is skipped and reported, in the text
    /// and the JSON, with exit 65. A link named on the command line is followed.
    @Test func symlinksInsideAFolderAreSkippedAndNamedOnesFollowed() throws {
        let c = try CLI()
        let src = try c.photos(["own.jpg"])
        let elsewhere = try c.photos(["private.jpg"])
        #expect(symlink(elsewhere + "/private.jpg", src + "/link.jpg") == 0)
        let o = try c.run("import", src)
        #expect(o.status == Code.badInput, "\(o.stderr)")
        #expect(o.stderr.contains("skipped \(src)/link.jpg: a symbolic link inside a folder (not followed"), "\(o.stderr)")
        #expect(o.stdout.contains("1 imported, 0 already in the library, 1 skipped"), "\(o.stdout)")
        func names() throws -> [String] { try #require(try c.json("assets") as? [[String: Any]]).compactMap { $0["name"] as? String }.sorted() }
        #expect(try names() == ["own.jpg"])
        let j = try c.run("import", "--json", src)
        let report = try #require(try JSONSerialization.jsonObject(with: Data(j.stdout.utf8)) as? [String: Any])
        #expect((report["skipped"] as? [[String: Any]])?.map { $0["path"] as? String } == [src + "/link.jpg"], "\(report)")
        #expect(try names() == ["own.jpg"])
        // Named on the command line, the link is followed.
        try c.ok("import", src + "/link.jpg")
        #expect(try names() == ["link.jpg", "own.jpg"])
    }

    @Test func importNeedsPaths() throws {
        let c = try CLI()
        #expect(try c.run("import").status == Code.usage)
    }
}

@Suite(.serialized) struct CLIGrants {
    @Test func authorizeStatusAndApps() throws {
        let c = try CLI()
        try c.ok("authorize", "org.example.Editor", "--access", "read-write", "--status", "limited")
        try c.ok("authorize", "org.example.Editor", "--access", "add-only", "--status", "authorized")
        let s = try #require(try c.json("status", "org.example.Editor") as? [String: Any])
        #expect(s["readWrite"] as? String == "limited")
        #expect(s["addOnly"] as? String == "authorized")
        let apps = try #require(try c.json("apps") as? [[String: Any]])
        #expect(apps.map { $0["app"] as? String } == ["org.example.Editor"])
        let bad = try c.run("authorize", "org.example.Editor", "--access", "add-only", "--status", "limited")
        #expect(bad.status == Code.usage)
        #expect(bad.stderr.contains("limited"))
    }

    @Test func invalidAppIDShowsTheRule() throws {
        let c = try CLI()
        for bad in ["editor", "org..x", "-org.x", "org.x/../y"] {
            let o = try c.run("authorize", bad, "--status", "authorized")
            #expect(o.status == Code.usage, "\(bad)")
            #expect(o.stderr.contains("reverse-DNS"), "\(bad): \(o.stderr)")
        }
    }

    @Test func unknownAppIsNotFound() throws {
        let c = try CLI()
        for args in [["status", "org.no.Body"], ["grants", "org.no.Body"], ["revoke", "org.no.Body", "--all"]] {
            let o = try c.run(args)
            #expect(o.status == Code.notFound, "\(args)")
            #expect(o.stderr.contains("unknown app"))
        }
    }

    @Test func grantFromStdinAndUnknownAssetsChangeNothing() throws {
        let c = try CLI()
        try c.ok("import", try c.photos(["a.jpg", "b.jpg", "c.jpg"]))
        let list = try #require(try c.json("assets") as? [[String: Any]])
        let ids = list.compactMap { $0["id"] as? String }
        try c.ok("authorize", "org.example.Editor", "--status", "limited")
        try c.ok("grant", "org.example.Editor", "-", stdin: ids[0] + "\n" + ids[1] + "\n")
        var grants = try #require(try c.json("grants", "org.example.Editor") as? [[String: Any]])
        #expect(grants.count == 2)
        #expect(grants.allSatisfy { $0["grant"] as? String == "selected" })
        let o = try c.run("grant", "org.example.Editor", "c.jpg", "ghost.jpg")
        #expect(o.status == Code.notFound)
        #expect(o.stderr.contains("ghost.jpg"))
        #expect(!o.stderr.contains("'c.jpg'"))
        grants = try #require(try c.json("grants", "org.example.Editor") as? [[String: Any]])
        #expect(grants.count == 2)
        // idempotent
        try c.ok("grant", "org.example.Editor", ids[0])
        try c.ok("revoke", "org.example.Editor", ids[0])
        try c.ok("revoke", "org.example.Editor", ids[0])
        try c.ok("revoke", "org.example.Editor", "--all")
        grants = try #require(try c.json("grants", "org.example.Editor") as? [[String: Any]])
        #expect(grants.isEmpty)
    }

    @Test func assetsForAnAppUsesThePolicy() throws {
        let c = try CLI()
        try c.ok("import", try c.photos(["a.jpg", "b.jpg"]))
        try c.ok("import", try c.photos(["s.jpg"]), "--shared", "Family")
        try c.ok("authorize", "org.example.Editor", "--status", "limited")
        try c.ok("grant", "org.example.Editor", "a.jpg")
        var seen = try #require(try c.json("assets", "--app", "org.example.Editor") as? [[String: Any]])
        #expect(seen.map { $0["name"] as? String } == ["a.jpg"])
        let refused = try c.run("grant", "org.example.Editor", "s.jpg")
        #expect(refused.status == Code.conflict)
        #expect(refused.stderr.contains("shared"))
        try c.ok("authorize", "org.example.Editor", "--status", "authorized")
        seen = try #require(try c.json("assets", "--app", "org.example.Editor") as? [[String: Any]])
        #expect(seen.count == 3)
        seen = try #require(try c.json("assets", "--app", "org.example.Editor", "--access", "add-only") as? [[String: Any]])
        #expect(seen.isEmpty)
    }

    @Test func optionsAreStored() throws {
        let c = try CLI()
        try c.ok("options", "org.example.Editor", "--new-app", "--strip-location", "on", "--prevent-prompt", "on")
        let o = try #require(try c.json("options", "org.example.Editor") as? [String: Any])
        #expect(o["stripLocation"] as? Bool == true)
        #expect(o["preventPrompt"] as? Bool == true)
        #expect(try c.run("options", "org.example.Editor", "--strip-location", "maybe").status == Code.usage)
    }

    @Test func albumsTrashRestoreRequests() throws {
        let c = try CLI()
        try c.ok("import", try c.photos(["a.jpg"]))
        try c.ok("album", "create", "Best")
        #expect(try c.run("album", "create", "Best").status == Code.conflict)
        try c.ok("album", "add", "Best", "a.jpg")
        #expect(try c.run("album", "add", "Nope", "a.jpg").status == Code.notFound)
        let albums = try #require(try c.json("albums") as? [[String: Any]])
        #expect(albums.first?["count"] as? Int == 1)
        let trash = try #require(try c.json("trash") as? [Any])
        #expect(trash.isEmpty)
        #expect(try c.run("restore", "a.jpg").status == Code.conflict)
        #expect(try c.run("restore", "ghost").status == Code.notFound)
        let reqs = try #require(try c.json("requests") as? [Any])
        #expect(reqs.isEmpty)
    }

    @Test func twentyConcurrentGrantProcessesAllLand() throws {
        let c = try CLI()
        let names = (0..<20).map { "p\($0).jpg" }
        try c.ok("import", try c.photos(names))
        try c.ok("authorize", "org.example.Editor", "--status", "limited")
        let group = DispatchGroup()
        let failures = Failures()
        for n in names {
            group.enter()
            DispatchQueue.global().async {
                let o = try? c.run("grant", "org.example.Editor", n)
                if o?.status != 0 { failures.add(o?.stderr ?? "spawn failed") }
                group.leave()
            }
        }
        group.wait()
        #expect(failures.all.isEmpty, "\(failures.all)")
        let grants = try #require(try c.json("grants", "org.example.Editor") as? [Any])
        #expect(grants.count == 20)
    }
}

final class Failures: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [String] = []
    func add(_ s: String) { lock.lock(); items.append(s); lock.unlock() }
    var all: [String] { lock.lock(); defer { lock.unlock() }; return items }
}
