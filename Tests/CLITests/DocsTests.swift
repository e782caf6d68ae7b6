import Foundation
import Testing
import TestSupport

/// Issue 40: the README is a few screens and the rest is in docs/, by purpose. What the documents
/// say must stay true of the code: the exit-code page is the code's own output, every command
/// line they show names a command and options that exist, and every link between them leads to a
/// file and a heading that exist. (The README's quick start is run as written, through a real
/// mount, by scripts/test.d/quickstart.sh.)
@Suite(.serialized) struct Docs {
    static let root = TestSupport.packageRoot

    /// README.md and every docs/*.md, by path relative to the package.
    static func documents() throws -> [(path: String, text: String)] {
        let docs = try FileManager.default.contentsOfDirectory(atPath: root + "/docs").filter { $0.hasSuffix(".md") }.sorted()
        return try (["README.md"] + docs.map { "docs/" + $0 }).map { ($0, try String(contentsOfFile: root + "/" + $0, encoding: .utf8)) }
    }

    @Test func theExitCodePageIsTheCodesOwnOutput() throws {
        let c = try CLI(initialize: false)
        let o = try c.run("exit-codes", "--markdown")
        #expect(o.status == 0, "\(o.stderr)")
        let page = try String(contentsOfFile: Self.root + "/docs/exit-codes.md", encoding: .utf8)
        #expect(o.stdout == page, "docs/exit-codes.md is not `photogate exit-codes --markdown`: run it again into the file")
        // One row per code the command lists, in its order.
        let codes = try c.run("exit-codes").stdout.split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) }
        let rows = page.split(separator: "\n").filter { $0.hasPrefix("| ") && !$0.hasPrefix("| code") }
            .compactMap { $0.dropFirst(2).split(separator: " ").first.map(String.init) }
        #expect(codes.count >= 15 && rows == codes, "\(rows) against \(codes)")
    }

    @Test func theReadmeIsAFewScreensAndLeadsToTheRest() throws {
        let readme = try String(contentsOfFile: Self.root + "/README.md", encoding: .utf8)
        let lines = readme.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count <= 250, "README.md has \(lines.count) lines: move the detail to docs/")
        // The two set-up commands, and the quick start the test runs.
        #expect(readme.contains("scripts/demo ") && readme.contains("scripts/test "))
        #expect(readme.contains("\n<!-- quick-start") && readme.contains("\n<!-- /quick-start -->\n"))
        for (path, _) in try Self.documents() where path.hasPrefix("docs/") {
            #expect(readme.contains("](\(path))"), "README.md does not link to \(path)")
        }
    }

    /// GitHub's anchor of a heading: lower case, spaces to hyphens, punctuation dropped.
    static func anchor(_ heading: String) -> String {
        String(heading.lowercased().compactMap { ch -> Character? in
            if ch == " " { return "-" }
            if ch.isLetter || ch.isNumber || ch == "-" || ch == "_" { return ch }
            return nil
        })
    }

    /// Text outside fenced code blocks.
    static func prose(_ text: String) -> String {
        var out: [Substring] = []
        var fenced = false
        for l in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if l.hasPrefix("```") { fenced.toggle(); continue }
            if !fenced { out.append(l) }
        }
        return out.joined(separator: "\n")
    }

    @Test func everyLinkBetweenTheDocumentsLeadsToAFileAndAHeading() throws {
        let docs = try Self.documents()
        var anchors: [String: Set<String>] = [:]
        for (path, text) in docs {
            anchors[path] = Set(Self.prose(text).split(separator: "\n").filter { $0.hasPrefix("#") }
                .map { Self.anchor($0.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces)) })
        }
        let link = try Regex(#"\]\(([^)\s]+)\)"#)
        var checked = 0
        for (path, text) in docs {
            let folder = (path as NSString).deletingLastPathComponent
            for m in Self.prose(text).matches(of: link) {
                let target = String(m.output[1].substring ?? "")
                if target.hasPrefix("http://") || target.hasPrefix("https://") || target.hasPrefix("mailto:") { continue }
                let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                let file = parts[0].isEmpty ? path : ((folder as NSString).appendingPathComponent(parts[0]) as NSString).standardizingPath
                #expect(FileManager.default.fileExists(atPath: Self.root + "/" + file), "\(path): a link to \(target): no \(file)")
                if parts.count == 2 {
                    #expect(anchors[file]?.contains(parts[1]) == true, "\(path): a link to \(target): \(file) has no such heading")
                }
                checked += 1
            }
        }
        #expect(checked > 30)
    }

    /// Every `photogate ...` line of a code block, and every inline `photogate ...` span, names a
    /// command that exists (subcommands of subcommands too), and each of its options is one that
    /// command's --help lists. Placeholders (APP, `...`) are not commands and are left alone.
    @Test func everyCommandTheDocumentsShowExistsWithItsOptions() throws {
        let c = try CLI(initialize: false)
        let commands = Set(try CLIScripting.allCommands(c).map { $0.joined(separator: " ") })
        var help: [String: String] = [:]
        func helpText(_ cmd: String) throws -> String {
            if let h = help[cmd] { return h }
            let h = try c.run(cmd.split(separator: " ").map(String.init) + ["--help"], env: ["COLUMNS": "1000"]).stdout
            help[cmd] = h
            return h
        }
        var lines: [(doc: String, line: String)] = []
        for (path, text) in try Self.documents() {
            var fenced = false
            for l in text.split(separator: "\n") {
                if l.hasPrefix("```") { fenced.toggle(); continue }
                if fenced { lines.append((path, String(l))) }
            }
            // Code spans, paired left to right (a span may wrap onto the next line).
            let span = try Regex(#"`([^`]+)`"#)
            for m in Self.prose(text).replacingOccurrences(of: "\n", with: " ").matches(of: span) {
                let code = String(m.output[1].substring ?? "")
                if code.hasPrefix("photogate ") || code.contains(" photogate ") { lines.append((path, code)) }
            }
        }
        var checked = 0
        for (doc, line) in lines {
            // The command, not its comment; each command of a pipeline or list on its own.
            var code = line
            if let hash = code.range(of: " #") { code = String(code[..<hash.lowerBound]) }
            for separator in ["$(", ")", "&&", "||", ";", "|"] { code = code.replacingOccurrences(of: separator, with: "\n") }
            for segment in code.split(separator: "\n") {
                let words = segment.split(separator: " ").map(String.init)
                guard let at = words.firstIndex(of: "photogate"), at + 1 < words.count else { continue }
                var rest = Array(words[(at + 1)...])
                if let end = rest.firstIndex(of: "--") { rest = Array(rest[..<end]) }   // run's own command follows
                guard let first = rest.first, first.first?.isLowercase == true else { continue }   // a placeholder, a flag
                if first == "help" {
                    if rest.count > 1, rest[1].first?.isLowercase == true { #expect(commands.contains(rest[1]), "\(doc): \(line)") }
                    continue
                }
                var cmd = first
                if rest.count > 1, commands.contains(first + " " + rest[1]) { cmd = first + " " + rest[1] }
                // A hidden command (debug-fill-catalog) is not listed, but has its --help.
                var known = commands.contains(cmd)
                if !known { known = try c.run([cmd, "--help"]).status == 0 }
                guard known else {
                    Issue.record("\(doc): `photogate \(first)` is no command: \(line)")
                    continue
                }
                let h = try helpText(cmd)
                for w in rest where w.hasPrefix("-") && w.count > 1 && w != "--help" {
                    let flag = String(w.prefix { $0 != "=" }).trimmingCharacters(in: CharacterSet(charactersIn: "`'\",.:"))
                    guard flag.count > 1, flag.dropFirst(flag.hasPrefix("--") ? 2 : 1).allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" }) else { continue }
                    let listed = h.contains(flag + " ") || h.contains(flag + ",") || h.contains(flag + "\n") || h.contains(flag + "=")
                        || h.contains(flag + "]") || h.contains(flag + ")")
                    #expect(listed, "\(doc): `photogate \(cmd)` has no option \(flag): \(line)")
                }
                checked += 1
            }
        }
        #expect(checked > 100, "\(checked) command lines checked")
    }
}
