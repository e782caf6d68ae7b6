import ArgumentParser
import Foundation
import GrantStore
import PhotoLibrary
import LibraryRun
#if canImport(Glibc)
import Glibc
#endif

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
    case .libraryDamaged, .catalogDamaged, .catalogLogLost: return .catalogDamaged
    case .notOwner, .openFolder: return .notOwner
    case .libraryBusy, .catalogFileGone: return .busy
    case .invalidAppID, .invalid: return .usage
    case .unknownApp, .unknownAssets, .unknownAlbum, .unknownRequest: return .notFound
    case .badInput: return .badInput
    case .noSpace: return .noSpace
    case .io, .notDurable: return .failure
    }
}

/// Text for a terminal (issue 14): names, reasons and paths come from apps and from disk, and
/// may hold ESC, newlines, tabs, C1 controls or bidirectional overrides that would steer a
/// terminal, forge or split rows, or reorder what a person reads. Every text (non-JSON) output
/// goes through this: `\\` for a backslash, `\n`, `\r`, `\t`, and `\u{XXXX}` for every other
/// character of `DisplayName.isUnsafe`, so nothing raw gets through and the escaping is
/// unambiguous. JSON output is escaped by JSON itself.
func escaped(_ s: String) -> String {
    guard s.unicodeScalars.contains(where: { $0 == "\\" || DisplayName.isUnsafe($0) }) else { return s }
    var out = ""
    out.reserveCapacity(s.utf8.count + 8)
    for u in s.unicodeScalars {
        switch u {
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        default:
            if DisplayName.isUnsafe(u) {
                out += "\\u{" + String(u.value, radix: 16, uppercase: true) + "}"
            } else {
                out.unicodeScalars.append(u)
            }
        }
    }
    return out
}

func printError(_ message: String) {
    let line = "photogate: error: \(escaped(message))\n"
    _ = line.withCString { write(2, $0, strlen($0)) }
}

func printWarning(_ message: String) {
    let line = "photogate: warning: \(escaped(message))\n"
    _ = line.withCString { write(2, $0, strlen($0)) }
}

/// Something the person should know about what a command did (stderr: stdout stays the result).
func printNote(_ message: String) {
    let line = "photogate: note: \(escaped(message))\n"
    _ = line.withCString { write(2, $0, strlen($0)) }
}

/// A photogate subcommand: it writes `execute`, and errors become a message and an exit code in
/// one place (`photogate.run`), the same for every command.
protocol PhotogateCommand: ParsableCommand {
    func execute() throws
}

extension PhotogateCommand {
    func run() throws {
        // A command that changed the library returns once the running mounts show the change, so
        // that what it took away (a revoke, a denial, strip-location on, a photo trashed) is gone
        // for the next open. Not a mount's daemon (it waits for no other mount), and not `grant`,
        // which only adds to what an app sees: it stays one commit (~14 ms with 10 mounts
        // running; waiting for them all doubled it), and its mounts show it within a millisecond.
        let waits = !(self is Mount) && !(self is Grant)
        if waits { Library.notesCommits.store(true, ordering: .relaxed) }
        // Also when it fails after committing (pick interrupted by a signal reverts, then exits 130).
        defer { if waits { awaitRunningMounts() } }
        try photogate.run {
            do {
                try execute()
            } catch LibraryError.unknownApp(let id) {
                // What to do about it, which the library's own message cannot say (issue 38).
                let offersNewApp = self is Grant || self is Options || self is Pick
                throw CommandFailure(unknownAppMessage(id, offersNewApp: offersNewApp), .notFound)
            }
        }
    }
}

/// "unknown app", and how an app becomes known: a typo is the usual cause, so nothing registers
/// one by accident; `authorize` (or, where the command has it, --new-app) does it on purpose.
func unknownAppMessage(_ id: String, offersNewApp: Bool) -> String {
    "unknown app '\(id)': no authorization, mount or grant has named it (a typo?); `photogate apps` lists the known apps. "
        + "Register it with `photogate authorize \(id) --status limited` (or another status)"
        + (offersNewApp ? ", or pass --new-app" : "")
}

/// Waits until every running mount of each library this command changed has applied the change
/// (at most 10 s; a mount whose daemon is stopped or stuck gets a warning, and the command still
/// succeeds: the change is committed, and that mount applies it when its daemon runs again).
func awaitRunningMounts() {
    for c in Library.takeCommitted() {
        for r in MountAcks.wait(for: c.seq, run: c.run, timeout: 10) {
            printWarning("the mount of \(r.app) at \(r.mountpoint) (pid \(r.pid)) has not applied this change after 10 s; it will once its daemon runs again")
        }
    }
}

