/// TIFF files: the file itself is the TIFF structure; every IFD of the main chain (pages), their
/// SubIFDs, EXIF and GPS IFDs are walked, read on demand from the file.
enum TIFFFileScanner {
    static func scan(_ f: inout Findings) throws(ScanError) {
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
        var walker = TIFFWalker(FileBlock(source: source, base: 0, length: source.size), isFile: true)
        try walker.run()
        f.apply(walker.changes, through: ExtentMap(file: 0, length: source.size))
        f.dates.takeEXIF(walker.info.dates)
        f.dates.takeXMP(walker.info.xmpDates)
        f.setSize(walker.info.width, walker.info.height)
        f.setSize(walker.info.exifWidth, walker.info.exifHeight)
    }
}
