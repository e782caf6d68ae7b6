import ArgumentParser
import Foundation
import GrantStore
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

            <!-- Generated from the code (enum Exit, Sources/photogate/ExitCodes.swift): do not edit.
                 After changing the code: photogate exit-codes --markdown > docs/exit-codes.md -->

            Every photogate command exits with one of these codes (but `photogate run`, which exits
            with its command's status, and a command a signal N interrupts: 128+N). They are stable: scripts may
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

/// The documented, stable exit codes: the one list. `photogate exit-codes` and its `--help` print
/// it, and docs/exit-codes.md is its `--markdown` output (a test keeps them equal). Scripts branch
/// on the numbers; never renumber.
enum Exit: Int32, CaseIterable {
    case success = 0
    case failure = 1
    case usage = 64
    case badInput = 65
    case notFound = 66
    case libraryMissing = 67
    case conflict = 68
    case busy = 69
    case libraryIncompatible = 70
    case noSpace = 71
    case mountFailed = 72
    case expired = 73
    case notOwner = 74
    case catalogDamaged = 75
    case verifyProblems = 76

    var meaning: String {
        switch self {
        case .success: return "success"
        case .failure: return "other failure (I/O error, unexpected state)"
        case .usage: return "usage: bad arguments, invalid app id, invalid option value"
        case .badInput: return "bad input: a file is not a photo or video, is truncated or unreadable (import still imports the rest)"
        case .notFound:
            return "not found: unknown app (also for `grant`, `options` and `pick` without `--new-app`), asset, album or request; "
                + "`unmount`: nothing mounted there, or not a photogate view of this library"
        case .libraryMissing: return "no library at the given place (run `photogate init`)"
        case .conflict:
            return "conflict: already exists, not empty, or refused by a rule (e.g. a shared asset to a limited app, selected or picked; "
                + "an ambiguous name; a library open to other users that belongs to someone else)"
        case .busy:
            return "the library is locked by another process for too long; try again. Or its catalog's log or shared index was removed "
                + "while processes (named) hold it open: end them first (`photogate unmount`). `unmount`: the view is unmounted, "
                + "but its daemon has not ended within `--timeout` (stopped or stuck; it is named)"
        case .libraryIncompatible: return "the library was written by a newer photogate; nothing was changed"
        case .noSpace: return "no space left on the library's disk; nothing partial was kept"
        case .mountFailed:
            return "mount failed: mount point missing or busy, inside the library (its folder, the database's folder, `store/`, "
                + "`tmp/`, `run/`, anything in them, however reached) or holding it, /dev/fuse missing or not open to the user, "
                + "or the daemon did not start"
        case .expired: return "change token expired: the history before it was discarded; refetch everything"
        case .notOwner:
            return "the library (its folder, or a part of it such as the database, `store/`, `tmp/` or `run/`, or a folder above it) "
                + "belongs to another user, neither you nor root: run the command as its owner (`runuser -u OWNER -- photogate ...`, "
                + "`sudo -u OWNER photogate ...`); or a folder above it is writable by others (make it `go-w`, or sticky); nothing "
                + "was changed. Also when the place `mount`, `unmount`, `backup` or `run --bind`/`--ro-bind` acts on is reached "
                + "through a symbolic link, or a folder, that another user owns or may change"
        case .catalogDamaged:
            return "the library's catalog (`photogate.sqlite`) is damaged or missing while the library is there (its marker, its "
                + "store), or its write-ahead log was lost after a kill; nothing was changed or created: restore it from a backup, "
                + "or rebuild it from the store (`photogate verify --rebuild`; `verify --accept-lost-log` for a lost log)"
        case .verifyProblems: return "verify found a problem in the library (after --repair: one it could not repair); each is printed"
        }
    }
}

func exitCode(for e: LibraryError) -> Exit {
    switch e {
    case .libraryMissing: return .libraryMissing
    case .libraryExists, .albumExists, .conflict, .tooManyRequests: return .conflict
    case .libraryTooNew: return .libraryIncompatible
    case .libraryDamaged, .catalogDamaged, .serverCatalogDamaged, .catalogLogLost: return .catalogDamaged
    case .notOwner, .openFolder: return .notOwner
    case .libraryBusy, .catalogFileGone: return .busy
    case .invalidAppID, .invalid: return .usage
    case .unknownApp, .unknownAssets, .unknownAlbum, .unknownRequest: return .notFound
    case .badInput: return .badInput
    case .noSpace: return .noSpace
    case .io, .notDurable: return .failure
    }
}
