/// JPEG: walks the marker segments up to the first SOS. APP1 EXIF (GPS IFD), APP1 XMP and
/// extended XMP (reassembled across segments), APP13 Photoshop resources (IPTC location), and the
/// images an APP2 MPF index points to (their own header segments).
enum JPEGScanner {
    static let exifHeader: [UInt8] = Array("Exif\0".utf8)
    static let xmpHeader: [UInt8] = Array("http://ns.adobe.com/xap/1.0/\0".utf8)
    static let extendedXMPHeader: [UInt8] = Array("http://ns.adobe.com/xmp/extension/\0".utf8)
    static let photoshopHeader: [UInt8] = Array("Photoshop 3.0\0".utf8)
    static let mpfHeader: [UInt8] = Array("MPF\0".utf8)

    struct ExtendedChunk {
        var offset: UInt64
        var fileOffset: UInt64
        var data: [UInt8]
    }

    static func scan(_ f: inout Findings) throws(ScanError) {
        var extended: [[UInt8]: (fullLength: UInt64, chunks: [ExtendedChunk])] = [:]
        var mpfTargets: [UInt64] = []
        try scanImage(&f, at: 0, primary: true, extended: &extended, mpfTargets: &mpfTargets)
        // Images listed by MPF (secondary images, depth maps...) carry their own metadata.
        var seen = Set<UInt64>([0])
        for target in mpfTargets.prefix(64) where seen.insert(target).inserted {
            do {
                var ignored: [UInt64] = []
                try scanImage(&f, at: target, primary: false, extended: &extended, mpfTargets: &ignored)
            } catch {
                if case .io = error { throw error }
                // A secondary image that is not a JPEG has no metadata a reader could find.
            }
        }
        reassembleExtendedXMP(&f, extended)
    }

    private static func scanImage(_ f: inout Findings, at start: UInt64, primary: Bool,
                                  extended: inout [[UInt8]: (fullLength: UInt64, chunks: [ExtendedChunk])],
                                  mpfTargets: inout [UInt64]) throws(ScanError) {
        let source = f.source
        guard try source.readAvailable(start, 2) == [0xFF, 0xD8] else {
            throw .malformed("no JPEG start of image at \(start)")
        }
        var pos = start + 2
        var segments = 0
        var sawExif = false
        while true {
            segments += 1
            guard segments <= Limits.maxChunks else { throw .malformed("too many JPEG segments") }
            guard pos + 2 <= source.size else { throw .truncated("JPEG ends inside its header segments") }
            let m = try source.read(pos, 2)
            guard m[0] == 0xFF else { throw .malformed("expected a JPEG marker at \(pos)") }
            let marker = m[1]
            if marker == 0xFF { pos += 1; continue }                   // fill byte
            if marker == 0xD8 || marker == 0x01 || (0xD0...0xD7).contains(marker) { pos += 2; continue }
            if marker == 0xD9 { return }                                // EOI before any scan
            guard pos + 4 <= source.size else { throw .truncated("JPEG ends inside a segment header") }
            let length = UInt64(try source.read(pos + 2, 2).be16(0))
            guard length >= 2 else { throw .malformed("JPEG segment length \(length) at \(pos)") }
            let payloadStart = pos + 4
            let end = pos + 2 + length
            guard end <= source.size else { throw .truncated("JPEG segment at \(pos) runs past the end") }
            if marker == 0xDA { return }                                // start of scan: headers done
            let payloadLength = Int(length - 2)

            switch marker {
            case 0xE1:
                let payload = try source.read(payloadStart, payloadLength)
                if payload.has(exifHeader), payload.count >= 6 {
                    let tiff = Array(payload[6...])
                    var walker = TIFFWalker(MemoryBlock(bytes: tiff), isFile: false)
                    try walker.run()
                    f.apply(walker.changes, through: ExtentMap(file: payloadStart + 6, length: UInt64(tiff.count)))
                    if primary && !sawExif {
                        sawExif = true
                        f.dates.takeEXIF(walker.info.dates)
                        f.setSize(walker.info.exifWidth, walker.info.exifHeight)
                    }
                    f.dates.takeXMP(walker.info.xmpDates)
                } else if payload.has(xmpHeader) {
                    let packet = Array(payload[xmpHeader.count...])
                    let x = XMPScanner.scan(packet)
                    f.apply(x.changes, through: ExtentMap(file: payloadStart + UInt64(xmpHeader.count), length: UInt64(packet.count)))
                    if primary { f.dates.takeXMP(x.dates) }
                } else if payload.has(extendedXMPHeader) {
                    let h = extendedXMPHeader.count
                    if payload.count >= h + 40 {
                        let guid = Array(payload[h..<(h + 32)])
                        let full = UInt64(payload.be32(h + 32))
                        let offset = UInt64(payload.be32(h + 36))
                        var entry = extended[guid] ?? (full, [])
                        if entry.chunks.count < 10_000 {
                            entry.chunks.append(ExtendedChunk(offset: offset, fileOffset: payloadStart + UInt64(h + 40),
                                                              data: Array(payload[(h + 40)...])))
                        }
                        extended[guid] = entry
                    }
                }
            case 0xED:
                let payload = try source.read(payloadStart, payloadLength)
                if payload.has(photoshopHeader) {
                    let h = photoshopHeader.count
                    let changes = PhotoshopResources.scan(Array(payload[h...]))
                    f.apply(changes, through: ExtentMap(file: payloadStart + UInt64(h), length: UInt64(payloadLength - h)))
                }
            case 0xE2 where primary:
                let payload = try source.read(payloadStart, payloadLength)
                if payload.has(mpfHeader) {
                    mpfTargets += mpfImageOffsets(Array(payload[4...]), base: payloadStart + 4)
                }
            case 0xC0...0xCF where marker != 0xC4 && marker != 0xC8 && marker != 0xCC:
                if primary && payloadLength >= 5 {
                    let sof = try source.read(payloadStart, 5)
                    let h = Int(sof.be16(1)), w = Int(sof.be16(3))
                    f.width = nil
                    f.setSize(w, h)
                }
            default:
                break
            }
            pos = end
        }
    }

