import Foundation
import Testing
import TestSupport

/// Issue 38: what a person scripting their library reached for and did not find, or found wrong.
@Suite(.serialized) struct CLIScriptsRoundTwo {
    static let app = "org.example.Editor"

    /// A token beyond the app's latest was never issued: refused (64), not echoed as the latest.
    @Test func aTokenNeverIssuedIsAUsageError() throws {
        let c = try CLI()
        try c.ok("import", try c.photos(["a.jpg"]))
        try c.ok("authorize", Self.app, "--status", "limited")
        try c.ok("grant", Self.app, "a.jpg")
        let all = try #require(try c.json("changes", Self.app) as? [String: Any])
        let latest = try #require(all["token"] as? Int)
        #expect(latest >= 1)
        // The latest itself, and 0, are tokens the library issued (or the start).
        let atLatest = try #require(try c.json("changes", Self.app, "--since", String(latest)) as? [String: Any])
        #expect((atLatest["changes"] as? [Any])?.isEmpty == true)
        #expect(atLatest["token"] as? Int == latest)
        for bad in [String(latest + 1), "999999", "-1"] {
            for json in [false, true] {
                let o = try c.run(["changes", Self.app, "--since=\(bad)"] + (json ? ["--json"] : []))
                #expect(o.status == Code.usage, "--since \(bad): \(o.status) \(o.stdout)")
                #expect(o.stdout.isEmpty, "--since \(bad): \(o.stdout)")
                #expect(o.stderr.contains(bad == "-1" ? "tokens are 1 and up" : "token \(bad) was never issued for \(Self.app) (its latest is \(latest))"),
                        "\(o.stderr)")
            }
        }
        // Once the history reaches it, the token is fine.
        try c.ok("revoke", Self.app, "a.jpg")
        #expect(try c.run("changes", Self.app, "--since", String(latest + 1)).status == 0)
    }

    /// A grant to an app that is not limited said "granted 1", and the app saw nothing: it says
    /// why, and what to run. An unknown app says how an app becomes known.
    @Test func grantSaysWhenTheSelectionDoesNotShowYet() throws {
        let c = try CLI()
        try c.ok("import", try c.photos(["a.jpg", "b.jpg"]))
        let fresh = try c.run("grant", "org.example.New", "a.jpg", "--new-app")
        #expect(fresh.status == 0)
        #expect(fresh.stdout == "granted 1 (0 already granted) to org.example.New\n")
        #expect(fresh.stderr.contains("photogate: note: org.example.New is not-determined for read-write, so it sees none of its selection"), "\(fresh.stderr)")
        #expect(fresh.stderr.contains("photogate authorize org.example.New --status limited"), "\(fresh.stderr)")
        try c.ok("authorize", "org.example.New", "--status", "denied")
        #expect(try c.run("grant", "org.example.New", "b.jpg").stderr.contains("org.example.New is denied for read-write"))
        try c.ok("authorize", "org.example.New", "--status", "authorized")
        let all = try c.run("grant", "org.example.New", "b.jpg")
        #expect(all.stderr.contains("is authorized for the whole library and sees every photo already"), "\(all.stderr)")
        // Limited: the selection shows, nothing to say. Picked: shows whatever the status.
        try c.ok("authorize", Self.app, "--status", "limited")
        #expect(try c.ok("grant", Self.app, "a.jpg").stderr.isEmpty)
        try c.ok("authorize", "org.example.Picker", "--status", "denied")
        #expect(try c.ok("grant", "org.example.Picker", "a.jpg", "--picked").stderr.isEmpty)

        // Unknown: say how an app becomes known; --new-app only where the command has it.
        for args in [["grant", "org.no.Body", "a.jpg"], ["options", "org.no.Body", "--strip-location", "on"]] {
            let o = try c.run(args)
            #expect(o.status == Code.notFound)
            #expect(o.stderr.contains("unknown app 'org.no.Body'") && o.stderr.contains("photogate authorize org.no.Body --status limited")
                    && o.stderr.contains("--new-app"), "\(args): \(o.stderr)")
        }
        for args in [["status", "org.no.Body"], ["revoke", "org.no.Body", "--all"], ["changes", "org.no.Body"]] {
            let o = try c.run(args)
            #expect(o.status == Code.notFound)
            #expect(o.stderr.contains("unknown app 'org.no.Body'") && o.stderr.contains("photogate authorize org.no.Body")
                    && !o.stderr.contains("--new-app"), "\(args): \(o.stderr)")
        }
    }

    /// LOCATION said "yes" for a photo whose GPS block holds no position (altitude and time only):
    /// it says "-" now, and strip-location still zeroes that block.
    @Test func aGPSBlockWithoutCoordinatesIsNoLocation() throws {
        let c = try CLI()
        let src = c.dir + "/nofix"
        try FileManager.default.createDirectory(atPath: src, withIntermediateDirectories: true)
        try TestMedia.write(try TestMedia.jpeg(tag: "nofix" + UUID().uuidString), to: src + "/nofix.jpg")
        let tool = try TestSupport.run("exiftool", ["-q", "-overwrite_original", "-GPSAltitude=35", "-GPSAltitudeRef=0",
                                                    "-GPSTimeStamp=10:11:12", "-GPSDateStamp=2024:07:14", src + "/nofix.jpg"])
        #expect(tool.status == 0, "\(tool.stderr)")
        try TestMedia.write(try TestMedia.jpeg(tag: "fix" + UUID().uuidString, gps: true), to: src + "/fix.jpg")
        try c.ok("import", src)
        let rows = try #require(try c.json("assets") as? [[String: Any]])
        #expect(Dictionary(uniqueKeysWithValues: rows.map { ($0["name"] as? String ?? "", $0["hasLocation"] as? Bool) })
                == ["nofix.jpg": false, "fix.jpg": true])
        let table = try c.ok("assets", "--columns", "name,location").stdout
        #expect(table.contains("nofix.jpg\t-\n") && table.contains("fix.jpg\tyes\n"), "\(table)")
        // Stripping stays conservative: an app with strip-location reads that block zeroed.
        try c.ok("authorize", Self.app, "--status", "authorized")
        try c.ok("options", Self.app, "--strip-location", "on")
        let e = try #require(try c.json("explain", Self.app, "nofix.jpg") as? [String: Any])
        #expect(e["verdict"] as? String == "visible, location stripped", "\(e)")
        #expect((e["redactedRanges"] as? [Any])?.isEmpty == false, "\(e)")
    }

    /// Runs SQL on the library's catalog (to move a deletion into the past), with python3's sqlite3.
    static func sql(_ c: CLI, _ statement: String) throws {
        let o = try TestSupport.catalogSQL(library: c.library, statement)
        #expect(o.status == 0, "\(o.stderr)")
    }

    static func trash(_ c: CLI) throws -> [String: [String: Any]] {
        let list = try #require(try c.json("trash") as? [[String: Any]])
        return Dictionary(uniqueKeysWithValues: list.map { ($0["name"] as? String ?? "", $0) })
    }

    /// The person deletes from the command line (it was "2 unexpected arguments"): to Recently
    /// Deleted, recorded as the person's; `trash` says who and when; --empty and --delete delete
    /// for good.
    @Test func thePersonDeletesAndEmptiesRecentlyDeleted() throws {
        let c = try CLI()
        try c.ok("import", try c.photos(["a.jpg", "b.jpg", "c.jpg", "d.jpg"]))
        let ids = Dictionary(uniqueKeysWithValues: try #require(try c.json("assets") as? [[String: Any]]).map { ($0["name"] as! String, $0["id"] as! String) })
        try c.ok("authorize", Self.app, "--status", "limited")
        try c.ok("grant", Self.app, "a.jpg", "b.jpg")
        let d = try c.ok("delete", "a.jpg", "-", stdin: ids["b.jpg"]! + "\n")
        #expect(d.stdout == "deleted \(ids["a.jpg"]!)  a.jpg\ndeleted \(ids["b.jpg"]!)  b.jpg\n", "\(d.stdout)")
        #expect(try #require(try c.json("assets") as? [[String: Any]]).compactMap { $0["name"] as? String } == ["c.jpg", "d.jpg"])
        // The app's view lost them, and its history says so.
        #expect(try #require(try c.json("assets", "--app", Self.app) as? [Any]).isEmpty)
        let changes = try #require(try c.json("changes", Self.app) as? [String: Any])
        #expect((changes["changes"] as? [[String: Any]])?.filter { $0["kind"] as? String == "removed" }.count == 2)
        var t = try Self.trash(c)
        #expect(Set(t.keys) == ["a.jpg", "b.jpg"])
        #expect(t.values.allSatisfy { $0["deletedBy"] as? String == "person" && $0["trashedDate"] is String && $0["purgeDate"] is NSNull }, "\(t)")
        let rows = try c.ok("trash", "--columns", "name,by").stdout
        #expect(rows == "NAME\tBY\na.jpg\tperson\nb.jpg\tperson\n", "\(rows)")
        // Twice is no error; an unknown asset deletes nothing.
        let again = try c.ok("delete", "a.jpg")
        #expect(again.stdout.isEmpty && again.stderr.contains("already in Recently Deleted: a.jpg"), "\(again.stderr)")
        let unknown = try c.run("delete", "c.jpg", "ghost.jpg")
        #expect(unknown.status == Code.notFound && unknown.stderr.contains("ghost.jpg"))
        #expect(try Self.trash(c).count == 2)
        #expect(try c.run("delete").status == Code.usage)

        // --empty --older-than: only what was deleted long enough ago.
        try Self.sql(c, "UPDATE assets SET trashed_at = trashed_at - 10 * 86400 WHERE display_name = 'a.jpg'")
        let old = try c.ok("trash", "--empty", "--older-than", "5")
        #expect(old.stdout == "deleted for good \(ids["a.jpg"]!)  a.jpg\n", "\(old.stdout)")
        #expect(Set(try Self.trash(c).keys) == ["b.jpg"])
        // Per asset, for good; then --empty takes the rest.
        try c.ok("delete", "c.jpg")
        #expect(try c.ok("trash", "--delete", "c.jpg").stdout == "deleted for good \(ids["c.jpg"]!)  c.jpg\n")
        #expect(try c.run("trash", "--delete", "d.jpg").status == Code.conflict, "d.jpg is not in Recently Deleted")
        #expect(try c.ok("trash", "--empty").stdout == "deleted for good \(ids["b.jpg"]!)  b.jpg\n")
        #expect(try Self.trash(c).isEmpty)
        #expect(try c.run("restore", "b.jpg").status == Code.notFound)
        #expect(try #require(try c.json("assets") as? [[String: Any]]).compactMap { $0["name"] as? String } == ["d.jpg"])
        for bad in [["trash", "--older-than", "3"], ["trash", "--empty", "--delete", "d.jpg"], ["trash", "--empty", "--older-than=-1"],
                    ["trash", "--purge-after", "0"], ["trash", "--purge-after", "soon"], ["trash", "--empty", "--purge-after", "3"]] {
            #expect(try c.run(bad).status == Code.usage, "\(bad)")
        }
    }

    /// iOS empties Recently Deleted after 30 days: here a setting, off by default, never silent.
    @Test func theAutomaticPurgeIsASettingAndSaysWhatItDid() throws {
        let c = try CLI()
        try c.ok("import", try c.photos(["a.jpg", "b.jpg", "c.jpg"]))
        try c.ok("delete", "a.jpg", "b.jpg")
        try Self.sql(c, "UPDATE assets SET trashed_at = trashed_at - 40 * 86400 WHERE display_name = 'a.jpg'")
        // Off: nothing goes, however old; the listing says it is off.
        #expect(try c.ok("assets").stderr.isEmpty)
        #expect(Set(try Self.trash(c).keys) == ["a.jpg", "b.jpg"])
        // On: turning it on runs it, and says what it deleted for good.
        let on = try c.ok("trash", "--purge-after", "30")
        #expect(on.stdout.contains("more than 30 days is deleted for good automatically"), "\(on.stdout)")
        #expect(on.stderr.contains("photogate: note: deleted for good 1 photo in Recently Deleted for more than 30 days (the automatic purge")
                && on.stderr.contains("a.jpg"), "\(on.stderr)")
        let left = try Self.trash(c)
        #expect(Set(left.keys) == ["b.jpg"])
        #expect(left["b.jpg"]?["purgeDate"] is String, "\(left)")
        // Any command that opens the library runs it, at most hourly; restore never does.
        try Self.sql(c, "UPDATE assets SET trashed_at = trashed_at - 40 * 86400 WHERE display_name = 'b.jpg'")
        #expect(try c.ok("assets").stderr.isEmpty, "within the hour of the last run")
        try Self.sql(c, "UPDATE trash_settings SET last_purge_at = last_purge_at - 3601")
        #expect(try c.ok("restore", "b.jpg").stdout.contains("restored"), "restore rescues what is past its days")
        try c.ok("delete", "b.jpg")
        try Self.sql(c, "UPDATE assets SET trashed_at = trashed_at - 40 * 86400 WHERE display_name = 'b.jpg'")
        try Self.sql(c, "UPDATE trash_settings SET last_purge_at = last_purge_at - 3601")
        let any = try c.ok("albums")
        #expect(any.stderr.contains("deleted for good 1 photo") && any.stderr.contains("b.jpg"), "\(any.stderr)")
        #expect(try Self.trash(c).isEmpty)
        // Off again.
        try c.ok("delete", "c.jpg")
        try Self.sql(c, "UPDATE assets SET trashed_at = trashed_at - 400 * 86400")
        #expect(try c.ok("trash", "--purge-after", "off").stdout.contains("the automatic purge is off"))
        #expect(Set(try Self.trash(c).keys) == ["c.jpg"])
    }

    /// Capture times on a terminal are local, with the zone's offset; piped and JSON keep UTC.
    /// (The test photo was taken 2024-07-14 10:31:00 UTC.)
    @Test func aTerminalShowsLocalTimesWithTheirOffset() throws {
        guard TestSupport.which("script") else { print("aTerminalShowsLocalTimesWithTheirOffset: SKIPPED — no script(1)"); return }
        let c = try CLI()
        try c.ok("import", try c.photos(["a.jpg"]))
        func terminal(_ tz: String) throws -> String {
            let o = try TestSupport.run("script", ["-qec", "'\(TestSupport.photogateBinary)' assets --library '\(c.library)'", "/dev/null"],
                                        environment: ["TZ": tz])
            #expect(o.status == 0, "\(o.stdout)")
            return o.stdout
        }
        // POSIX zones (no tzdata needed): 5 h 30 east of UTC, 3 h west, and UTC.
        let east = try terminal("IST-5:30"), west = try terminal("BRT3"), utc = try terminal("UTC0")
        #expect(east.contains("2024-07-14 16:01 +05:30"), "\(east)")
        #expect(west.contains("2024-07-14 07:31 -03:00"), "\(west)")
        #expect(utc.contains("2024-07-14 10:31 +00:00"), "\(utc)")
        // For scripts, the same instant whatever the zone: ISO 8601 UTC, as in --json.
        for tz in ["IST-5:30", "BRT3"] {
            let piped = try c.run(["assets", "--columns", "captured"], env: ["TZ": tz])
            #expect(piped.stdout == "CAPTURED\n2024-07-14T10:31:00Z\n", "\(piped.stdout)")
            let json = try c.run(["assets", "--json"], env: ["TZ": tz])
            #expect(json.stdout.contains("\"captureDate\" : \"2024-07-14T10:31:00Z\""), "\(json.stdout)")
        }
    }
}
