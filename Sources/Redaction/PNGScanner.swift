/// PNG: walks the chunks from IHDR to IEND.
///
/// - `eXIf`: the GPS IFD is zeroed inside the chunk and the chunk CRC recomputed (a replacement patch).
/// - XMP in `iTXt` (`XML:com.adobe.xmp`): location properties blanked, CRC recomputed.
/// - Text chunks that carry location and cannot be edited in place (compressed XMP, ImageMagick's
///   hex "Raw profile type exif/xmp/iptc", ImageMagick's `exif:GPS*` tEXt entries) are wiped: the
///   chunk type becomes the private ancillary type `pgRx` (decoders skip unknown ancillary
///   chunks), its data is zeroed and its CRC recomputed.
enum PNGScanner {
    static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    static let wipedType = FourCC("pgRx")

    static func scan(_ f: inout Findings) throws(ScanError) {
        let source = f.source
        var pos: UInt64 = 8
        var chunks = 0
        while true {
            chunks += 1
            guard chunks <= Limits.maxChunks else { throw .malformed("too many PNG chunks") }
            guard pos + 8 <= source.size else { throw .truncated("PNG ends before IEND") }
            let header = try source.read(pos, 8)
            let length = UInt64(header.be32(0))
            let type = header.fourCC(4)
            guard length <= 0x7FFF_FFFF else { throw .malformed("PNG chunk length \(length) at \(pos)") }
            let dataStart = pos + 8
            let end = dataStart + length + 4
            guard end <= source.size else { throw .truncated("PNG chunk \(type) at \(pos) runs past the end") }
            if chunks == 1 {
                guard type == FourCC("IHDR"), length == 13 else { throw .malformed("PNG without IHDR") }
                let ihdr = try source.read(dataStart, 13)
                f.setSize(Int(ihdr.be32(0)), Int(ihdr.be32(4)))
            }
            switch type {
            case FourCC("IEND"):
                return
            case FourCC("eXIf"), FourCC("tEXt"), FourCC("zTXt"), FourCC("iTXt"):
                do {
                    try metadataChunk(&f, type: type, dataStart: dataStart, length: length)
                } catch {
                    if case .io = error { throw error }
                    f.refuse("PNG \(type) chunk: \(error)")
                }
            default:
                break
            }
            pos = end
        }
    }

