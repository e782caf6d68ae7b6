import Foundation
import Testing
import TestSupport

/// Issue 16, scripting conventions: piped listings are tab-separated (a header, then one row per
/// line, bytes and ISO 8601 dates), --columns chooses and orders columns, and --help wraps cleanly.
@Suite(.serialized) struct CLIScripting {
    /// A library with two photos in an album whose name has a space, one photo's name too.
    static func library() throws -> CLI {
        let c = try CLI()
        let src = try c.photos(["my photo.jpg", "b.jpg"])
        try c.ok("import", src, "--album", "Summer 2024")
        return c
    }

    static func rows(_ s: String) -> [[String]] {
        s.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
    }

    @Test func pipedListingsAreTSVWithBytesAndISODates() throws {
        let c = try Self.library()
        let json = try #require(try c.json("assets") as? [[String: Any]])
        let o = try c.ok("assets")
        #expect(!o.stdout.contains("  "), "no padding: \(o.stdout)")
        let t = Self.rows(o.stdout)
        #expect(t.first == ["ID", "NAME", "TYPE", "SIZE", "CAPTURED", "LOCATION", "OWNER"])
        #expect(t.count == 3)
        for (row, j) in zip(t.dropFirst(), json) {
            #expect(row.count == 7, "\(row)")
            #expect(row[0] == j["id"] as? String)
            #expect(row[1] == j["name"] as? String)
            #expect(row[3] == String(describing: j["size"]!), "size in bytes: \(row)")
            #expect(UInt64(row[3]) != nil)
            #expect(row[4] == j["captureDate"] as? String, "ISO 8601 UTC: \(row)")
            #expect(row[4].hasSuffix("Z") && row[4].contains("T"))
        }
        #expect(t.dropFirst().contains { $0[1] == "my photo.jpg" }, "a name with a space is one field")

        let albums = Self.rows(try c.ok("albums").stdout)
        #expect(albums == [["NAME", "KIND", "ASSETS"], ["Summer 2024", "album", "2"]])

        // Every listing a script may pipe: a header, then tab-separated rows.
        try c.ok("authorize", "org.example.Editor", "--status", "limited")
        try c.ok("grant", "org.example.Editor", "my photo.jpg")
        for args in [["apps"], ["grants", "org.example.Editor"], ["trash"], ["requests"], ["changes", "org.example.Editor"],
                     ["mounts"], ["refused"], ["versions", "b.jpg"], ["status", "org.example.Editor"], ["verify"]] {
            let out = try c.run(args)
            #expect(out.status == 0, "\(args): \(out.stderr)")
            let lines = out.stdout.split(separator: "\n").map(String.init)
            let header = try #require(lines.first, "\(args)")
            #expect(header == header.uppercased() && header.contains("\t") && !header.contains(" "), "\(args): \(header)")
            let width = header.split(separator: "\t").count
            // verify keeps its summary as the last line.
            for l in lines.dropFirst().dropLast(args == ["verify"] ? 1 : 0) {
                #expect(l.split(separator: "\t", omittingEmptySubsequences: false).count == width, "\(args): \(l)")
                #expect(!l.contains("  "), "\(args): \(l)")
            }
        }
        let grants = Self.rows(try c.ok("grants", "org.example.Editor").stdout)
        #expect(grants.count == 2 && grants[1][1] == "my photo.jpg")
        let status = Self.rows(try c.ok("status", "org.example.Editor").stdout)
        #expect(status.count == 2 && status[1][0] == "org.example.Editor" && status[1][1] == "limited")
        let versions = Self.rows(try c.ok("versions", "b.jpg").stdout)
        #expect(versions.count == 2 && versions[1][2].hasSuffix("Z") && UInt64(versions[1][3]) != nil, "\(versions)")
    }