/// The one CLI error handler: library errors and command failures become the message and exit
/// code of the table (`photogate help exit-codes`); argument-parser's own errors and exit codes
/// pass through to it; anything else (an error no layer typed) is reported, escaped, as a
/// failure rather than as argument-parser's raw "Error: ..." line.
func run(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch let e as LibraryError {
        printError(e.description)
        throw ExitCode(exitCode(for: e).rawValue)
    } catch let e as CommandFailure {
        printError(e.message)
        throw ExitCode(e.code.rawValue)
    } catch let e as ExitCode {
        throw e
    } catch let e as ValidationError {
        throw e
    } catch let e as CleanExit {
        throw e
    } catch {
        printError(String(describing: error))
        throw ExitCode(Exit.failure.rawValue)
    }
}

struct CommandFailure: Error {
    var message: String
    var code: Exit
    init(_ message: String, _ code: Exit) {
        self.message = message
        self.code = code
    }
}

struct LibraryOption: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The library folder (default: $PHOTOGATE_LIBRARY, else $XDG_DATA_HOME/photogate, else ~/.local/share/photogate).", valueName: "dir"),
            completion: .directory)
    var library: String?

    var paths: LibraryPaths { LibraryPaths.resolve(library) }

    /// Opens the library, and runs the automatic purge of Recently Deleted when it is on and due
    /// (at most hourly; `photogate trash --purge-after`), saying what it deleted. `purge: false`
    /// for a command that must not lose a photo by running (`restore`).
    func open(purge: Bool = true) throws -> Library {
        let library = try Library.open(at: paths)
        if purge { runAutomaticPurge(library) }
        return library
    }

    /// The library's folders, for what reads only its mount registry (`mounts`, `unmount`): the
    /// library is opened (its ownership and catalog checked), and a catalog whose log or index
    /// was removed under running mounts still lets them be listed and unmounted, which is what
    /// the person is told to do then.
    func registryLocations() throws -> LibraryPaths {
        do { return try open(purge: false).paths } catch LibraryError.catalogFileGone { return paths }
    }
}

/// The automatic purge of Recently Deleted, run by any command that opens the library (issue 38):
/// never silent, it says on stderr what it deleted for good; a failure is a warning, and the
/// command goes on. `force`: whether an hour has passed or not (`photogate trash` lists what is
/// left after it).
func runAutomaticPurge(_ library: Library, force: Bool = false) {
    do {
        guard let done = try library.purgeRecentlyDeleted(force: force), !done.assets.isEmpty else { return }
        let n = done.assets.count
        let names = done.assets.prefix(10).map { "\($0.displayName) (\($0.id))" }.joined(separator: ", ")
        printNote("deleted for good \(n) photo\(n == 1 ? "" : "s") in Recently Deleted for more than \(done.days) day\(done.days == 1 ? "" : "s") "
            + "(the automatic purge; photogate trash --purge-after off stops it): \(names)\(n > 10 ? " and \(n - 10) more" : "")")
    } catch {
        printWarning("the automatic purge of Recently Deleted did not run: \(error)")
    }
}

struct JSONFlag: ParsableArguments {
    @Flag(name: .long, help: "Print JSON (stable fields, documented in docs/guide.md).")
    var json = false
}

func parseApp(_ raw: String) throws -> AppID {
    guard let id = AppID(raw) else { throw LibraryError.invalidAppID(raw) }
    return id
}

/// Asset references from the command line; "-" reads more from standard input, one per line.
func expandRefs(_ refs: [String]) -> [String] {
    var out: [String] = []
    for r in refs {
        if r == "-" {
            while let line = readLine(strippingNewline: true) {
                let t = line.trimmingCharacters(in: .whitespaces)
                if !t.isEmpty { out.append(t) }
            }
        } else {
            out.append(r)
        }
    }
    return out
}

// MARK: output

/// UTC time formatting without Foundation formatters (they are not Sendable globals).
func formatUTC(_ d: Date, _ format: String) -> String {
    var t = time_t(d.timeIntervalSince1970.rounded(.down))
    var tmv = tm()
    gmtime_r(&t, &tmv)
    var buf = [CChar](repeating: 0, count: 64)
    let n = strftime(&buf, buf.count, format, &tmv)
    return String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

func iso(_ d: Date) -> String { formatUTC(d, "%Y-%m-%dT%H:%M:%SZ") }
func shortDate(_ d: Date) -> String { formatUTC(d, "%Y-%m-%d %H:%M") }

/// A time for a person (issue 38): local (TZ, else /etc/localtime) with the zone's offset at that
/// moment, "2024-07-14 12:31 +02:00", so that no one reads UTC as their own time.
func localDate(_ d: Date) -> String {
    var t = time_t(d.timeIntervalSince1970.rounded(.down))
    var tmv = tm()
    tzset()
    localtime_r(&t, &tmv)
    var buf = [CChar](repeating: 0, count: 64)
    let n = strftime(&buf, buf.count, "%Y-%m-%d %H:%M", &tmv)
    let offset = Int(tmv.tm_gmtoff)
    let minutes = abs(offset) / 60
    let zone = (offset < 0 ? "-" : "+") + String(format: "%02d:%02d", minutes / 60, minutes % 60)
    return String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) + " " + zone
}

func printJSON(_ value: Any) {
    let data = try! JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
    FileHandle.standardOutput.write(data)
    FileHandle.standardOutput.write(Data("\n".utf8))
}

