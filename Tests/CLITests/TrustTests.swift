import Foundation
import GRDB
import Testing
import TestSupport
@testable import GrantStore
import PhotoLibrary

/// Issue 14: a hostile app must not steer the person's CLI (names it gives its files, names that
/// hold terminal controls, typos, shared assets).
extension CLI {
    /// An app creates a file as its mount would (the same commit path), without a mount.
    @discardableResult
    func appFile(_ app: String, _ name: String) throws -> Asset {
        let lib = try Library.open(at: LibraryPaths(root: library))
        let writer = try StoreWriter(library: lib, purpose: "test")
        let (id, temp, fd) = try writer.makeTemp(extension: "jpg")
        defer { close(fd) }
        let bytes = try TestMedia.jpeg(tag: "\(app)-\(name)-\(UUID())")
        _ = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        return try writer.commitAppFile(tempPath: temp, fd: fd, id: id, app: AppID(app)!, name: name).asset
    }

    func list(_ args: [String]) throws -> [[String: Any]] {
        let o = try run(args + ["--json"])
        #expect(o.status == 0, "\(args): \(o.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(o.stdout.utf8)) as? [[String: Any]])
    }

    func ids(_ args: String...) throws -> [String] { try list(args).compactMap { $0["id"] as? String } }
    func names(_ args: String...) throws -> [String] { try list(args).compactMap { $0["name"] as? String } }

    /// The id of the library asset whose display name is `name`.
    func id(of name: String) throws -> String {
        try #require(try list(["assets"]).first { $0["displayName"] as? String == name }?["id"] as? String)
    }

    func sql(_ statement: String, _ arguments: GrantStore.StatementArguments = []) throws {
        let lib = try Library.open(at: LibraryPaths(root: library))
        try lib.write { db in try db.execute(sql: statement, arguments: arguments) }
    }
}

let appA = "org.example.Limited"
let appB = "org.example.Other"

@Suite(.serialized) struct CLIConfusedDeputy {
    /// Item 1: the app names its own file like a photo hidden from it. A pipeline from its listing
    /// must never reach the hidden photo: the name means two assets, so it is refused and the ids
    /// are the way; `explain` (read-only, it prints the id) describes what the app sees.
    @Test func anAppsNameForItsOwnFileNeverReachesTheHiddenPhoto() throws {
        let c = try CLI()
        try c.ok("import", try c.photos(["DSCN0027.jpg", "other.jpg"], gps: true))
        try c.ok("authorize", appA, "--status", "limited")
        let real = try c.id(of: "DSCN0027.jpg")
        let own = try c.appFile(appA, "DSCN0027.jpg")
        #expect(own.displayName == "DSCN0027-1.jpg")
        #expect(try c.names("assets", "--app", appA) == ["DSCN0027.jpg"])

        // The pipeline of the issue: names from the app's listing, granted back to the app.
        let names = try c.names("assets", "--app", appA).joined(separator: "\n") + "\n"
        let back = try c.run(["grant", appA, "-"], stdin: names)
        #expect(back.status == Code.conflict, "\(back.stderr)")
        #expect(back.stderr.contains("ambiguous") && back.stderr.contains(real) && back.stderr.contains(own.id))
        #expect(try !c.ids("grants", appA).contains(real))
        #expect(try c.ids("assets", "--app", appA) == [own.id])

        // explain names the asset the app sees under that name, with its id.
        let e = try #require(try JSONSerialization.jsonObject(with: Data(c.ok("explain", appA, "DSCN0027.jpg", "--json").stdout.utf8)) as? [String: Any])
        #expect((e["asset"] as? [String: Any])?["id"] as? String == own.id)
        let text = try c.ok("explain", appA, "DSCN0027.jpg").stdout
        #expect(text.contains(own.id))
        #expect(!text.contains(real))

        // The same names piped to another app: the name means two assets, so nothing happens.
        let other = try c.run(["grant", appB, "--new-app", "-"], stdin: names)
        #expect(other.status == Code.conflict, "\(other.stderr)")
        #expect(other.stderr.contains("ambiguous") && other.stderr.contains(real) && other.stderr.contains(own.id))
        #expect(try c.run("grants", appB).status == Code.notFound)   // not even the app was created
        let album = try c.run(["album", "create", "Best"])
        #expect(album.status == 0)
        #expect(try c.run(["album", "add", "Best", "-"], stdin: names).status == Code.conflict)
        // Ids always work.
        try c.ok("grant", appB, "--new-app", real)
        #expect(try c.ids("grants", appB) == [real])
    }