    @Test func columnsSelectAndOrder() throws {
        let c = try Self.library()
        let json = try #require(try c.json("assets") as? [[String: Any]])
        let t = Self.rows(try c.ok("assets", "--columns", "size,id").stdout)
        #expect(t.first == ["SIZE", "ID"])
        #expect(t.dropFirst().map { $0[1] } == json.map { $0["id"] as? String ?? "" })
        #expect(t.dropFirst().map { $0[0] } == json.map { String(describing: $0["size"]!) })
        // Case-insensitive, and a repeated column is repeated.
        #expect(Self.rows(try c.ok("albums", "--columns", "Assets,NAME").stdout) == [["ASSETS", "NAME"], ["2", "Summer 2024"]])
        #expect(Self.rows(try c.ok("assets", "--columns", "name").stdout).map { $0.count } == [1, 1, 1])
        #expect(try c.ok("trash", "--columns", "id").stdout == "ID\n")
    }

    @Test func anUnknownColumnIsAUsageErrorNamingTheValidOnes() throws {
        let c = try Self.library()
        let o = try c.run("assets", "--columns", "id,bogus")
        #expect(o.status == Code.usage)
        #expect(o.stdout.isEmpty)
        #expect(o.stderr.contains("bogus") && o.stderr.contains("id,name,type,size,captured,location,owner"), "\(o.stderr)")
        #expect(try c.run("albums", "--columns", "").status == Code.usage)
    }

    @Test func aTerminalKeepsTheAlignedTable() throws {
        guard TestSupport.which("script") else { print("aTerminalKeepsTheAlignedTable: SKIPPED — no script(1)"); return }
        let c = try Self.library()
        let o = try TestSupport.run("script", ["-qec", "'\(TestSupport.photogateBinary)' albums --library '\(c.library)'", "/dev/null"])
        #expect(o.status == 0, "\(o.stdout)")
        #expect(o.stdout.contains("NAME         KIND   ASSETS"), "\(o.stdout)")
        #expect(!o.stdout.contains("\t"))
        let a = try TestSupport.run("script", ["-qec", "'\(TestSupport.photogateBinary)' assets --library '\(c.library)'", "/dev/null"])
        #expect(a.stdout.contains(" KB") || a.stdout.contains(" B "), "human sizes on a terminal: \(a.stdout)")
    }

    /// Every `--help` at 80 columns: no line over 80, and no hard break inside a paragraph (a prose
    /// line that does not end a sentence or clause, followed by one whose first word would have fit
    /// on it: argument-parser's own wrapping never leaves that; a hard line break in the source does).
    @Test func helpWrapsCleanlyAt80Columns() throws {
        let c = try CLI(initialize: false)
        let top = try c.run(["--help"], env: ["COLUMNS": "80"]).stdout
        // The subcommand names, from the SUBCOMMANDS section.
        var cmds: [String] = []
        var inSub = false
        for l in top.split(separator: "\n", omittingEmptySubsequences: false) {
            if l.hasPrefix("SUBCOMMANDS:") { inSub = true; continue }
            if inSub && l.hasPrefix("  ") && !l.hasPrefix("   ") { cmds.append(String(l.dropFirst(2).prefix { $0 != " " })) }
            if inSub && l.isEmpty { inSub = false }
        }
        #expect(cmds.count >= 25, "\(cmds)")
        for cmd in [[]] + cmds.map({ [$0] }) {
            let o = try c.run(cmd + ["--help"], env: ["COLUMNS": "80"])
            #expect(o.status == 0, "\(cmd)")
            let lines = o.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            for (i, l) in lines.enumerated() {
                #expect(l.count <= 80, "\(cmd) line over 80: \(l)")
                guard i + 1 < lines.count else { continue }
                let next = lines[i + 1]
                let indent = l.prefix { $0 == " " }.count
                let body = l.trimmingCharacters(in: .whitespaces), nextBody = next.trimmingCharacters(in: .whitespaces)
                // Prose lines only: same indentation, not a command line or an option's line.
                // Prose is at column 0 (overview, discussion) or in the options' help column;
                // lines indented less (examples, tables such as exit-codes') are verbatim.
                guard indent == 0 || indent >= 20 else { continue }
                guard !body.isEmpty, !nextBody.isEmpty, indent == next.prefix(while: { $0 == " " }).count,
                      !body.hasPrefix("photogate"), !nextBody.hasPrefix("photogate"), !nextBody.hasPrefix("-"),
                      !body.hasPrefix("-") else { continue }
                if let last = body.last, ".:;!?".contains(last) { continue }
                let word = nextBody.prefix { $0 != " " }
                // argument-parser breaks before a word that would end exactly at column 80.
                #expect(l.count + 1 + word.count >= 80, "\(cmd): a hard break mid-sentence:\n\(l)\n\(next)")
            }
        }
    }