func assetJSON(_ a: Asset, name: String? = nil) -> [String: Any] {
    var d: [String: Any] = [
        "id": a.id, "name": name ?? a.displayName, "displayName": a.displayName, "type": a.mediaKind,
        "mediaClass": a.mediaClass.rawValue, "size": a.byteSize, "captureDate": iso(a.captureDate),
        "addedDate": iso(a.addedDate), "hasLocation": a.hasLocation, "hash": a.contentHash,
        "shared": a.isShared, "owner": a.owner?.rawValue ?? NSNull(),
    ]
    if let t = a.trashedDate { d["trashedDate"] = iso(t) }
    return d
}

func humanSize(_ n: UInt64) -> String {
    let units = ["B", "KB", "MB", "GB", "TB"]
    var v = Double(n)
    var i = 0
    while v >= 1000 && i < units.count - 1 { v /= 1000; i += 1 }
    return i == 0 ? "\(n) B" : String(format: "%.1f %@", v, units[i])
}

/// One table cell: what a person reads on a terminal, and what a script reads from a pipe
/// (issue 16: sizes in bytes, dates in ISO 8601 UTC, as in --json, whatever the machine's zone).
/// Most cells are the same text for both. Dates on a terminal are local, with their offset.
struct Cell: ExpressibleByStringLiteral {
    var human: String
    var raw: String
    init(_ s: String) { human = s; raw = s }
    init(human: String, raw: String) { self.human = human; self.raw = raw }
    init(stringLiteral s: String) { self.init(s) }
    static func size(_ n: UInt64) -> Cell { Cell(human: humanSize(n), raw: String(n)) }
    static func date(_ d: Date) -> Cell { Cell(human: localDate(d), raw: iso(d)) }
}

/// Whether text listings are for a script: stdout is not a terminal (issue 16).
var outputIsPiped: Bool { isatty(1) == 0 }

/// `--columns a,b,c` on every listing (like `flatpak document-list --columns`).
struct ColumnsOption: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("Print only these columns, in this order (comma-separated header names, any case).", valueName: "a,b,c"))
    var columns: String?

    /// The indexes into `header` to print, in order; exit 64 naming the valid columns on an unknown one.
    func select(_ header: [String]) throws -> [Int] {
        guard let columns else { return Array(header.indices) }
        let valid = header.map { $0.lowercased() }
        var out: [Int] = []
        for raw in columns.split(separator: ",", omittingEmptySubsequences: false) {
            let name = raw.trimmingCharacters(in: .whitespaces).lowercased()
            guard let i = valid.firstIndex(of: name) else {
                throw CommandFailure("unknown column '\(name)' (valid: \(valid.joined(separator: ",")))", .usage)
            }
            out.append(i)
        }
        return out
    }
}

/// Prints a listing: a header, then one line per row, every cell escaped (`escaped`) so one row
/// is one line whatever the names hold. On a terminal: aligned columns, sizes and dates for
/// people (local times with their offset). Piped (issue 16): tab-separated, no padding, sizes in
/// bytes, ISO 8601 UTC dates.
func printTable(_ header: [String], _ rawRows: [[Cell]], columns: ColumnsOption = ColumnsOption()) throws {
    let pick = try columns.select(header)
    let piped = outputIsPiped
    let head = pick.map { header[$0] }
    let rows = rawRows.map { r in pick.map { i in i < r.count ? escaped(piped ? r[i].raw : r[i].human) : "" } }
    if piped {
        var out = head.joined(separator: "\t") + "\n"
        for r in rows { out += r.joined(separator: "\t") + "\n" }
        FileHandle.standardOutput.write(Data(out.utf8))
        return
    }
    var widths = head.map { $0.count }
    for r in rows { for (i, c) in r.enumerated() where i < widths.count { widths[i] = max(widths[i], c.count) } }
    func line(_ cells: [String]) -> String {
        var s = ""
        for (i, c) in cells.enumerated() {
            if i == cells.count - 1 { s += c } else { s += c.padding(toLength: widths[i] + 2, withPad: " ", startingAt: 0) }
        }
        return s
    }
    var out = line(head) + "\n"
    for r in rows { out += line(r) + "\n" }
    FileHandle.standardOutput.write(Data(out.utf8))
}

/// Plain-string rows (every cell the same on a terminal and in a pipe).
func printTable(_ header: [String], _ rawRows: [[String]], columns: ColumnsOption = ColumnsOption()) throws {
    try printTable(header, rawRows.map { $0.map { Cell($0) } }, columns: columns)
}

/// A line that is not a row (a title, a summary): stdout on a terminal; stderr when piped, so
/// that stdout stays header + rows for scripts.
func sayNote(_ s: String) {
    if outputIsPiped {
        FileHandle.standardError.write(Data((escaped(s) + "\n").utf8))
    } else {
        say(s)
    }
}

/// Prints one line of text output, escaped (`escaped`).
func say(_ s: String) { FileHandle.standardOutput.write(Data((escaped(s) + "\n").utf8)) }

