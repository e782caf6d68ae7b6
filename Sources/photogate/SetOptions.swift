import ArgumentParser
import Foundation
import GrantStore
import PhotoLibrary

/// Which assets, by capture date and kind (issue 38): `assets` filters with them, and `grant`
/// makes a set grant of them that stays live. A day (`2024-06-01`) or a time without an offset is
/// read on the camera's clock: capture times a camera wrote without an offset are kept as UTC,
/// so a day is UTC midnight (local midnight put a photo taken on 1 August, 02:00 on the camera,
/// in a July set west of UTC); a time with an offset (`2024-06-01T12:00:00+02:00`) is exact.
/// `--taken-after` includes its moment, `--taken-before` excludes its own: June 2024 is
/// `--taken-after 2024-06-01 --taken-before 2024-07-01`.
struct SetFilterOptions: ParsableArguments {
    @Option(name: .customLong("taken-after"), help: ArgumentHelp("Only assets captured at or after this day or time (YYYY-MM-DD on the camera's clock, or ISO 8601 with an offset).", valueName: "date"))
    var takenAfter: String?
    @Option(name: .customLong("taken-before"), help: ArgumentHelp("Only assets captured before this day or time.", valueName: "date"))
    var takenBefore: String?
    @Option(help: ArgumentHelp("Only photos or only videos.", valueName: "photo|video"))
    var kind: String?

    var isEmpty: Bool { takenAfter == nil && takenBefore == nil && kind == nil }

    func validate() throws {
        if let takenAfter { _ = try Self.parseDate(takenAfter, "--taken-after") }
        if let takenBefore { _ = try Self.parseDate(takenBefore, "--taken-before") }
        if let kind, MediaClass(rawValue: kind) == nil { throw ValidationError("--kind is photo or video, not '\(kind)'") }
        if let a = try takenAfter.map({ try Self.parseDate($0, "--taken-after") }),
           let b = try takenBefore.map({ try Self.parseDate($0, "--taken-before") }), a >= b {
            throw ValidationError("--taken-after must be before --taken-before")
        }
    }

    /// The set these options describe (with an album, if any).
    func set(album: String?, stripLocation: Bool) throws -> SetGrant {
        SetGrant(album: album, takenAfter: try takenAfter.map { try Self.parseDate($0, "--taken-after") },
                 takenBefore: try takenBefore.map { try Self.parseDate($0, "--taken-before") },
                 mediaClass: kind.flatMap(MediaClass.init(rawValue:)), stripLocation: stripLocation)
    }

    /// Whether an asset passes the options.
    func admits(_ a: Asset) throws -> Bool {
        if let d = try takenAfter.map({ try Self.parseDate($0, "--taken-after") }), a.captureDate < d { return false }
        if let d = try takenBefore.map({ try Self.parseDate($0, "--taken-before") }), a.captureDate >= d { return false }
        if let kind, a.mediaClass.rawValue != kind { return false }
        return true
    }

    static func parseDate(_ s: String, _ flag: String) throws -> Date {
        let day = DateFormatter()
        day.locale = Locale(identifier: "en_US_POSIX")
        day.timeZone = TimeZone(identifier: "UTC")!
        day.dateFormat = "yyyy-MM-dd"
        if s.count == 10, let d = day.date(from: s) { return d }
        let iso = ISO8601DateFormatter()
        for options: ISO8601DateFormatter.Options in [[.withInternetDateTime], [.withInternetDateTime, .withFractionalSeconds]] {
            iso.formatOptions = options
            if let d = iso.date(from: s) { return d }
        }
        let local = DateFormatter()
        local.locale = Locale(identifier: "en_US_POSIX")
        local.timeZone = TimeZone(identifier: "UTC")!
        for f in ["yyyy-MM-dd'T'HH:mm:ss", "yyyy-MM-dd'T'HH:mm", "yyyy-MM-dd HH:mm:ss", "yyyy-MM-dd HH:mm"] {
            local.dateFormat = f
            if let d = local.date(from: s) { return d }
        }
        throw ValidationError("\(flag): '\(s)' is not a date (YYYY-MM-DD, or YYYY-MM-DDTHH:MM:SS with an optional offset)")
    }
}
