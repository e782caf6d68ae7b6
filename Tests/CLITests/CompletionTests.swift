import Foundation
import Testing
import TestSupport

/// Issue 38: bash, zsh and fish complete app ids, asset names and ids, and album names from the
/// library the command line names, by one read-only query that changes nothing, purges nothing
/// and prints nothing but the candidates.
@Suite(.serialized) struct CLICompletion {
    /// Two apps, photos (one in Recently Deleted), an album with a space in its name, and files an
    /// app could have named to steer a shell: `$(...)`, backquotes, a quote and a colon.
    static func library() throws -> (CLI, [String: String]) {
        let c = try CLI()
        try c.ok("import", try c.photos(["beach.jpg", "boat.jpg", "cat.jpg", "$(touch pwned).jpg", "`touch pwned2`.jpg", "it's a:b.jpg", "~tilde.jpg"]))
        try c.ok("album", "create", "Summer 2024")
        try c.ok("album", "create", "Winter")
        try c.ok("authorize", "org.example.Editor", "--status", "limited")
        try c.ok("authorize", "org.example.Frame", "--status", "authorized")
        try c.ok("delete", "cat.jpg")
        let list = try #require(try c.json("assets") as? [[String: Any]]) + (try #require(try c.json("trash") as? [[String: Any]]))
        let ids = Dictionary(uniqueKeysWithValues: list.map { ($0["name"] as! String, $0["id"] as! String) })
        return (c, ids)
    }

    /// The hidden entry point the completion scripts call: `photogate ---completion <command> --
    /// <argument> <word index> <cursor> <words...>`, completing the last word.
    static func complete(_ c: CLI, _ command: [String], _ argument: String, _ words: [String], shell: String? = nil,
                         env: [String: String] = [:]) throws -> (lines: [String], out: TestSupport.Output) {
        let last = words.last ?? ""
        var e = env
        if let shell { e["SAP_SHELL"] = shell }
        let o = try c.run(["---completion"] + command + ["--", argument, String(words.count - 1), String(last.count)] + words, env: e)
        return (o.stdout.split(separator: "\n").map(String.init), o)
    }

