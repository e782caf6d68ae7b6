// Terminal text helpers: what a cell shows, how wide it is, and UTC dates without Foundation
// formatters (formatting 100,000 dates must take milliseconds, and the picker's search keys hold
// the same date text the date column shows).

/// Text safe to put on a terminal, measured in columns.
public enum TerminalText {
    /// Replaces everything a terminal would interpret: C0 and C1 controls (ESC, CSI, ...), DEL,
    /// and bidirectional overrides that reorder what follows. Names and album names come from
    /// files and apps, so they may hold any of these.
    public static func sanitize(_ s: String) -> String {
        var clean = true
        for u in s.unicodeScalars where isUnsafe(u) { clean = false; break }
        if clean { return s }
        var out = String.UnicodeScalarView()
        for u in s.unicodeScalars { out.append(isUnsafe(u) ? "?" : u) }
        return String(out)
    }

    static func isUnsafe(_ u: Unicode.Scalar) -> Bool {
        let v = u.value
        return v < 0x20 || (v >= 0x7f && v <= 0x9f) || (v >= 0x202a && v <= 0x202e) || (v >= 0x2066 && v <= 0x2069)
            || v == 0x200e || v == 0x200f || v == 0x061c
    }

    /// Columns one scalar takes: 0 for combining marks and zero-width characters, 2 for East
    /// Asian wide and emoji, else 1. An approximation of wcwidth that needs no locale.
    public static func width(_ u: Unicode.Scalar) -> Int {
        let v = u.value
        if v < 0x300 { return 1 }
        if (v >= 0x300 && v <= 0x36f) || (v >= 0x200b && v <= 0x200f) || (v >= 0xfe00 && v <= 0xfe0f)
            || (v >= 0x1ab0 && v <= 0x1aff) || (v >= 0x20d0 && v <= 0x20ff) || v == 0x200d {
            return 0
        }
        if (v >= 0x1100 && v <= 0x115f) || (v >= 0x2e80 && v <= 0xa4cf) || (v >= 0xac00 && v <= 0xd7a3)
            || (v >= 0xf900 && v <= 0xfaff) || (v >= 0xfe30 && v <= 0xfe4f) || (v >= 0xff00 && v <= 0xff60)
            || (v >= 0xffe0 && v <= 0xffe6) || (v >= 0x1f300 && v <= 0x1f64f) || (v >= 0x1f900 && v <= 0x1f9ff)
            || (v >= 0x20000 && v <= 0x3fffd) {
            return 2
        }
        return 1
    }

    public static func width(_ s: String) -> Int {
        var n = 0
        for u in s.unicodeScalars { n += width(u) }
        return n
    }

    /// Exactly `columns` wide: cut (ending in "~") or padded with spaces. `right` aligns right.
    public static func fit(_ s: String, _ columns: Int, right: Bool = false) -> String {
        guard columns > 0 else { return "" }
        let w = width(s)
        if w <= columns {
            let pad = String(repeating: " ", count: columns - w)
            return right ? pad + s : s + pad
        }
        var out = String.UnicodeScalarView()
        var used = 0
        for u in s.unicodeScalars {
            let cw = width(u)
            if used + cw > columns - 1 { break }
            out.append(u)
            used += cw
        }
        return String(out) + "~" + String(repeating: " ", count: max(0, columns - 1 - used))
    }

    /// Cut to at most `columns` (no padding).
    public static func clip(_ s: String, _ columns: Int) -> String {
        width(s) <= columns ? s : fit(s, columns)
    }
}