    /// Absolute offsets of the images an MPF index lists (MP Entry tag 0xB002).
    private static func mpfImageOffsets(_ tiff: [UInt8], base: UInt64) -> [UInt64] {
        guard tiff.count >= 8 else { return [] }
        let little: Bool
        if tiff.has([0x49, 0x49, 0x2A, 0x00]) { little = true }
        else if tiff.has([0x4D, 0x4D, 0x00, 0x2A]) { little = false }
        else { return [] }
        func u16(_ i: Int) -> Int { Int(little ? tiff.le16(i) : tiff.be16(i)) }
        func u32(_ i: Int) -> Int { Int(little ? tiff.le32(i) : tiff.be32(i)) }
        let ifd = u32(4)
        guard ifd + 2 <= tiff.count else { return [] }
        let n = min(u16(ifd), (tiff.count - ifd - 2) / 12)
        var out: [UInt64] = []
        for e in 0..<n {
            let p = ifd + 2 + e * 12
            guard u16(p) == 0xB002, u16(p + 2) == 7 else { continue }
            let count = u32(p + 4)
            let at = u32(p + 8)
            guard count % 16 == 0, count <= 16 * 64, at <= tiff.count, count <= tiff.count - at else { continue }
            for k in 0..<(count / 16) {
                let offset = u32(at + k * 16 + 8)
                if offset != 0 { out.append(base + UInt64(offset)) }
            }
        }
        return out
    }

    /// Extended XMP: chunks of one GUID put back in order, scanned as one packet. If they do not
    /// tile the announced length, every chunk's data is blanked (fail closed).
    private static func reassembleExtendedXMP(_ f: inout Findings,
                                              _ extended: [[UInt8]: (fullLength: UInt64, chunks: [ExtendedChunk])]) {
        for (_, entry) in extended {
            let chunks = entry.chunks.sorted { $0.offset < $1.offset }
            var map = ExtentMap()
            var packet: [UInt8] = []
            var mapped = Set<Int>()
            var ok = entry.fullLength <= UInt64(Limits.maxBlock)
            for (index, c) in chunks.enumerated() where ok {
                if c.offset == map.length {
                    map.append(file: c.fileOffset, length: UInt64(c.data.count))
                    packet += c.data
                    mapped.insert(index)
                } else if c.offset + UInt64(c.data.count) > map.length {
                    ok = false   // a gap or a partial overlap
                }
            }
            if ok && map.length == entry.fullLength {
                let x = XMPScanner.scan(packet)
                f.apply(x.changes, through: map)
                // A chunk repeated at an offset already covered is checked on its own.
                for (index, c) in chunks.enumerated() where !mapped.contains(index) && XMPScanner.mentionsLocation(c.data) {
                    f.replace(c.fileOffset, [UInt8](repeating: 0x20, count: c.data.count))
                    f.hasLocation = true
                }
            } else {
                for c in chunks { f.replace(c.fileOffset, [UInt8](repeating: 0x20, count: c.data.count)) }
                if XMPScanner.mentionsLocation(chunks.flatMap(\.data)) { f.hasLocation = true }
            }
        }
    }
}

extension DateCandidates {
    mutating func takeEXIF(_ other: DateCandidates) {
        guard exifOriginal == nil && exifDigitized == nil && exifDateTime == nil else { return }
        exifOriginal = other.exifOriginal
        exifOriginalOffset = other.exifOriginalOffset
        exifDigitized = other.exifDigitized
        exifDigitizedOffset = other.exifDigitizedOffset
        exifDateTime = other.exifDateTime
        exifDateTimeOffset = other.exifDateTimeOffset
    }

    mutating func takeXMP(_ other: DateCandidates) {
        if xmpOriginal == nil { xmpOriginal = other.xmpOriginal }
        if xmpCreated == nil { xmpCreated = other.xmpCreated }
    }
}
