/// WebP: walks the RIFF chunks. `EXIF` (a TIFF structure, sometimes behind "Exif\0\0"): GPS IFD
/// zeroed in place; `XMP `: location properties blanked. RIFF has no checksums.
enum WebPScanner {
    static func scan(_ f: inout Findings) throws(ScanError) {
        let source = f.source
        guard source.size >= 12 else { throw .truncated("WebP header cut short") }
        let header = try source.read(0, 12)
        let riffEnd = 8 + UInt64(header.le32(4))
        guard riffEnd <= source.size else { throw .truncated("RIFF size \(riffEnd) past the end (\(source.size))") }
        var pos: UInt64 = 12
        var chunks = 0
        var sawImage = false
        while pos + 8 <= riffEnd {
            chunks += 1
            guard chunks <= Limits.maxChunks else { throw .malformed("too many WebP chunks") }
            let h = try source.read(pos, 8)
            let type = h.fourCC(0)
            let length = UInt64(h.le32(4))
            let dataStart = pos + 8
            guard dataStart + length <= riffEnd else { throw .truncated("WebP chunk \(type) at \(pos) runs past the end") }
            switch type {
            case FourCC("VP8X"):
                if length >= 10 {
                    let d = try source.read(dataStart, 10)
                    let w = Int(d[4]) | Int(d[5]) << 8 | Int(d[6]) << 16
                    let hh = Int(d[7]) | Int(d[8]) << 8 | Int(d[9]) << 16
                    f.setSize(w + 1, hh + 1)
                }
            case FourCC("VP8 "):
                sawImage = true
                if length >= 10 {
                    let d = try source.read(dataStart, 10)
                    if d[3] == 0x9D && d[4] == 0x01 && d[5] == 0x2A {
                        f.setSize(Int(d.le16(6) & 0x3FFF), Int(d.le16(8) & 0x3FFF))
                    }
                }
            case FourCC("VP8L"):
                sawImage = true
                if length >= 5 {
                    let d = try source.read(dataStart, 5)
                    if d[0] == 0x2F {
                        let bits = UInt32(d[1]) | UInt32(d[2]) << 8 | UInt32(d[3]) << 16 | UInt32(d[4]) << 24
                        f.setSize(Int(bits & 0x3FFF) + 1, Int(bits >> 14 & 0x3FFF) + 1)
                    }
                }
            case FourCC("ANMF"), FourCC("ALPH"):
                sawImage = true
            case FourCC("EXIF"), FourCC("XMP "):
                do {
                    guard length <= UInt64(Limits.maxBlock) else {
                        f.refuse("WebP \(type) chunk of \(length) bytes is too large")
                        break
                    }
                    let data = try source.read(dataStart, Int(length))
                    if type == FourCC("EXIF") {
                        let skip = data.has(Array("Exif\0\0".utf8)) ? 6 : 0
                        var walker = TIFFWalker(MemoryBlock(bytes: Array(data[skip...])), isFile: false)
                        try walker.run()
                        f.apply(walker.changes, through: ExtentMap(file: dataStart + UInt64(skip), length: length - UInt64(skip)))
                        f.dates.takeEXIF(walker.info.dates)
                        f.dates.takeXMP(walker.info.xmpDates)
                    } else {
                        let x = XMPScanner.scan(data)
                        f.apply(x.changes, through: ExtentMap(file: dataStart, length: length))
                        f.dates.takeXMP(x.dates)
                    }
                } catch {
                    if case .io = error { throw error }
                    f.refuse("WebP \(type) chunk: \(error)")
                }
            default:
                break
            }
            pos = dataStart + length + (length & 1)
        }
        guard sawImage else { throw .malformed("WebP without image data") }
    }
}

/// GIF: walks the blocks to the trailer. GIF has no EXIF; XMP lives in the "XMP DataXMP"
/// application extension as raw text followed by a 258-byte "magic trailer" that makes it parse as
/// sub-blocks. Location properties are blanked with spaces: any non-zero byte keeps the sub-block
/// chain valid (zeros would end it early).
enum GIFScanner {
    static let xmpApplication: [UInt8] = Array("XMP DataXMP".utf8)

    static func scan(_ f: inout Findings) throws(ScanError) {
        let source = f.source
        guard source.size >= 13 else { throw .truncated("GIF header cut short") }
        let lsd = try source.read(6, 7)
        f.setSize(Int(lsd.le16(0)), Int(lsd.le16(2)))
        var pos: UInt64 = 13
        if lsd[4] & 0x80 != 0 { pos += 3 << (UInt64(lsd[4] & 7) + 1) }
        var blocks = 0
        while true {
            blocks += 1
            guard blocks <= Limits.maxChunks else { throw .malformed("too many GIF blocks") }
            guard pos < source.size else { throw .truncated("GIF ends before its trailer") }
            let introducer = try source.byte(pos)
            switch introducer {
            case 0x3B:
                return
            case 0x2C:
                guard pos + 10 <= source.size else { throw .truncated("GIF image descriptor cut short") }
                let d = try source.read(pos, 10)
                pos += 10
                if d[9] & 0x80 != 0 { pos += 3 << (UInt64(d[9] & 7) + 1) }
                pos += 1   // LZW minimum code size
                pos = try skipSubBlocks(source, pos)
            case 0x21:
                guard pos + 2 <= source.size else { throw .truncated("GIF extension cut short") }
                let label = try source.byte(pos + 1)
                pos += 2
                if label == 0xFF, pos + 12 <= source.size, try source.read(pos, 12) == [11] + xmpApplication {
                    let textStart = pos + 12
                    let end = try skipSubBlocks(source, textStart)
                    try xmp(&f, from: textStart, to: end)
                    pos = end
                } else {
                    pos = try skipSubBlocks(source, pos)
                }
            default:
                throw .malformed("unknown GIF block 0x\(String(introducer, radix: 16)) at \(pos)")
            }
        }
    }

    /// Position after the terminating empty sub-block.
    private static func skipSubBlocks(_ source: ByteSource, _ start: UInt64) throws(ScanError) -> UInt64 {
        var pos = start
        while true {
            guard pos < source.size else { throw .truncated("GIF sub-blocks run past the end") }
            let n = try source.byte(pos)
            pos += 1
            if n == 0 { return pos }
            pos += UInt64(n)
        }
    }

    private static func xmp(_ f: inout Findings, from start: UInt64, to end: UInt64) throws(ScanError) {
        let n = end - start
        guard n <= UInt64(Limits.maxBlock) else {
            f.refuse("GIF XMP of \(n) bytes is too large")
            return
        }
        let data = try f.source.read(start, Int(n))
        // The text ends where the magic trailer (0x01 0xFF 0xFE ...) starts.
        let textEnd = data.firstIndex(of: [0x01, 0xFF, 0xFE]) ?? data.count
        let text = Array(data[..<textEnd])
        let x = XMPScanner.scan(text)
        f.apply(x.changes, through: ExtentMap(file: start, length: UInt64(text.count)))
        f.dates.takeXMP(x.dates)
    }
}