    private static func metadataChunk(_ f: inout Findings, type: FourCC, dataStart: UInt64, length: UInt64) throws(ScanError) {
        if length > UInt64(Limits.maxBlock) {
            if type == FourCC("eXIf") {
                f.refuse("PNG eXIf chunk of \(length) bytes is too large")
            } else {
                let keyword = try f.source.read(dataStart, 80).prefix { $0 != 0 }
                if keywordKind(Array(keyword)) != .other { f.refuse("PNG text chunk of \(length) bytes is too large") }
            }
            return
        }
        let data = try f.source.read(dataStart, Int(length))
        var changes = BlockChanges()
        var wipe = false

        if type == FourCC("eXIf") {
            let skip = data.has(Array("Exif\0\0".utf8)) ? 6 : 0
            var walker = TIFFWalker(MemoryBlock(bytes: Array(data[skip...])), isFile: false)
            try walker.run()
            changes.merge(walker.changes, at: UInt64(skip))
            f.dates.takeEXIF(walker.info.dates)
            f.dates.takeXMP(walker.info.xmpDates)
        } else {
            guard let nul = data.firstIndex(of: 0) else { return }
            let keyword = Array(data[..<nul])
            let kind = keywordKind(keyword)
            if kind == .other { return }
            if kind == .location {
                // A text entry named after location (ImageMagick's "exif:GPSLatitude"...): wipe, whatever it holds.
                wipe = true
                changes.sawLocation = true
                return finish()
            }
            // The text and whether it is compressed.
            var textStart = nul + 1
            var compressed = false
            if type == FourCC("zTXt") {
                compressed = true
                textStart = nul + 2
            } else if type == FourCC("iTXt") {
                guard nul + 2 < data.count else { return }
                compressed = data[nul + 1] != 0
                guard let langEnd = data[(nul + 3)...].firstIndex(of: 0),
                      let translatedEnd = data[(langEnd + 1)...].firstIndex(of: 0) else {
                    wipe = true
                    textStart = data.count
                    changes.sawLocation = kind == .location
                    return finish()
                }
                textStart = translatedEnd + 1
            }
            guard textStart <= data.count else { return }
            let raw = data[textStart...]
            var text: [UInt8]
            if compressed {
                guard let inflated = Inflate.zlib(raw, limit: Limits.maxInflated) else {
                    // Cannot look inside: fail closed.
                    wipe = true
                    changes.sawLocation = true
                    return finish()
                }
                text = inflated
            } else {
                text = Array(raw)
            }
            switch kind {
            case .location:
                wipe = true
                changes.sawLocation = true
            case .xmp:
                let x = XMPScanner.scan(text)
                f.dates.takeXMP(x.dates)
                if !x.changes.isEmpty {
                    if compressed { wipe = true; changes.sawLocation = true }
                    else { changes.merge(x.changes, at: UInt64(textStart)) }
                }
            case .rawProfile(let profile):
                guard let decoded = decodeRawProfile(text) else {
                    wipe = true
                    changes.sawLocation = XMPScanner.mentionsLocation(text) || profile == "exif" || profile == "app1"
                    return finish()
                }
                text = decoded
                var found = BlockChanges()
                switch profile {
                case "exif", "app1":
                    let skip = text.has(Array("Exif\0".utf8)) ? 6 : 0
                    if skip < text.count {
                        var walker = TIFFWalker(MemoryBlock(bytes: Array(text[skip...])), isFile: false)
                        try walker.run()
                        found = walker.changes
                        f.dates.takeEXIF(walker.info.dates)
                    }
                case "xmp":
                    found = XMPScanner.scan(text).changes
                case "iptc", "8bim":
                    found = text.has(Array("8BIM".utf8)) ? PhotoshopResources.scan(text) : IPTCScanner.scan(text)
                default:
                    break
                }
                if !found.isEmpty || found.refusal != nil || found.sawLocation {
                    wipe = true
                    changes.sawLocation = found.sawLocation
                }
            case .other:
                break
            }
        }
        return finish()

        func finish() {
            var newType = type
            if wipe {
                newType = wipedType
                changes.zeros = [(0, length)]
                changes.replacements = []
                f.replace(dataStart - 4, newType.bytes)
            }
            guard !changes.isEmpty || changes.refusal != nil else { return }
            f.apply(changes, through: ExtentMap(file: dataStart, length: length))
            guard !changes.isEmpty else { return }
            let newData = changes.applied(to: data)
            let crc = CRC32.update(CRC32.checksum(newType.bytes), newData)
            f.replace(dataStart + length, [UInt8(crc >> 24), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc & 0xFF)])
        }
    }

    enum KeywordKind: Equatable {
        case xmp, rawProfile(String), location, other
    }

    static func keywordKind(_ keyword: [UInt8]) -> KeywordKind {
        let k = String(decoding: keyword, as: UTF8.self)
        if k == "XML:com.adobe.xmp" { return .xmp }
        let lower = k.lowercased()
        if lower.hasPrefix("raw profile type ") { return .rawProfile(String(lower.dropFirst(17))) }
        if lower.contains("gps") || lower.contains("latitude") || lower.contains("longitude") || lower.contains("location") {
            return .location
        }
        return .other
    }

    /// ImageMagick's "Raw profile type NAME": "\nNAME\n   LENGTH\nHEX...".
    static func decodeRawProfile(_ text: [UInt8]) -> [UInt8]? {
        var i = 0
        func isSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 }
        while i < text.count, isSpace(text[i]) { i += 1 }
        while i < text.count, text[i] != 0x0A { i += 1 }        // profile name line
        while i < text.count, isSpace(text[i]) { i += 1 }
        var length = 0
        var digits = 0
        while i < text.count, text[i] >= 48, text[i] <= 57, digits < 10 {
            length = length * 10 + Int(text[i] - 48)
            digits += 1
            i += 1
        }
        guard digits > 0, length <= Limits.maxInflated else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(length)
        var high: UInt8?
        while i < text.count, out.count < length {
            let c = text[i]
            i += 1
            if isSpace(c) { continue }
            let v: UInt8
            switch c {
            case 48...57: v = c - 48
            case 97...102: v = c - 87
            case 65...70: v = c - 55
            default: return nil
            }
            if let h = high { out.append(h << 4 | v); high = nil } else { high = v }
        }
        return out.count == length ? out : nil
    }
}