    /// Item 1, names settled in a view: once the hidden photo is granted, the app sees it under
    /// an alternative name, which is its own file's display name, and its own file under the
    /// photo's display name. A revoke by either name, from either listing, must never silently
    /// act on the other asset (the photo would stay granted): refused; by id it works.
    @Test func aNameThatMeansTwoAssetsNeverRevokesTheWrongOne() throws {
        let c = try CLI()
        try c.ok("import", try c.photos(["DSCN0027.jpg"]))
        try c.ok("authorize", appA, "--status", "limited")
        let real = try c.id(of: "DSCN0027.jpg")
        let own = try c.appFile(appA, "DSCN0027.jpg")
        try c.ok("grant", appA, real)
        let seen = try c.list(["assets", "--app", appA])
        let realName = try #require(seen.first { $0["id"] as? String == real }?["name"] as? String)
        #expect(realName == own.displayName)   // the clash this test is about
        // grants lists what the app was given under the names it sees them by.
        #expect(try c.names("grants", appA) == [realName])
        let fromGrants = try c.names("grants", appA).joined(separator: "\n") + "\n"
        #expect(try c.run(["revoke", appA, "-"], stdin: fromGrants).status == Code.conflict)
        #expect(try c.run("revoke", appA, "DSCN0027.jpg").status == Code.conflict)   // the library's name
        #expect(try c.ids("grants", appA) == [real])
        try c.ok("revoke", appA, real)
        #expect(try c.ids("grants", appA).isEmpty)
        #expect(try c.ids("assets", "--app", appA) == [own.id])
        // Text listings carry ids too: changes says which asset each entry is about.
        #expect(try c.ok("changes", appA).stdout.contains(real))
    }

    /// Item 2: an app that takes a name first does not get it: the person's import takes it, the
    /// app keeps seeing its name, and a grant by that name never hands over the app's file.
    @Test func anImportTakesItsNameBackFromAnAppsFile() throws {
        let c = try CLI()
        try c.ok("authorize", appA, "--status", "limited")
        let squatter = try c.appFile(appA, "DSCN0099.jpg")
        #expect(squatter.displayName == "DSCN0099.jpg")
        try c.ok("import", try c.photos(["DSCN0099.jpg"]))
        let real = try c.id(of: "DSCN0099.jpg")
        #expect(real != squatter.id)
        #expect(try c.id(of: "DSCN0099-1.jpg") == squatter.id)
        #expect(try c.names("assets", "--app", appA) == ["DSCN0099.jpg"])   // the app's view is unchanged
        #expect(try c.ids("assets", "--app", appA) == [squatter.id])
        let o = try c.run("grant", appB, "--new-app", "DSCN0099.jpg")
        if o.status == 0 {
            #expect(try c.ids("grants", appB) == [real])
        } else {
            #expect(o.status == Code.conflict, "\(o.stderr)")
            #expect(try c.run("grants", appB).status == Code.notFound)
        }
        try c.ok("grant", appB, "--new-app", real)
        #expect(try c.ids("grants", appB) == [real])
    }
}

