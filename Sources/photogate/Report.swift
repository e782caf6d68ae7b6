import ArgumentParser
import Foundation
import GrantStore
#if canImport(Glibc)
import Glibc
#endif

struct Report: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Show what each app did to which photos through its mounts.",
        usage: "photogate report [<app>] [--since <date>] [--asset <asset>] [<options>]",
        discussion: """
            Like iOS's App Privacy Report and Android's privacy dashboard, but naming the photos. A \
            running mount records, per app, photo, kind and day (UTC), the first and last time and \
            how many times: an open for reading (in a --no-open mount, the reads of a file's start \
            the daemon served; reads the kernel answers from its cache are not seen), a photo the \
            app created, a new version it saved, a photo it deleted, and an access it was refused \
            (a read of a photo whose location could not be stripped with confidence or whose \
            referenced original changed, an edit without consent, a delete it may not do). Your \
            own commands are never recorded. Mounts write it every 5 seconds: a crash loses at most \
            the last few seconds. It lives in the library's catalog, which no app's mount shows.

            Newest first. --asset ASSET lists which apps did what to one photo. Piped output is \
            tab-separated with ISO 8601 UTC dates. The report keeps 30 days unless set \
            (--retention); --recording off stops it (running mounts follow within seconds).

            Examples:
              photogate report org.example.Camera --since 7d
              photogate report --asset IMG_0001.JPG --json
              photogate report --clear org.example.Camera
              photogate report --retention 7
            """)

    @Argument(help: "Only this app's.", completion: Complete.apps) var app: String?
    @Option(help: ArgumentHelp("Only what was last done at or after this: YYYY-MM-DD (UTC), an ISO 8601 time, or an age such as 7d, 24h, 30m.", valueName: "date"))
    var since: String?
    @Option(help: ArgumentHelp("Only this photo (an id or a name).", valueName: "asset"), completion: Complete.assets) var asset: String?
    @Flag(help: "Forget the report (the app's, or every app's).") var clear = false
    @Option(help: ArgumentHelp("Keep this many days (1 to 3650; default 30); older days are dropped now.", valueName: "days"))
    var retention: Int?
    @Option(help: ArgumentHelp("Whether mounts record: on or off.", valueName: "on|off")) var recording: String?
    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag
    @OptionGroup var columns: ColumnsOption

    func execute() throws {
        let id = try app.map { try parseApp($0) }
        let library = try lib.open()
        if retention != nil || recording != nil {
            let on: Bool? = try recording.map { r in
                switch r.lowercased() {
                case "on": return true
                case "off": return false
                default: throw CommandFailure("--recording takes on or off, not '\(r)'", .usage)
                }
            }
            guard !clear, since == nil, asset == nil, app == nil else {
                throw CommandFailure("--retention and --recording apply to the whole report: give them alone", .usage)
            }
            try library.setReportSettings(retentionDays: retention, recording: on)
            let s = try library.reportSettings()
            sayNote("the report keeps \(s.retentionDays) day\(s.retentionDays == 1 ? "" : "s"); recording is \(s.recording ? "on" : "off")")
            return
        }
        if clear {
            guard since == nil, asset == nil else { throw CommandFailure("--clear takes only an app", .usage) }
            let n = try library.clearReport(app: id)
            sayNote("cleared \(n) entr\(n == 1 ? "y" : "ies") of \(id.map { "\($0)'s" } ?? "every app's") report")
            return
        }
        let sinceDate = try since.map { try Report.parseSince($0) }
        let rowID: Int64? = try asset.map { ref in
            guard let a = try library.resolve([ref]).first else { throw LibraryError.unknownAssets([ref]) }
            return a.rowID
        }
        // Days past the retention go from the disk now, not only from the listing.
        try? library.pruneReport()
        let entries = try library.accessReport(app: id, asset: rowID, since: sinceDate)
        if output.json {
            printJSON(entries.map { e -> [String: Any] in
                var d: [String: Any] = ["app": e.app.rawValue, "kind": e.kind.description, "first": iso(e.first),
                                        "last": iso(e.last), "count": e.count, "days": e.days]
                d["id"] = e.assetID ?? NSNull()
                d["name"] = e.name ?? NSNull()
                return d
            })
            return
        }
        try printTable(["LAST", "APP", "KIND", "ID", "NAME", "COUNT", "DAYS", "FIRST"], entries.map { e in
            [Cell.date(e.last), Cell(e.app.rawValue), Cell(e.kind.description), Cell(e.assetID ?? "-"),
             Cell(e.name ?? "(deleted for good)"), Cell(String(e.count)), Cell(String(e.days)), Cell.date(e.first)]
        }, columns: columns)
        if entries.isEmpty, !outputIsPiped {
            let s = try library.reportSettings()
            sayNote(s.recording ? "nothing recorded\(sinceDate == nil ? " in the last \(s.retentionDays) days" : " since then")"
                                : "nothing recorded: recording is off (photogate report --recording on)")
        }
    }

    /// `YYYY-MM-DD` (UTC midnight), `YYYY-MM-DDTHH:MM[:SS][Z]`, or an age: `7d`, `24h`, `30m`.
    static func parseSince(_ raw: String, now: Date = Date()) throws -> Date {
        let s = raw.trimmingCharacters(in: .whitespaces)
        if let unit = s.last, "dhm".contains(unit), let n = Int(s.dropLast()), n >= 0, n <= 100_000 {
            let seconds = Double(n) * (unit == "d" ? 86_400 : unit == "h" ? 3_600 : 60)
            return now.addingTimeInterval(-seconds)
        }
        let digits = s.unicodeScalars.map { Character($0) }
        func number(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= digits.count else { return nil }
            let part = digits[from..<from + count]
            guard part.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
            return Int(String(part))
        }
        guard digits.count >= 10, let y = number(0, 4), digits[4] == "-", let mo = number(5, 2), digits[7] == "-",
              let d = number(8, 2), (1...12).contains(mo), (1...31).contains(d) else {
            throw CommandFailure("--since: '\(raw)' is not a date (YYYY-MM-DD, YYYY-MM-DDTHH:MM:SSZ) or an age (7d, 24h, 30m)", .usage)
        }
        var h = 0, mi = 0, se = 0
        if digits.count > 10 {
            guard digits[10] == "T" || digits[10] == " ", let hh = number(11, 2), digits.count > 13, digits[13] == ":",
                  let mm = number(14, 2), hh < 24, mm < 60 else {
                throw CommandFailure("--since: '\(raw)' is not a date (YYYY-MM-DD, YYYY-MM-DDTHH:MM:SSZ) or an age (7d, 24h, 30m)", .usage)
            }
            h = hh; mi = mm
            var rest = digits.count > 16 ? Array(digits[16...]) : []
            if rest.first == ":" {
                guard let ss = number(17, 2), ss < 61 else {
                    throw CommandFailure("--since: '\(raw)' is not a date (YYYY-MM-DDTHH:MM:SSZ)", .usage)
                }
                se = ss
                rest = Array(rest.dropFirst(3))
            }
            guard rest.isEmpty || rest == ["Z"] else {
                throw CommandFailure("--since: '\(raw)': give times in UTC (a trailing Z or none)", .usage)
            }
        }
        var t = tm()
        t.tm_year = Int32(y - 1900); t.tm_mon = Int32(mo - 1); t.tm_mday = Int32(d)
        t.tm_hour = Int32(h); t.tm_min = Int32(mi); t.tm_sec = Int32(se)
        let seconds = timegm(&t)
        // timegm carries a day past the month's end over (2026-02-30 would be March 2nd).
        guard t.tm_mday == Int32(d), t.tm_mon == Int32(mo - 1) else {
            throw CommandFailure("--since: '\(raw)' is not a date (no such day)", .usage)
        }
        return Date(timeIntervalSince1970: Double(seconds))
    }
}
