import Foundation
import Testing
import TestSupport

/// Issue 38: the man pages scripts/install installs (made by scripts/man-pages from each
/// command's --help). Their NAME line was the abstract's first 70 columns (cut mid-sentence in 12
/// of 28 pages), SYNOPSIS came after DESCRIPTION, and SEE ALSO named "the README", which was not
/// installed.
@Suite(.serialized) struct ManPages {
    static let docdir = "/opt/example/share/doc/photogate"

    /// The pages made from the binary under test, by name, with each command's unwrapped help.
    static func pages(_ c: CLI) throws -> [(name: String, page: String, help: String)] {
        let out = c.dir + "/man"
        let o = try TestSupport.run("bash", [TestSupport.packageRoot + "/scripts/man-pages", TestSupport.photogateBinary, out, docdir])
        #expect(o.status == 0 && o.stderr.isEmpty, "\(o)")
        return try CLIScripting.allCommands(c).compactMap { cmd in
            let name = (["photogate"] + cmd).joined(separator: "-")
            guard let page = try? String(contentsOfFile: "\(out)/\(name).1", encoding: .utf8) else {
                Issue.record("no page \(name).1")
                return nil
            }
            return (name, page, try c.run(cmd + ["--help"], env: ["COLUMNS": "1000"]).stdout)
        }
    }

    @Test func everyCommandHasAPageWithItsWholeNameLineSynopsisFirstAndTheInstalledReadme() throws {
        let c = try CLI(initialize: false)
        let pages = try Self.pages(c)
        #expect(pages.count >= 35 && pages.contains { $0.name == "photogate-album-add" }, "\(pages.map(\.name))")
        for (name, page, help) in pages {
            let lines = page.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            let abstract = try #require(help.split(separator: "\n").first.map { String($0.dropFirst("OVERVIEW: ".count)) })
            // NAME: the whole abstract, a sentence.
            let nameAt = try #require(lines.firstIndex(of: ".SH NAME"), "\(name)")
            #expect(lines[nameAt + 1] == "\(name) \\- \(abstract)", "\(name): \(lines[nameAt + 1])")
            #expect(abstract.hasSuffix("."), "\(name): \(abstract)")
            // Sections in man's order.
            let sections = lines.filter { $0.hasPrefix(".SH ") }.map { String($0.dropFirst(4)) }
            #expect(Array(sections.prefix(2)) == ["NAME", "SYNOPSIS"] && sections.last == "SEE ALSO", "\(name): \(sections)")
            if let d = sections.firstIndex(of: "DESCRIPTION") { #expect(d == 2, "\(name): \(sections)") }
            let synopsis = try #require(lines.firstIndex(of: ".SH SYNOPSIS"))
            #expect(lines[synopsis + 1].hasPrefix("photogate"), "\(name): \(lines[synopsis + 1])")
            // SEE ALSO: the page above, and the documentation where scripts/install puts it
            // (issue 40: the README and docs/, each named whole; install.sh checks they are there).
            let seeAlso = lines.drop { $0 != ".SH SEE ALSO" }.joined(separator: "\n")
            for doc in ["README.md", "docs/guide.md", "docs/admin.md", "docs/security.md", "docs/exit-codes.md"] {
                #expect(seeAlso.contains("\n.I \(Self.docdir)/\(doc)\n"), "\(name): \(doc) in \(seeAlso)")
                #expect(FileManager.default.fileExists(atPath: TestSupport.packageRoot + "/" + doc), "\(doc) is not in the tree")
            }
            if name != "photogate" { #expect(seeAlso.contains(".BR photogate"), "\(name): \(seeAlso)") }
            // Examples (the indented lines of the help before USAGE) are kept whole, as lines.
            for example in help.split(separator: "\n").prefix(while: { !$0.hasPrefix("USAGE:") })
                where example.hasPrefix("  photogate") || example.hasPrefix("    ") {
                #expect(lines.contains(String(example).replacingOccurrences(of: "\\", with: "\\e")), "\(name): \(example)")
            }
        }
        let root = try #require(pages.first { $0.name == "photogate" })
        #expect(root.page.contains(".BR photogate-grant (1),") && root.page.contains(".BR photogate-album (1),"))
        // The exit codes are a table of items, not lines carried over.
        let codes = try #require(pages.first { $0.name == "photogate-exit-codes" })
        #expect(codes.page.contains(".TP\n\\fB64\\fR\nusage: bad arguments"), "\(codes.page)")
    }

    /// groff reads every page without a warning, and man shows the NAME line whole.
    @Test func pagesRenderCleanly() throws {
        guard TestSupport.which("groff"), TestSupport.which("man") else { print("pagesRenderCleanly: SKIPPED — no groff or man"); return }
        let c = try CLI(initialize: false)
        for (name, _, help) in try Self.pages(c) {
            let path = "\(c.dir)/man/\(name).1"
            let g = try TestSupport.run("groff", ["-man", "-Tutf8", "-ww", "-z", path])
            #expect(g.status == 0 && g.stderr.isEmpty, "\(name): \(g.stderr)")
            let m = try TestSupport.run("man", ["-l", path], environment: ["MANWIDTH": "80", "MANPAGER": "cat", "PAGER": "cat"])
            #expect(m.status == 0, "\(name): \(m.stderr)")
            let shown = m.stdout.split(separator: "\n", omittingEmptySubsequences: false).drop { $0 != "NAME" }.dropFirst().prefix { !$0.isEmpty }
                .map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " ")
            let abstract = String(help.split(separator: "\n")[0].dropFirst("OVERVIEW: ".count))
            #expect(shown == "\(name) - \(abstract)", "\(name): \(shown)")
        }
    }
}