@Suite(.serialized) struct CLIUnknownApps {
    /// Item 4: a typo in an app id grants nothing, creates nothing, and says so.
    @Test func aTypoGrantsNothing() throws {
        let c = try CLI()
        try c.ok("import", try c.photos(["a.jpg"]))
        for args in [["grant", "no.such.app", "a.jpg"], ["grant", "no.such.app", "--picked", "a.jpg"],
                     ["options", "no.such.app", "--strip-location", "on"], ["revoke", "no.such.app", "a.jpg"],
                     ["pick", "no.such.app"]] {
            let o = try c.run(args)
            #expect(o.status == Code.notFound, "\(args): \(o.status) \(o.stderr)")
            #expect(o.stderr.contains("unknown app"), "\(args): \(o.stderr)")
        }
        #expect(try c.list(["apps"]).isEmpty)
        // An explicit flag registers it; authorize registers as before.
        try c.ok("grant", "no.such.app", "--new-app", "a.jpg")
        try c.ok("options", "org.example.Fresh", "--new-app", "--strip-location", "on")
        try c.ok("authorize", "org.example.Third", "--status", "limited")
        #expect(try c.list(["apps"]).compactMap { $0["app"] as? String } == ["no.such.app", "org.example.Fresh", "org.example.Third"])
        #expect(try c.ids("grants", "no.such.app").count == 1)
    }
}

@Suite(.serialized) struct CLISharedAssets {
    /// Item 5: importing a file already in the library as shared makes it shared, puts it in the
    /// shared album and takes it out of every limited selection, visibly to the app's history.
    @Test func importSharedOfAKnownFileLeavesEveryLimitedSelection() throws {
        let c = try CLI()
        let src = try c.photos(["a.jpg", "b.jpg"])
        try c.ok("import", src)
        try c.ok("authorize", appA, "--status", "limited")
        try c.ok("authorize", appB, "--status", "authorized")
        let a = try c.id(of: "a.jpg")
        try c.ok("grant", appA, "a.jpg", "b.jpg")
        let o = try c.ok("import", src + "/a.jpg", "--shared", "Family")
        #expect(o.stdout.contains("1 already in the library"))
        let asset = try #require(try c.list(["assets"]).first { $0["id"] as? String == a })
        #expect(asset["shared"] as? Bool == true)
        #expect(try c.ids("assets", "--album", "Family") == [a])
        #expect(try !c.ids("grants", appA).contains(a))
        #expect(try !c.ids("assets", "--app", appA).contains(a))
        #expect(try c.ids("assets", "--app", appB).contains(a))   // an authorized app still sees it
        let refused = try c.run("grant", appA, a)
        #expect(refused.status == Code.conflict)
        // The app's history says it went (what a running mount follows).
        let changes = try #require(try JSONSerialization.jsonObject(with: Data(c.ok("changes", appA, "--json").stdout.utf8)) as? [String: Any])
        let last = try #require((changes["changes"] as? [[String: Any]])?.last)
        #expect(last["kind"] as? String == "removed")
        #expect(last["id"] as? String == a)
    }

    /// Item 6: a shared asset picked for a limited app could never appear: refused (exit 68).
    /// Picked for an app that sees picked assets only, it works as before.
    @Test func pickingASharedAssetForALimitedAppIsRefused() throws {
        let c = try CLI()
        try c.ok("import", try c.photos(["s.jpg"]), "--shared", "Family")
        try c.ok("authorize", appA, "--status", "limited")
        let o = try c.run("grant", appA, "--picked", "s.jpg")
        #expect(o.status == Code.conflict, "\(o.stderr)")
        #expect(o.stderr.contains("shared") && o.stderr.contains("limited"))
        #expect(try c.ids("grants", appA).isEmpty)
        try c.ok("authorize", appB, "--status", "denied")
        try c.ok("grant", appB, "--picked", "s.jpg")
        #expect(try c.names("assets", "--app", appB) == ["s.jpg"])
    }
}

@Suite(.serialized) struct CLITerminalSafety {
    static let evil = "a\u{1B}]0;owned\u{07}\u{1B}[2J\u{9B}31m\u{202E}gpj.exe\nFAKE\tROW\r\u{2066}.jpg"

