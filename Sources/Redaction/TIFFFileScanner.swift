/// TIFF files and the camera raw formats built on TIFF (DNG, CR2, NEF, ARW, ORF, RW2): the file
/// itself is the TIFF structure; every IFD of the main chain (pages, raw IFDs), their SubIFDs,
/// EXIF and GPS IFDs are walked, read on demand from the file.
///
/// Complete files only: an IFD, an out-of-line value, a strip, a tile or a JPEG thumbnail that
/// lies (even partly) past the end of the file makes the file `.truncated`.
///
/// Embedded JPEG images (a JPEG thumbnail or preview an IFD points to, Panasonic's JpgFromRaw)
/// carry their own EXIF: they are redacted with the JPEG scanner in their own coordinates; one
/// that cannot be redacted with confidence refuses the file.
enum TIFFFileScanner {
    static func scan(_ f: inout Findings, sniffed: MediaKind = .tiff) throws(ScanError) {
        let source = f.source
        guard source.size >= 8 else { throw .truncated("TIFF header cut short") }
        let header = try source.read(0, 8)
        let big = header.has([0x49, 0x49, 0x2B, 0x00]) || header.has([0x4D, 0x4D, 0x00, 0x2B])
        if big {
            // BigTIFF: recognised but not parsed; fail closed.
            f.refuse("BigTIFF is not supported")
            return
        }
        let little = header[0] == 0x49
        let ifd0 = UInt64(little ? header.le32(4) : header.be32(4))
        guard ifd0 >= 8, ifd0 + 2 <= source.size else { throw .truncated("TIFF IFD0 offset \(ifd0) past the end") }
        if sniffed == .cr2, source.size >= 16 {
            // CR2: the raw IFD's offset follows "CR" and the version.
            let raw = UInt64(try source.read(12, 4).le32(0))
            guard raw < source.size else { throw .truncated("CR2 raw IFD offset \(raw) past the end") }
        }
        var walker = TIFFWalker(FileBlock(source: source, base: 0, length: source.size), isFile: true)
        try walker.run()
        if let why = walker.truncation { throw .truncated(why) }
        f.apply(walker.changes, through: ExtentMap(file: 0, length: source.size))
        f.dates.takeEXIF(walker.info.dates)
        f.dates.takeXMP(walker.info.xmpDates)
        f.setSize(walker.info.width, walker.info.height)
        f.setSize(walker.info.exifWidth, walker.info.exifHeight)
        f.kind = kind(sniffed: sniffed, walker.info)
        try embeddedJPEGs(&f, walker.info.embeddedJPEGs)
    }

    /// What a TIFF structure is: a DNG has a DNGVersion tag; a NEF or ARW is a Nikon or Sony file
    /// with raw sensor data (a CFA image or the maker's raw compression); CR2, ORF and RW2 have
    /// their own headers (sniffed).
    static func kind(sniffed: MediaKind, _ info: TIFFInfo) -> MediaKind {
        if info.dngVersion { return .dng }
        guard sniffed == .tiff else { return sniffed }
        let make = info.make.uppercased()
        let cfa = info.photometrics.contains(32803) || info.photometrics.contains(34892)
        if make.hasPrefix("NIKON"), cfa || info.compressions.contains(34713) { return .nef }
        if make.hasPrefix("SONY"), cfa || info.compressions.contains(32767) { return .arw }
        return .tiff
    }

    private static func embeddedJPEGs(_ f: inout Findings, _ list: [(offset: UInt64, length: UInt64)]) throws(ScanError) {
        var seen = Set<UInt64>()
        for (offset, length) in list where seen.insert(offset).inserted {
            guard seen.count <= Limits.maxEmbeddedBlocks else {
                f.refuse("more than \(Limits.maxEmbeddedBlocks) embedded JPEG images")
                return
            }
            guard length >= 4, let window = f.source.window(offset, length),
                  try window.read(0, 3) == [0xFF, 0xD8, 0xFF] else { continue }   // not a JPEG: nothing a reader parses
            var inner = Findings(source: window)
            do {
                try JPEGScanner.scan(&inner)
            } catch {
                if case .io = error { throw error }
                f.refuse("embedded JPEG at \(offset): \(error)")
                return
            }
            if let reason = inner.refusal {
                f.refuse("embedded JPEG at \(offset): \(reason)")
                return
            }
            for p in inner.patches {
                if let r = p.replacement { f.replace(offset + p.offset, r) } else { f.zero(offset + p.offset, UInt64(p.length)) }
            }
            if inner.hasLocation { f.hasLocation = true }
        }
    }
}
