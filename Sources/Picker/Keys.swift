/// A key press, decoded from the bytes a terminal sends (xterm, tmux, screen, the Linux console,
/// and anything in between over SSH).
public enum Key: Equatable, Sendable {
    case char(Character)
    case up, down, left, right
    case pageUp, pageDown, home, end
    case enter, escape, backspace, delete, tab, backTab
    /// Control plus a letter ("a" ... "z"), for those that are not enter, tab or backspace.
    case ctrl(Character)
    /// Alt plus a character (ESC then the character).
    case alt(Character)
    /// A sequence this picker does not use (function keys, ...).
    case unknown
}

/// Turns bytes into keys. Bytes may arrive split anywhere (over SSH, a sequence can span two
/// reads); an incomplete sequence stays pending until more bytes come or `flush()` is called
/// after a short pause, which is how a lone Escape is told from the start of an arrow key.
public struct KeyDecoder: Sendable {
    private var buffer: [UInt8] = []

    public init() {}

    /// Bytes are waiting for the rest of a sequence.
    public var hasPending: Bool { !buffer.isEmpty }

    public mutating func feed(_ bytes: [UInt8]) -> [Key] {
        buffer += bytes
        var keys: [Key] = []
        var i = 0
        while i < buffer.count {
            guard let (key, used) = decode(buffer, at: i) else { break }
            keys.append(key)
            i += used
        }
        buffer.removeFirst(i)
        return keys
    }

    /// After a pause: what is pending is taken as it stands (a lone ESC is Escape).
    public mutating func flush() -> [Key] {
        guard !buffer.isEmpty else { return [] }
        var keys: [Key] = []
        if buffer[0] == 0x1b {
            keys.append(buffer.count == 1 ? .escape : .unknown)
        } else {
            keys.append(.unknown)   // a truncated UTF-8 sequence
        }
        buffer.removeAll()
        return keys
    }

    /// One key at `i`, or nil if the bytes there are an incomplete sequence.
    private func decode(_ b: [UInt8], at i: Int) -> (Key, Int)? {
        let c = b[i]
        switch c {
        case 0x1b:
            guard i + 1 < b.count else { return nil }
            let n = b[i + 1]
            if n == UInt8(ascii: "[") { return csi(b, at: i) }
            if n == UInt8(ascii: "O") {
                guard i + 2 < b.count else { return nil }
                switch b[i + 2] {
                case UInt8(ascii: "A"): return (.up, 3)
                case UInt8(ascii: "B"): return (.down, 3)
                case UInt8(ascii: "C"): return (.right, 3)
                case UInt8(ascii: "D"): return (.left, 3)
                case UInt8(ascii: "H"): return (.home, 3)
                case UInt8(ascii: "F"): return (.end, 3)
                case UInt8(ascii: "M"): return (.enter, 3)   // keypad enter in application mode
                default: return (.unknown, 3)
                }
            }
            if n == 0x1b { return (.escape, 1) }
            if n >= 0x20 && n < 0x7f { return (.alt(Character(Unicode.Scalar(n))), 2) }
            return (.escape, 1)
        case 0x0d, 0x0a: return (.enter, 1)
        case 0x7f, 0x08: return (.backspace, 1)
        case 0x09: return (.tab, 1)
        case 0x01...0x1a: return (.ctrl(Character(Unicode.Scalar(c + 0x60))), 1)
        case 0x00, 0x1c...0x1f: return (.unknown, 1)
        case 0x20..<0x7f: return (.char(Character(Unicode.Scalar(c))), 1)
        default:
            let len: Int
            switch c {
            case 0xc2...0xdf: len = 2
            case 0xe0...0xef: len = 3
            case 0xf0...0xf4: len = 4
            default: return (.unknown, 1)
            }
            guard i + len <= b.count else { return nil }
            let bytes = b[i..<(i + len)]
            guard bytes.dropFirst().allSatisfy({ $0 & 0xc0 == 0x80 }),
                  let s = String(validating: bytes, as: UTF8.self), let ch = s.first else { return (.unknown, 1) }
            return (.char(ch), len)
        }
    }

    /// ESC [ params intermediates final.
    private func csi(_ b: [UInt8], at i: Int) -> (Key, Int)? {
        var j = i + 2
        var params: [UInt8] = []
        while j < b.count, (0x30...0x3f).contains(b[j]) { params.append(b[j]); j += 1 }
        while j < b.count, (0x20...0x2f).contains(b[j]) { j += 1 }
        guard j < b.count else { return nil }
        let final = b[j]
        let used = j - i + 1
        guard (0x40...0x7e).contains(final) else { return (.unknown, used) }
        // "1;5A" (with modifiers) is still an arrow.
        let first = String(decoding: params.split(separator: UInt8(ascii: ";")).first ?? [], as: UTF8.self)
        switch final {
        case UInt8(ascii: "A"): return (.up, used)
        case UInt8(ascii: "B"): return (.down, used)
        case UInt8(ascii: "C"): return (.right, used)
        case UInt8(ascii: "D"): return (.left, used)
        case UInt8(ascii: "H"): return (.home, used)
        case UInt8(ascii: "F"): return (.end, used)
        case UInt8(ascii: "Z"): return (.backTab, used)
        case UInt8(ascii: "~"):
            switch first {
            case "1", "7": return (.home, used)
            case "4", "8": return (.end, used)
            case "5": return (.pageUp, used)
            case "6": return (.pageDown, used)
            case "3": return (.delete, used)
            default: return (.unknown, used)
            }
        default: return (.unknown, used)
        }
    }
}