    /// Every command, subcommands of subcommands too (`album add`), as a word list.
    static func allCommands(_ c: CLI) throws -> [[String]] {
        var out: [[String]] = [[]]
        var i = 0
        while i < out.count {
            let help = try c.run(out[i] + ["--help"], env: ["COLUMNS": "1000"]).stdout
            var inSub = false
            for l in help.split(separator: "\n", omittingEmptySubsequences: false) {
                if l.hasPrefix("SUBCOMMANDS:") { inSub = true; continue }
                if inSub && l.isEmpty { inSub = false }
                guard inSub, l.hasPrefix("  "), !l.hasPrefix("   ") else { continue }
                let name = String(l.dropFirst(2).prefix { $0 != " " })
                if name != "help" { out.append(out[i] + [name]) }
            }
            i += 1
        }
        return out
    }

    /// Issue 38: examples and tables in `--help` are never broken mid-line at 80 columns.
    /// argument-parser wraps every line of a discussion at the screen width and carries the rest
    /// to column 0, so an example (`  photogate grant ... --kind photo`) longer than the screen
    /// became a command and a stray line. So: an indented line (an example, a table row) is
    /// followed by a blank line or another indented line, never by text at column 0; and a
    /// one-line `Example: photogate ...` stays one line.
    @Test func examplesAndTablesAreNotBrokenAt80Columns() throws {
        let c = try CLI(initialize: false)
        let commands = try Self.allCommands(c)
        #expect(commands.contains(["album", "add"]) && commands.count >= 30, "\(commands)")
        for cmd in commands {
            let o = try c.run(cmd + ["--help"], env: ["COLUMNS": "80"])
            let lines = o.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            for (i, l) in lines.enumerated() {
                #expect(l.count <= 80, "\(cmd) line over 80: \(l)")
                guard i + 1 < lines.count, !lines[i + 1].isEmpty else { continue }
                let next = lines[i + 1]
                let indent = l.prefix { $0 == " " }.count
                let verbatim = (indent > 0 && indent < 20) || l.hasPrefix("Example: ")
                #expect(!(verbatim && !next.hasPrefix(" ")), "\(cmd): an example or table row broken mid-line:\n\(l)\n\(next)")
            }
        }
    }

    /// The abstract (`OVERVIEW:`, the man page's NAME line, the shells' completion menus) is one
    /// complete sentence that fits on its line at 80 columns: it was cut mid-sentence in the man
    /// pages of 12 of 28 commands.
    @Test func abstractsAreCompleteSentencesThatFitOneLine() throws {
        let c = try CLI(initialize: false)
        for cmd in try Self.allCommands(c) {
            let help = try c.run(cmd + ["--help"], env: ["COLUMNS": "80"]).stdout
            let first = help.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            #expect(first.count > 2 && first[0].hasPrefix("OVERVIEW: ") && first[1].isEmpty, "\(cmd): the abstract wraps: \(first.prefix(2))")
            let abstract = String(first[0].dropFirst("OVERVIEW: ".count))
            #expect(abstract.hasSuffix(".") && abstract.first?.isUppercase == true, "\(cmd): \(abstract)")
        }
    }

    @Test func versionIsPrinted() throws {
        let o = try CLI(initialize: false).run("--version")
        #expect(o.status == 0)
        let v = o.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(v.split(separator: ".").count == 3 && v.split(separator: ".").allSatisfy { Int($0) != nil }, "\(o.stdout)")
    }
}
