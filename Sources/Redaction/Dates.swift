import Foundation

/// Capture-date candidates, in the order of trust.
struct DateCandidates {
    // EXIF (first EXIF block that has them wins).
    var exifOriginal: String?
    var exifOriginalOffset: String?
    var exifDigitized: String?
    var exifDigitizedOffset: String?
    var exifDateTime: String?
    var exifDateTimeOffset: String?
    // XMP
    var xmpOriginal: String?
    var xmpCreated: String?
    // Movies
    var quickTimeCreation: String?
    var movieHeader: Date?

    func best(video: Bool) -> Date? {
        if video {
            if let s = quickTimeCreation, let d = DateParsing.iso8601(s) { return d }
            if let d = movieHeader { return d }
        }
        if let s = exifOriginal, let d = DateParsing.exif(s, offset: exifOriginalOffset) { return d }
        if let s = exifDigitized, let d = DateParsing.exif(s, offset: exifDigitizedOffset) { return d }
        if let s = exifDateTime, let d = DateParsing.exif(s, offset: exifDateTimeOffset) { return d }
        if let s = xmpOriginal, let d = DateParsing.iso8601(s) { return d }
        if let s = xmpCreated, let d = DateParsing.iso8601(s) { return d }
        if !video, let s = quickTimeCreation, let d = DateParsing.iso8601(s) { return d }
        return nil
    }
}

/// Date parsing by hand: fixed formats, no locale, no Calendar.
enum DateParsing {
    /// Seconds between 1904-01-01 (QuickTime epoch) and 1970-01-01.
    static let quickTimeEpochOffset: UInt64 = 2_082_844_800

    /// Days from 1970-01-01 to y-m-d (proleptic Gregorian), after Howard Hinnant's `days_from_civil`.
    static func daysFromCivil(_ y0: Int, _ m: Int, _ d: Int) -> Int {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (m + 9) % 12
        let doy = (153 * mp + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    private struct Scanner {
        let b: [UInt8]
        var i = 0
        mutating func number(_ digits: Int) -> Int? {
            guard i + digits <= b.count else { return nil }
            var v = 0
            for k in 0..<digits {
                let c = b[i + k]
                guard c >= 48 && c <= 57 else { return nil }
                v = v * 10 + Int(c - 48)
            }
            i += digits
            return v
        }
        mutating func skip(_ allowed: String) -> Bool {
            guard i < b.count, allowed.utf8.contains(b[i]) else { return false }
            i += 1
            return true
        }
        var atEnd: Bool { i >= b.count }
        var current: UInt8? { i < b.count ? b[i] : nil }
    }

    /// "YYYY:MM:DD HH:MM:SS" (also with '-' and 'T'), local time; `offset` like "+02:00" gives the zone,
    /// otherwise the time is read as UTC.
    static func exif(_ text: String, offset: String?) -> Date? {
        guard let (seconds, zone) = parse(text.trimmingCharacters(in: .whitespacesAndNewlines.union(.init(charactersIn: "\0")))) else { return nil }
        var z = zone
        if z == nil, let offset, let parsed = parseZone(Array(offset.trimmingCharacters(in: .whitespacesAndNewlines.union(.init(charactersIn: "\0"))).utf8)) {
            z = parsed
        }
        return Date(timeIntervalSince1970: seconds - Double(z ?? 0))
    }

    /// ISO 8601 as XMP and QuickTime write it: date, optional time with optional fraction and zone.
    static func iso8601(_ text: String) -> Date? {
        guard let (seconds, zone) = parse(text.trimmingCharacters(in: .whitespacesAndNewlines.union(.init(charactersIn: "\0")))) else { return nil }
        return Date(timeIntervalSince1970: seconds - Double(zone ?? 0))
    }

    /// Seconds since 1970 of the wall-clock time, and the zone offset in seconds if the text has one.
    private static func parse(_ text: String) -> (Double, Int?)? {
        var s = Scanner(b: Array(text.utf8))
        guard let year = s.number(4), year >= 1, s.skip(":-") else { return nil }
        guard let month = s.number(2), (1...12).contains(month), s.skip(":-") else { return nil }
        guard let day = s.number(2), (1...31).contains(day) else { return nil }
        var seconds = Double(daysFromCivil(year, month, day)) * 86_400
        if s.atEnd { return (seconds, nil) }
        guard s.skip(" T") else { return nil }
        guard let hour = s.number(2), hour < 24, s.skip(":"), let minute = s.number(2), minute < 60 else { return nil }
        seconds += Double(hour * 3600 + minute * 60)
        if s.skip(":") {
            guard let second = s.number(2), second <= 60 else { return nil }
            seconds += Double(second)
            if s.skip(".,") {
                var scale = 0.1
                while let c = s.current, c >= 48 && c <= 57 {
                    seconds += Double(c - 48) * scale
                    scale /= 10
                    s.i += 1
                }
            }
        }
        if s.atEnd { return (seconds, nil) }
        guard let zone = parseZone(Array(s.b[s.i...])) else { return nil }
        return (seconds, zone)
    }

    /// "Z", "+HH:MM", "+HHMM", "+HH".
    private static func parseZone(_ b: [UInt8]) -> Int? {
        if b == [UInt8(ascii: "Z")] { return 0 }
        var s = Scanner(b: b)
        guard let sign = s.current, sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") else { return nil }
        s.i += 1
        guard let h = s.number(2), h <= 23 else { return nil }
        var m = 0
        if !s.atEnd {
            _ = s.skip(":")
            guard let mm = s.number(2), mm < 60 else { return nil }
            m = mm
        }
        guard s.atEnd else { return nil }
        let v = (h * 60 + m) * 60
        return sign == UInt8(ascii: "-") ? -v : v
    }
}
