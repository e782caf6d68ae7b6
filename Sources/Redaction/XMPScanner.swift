import Foundation

/// Finds location properties in an XMP packet and blanks them with spaces.
///
/// A small XML tokenizer (tags, attributes, comments, processing instructions, CDATA) tracks
/// namespace declarations so a property is recognised by namespace URI and local name, whatever
/// its prefix. A location property is blanked whole, in attribute form (`exif:GPSLatitude="..."`)
/// or element form (`<exif:GPSLatitude>...</exif:GPSLatitude>`, nested structures included):
/// its bytes become spaces, which keeps the XML well formed and removes the property for every
/// reader (and keeps a GIF's raw XMP sub-block chain valid, which zeros would break).
/// A packet that mentions location but cannot be tokenized with confidence (not UTF-8, DOCTYPE,
/// unbalanced tags, cut short) is blanked entirely.
enum XMPScanner {
    struct Result {
        var changes = BlockChanges()
        var dates = DateCandidates()
    }

    static let nsExif = "http://ns.adobe.com/exif/1.0/"
    static let nsExifEX = "http://cipa.jp/exif/1.0/"
    static let nsPhotoshop = "http://ns.adobe.com/photoshop/1.0/"
    static let nsIptcCore = "http://iptc.org/std/Iptc4xmpCore/1.0/xmlns/"
    static let nsIptcExt = "http://iptc.org/std/Iptc4xmpExt/2008-02-29/"
    static let nsXMP = "http://ns.adobe.com/xap/1.0/"

    /// Used when a prefix is not declared (sloppy writers).
    static let conventionalPrefixes: [String: String] = [
        "exif": nsExif, "exifEX": nsExifEX, "photoshop": nsPhotoshop,
        "Iptc4xmpCore": nsIptcCore, "Iptc4xmpExt": nsIptcExt, "xmp": nsXMP, "xap": nsXMP,
    ]

    /// Words whose absence (case-insensitive) proves a UTF-8 packet has no location property:
    /// XML names cannot be escaped, so every location property name contains one of them.
    static let triggers: [[UInt8]] = ["gps", "latitude", "longitude", "altitude", "city", "state", "country", "location"]
        .map { Array($0.utf8) }

    /// Whether the property `uri` + `local` carries location.
    static func isLocation(uri: String?, local: String) -> Bool {
        let l = local.lowercased()
        if l.hasPrefix("gps") || l.contains("latitude") || l.contains("longitude") || l.contains("altitude") {
            return true
        }
        switch uri {
        case nsPhotoshop?: return local == "City" || local == "State" || local == "Country"
        case nsIptcCore?: return local == "Location" || local == "CountryCode"
        case nsIptcExt?: return local == "LocationShown" || local == "LocationCreated"
        default: return false
        }
    }