/// UTC calendar arithmetic (Howard Hinnant's days-from-civil algorithms).
public enum UTCDate {
    /// "YYYY-MM-DD HH:MM" for seconds since 1970 (UTC).
    public static func format(_ t: Double) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16)
        append(t, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends "YYYY-MM-DD HH:MM" (UTC) as UTF-8.
    public static func append(_ t: Double, to bytes: inout [UInt8]) {
        let secs = t.isFinite ? Int64(max(-6e10, min(2.5e11, t)).rounded(.down)) : 0
        var days = secs / 86400
        var rem = secs % 86400
        if rem < 0 { rem += 86400; days -= 1 }
        let (y, m, d) = civil(days)
        let hh = Int(rem / 3600), mm = Int((rem % 3600) / 60)
        let yy = Int(max(0, min(9999, y)))
        @inline(__always) func digit(_ v: Int) -> UInt8 { UInt8(truncatingIfNeeded: 0x30 + v) }
        var out: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (digit(yy / 1000), digit(yy / 100 % 10), digit(yy / 10 % 10), digit(yy % 10), 0x2d,
             digit(m / 10), digit(m % 10), 0x2d, digit(d / 10), digit(d % 10), 0x20,
             digit(hh / 10), digit(hh % 10), 0x3a, digit(mm / 10), digit(mm % 10))
        withUnsafeBytes(of: &out) { bytes.append(contentsOf: $0) }
    }

    static func civil(_ z0: Int64) -> (Int64, Int, Int) {
        let z = z0 + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let doe = z - era * 146097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = Int(doy - (153 * mp + 2) / 5 + 1)
        let m = Int(mp < 10 ? mp + 3 : mp - 9)
        return (m <= 2 ? y + 1 : y, m, d)
    }

    static func days(_ y0: Int64, _ m: Int, _ d: Int) -> Int64 {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = Int64(m > 2 ? m - 3 : m + 9)
        let doy = (153 * mp + 2) / 5 + Int64(d) - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146097 + doe - 719468
    }

    /// Parses "YYYY", "YYYY-MM", "YYYY-MM-DD" or "YYYY-MM-DD HH:MM" (UTC) to the first second it
    /// names; nil if it is not such a date.
    public static func parse(_ text: String) -> Double? {
        let s = text.trimmed(" ")
        let parts = s.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 1 || parts.count == 2 else { return nil }
        let ymd = parts[0].split(separator: "-", omittingEmptySubsequences: false)
        guard (1...3).contains(ymd.count), ymd[0].count == 4, let y = Int64(ymd[0]) else { return nil }
        var m = 1, d = 1, hh = 0, mm = 0
        if ymd.count >= 2 { guard ymd[1].count <= 2, let v = Int(ymd[1]), (1...12).contains(v) else { return nil }; m = v }
        if ymd.count == 3 {
            guard ymd[2].count <= 2, let v = Int(ymd[2]), v >= 1, v <= daysIn(y, m) else { return nil }
            d = v
        }
        if parts.count == 2 {
            guard ymd.count == 3 else { return nil }
            let hm = parts[1].split(separator: ":", omittingEmptySubsequences: false)
            guard hm.count == 2, let h = Int(hm[0]), let mi = Int(hm[1]), (0...23).contains(h), (0...59).contains(mi) else { return nil }
            hh = h; mm = mi
        }
        return Double(days(y, m, d) * 86400 + Int64(hh * 3600 + mm * 60))
    }

    static func daysIn(_ y: Int64, _ m: Int) -> Int {
        switch m {
        case 2: return (y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }
}

extension String {
    func trimmed(_ ch: Character) -> String {
        var s = Substring(self)
        while s.first == ch { s.removeFirst() }
        while s.last == ch { s.removeLast() }
        return String(s)
    }
}

/// "1.2 MB" like the rest of the CLI (decimal units).
public func pickerSize(_ n: UInt64) -> String {
    if n < 1000 { return "\(n) B" }
    let units = ["KB", "MB", "GB", "TB", "PB"]
    var v = Double(n) / 1000
    var i = 0
    while v >= 999.95 && i < units.count - 1 { v /= 1000; i += 1 }
    let tenths = Int((v * 10).rounded())
    return "\(tenths / 10).\(tenths % 10) \(units[i])"
}
