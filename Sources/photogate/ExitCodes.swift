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

    func execute() throws {
        for e in Exit.allCases {
            say("\(String(e.rawValue).padding(toLength: 4, withPad: " ", startingAt: 0)) \(e.meaning)")
        }
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
