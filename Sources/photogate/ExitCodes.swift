import ArgumentParser
import Foundation
#if canImport(Glibc)
import Glibc
#endif

struct ExitCodes: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "exit-codes",
        abstract: "List the exit codes of every command (stable for scripts).",
        discussion: table(width: helpWidth()))

    @Flag(name: .long, help: "Print the table as the Markdown page docs/exit-codes.md (generated from this list).")
    var markdown = false

    func execute() throws {
        if markdown {
            FileHandle.standardOutput.write(Data(Self.markdownPage().utf8))
            return
        }
        for e in Exit.allCases {
            say("\(String(e.rawValue).padding(toLength: 4, withPad: " ", startingAt: 0)) \(e.meaning)")
        }
    }

    /// docs/exit-codes.md, whole: written from `Exit`, never by hand (a test compares the file
    /// with this output, so the page and the code cannot drift apart).
    static func markdownPage() -> String {
        var page = """
            # Exit codes

            <!-- Generated from the code (enum Exit, Sources/photogate/Support.swift): do not edit.
                 After changing the code: photogate exit-codes --markdown > docs/exit-codes.md -->

            Every photogate command exits with one of these codes. They are stable: scripts may
            branch on them, and a code is never renumbered. `photogate exit-codes` prints the same
            list, and `photogate help exit-codes` (`man photogate-exit-codes`) shows it.

            | code | meaning |
            |---|---|

            """
        for e in Exit.allCases {
            page += "| \(e.rawValue) | \(e.meaning.replacingOccurrences(of: "|", with: "\\|")) |\n"
        }
        return page
    }

    /// The codes as `--help` shows them: "  CODE meaning", each meaning wrapped under itself
    /// within `width` columns (argument-parser would carry the rest of a long row to column 0,
    /// breaking the table). Unwrapped for a wide screen (the man pages are made at 1000).
    static func table(width: Int) -> String {
        let indent = String(repeating: " ", count: 7)
        // argument-parser wraps a line followed by another one at width - 1.
        let room = max(20, width - 1 - indent.count)
        return Exit.allCases.map { e in
            var lines: [String] = []
            var line = ""
            for word in e.meaning.split(separator: " ") {
                if !line.isEmpty && line.count + 1 + word.count > room {
                    lines.append(line)
                    line = ""
                }
                line += (line.isEmpty ? "" : " ") + word
            }
            lines.append(line)
            let code = "  " + String(e.rawValue).padding(toLength: 4, withPad: " ", startingAt: 0) + " "
            return code + lines.joined(separator: "\n" + indent)
        }.joined(separator: "\n")
    }

    /// The width argument-parser formats help for: $COLUMNS, else the terminal's, else 80.
    static func helpWidth() -> Int {
        if let c = ProcessInfo.processInfo.environment["COLUMNS"].flatMap(Int.init), c > 0 { return c }
        var size = winsize()
        if ioctl(1, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        return 80
    }
}