    static func checkClean(_ o: TestSupport.Output, lines: Int? = nil, _ what: String) {
        // Piped listings are tab-separated (issue 16): a tab in stdout is only ever a separator,
        // so every line has as many as the header; a tab in a name is escaped like the rest.
        let raw = o.stdout.unicodeScalars.filter { DisplayName.isUnsafe($0) && $0 != "\n" && $0 != "\t" }
            + o.stderr.unicodeScalars.filter { DisplayName.isUnsafe($0) && $0 != "\n" }
        #expect(raw.isEmpty, "\(what): raw \(raw.map { String($0.value, radix: 16) })")
        let tabs = Set(o.stdout.split(separator: "\n").map { $0.filter { $0 == "\t" }.count })
        #expect(tabs.count <= 1, "\(what): rows split by a raw tab: \(o.stdout)")
        if let lines { #expect(o.stdout.split(separator: "\n").count == lines, "\(what): \(o.stdout)") }
    }

    /// Item 3: names, album names, reasons and history entries holding ESC, newlines, tabs, C1
    /// controls and bidi overrides (an older library, or any path that let one in) reach text
    /// output escaped, one row per line.
    @Test func everyListingEscapesWhatATerminalWouldObey() throws {
        let c = try CLI()
        try c.ok("import", try c.photos(["a.jpg", "b.jpg"]))
        try c.ok("authorize", appA, "--status", "limited")
        try c.ok("grant", appA, "a.jpg", "b.jpg")
        try c.ok("album", "create", "Best")
        try c.ok("album", "add", "Best", "a.jpg")
        let a = try c.id(of: "a.jpg"), b = try c.id(of: "b.jpg")
        let lib = try Library.open(at: LibraryPaths(root: c.library))
        try lib.moveToTrash(rowIDs: lib.resolve([b]).map(\.rowID))
        try c.sql("UPDATE assets SET display_name = ? WHERE id = ?", [Self.evil, a])
        try c.sql("UPDATE assets SET display_name = ? WHERE id = ?", [Self.evil + "2", b])
        try c.sql("UPDATE albums SET name = ? WHERE name = 'Best'", [Self.evil])
        try c.sql("UPDATE app_changes SET name = ?", [Self.evil])
        try c.sql("INSERT INTO requests (app_id, kind, reason, created_at) VALUES (?, 'picker', ?, 0)", [appA, Self.evil])

        let expected: [([String], Int?)] = [
            (["assets"], 2), (["assets", "--app", appA], 2), (["grants", appA], 3), (["trash"], 2),
            (["changes", appA], nil), (["requests"], 2), (["albums"], 2), (["explain", appA, a], nil),
            (["restore", b], 1), (["grant", appA, Self.evil + "x"], 0),
        ]
        for (args, lines) in expected {
            let o = try c.run(args)
            Self.checkClean(o, lines: lines, args.joined(separator: " "))
        }
        let o = try c.run("assets")
        #expect(o.stdout.contains("\\u{1B}]0;owned\\u{7}"))
        #expect(o.stdout.contains("\\u{202E}gpj.exe\\nFAKE\\tROW\\r\\u{2066}"))
        // JSON keeps the exact name (JSON escapes it).
        #expect(try c.list(["assets"]).contains { $0["name"] as? String == Self.evil })
    }

    /// Item 3: a file on disk whose name holds controls is imported under a clean name.
    @Test func importReplacesControlAndBidiCharactersInNames() throws {
        let c = try CLI()
        let src = try c.photos([])
        try TestMedia.write(try TestMedia.jpeg(tag: "evil"), to: src + "/x\u{1B}[31m\u{202E}y\nz.jpg")
        let o = try c.ok("import", src)
        Self.checkClean(o, "import")
        #expect(try c.names("assets") == ["x_[31m_y_z.jpg"])
    }
}
