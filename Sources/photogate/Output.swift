import ArgumentParser
import Foundation
import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

// What commands print: escaped text for a terminal, notes, warnings and errors on stderr, tables
// (aligned for a person, tab-separated for a script), JSON, dates and sizes.

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