    @Test func theEntryPointCompletesAppsAssetsAndAlbumsOfTheLibrary() throws {
        let (c, ids) = try Self.library()
        let apps = try Self.complete(c, ["grant"], "positional@0", ["photogate", "grant", ""])
        #expect(apps.out.status == 0 && apps.out.stderr.isEmpty, "\(apps.out)")
        #expect(apps.lines == ["org.example.Editor", "org.example.Frame"])
        #expect(try Self.complete(c, ["status"], "positional@0", ["photogate", "status", "org.example.F"]).lines == ["org.example.Frame"])
        // Asset names (not those in Recently Deleted), then ids as well once something is typed.
        let names = try Self.complete(c, ["grant"], "positional@1", ["photogate", "grant", "org.example.Editor", ""]).lines
        #expect(names == ["$(touch pwned).jpg", "`touch pwned2`.jpg", "beach.jpg", "boat.jpg", "it's a:b.jpg", "~tilde.jpg"], "\(names)")
        #expect(try Self.complete(c, ["grant"], "positional@1", ["photogate", "grant", "org.example.Editor", "~"]).lines == ["~tilde.jpg"])
        #expect(try Self.complete(c, ["grant"], "positional@1", ["photogate", "grant", "org.example.Editor", "b"]).lines
                    == (["beach.jpg", "boat.jpg"] + ids.filter { $0.value.hasPrefix("b") && $0.key != "cat.jpg" }.map(\.value)).sorted())
        let beach = try #require(ids["beach.jpg"])
        #expect(try Self.complete(c, ["explain"], "positional@1", ["photogate", "explain", "org.example.Editor", String(beach.prefix(6))]).lines
                    .contains(beach))
        // restore and trash --delete: what is in Recently Deleted.
        #expect(try Self.complete(c, ["restore"], "positional@0", ["photogate", "restore", ""]).lines == ["cat.jpg"])
        #expect(try Self.complete(c, ["trash"], "positional@0", ["photogate", "trash", "--delete", ""]).lines == ["cat.jpg"])
        // Albums: --album options and the album subcommands; a shell-quoted prefix is unquoted.
        #expect(try Self.complete(c, ["grant"], "--album", ["photogate", "grant", "org.example.Frame", "--album", ""]).lines == ["Summer 2024", "Winter"])
        #expect(try Self.complete(c, ["album", "add"], "positional@0", ["photogate", "album", "add", "'Summer 2"]).lines == ["Summer 2024"])
        #expect(try Self.complete(c, ["album", "add"], "positional@1", ["photogate", "album", "add", "Winter", "boa"]).lines == ["boat.jpg"])
        #expect(try Self.complete(c, ["assets"], "--app", ["photogate", "assets", "--app", "org.example.E"]).lines == ["org.example.Editor"])
        #expect(try Self.complete(c, ["mount"], "positional@0", ["photogate", "mount", ""]).lines.count == 2)
    }

    /// The library is the one the words name (`--library DIR`, `--library=DIR`, `~`, mount's
    /// `-o library=DIR`), else $PHOTOGATE_LIBRARY; none, or no library there: nothing, silently.
    @Test func theLibraryIsTheOneTheCommandLineNames() throws {
        let (c, _) = try Self.library()
        let other = try CLI()
        try other.ok("authorize", "org.example.Other", "--status", "limited")
        let expected = ["org.example.Other"]
        #expect(try Self.complete(c, ["grant"], "positional@0", ["photogate", "grant", "--library", other.library, ""]).lines == expected)
        #expect(try Self.complete(c, ["grant"], "positional@0", ["photogate", "grant", "--library=\(other.library)", ""]).lines == expected)
        #expect(try Self.complete(c, ["grant"], "positional@0", ["photogate", "grant", "--library", "\"\(other.library)\"", ""]).lines == expected)
        #expect(try Self.complete(c, ["grant"], "positional@0", ["photogate", "grant", "--library", "~/library", ""],
                                  env: ["HOME": other.dir]).lines == expected)
        #expect(try Self.complete(c, ["mount"], "positional@0", ["photogate", "mount", "-o", "ro,library=\(other.library)", ""]).lines == expected)
        for words in [["photogate", "grant", "--library", c.dir + "/nothing-here", ""], ["photogate", "grant", "--library", "/", ""]] {
            let none = try Self.complete(c, ["grant"], "positional@0", words)
            #expect(none.out.status == 0 && none.out.stdout.isEmpty && none.out.stderr.isEmpty, "\(words): \(none.out)")
        }
        // A command line the completion cannot make sense of prints nothing either.
        let bad = try c.run(["---completion", "grant", "--", "--no-such-option", "2", "0", "photogate", "grant", ""])
        #expect(bad.stdout.isEmpty && bad.stderr.isEmpty, "\(bad)")
    }

    /// Completing reads: the catalog and its log are byte for byte what they were, and an
    /// automatic purge that is due does not run (it would delete photos for good at a TAB).
    @Test func completingChangesNothingAndPurgesNothing() throws {
        let (c, _) = try Self.library()
        try c.ok("delete", "boat.jpg")
        try CLIScriptsRoundTwo.sql(c, "UPDATE assets SET trashed_at = trashed_at - 40 * 86400 WHERE display_name = 'boat.jpg'")
        try CLIScriptsRoundTwo.sql(c, "UPDATE trash_settings SET purge_after_days = 30, last_purge_at = 0 WHERE one = 1")
        // Opened once without purging (python's sqlite3 removed the log at its close).
        #expect(try c.run("mounts").status == 0)
        func files() throws -> [String: Data] {
            var out: [String: Data] = [:]
            // A server's catalog is compared through what a command shows of it (`assets` above).
            for f in TestSupport.onPostgres ? ["catalog.conf", "LIBRARY"] : ["photogate.sqlite", "photogate.sqlite-wal", "LIBRARY"] {
                out[f] = try Data(contentsOf: URL(fileURLWithPath: c.library + "/" + f))
            }
            let shared = TestSupport.sharedFolder(of: c.library)
            for d in ["run", "store", "tmp"] {
                out[d] = Data(try FileManager.default.subpathsOfDirectory(atPath: (d == "run" ? c.library : shared) + "/" + d).sorted().joined(separator: "\n").utf8)
            }
            return out
        }
        let before = try files()
        for (command, argument, words) in [(["restore"], "positional@0", ["photogate", "restore", ""]),
                                           (["grant"], "positional@0", ["photogate", "grant", ""]),
                                           (["grant"], "--album", ["photogate", "grant", "x.y", "--album", ""])] {
            let r = try Self.complete(c, command, argument, words)
            #expect(r.out.status == 0 && r.out.stderr.isEmpty, "\(r.out)")
        }
        #expect(try Self.complete(c, ["restore"], "positional@0", ["photogate", "restore", ""]).lines == ["boat.jpg", "cat.jpg"])
        #expect(try files() == before)
        // The purge was due: the next command runs it.
        #expect(try c.ok("albums").stderr.contains("deleted for good 1 photo"))
    }

    /// bash: the script argument-parser generates, sourced in a real bash, completes from the
    /// library; a name is one word however it is spelled, and none runs a command (bash's
    /// `compgen -W` expands its words; readline inserts `$` and backquotes as they are, so those
    /// names are offered as their ids).
    @Test func bashCompletesFromTheLibraryAndRunsNothing() throws {
        guard TestSupport.which("bash") else { print("bashCompletesFromTheLibraryAndRunsNothing: SKIPPED — no bash"); return }
        let (c, ids) = try Self.library()
        let script = c.dir + "/photogate.bash"
        let gen = try c.run("--generate-completion-script", "bash")
        #expect(gen.status == 0)
        try gen.stdout.write(toFile: script, atomically: true, encoding: .utf8)
        // COMP_WORDS as bash makes them for the line typed so far (the last word being completed).
        func bash(_ words: [String]) throws -> [String] {
            let o = try TestSupport.run("bash", ["--norc", "--noprofile", "-c", """
                source "$1"; shift
                COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
                COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}; COMPREPLY=()
                _photogate "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
                printf '%s\\n' "${COMPREPLY[@]}"
                """, "bash", script, TestSupport.photogateBinary] + words.dropFirst(), environment: ["PHOTOGATE_LIBRARY": c.library], cwd: c.dir)
            #expect(o.status == 0 && o.stderr.isEmpty, "\(words): \(o)")
            return o.stdout.split(separator: "\n").map(String.init).sorted()
        }
        #expect(try bash(["photogate", "grant", ""]) == ["org.example.Editor", "org.example.Frame"])
        #expect(try bash(["photogate", "grant", "org.example.Editor", "b"]).filter { $0.hasSuffix(".jpg") } == ["beach.jpg", "boat.jpg"])
        #expect(try bash(["photogate", "grant", "org.example.Editor", ""])
                    == [ids["$(touch pwned).jpg"]!, ids["`touch pwned2`.jpg"]!, ids["~tilde.jpg"]!, "beach.jpg", "boat.jpg", "it's a:b.jpg"].sorted())
        #expect(try bash(["photogate", "grant", "org.example.Editor", "it"]) == ["it's a:b.jpg"])
        #expect(try bash(["photogate", "grant", "org.example.Frame", "--album", "Su"]) == ["Summer 2024"])
        #expect(try bash(["photogate", "restore", ""]) == ["cat.jpg"])
        #expect(try bash(["photogate", "revoke", "--library", c.library, "org.example.F"]) == ["org.example.Frame"])
        let fm = FileManager.default
        #expect(!fm.fileExists(atPath: c.dir + "/pwned") && !fm.fileExists(atPath: c.dir + "/pwned2"), "a name ran a command")
    }

    /// zsh and fish: their scripts call the same entry point for the same arguments; zsh's
    /// `_describe` reads `name:description`, so a colon in a name comes escaped.
    @Test func zshAndFishScriptsCallTheEntryPoint() throws {
        let (c, _) = try Self.library()
        for shell in ["zsh", "fish"] {
            let s = try c.run("--generate-completion-script", shell).stdout
            for call in ["---completion grant -- positional@0", "---completion grant -- positional@1", "---completion grant -- --album",
                         "---completion restore -- positional@0", "---completion album add -- positional@0", "---completion assets -- --app"] {
                #expect(s.contains(call), "\(shell): \(call)")
            }
        }
        let zsh = try Self.complete(c, ["grant"], "positional@1", ["photogate", "grant", "org.example.Editor", "it"], shell: "zsh").lines
        #expect(zsh.first == "it's a\\:b.jpg", "\(zsh)")
        let fish = try Self.complete(c, ["grant"], "positional@1", ["photogate", "grant", "org.example.Editor", "$"], shell: "fish").lines
        #expect(fish == ["$(touch pwned).jpg"], "fish escapes what it inserts: \(fish)")
    }
}