    static func mentionsLocation(_ b: [UInt8]) -> Bool {
        let lower = b.map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }
        return triggers.contains { lower.firstIndex(of: $0) != nil }
    }

    static func scan(_ b: [UInt8]) -> Result {
        var result = Result()
        guard !b.isEmpty else { return result }
        let utf16 = b.has([0xFE, 0xFF]) || b.has([0xFF, 0xFE])
            || (b.count >= 2 && ((b[0] == 0) != (b[1] == 0)))
        if utf16 || b.has([0x00, 0x00, 0xFE, 0xFF]) {
            // Not UTF-8: judge on the bytes without NULs, blank all if location is mentioned.
            if mentionsLocation(b.filter { $0 != 0 }) { wipe(&result, count: b.count) }
            return result
        }
        let mentions = mentionsLocation(b)
        var tokenizer = Tokenizer(b: b)
        if tokenizer.run() {
            result.dates = tokenizer.dates
            guard !tokenizer.blanks.isEmpty else { return result }
            result.changes.sawLocation = true
            var merged: [Range<Int>] = []
            for r in tokenizer.blanks.sorted(by: { $0.lowerBound < $1.lowerBound }) {
                if let last = merged.last, r.lowerBound <= last.upperBound {
                    merged[merged.count - 1] = last.lowerBound..<max(last.upperBound, r.upperBound)
                } else {
                    merged.append(r)
                }
            }
            for r in merged {
                result.changes.replacements.append((UInt64(r.lowerBound), [UInt8](repeating: 0x20, count: r.count)))
            }
        } else if mentions {
            wipe(&result, count: b.count)
        }
        return result
    }

    private static func wipe(_ result: inout Result, count: Int) {
        result.changes.sawLocation = true
        result.changes.replacements = [(0, [UInt8](repeating: 0x20, count: count))]
    }

    private struct Element {
        var prefix: String
        var local: String
        var qname: ArraySlice<UInt8>
        var namespaceCount: Int
        var start: Int
        var textStart: Int
        var hasChildren = false
        var blanking = false
        var date: Int = 0   // 1 exif:DateTimeOriginal, 2 photoshop:DateCreated, 3 xmp:CreateDate
    }

    private enum Pattern {
        static let pi = Array("<?".utf8), piEnd = Array("?>".utf8)
        static let comment = Array("<!--".utf8), commentEnd = Array("-->".utf8)
        static let cdata = Array("<![CDATA[".utf8), cdataEnd = Array("]]>".utf8)
        static let bang = Array("<!".utf8), endTag = Array("</".utf8)
    }

    private struct Tokenizer {
        let b: [UInt8]
        var i = 0
        var namespaces: [(prefix: String, uri: String)] = [("xml", "http://www.w3.org/XML/1998/namespace")]
        var stack: [Element] = []
        var blanks: [Range<Int>] = []
        var blankingDepth: Int?
        var dates = DateCandidates()

        init(b: [UInt8]) { self.b = b }

        func find(_ needle: [UInt8], from: Int) -> Int? { b.firstIndex(of: needle, from: from) }

        func isSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D }

        func isNameByte(_ c: UInt8) -> Bool {
            !(isSpace(c) || c == UInt8(ascii: ">") || c == UInt8(ascii: "/") || c == UInt8(ascii: "=")
              || c == UInt8(ascii: "<") || c == UInt8(ascii: "\"") || c == UInt8(ascii: "'") || c == 0)
        }

        mutating func name() -> ArraySlice<UInt8>? {
            let s = i
            while i < b.count, isNameByte(b[i]) { i += 1 }
            return i > s ? b[s..<i] : nil
        }

        mutating func skipSpace() { while i < b.count, isSpace(b[i]) { i += 1 } }

        func split(_ q: ArraySlice<UInt8>) -> (String, String) {
            if let colon = q.firstIndex(of: UInt8(ascii: ":")) {
                return (String(decoding: q[q.startIndex..<colon], as: UTF8.self),
                        String(decoding: q[(colon + 1)...], as: UTF8.self))
            }
            return ("", String(decoding: q, as: UTF8.self))
        }

        func resolve(_ prefix: String) -> String? {
            for (p, uri) in namespaces.reversed() where p == prefix { return uri }
            return prefix.isEmpty ? nil : XMPScanner.conventionalPrefixes[prefix]
        }

        static func dateKind(uri: String?, local: String) -> Int {
            switch (uri, local) {
            case (XMPScanner.nsExif?, "DateTimeOriginal"): return 1
            case (XMPScanner.nsPhotoshop?, "DateCreated"): return 2
            case (XMPScanner.nsXMP?, "CreateDate"): return 3
            default: return 0
            }
        }

        mutating func record(date kind: Int, _ text: ArraySlice<UInt8>) {
            let s = String(decoding: text, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard !s.isEmpty else { return }
            switch kind {
            case 1: if dates.xmpOriginal == nil { dates.xmpOriginal = s }
            case 2, 3: if dates.xmpCreated == nil { dates.xmpCreated = s }
            default: break
            }
        }

        /// False when the packet cannot be tokenized with confidence.
        mutating func run() -> Bool {
            let lt = UInt8(ascii: "<")
            while i < b.count {
                if b[i] != lt { i += 1; continue }
                let tagStart = i
                if b.has(Pattern.pi, at: i) {
                    guard let j = find(Pattern.piEnd, from: i + 2) else { return false }
                    i = j + 2
                } else if b.has(Pattern.comment, at: i) {
                    guard let j = find(Pattern.commentEnd, from: i + 4) else { return false }
                    i = j + 3
                } else if b.has(Pattern.cdata, at: i) {
                    guard let j = find(Pattern.cdataEnd, from: i + 9) else { return false }
                    i = j + 3
                } else if b.has(Pattern.bang, at: i) {
                    return false   // DOCTYPE and entity declarations could hide anything
                } else if b.has(Pattern.endTag, at: i) {
                    i += 2
                    guard let q = name() else { return false }
                    skipSpace()
                    guard i < b.count, b[i] == UInt8(ascii: ">") else { return false }
                    i += 1
                    guard let open = stack.popLast(), open.qname.elementsEqual(q) else { return false }
                    namespaces.removeLast(namespaces.count - open.namespaceCount)
                    if open.date != 0, !open.hasChildren { record(date: open.date, b[open.textStart..<tagStart]) }
                    if open.blanking {
                        blanks.append(open.start..<i)
                        blankingDepth = nil
                    }
                } else {
                    i += 1
                    guard let q = name() else { return false }
                    var attributes: [(nameStart: Int, q: ArraySlice<UInt8>, value: Range<Int>, end: Int)] = []
                    var selfClosing = false
                    while true {
                        skipSpace()
                        guard i < b.count else { return false }
                        if b[i] == UInt8(ascii: ">") { i += 1; break }
                        if b[i] == UInt8(ascii: "/") {
                            guard i + 1 < b.count, b[i + 1] == UInt8(ascii: ">") else { return false }
                            i += 2
                            selfClosing = true
                            break
                        }
                        let nameStart = i
                        guard let an = name() else { return false }
                        skipSpace()
                        guard i < b.count, b[i] == UInt8(ascii: "=") else { return false }
                        i += 1
                        skipSpace()
                        guard i < b.count, b[i] == UInt8(ascii: "\"") || b[i] == UInt8(ascii: "'") else { return false }
                        let quote = b[i]
                        let valueStart = i + 1
                        var j = valueStart
                        while j < b.count, b[j] != quote {
                            if b[j] == lt { return false }
                            j += 1
                        }
                        guard j < b.count else { return false }
                        i = j + 1
                        attributes.append((nameStart, an, valueStart..<j, i))
                    }
                    guard stack.count < 1000 else { return false }
                    // Namespace declarations first: they apply to this element's own names.
                    let namespaceCount = namespaces.count
                    for a in attributes {
                        let (p, l) = split(a.q)
                        if p == "xmlns" {
                            namespaces.append((l, String(decoding: b[a.value], as: UTF8.self)))
                        } else if p.isEmpty && l == "xmlns" {
                            namespaces.append(("", String(decoding: b[a.value], as: UTF8.self)))
                        }
                    }
                    // Namespaces are looked up by a walk of this list for every name: unbounded, a
                    // packet of 32,000 declarations cost 82 s of a daemon's CPU at a close (a
                    // red-team finding). No real packet declares more than a few dozen.
                    guard namespaces.count <= 256 else { return false }
                    if !stack.isEmpty { stack[stack.count - 1].hasChildren = true }
                    let (prefix, local) = split(q)
                    let uri = resolve(prefix)
                    var element = Element(prefix: prefix, local: local, qname: q, namespaceCount: namespaceCount,
                                          start: tagStart, textStart: i)
                    element.date = Tokenizer.dateKind(uri: uri, local: local)
                    let inBlank = blankingDepth != nil
                    if !inBlank && XMPScanner.isLocation(uri: uri, local: local) {
                        if selfClosing {
                            blanks.append(tagStart..<i)
                        } else {
                            element.blanking = true
                            blankingDepth = stack.count
                        }
                    } else if !inBlank {
                        for a in attributes {
                            let (p, l) = split(a.q)
                            if p == "xmlns" || (p.isEmpty && l == "xmlns") { continue }
                            let auri = p.isEmpty ? nil : resolve(p)
                            if XMPScanner.isLocation(uri: auri, local: l) {
                                blanks.append(a.nameStart..<a.end)
                            } else {
                                let kind = Tokenizer.dateKind(uri: auri, local: l)
                                if kind != 0 { record(date: kind, b[a.value]) }
                            }
                        }
                    }
                    if selfClosing {
                        namespaces.removeLast(namespaces.count - namespaceCount)
                    } else {
                        stack.append(element)
                    }
                }
            }
            return stack.isEmpty
        }
    }
}
