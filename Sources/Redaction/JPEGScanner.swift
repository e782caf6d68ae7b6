#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// JPEG: walks the marker segments and the entropy-coded scan data to the primary image's end of
/// image (EOI). APP1 EXIF (GPS IFD), APP1 XMP and extended XMP (reassembled across segments),
/// APP13 Photoshop resources (IPTC location), and the images an APP2 MPF index points to (their
/// own header segments).
///
/// Bytes after the primary image's EOI (a trailer) are not part of the image but can carry
/// location (Motion Photo movies with `©xyz`, Samsung SEFT blocks, anything a tool appends). In
/// the trailer: an image the MPF index lists is kept, with its own metadata redacted like the
/// primary's; a movie (an `ftyp` box first) is redacted with the ISO-BMFF scanner in its own
/// coordinates, so a Motion Photo stays playable, and zeroed whole if that scan is not clean;
/// every other trailer byte is zeroed. A primary image whose end cannot be found (broken
/// structure after the first scan) is refused: image data and appended data cannot be told apart.
///
/// Complete files only (`.truncated` otherwise): the primary image must reach its EOI (a file that
/// ends inside entropy-coded data or a segment was cut), the images the MPF index lists must lie
/// inside the file, and an appended movie's top-level boxes must not run past the end of the file.
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

    /// Bytes of entropy-coded data read at a time while looking for the next marker.
    static let scanChunk = 1 << 20

    static func scan(_ f: inout Findings) throws(ScanError) {
        var extended: [[UInt8]: (fullLength: UInt64, chunks: [ExtendedChunk])] = [:]
        var mpfTargets: [UInt64] = []
        var mpfExtents: [(start: UInt64, size: UInt64)] = []
        var reachedScan = false
        var primaryEnd: UInt64?
        do {
            primaryEnd = try scanImage(&f, at: 0, primary: true, extended: &extended, mpfTargets: &mpfTargets,
                                       mpfExtents: &mpfExtents, reachedScan: &reachedScan)
        } catch {
            // Errors in the header segments fail the scan as before, and so does a file that ends
            // before its end of image (a writer was stopped); past the first scan, other broken
            // structure means the metadata was read but where the image ends is unknown: fail closed.
            if case .io = error { throw error }
            if case .truncated = error { throw error }
            guard reachedScan else { throw error }
            f.refuse("JPEG image data: \(error) (cannot tell where the image ends)")
        }
        // The images MPF lists must all be in the file (offset 0 is the primary image itself).
        for e in mpfExtents where e.start > f.source.size || e.size > f.source.size - e.start {
            throw .truncated("MPF image at \(e.start) (\(e.size) bytes) runs past the end (\(f.source.size))")
        }
        // Images listed by MPF (secondary images, depth maps...) carry their own metadata.
        var seen = Set<UInt64>([0])
        var images: [(start: UInt64, end: UInt64)] = []
        for target in mpfTargets.prefix(64) where seen.insert(target).inserted {
            do {
                var ignored: [UInt64] = []
                var ignoredExtents: [(start: UInt64, size: UInt64)] = []
                var reached = false
                let end = try scanImage(&f, at: target, primary: false, extended: &extended, mpfTargets: &ignored,
                                        mpfExtents: &ignoredExtents, reachedScan: &reached)
                images.append((target, end))
            } catch {
                if case .io = error { throw error }
                // A secondary image that is not a JPEG has no metadata a reader could find; if it
                // lies after the primary image, it is trailer bytes and zeroed below.
            }
        }
        reassembleExtendedXMP(&f, extended)
        if let primaryEnd, primaryEnd < f.source.size {
            try trailer(&f, from: primaryEnd, images: images)
        }
    }

    /// Redacts `from ..< size`: MPF images there are kept (their metadata was handled), a movie
    /// starting a gap is redacted in place (else zeroed), every other byte is zeroed.
    private static func trailer(_ f: inout Findings, from start: UInt64,
                                images: [(start: UInt64, end: UInt64)]) throws(ScanError) {
        let size = f.source.size
        var cursor = start
        func gap(_ f: inout Findings, _ a: UInt64, _ b: UInt64) throws(ScanError) {
            guard a < b else { return }
            let movieEnd = try movie(&f, a, b)
            f.zero(movieEnd, b - movieEnd)
        }
        for image in images.sorted(by: { $0.start < $1.start }) where image.start >= cursor && image.end <= size {
            try gap(&f, cursor, image.start)
            cursor = image.end
        }
        try gap(&f, cursor, size)
    }

    /// If an ISO-BMFF movie (`ftyp`, then boxes with a `moov`) starts at `a`, redacts it as a file
    /// of its own (a Motion Photo's offsets count from the movie's start) and returns where its
    /// boxes end; a movie the scanner refuses or fails on is zeroed whole. Else returns `a`.
    private static func movie(_ f: inout Findings, _ a: UInt64, _ b: UInt64) throws(ScanError) -> UInt64 {
        guard b - a >= 16, let head = try? f.source.read(a, 8), head.fourCC(4) == FourCC("ftyp") else { return a }
        // The movie's extent: top-level boxes with printable types, up to the first that is not one.
        guard let whole = f.source.window(a, b - a) else { return a }
        var walk = ISOBMFFScanner.Walk()
        var end: UInt64 = 0
        while end < whole.size {
            let box: Box?
            do {
                box = try ISOBMFFScanner.box(whole, at: end, limit: whole.size, walk: &walk)
            } catch {
                // A movie box of a known type that runs past the end of the file: the file was cut
                // while the movie was being written.
                if case .truncated = error, b == f.source.size, let h = try? whole.read(end, 8),
                   ISOBMFFScanner.topLevelTypes.contains(h.fourCC(4)) {
                    throw .truncated("movie after the JPEG image: box \(h.fourCC(4)) at \(a + end) runs past the end")
                }
                break
            }
            guard let box, box.type.bytes.allSatisfy({ (0x20...0x7E).contains($0) || $0 == 0xA9 }) else { break }
            end = box.end
        }
        guard end > 0, let movie = whole.window(0, end) else { return a }
        var inner = Findings(source: movie)
        var clean = false
        do {
            try ISOBMFFScanner.scan(&inner, kind: .mp4)
            clean = inner.refusal == nil
        } catch {
            if case .io = error { throw error }
        }
        if clean {
            for p in inner.patches {
                if let r = p.replacement { f.replace(a + p.offset, r) } else { f.zero(a + p.offset, UInt64(p.length)) }
            }
            if inner.hasLocation { f.hasLocation = true }
        } else {
            f.zero(a, end)
            f.hasLocation = true   // a movie that could not be checked is treated as carrying location
        }
        return a + end
    }

    private static func scanImage(_ f: inout Findings, at start: UInt64, primary: Bool,
                                  extended: inout [[UInt8]: (fullLength: UInt64, chunks: [ExtendedChunk])],
                                  mpfTargets: inout [UInt64], mpfExtents: inout [(start: UInt64, size: UInt64)],
                                  reachedScan: inout Bool) throws(ScanError) -> UInt64 {
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
            if marker == 0xD9 { return pos + 2 }                        // end of image
            guard pos + 4 <= source.size else { throw .truncated("JPEG ends inside a segment header") }
            let length = UInt64(try source.read(pos + 2, 2).be16(0))
            guard length >= 2 else { throw .malformed("JPEG segment length \(length) at \(pos)") }
            let payloadStart = pos + 4
            let end = pos + 2 + length
            guard end <= source.size else { throw .truncated("JPEG segment at \(pos) runs past the end") }
            if marker == 0xDA {
                // Start of scan: entropy-coded data follows the header up to the next marker that
                // is not a restart marker (progressive images have several scans).
                reachedScan = true
                pos = try nextMarker(source, from: end)
                continue
            }
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
                    let images = mpfImages(Array(payload[4...]))
                    mpfTargets += images.filter { $0.offset != 0 }.map { payloadStart + 4 + $0.offset }
                    mpfExtents += images.map { ($0.offset == 0 ? start : payloadStart + 4 + $0.offset, $0.size) }
                }
            case 0xC0...0xCF where marker != 0xC4 && marker != 0xC8 && marker != 0xCC:
                if primary && !reachedScan && payloadLength >= 5 {
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

    /// Offset of the marker ending the entropy-coded data that starts at `from`: the first 0xFF not
    /// followed by 0x00 (stuffing), 0xD0-0xD7 (restart) or 0xFF (fill). Read in large chunks.
    static func nextMarker(_ source: ByteSource, from: UInt64) throws(ScanError) -> UInt64 {
        var pos = from
        while pos < source.size, source.size - pos >= 2 {
            let chunk = try source.readAvailable(pos, scanChunk)   // at least 2 bytes
            let n = chunk.count
            var i = 0
            var found: Int?
            chunk.withUnsafeBufferPointer { b in
                let start = b.baseAddress!
                while i + 1 < n {
                    // Search all but the last byte: an 0xFF there is looked at again with its successor.
                    guard let p = memchr(start + i, 0xFF, n - 1 - i) else { i = n - 1; return }
                    i = start.distance(to: p.assumingMemoryBound(to: UInt8.self))
                    let next = b[i + 1]
                    if next == 0x00 || (0xD0...0xD7).contains(next) {
                        i += 2
                    } else if next == 0xFF {
                        i += 1
                    } else {
                        found = i
                        return
                    }
                }
            }
            if let found { return pos + UInt64(found) }
            pos += UInt64(max(i, 1))
        }
        throw .truncated("JPEG scan data runs to the end of the file without an end of image")
    }

    /// The images an MPF index lists (MP Entry tag 0xB002): offset from the MPF header (0 for the
    /// first, primary image) and size.
    private static func mpfImages(_ tiff: [UInt8]) -> [(offset: UInt64, size: UInt64)] {
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
        var out: [(offset: UInt64, size: UInt64)] = []
        for e in 0..<n {
            let p = ifd + 2 + e * 12
            guard u16(p) == 0xB002, u16(p + 2) == 7 else { continue }
            let count = u32(p + 4)
            let at = u32(p + 8)
            guard count % 16 == 0, count <= 16 * 64, at <= tiff.count, count <= tiff.count - at else { continue }
            for k in 0..<(count / 16) {
                out.append((UInt64(u32(at + k * 16 + 8)), UInt64(u32(at + k * 16 + 4))))
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
