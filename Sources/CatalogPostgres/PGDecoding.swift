import PostgresNIO

/// Turns a result cell into a PGValue by its column's type.
///
/// postgres-nio asks the server for every result column in binary format (its Bind message
/// always says so; there is no option), so "anything else as its text form" cannot be had from
/// the server: the types below are decoded here, the others are refused with an error that says
/// to cast the column to text in the query, rather than returned as bytes nobody can read.
///
///   int2, int4, int8, oid              -> .int
///   float4, float8, numeric            -> .double (numeric NaN/±Infinity as Double's)
///   bool                               -> .int(0 or 1)
///   text, varchar, name, bpchar, "char", unknown, json, xml -> .text
///   bytea                              -> .bytes
///   void                               -> .null
///   text forms, as PostgreSQL writes them (DateStyle ISO): jsonb, uuid, date, time,
///   timestamp, timestamptz (in UTC, "+00": sessions run with TimeZone=UTC)
enum PGDecoding {
    struct Unsupported: Error {
        var column: String
        var typeOID: UInt32
    }

    static func value(_ cell: PostgresCell) throws -> PGValue {
        guard var buf = cell.bytes else { return .null }
        let oid = cell.dataType.rawValue
        func bad() -> Unsupported { Unsupported(column: cell.columnName, typeOID: oid) }
        switch oid {
        case 21: // int2
            guard buf.readableBytes == 2, let v = buf.readInteger(as: Int16.self) else { throw bad() }
            return .int(Int64(v))
        case 23: // int4
            guard buf.readableBytes == 4, let v = buf.readInteger(as: Int32.self) else { throw bad() }
            return .int(Int64(v))
        case 20: // int8
            guard buf.readableBytes == 8, let v = buf.readInteger(as: Int64.self) else { throw bad() }
            return .int(v)
        case 26: // oid
            guard buf.readableBytes == 4, let v = buf.readInteger(as: UInt32.self) else { throw bad() }
            return .int(Int64(v))
        case 700: // float4
            guard buf.readableBytes == 4, let v = buf.readInteger(as: UInt32.self) else { throw bad() }
            return .double(Double(Float(bitPattern: v)))
        case 701: // float8
            guard buf.readableBytes == 8, let v = buf.readInteger(as: UInt64.self) else { throw bad() }
            return .double(Double(bitPattern: v))
        case 1700: // numeric
            guard let d = numeric(&buf) else { throw bad() }
            return .double(d)
        case 16: // bool
            guard buf.readableBytes == 1, let v = buf.readInteger(as: UInt8.self) else { throw bad() }
            return .int(v == 0 ? 0 : 1)
        case 25, 1043, 19, 1042, 18, 705, 114, 142: // text, varchar, name, bpchar, "char", unknown, json, xml
            return .text(buf.readString(length: buf.readableBytes) ?? "")
        case 3802: // jsonb: a version byte (1), then the text
            guard buf.readInteger(as: UInt8.self) == 1 else { throw bad() }
            return .text(buf.readString(length: buf.readableBytes) ?? "")
        case 2278: // void (what pg_notify() and other procedures return)
            return .null
        case 17: // bytea
            return .bytes(buf.readBytes(length: buf.readableBytes) ?? [])
        case 2950: // uuid
            guard buf.readableBytes == 16, let b = buf.readBytes(length: 16) else { throw bad() }
            return .text(uuid(b))
        case 1082: // date: days since 2000-01-01
            guard buf.readableBytes == 4, let v = buf.readInteger(as: Int32.self) else { throw bad() }
            if v == Int32.max { return .text("infinity") }
            if v == Int32.min { return .text("-infinity") }
            return .text(date(days: Int64(v)))
        case 1083: // time: microseconds since midnight
            guard buf.readableBytes == 8, let v = buf.readInteger(as: Int64.self) else { throw bad() }
            return .text(time(micros: v))
        case 1114, 1184: // timestamp, timestamptz: microseconds since 2000-01-01 00:00 (UTC for tz)
            guard buf.readableBytes == 8, let v = buf.readInteger(as: Int64.self) else { throw bad() }
            if v == Int64.max { return .text("infinity") }
            if v == Int64.min { return .text("-infinity") }
            return .text(timestamp(micros: v, utcSuffix: oid == 1184))
        default:
            throw bad()
        }
    }

    /// PostgreSQL's binary numeric: ndigits, weight (of the first base-10000 digit), sign, dscale,
    /// then the digits. Read as a decimal string so that Double's parser rounds it once.
    static func numeric(_ buf: inout ByteBuffer) -> Double? {
        guard let ndigits = buf.readInteger(as: Int16.self), let weight = buf.readInteger(as: Int16.self),
              let sign = buf.readInteger(as: UInt16.self), buf.readInteger(as: Int16.self) != nil,
              ndigits >= 0, buf.readableBytes == Int(ndigits) * 2 else { return nil }
        switch sign {
        case 0xC000: return .nan
        case 0xD000: return .infinity
        case 0xF000: return -.infinity
        case 0x0000, 0x4000: break
        default: return nil
        }
        if ndigits == 0 { return 0 }
        var s = sign == 0x4000 ? "-0." : "0."
        for _ in 0..<ndigits {
            guard let d = buf.readInteger(as: Int16.self), (0..<10000).contains(d) else { return nil }
            let digits = String(d)
            s += String(repeating: "0", count: 4 - digits.count) + digits
        }
        s += "e\(4 * (Int(weight) + 1))"
        return Double(s)
    }

    static func uuid(_ b: [UInt8]) -> String {
        let hex = Array("0123456789abcdef")
        var s = ""
        for (i, byte) in b.enumerated() {
            if i == 4 || i == 6 || i == 8 || i == 10 { s.append("-") }
            s.append(hex[Int(byte >> 4)])
            s.append(hex[Int(byte & 0xF)])
        }
        return s
    }

    private static func pad(_ v: Int64, _ width: Int) -> String {
        let s = String(v)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }

    /// The proleptic Gregorian date `days` after 2000-01-01 (H. Hinnant's civil_from_days), as
    /// PostgreSQL writes it: YYYY-MM-DD, years before 1 as "YYYY-MM-DD BC" (no year 0).
    static func date(days: Int64) -> String {
        let z = days + 10957 + 719468   // 2000-01-01 is day 10957 after 1970-01-01
        let era = (z >= 0 ? z : z - 146096) / 146097
        let doe = z - era * 146097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        if y <= 0 { return "\(pad(1 - y, 4))-\(pad(m, 2))-\(pad(d, 2)) BC" }
        return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))"
    }

    /// HH:MM:SS, then the fraction of a second without its trailing zeros, as PostgreSQL writes it.
    static func time(micros: Int64) -> String {
        let secs = micros / 1_000_000, frac = micros % 1_000_000
        var s = "\(pad(secs / 3600, 2)):\(pad(secs / 60 % 60, 2)):\(pad(secs % 60, 2))"
        if frac != 0 {
            var f = pad(frac, 6)
            while f.hasSuffix("0") { f.removeLast() }
            s += "." + f
        }
        return s
    }

    static func timestamp(micros: Int64, utcSuffix: Bool) -> String {
        var days = micros / 86_400_000_000
        var rem = micros % 86_400_000_000
        if rem < 0 { rem += 86_400_000_000; days -= 1 }
        var d = date(days: days)
        var bc = false
        if d.hasSuffix(" BC") { d.removeLast(3); bc = true }
        return d + " " + time(micros: rem) + (utcSuffix ? "+00" : "") + (bc ? " BC" : "")
    }
}
