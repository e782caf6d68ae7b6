/// Splits an SQL script into its statements at the semicolons that end them, as psql does:
/// not inside 'strings' (with '' inside, and E'...' with backslash escapes), "identifiers",
/// $tag$ dollar-quoted bodies $tag$, -- line comments or /* nested block comments */.
///
/// postgres-nio has no simple-query protocol (its `simpleQuery` is the extended protocol, which
/// takes one statement), so PGSession.execute sends a script's statements one by one. Not
/// handled: SQL-standard function bodies (`BEGIN ATOMIC ... END` with semicolons inside);
/// write such a function's body as a $$ string.
enum SQLScript {
    static func statements(_ sql: String) -> [String] {
        let b = Array(sql.utf8)
        var out: [String] = []
        var start = 0, i = 0
        var hasContent = false   // anything but blanks and comments since `start`

        func isIdentByte(_ c: UInt8) -> Bool {
            (c >= 0x61 && c <= 0x7A) || (c >= 0x41 && c <= 0x5A) || (c >= 0x30 && c <= 0x39) || c == 0x5F || c >= 0x80 || c == 0x24
        }
        func flush(_ end: Int) {
            if hasContent, let s = String(validating: b[start..<end], as: UTF8.self) {
                let trimmed = s.trimmingSQLBlanks()
                if !trimmed.isEmpty { out.append(trimmed) }
            }
            hasContent = false
        }

        while i < b.count {
            let c = b[i]
            switch c {
            case UInt8(ascii: "-") where i + 1 < b.count && b[i + 1] == UInt8(ascii: "-"):
                while i < b.count && b[i] != UInt8(ascii: "\n") { i += 1 }
            case UInt8(ascii: "/") where i + 1 < b.count && b[i + 1] == UInt8(ascii: "*"):
                var depth = 1
                i += 2
                while i < b.count && depth > 0 {
                    if b[i] == UInt8(ascii: "/"), i + 1 < b.count, b[i + 1] == UInt8(ascii: "*") { depth += 1; i += 2 }
                    else if b[i] == UInt8(ascii: "*"), i + 1 < b.count, b[i + 1] == UInt8(ascii: "/") { depth -= 1; i += 2 }
                    else { i += 1 }
                }
            case UInt8(ascii: "'"):
                hasContent = true
                // E'...' (or e'...'): backslash escapes; the E must start a token
                let escaped = i > 0 && (b[i - 1] == UInt8(ascii: "E") || b[i - 1] == UInt8(ascii: "e"))
                    && (i < 2 || !isIdentByte(b[i - 2]))
                i += 1
                while i < b.count {
                    if escaped && b[i] == UInt8(ascii: "\\") { i += 2; continue }
                    if b[i] == UInt8(ascii: "'") {
                        if i + 1 < b.count && b[i + 1] == UInt8(ascii: "'") { i += 2; continue }
                        break
                    }
                    i += 1
                }
                i += 1
            case UInt8(ascii: "\""):
                hasContent = true
                i += 1
                while i < b.count {
                    if b[i] == UInt8(ascii: "\"") {
                        if i + 1 < b.count && b[i + 1] == UInt8(ascii: "\"") { i += 2; continue }
                        break
                    }
                    i += 1
                }
                i += 1
            case UInt8(ascii: "$") where i == 0 || !isIdentByte(b[i - 1]):
                hasContent = true
                // $tag$ with tag empty or an identifier not starting with a digit ($1 is a parameter)
                var j = i + 1
                if j < b.count, !(b[j] >= 0x30 && b[j] <= 0x39) {
                    while j < b.count && isIdentByte(b[j]) && b[j] != UInt8(ascii: "$") { j += 1 }
                }
                if j < b.count && b[j] == UInt8(ascii: "$") {
                    let tag = Array(b[i...j])
                    var k = j + 1
                    var found = false
                    while k + tag.count <= b.count {
                        if b[k] == UInt8(ascii: "$") && Array(b[k..<(k + tag.count)]) == tag { found = true; break }
                        k += 1
                    }
                    i = found ? k + tag.count : b.count
                } else {
                    i += 1
                }
            case UInt8(ascii: ";"):
                flush(i)
                i += 1
                start = i
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"), 0x0C:
                i += 1
            default:
                hasContent = true
                i += 1
            }
        }
        flush(b.count)
        return out
    }
}

extension String {
    fileprivate func trimmingSQLBlanks() -> String {
        let blanks: Set<Character> = [" ", "\t", "\n", "\r", "\r\n", "\u{0C}"]
        var s = Substring(self)
        while let f = s.first, blanks.contains(f) { s.removeFirst() }
        while let l = s.last, blanks.contains(l) { s.removeLast() }
        return String(s)
    }
}
