/// The largest JPEG image a TIFF-based camera raw (DNG, CR2, NEF, ARW, ORF, RW2) carries, for a
/// thumbnail of it (issue 35): image decoders cannot decode most raws, but every camera stores a
/// preview. Found by the same walk the redaction does (bounded, both byte orders, no loops), so
/// a hostile file gets no more from this than from a read of its view.
public enum RawPreview {
    /// (offset, length) of the largest embedded JPEG that starts with a JPEG marker, or nil.
    public static func locate(fd: Int32, size: UInt64) -> (offset: UInt64, length: UInt64)? {
        let source = ByteSource(fd: fd, size: size)
        guard size >= 8, let header = try? source.read(0, 8), header[0] == header[1], header[0] == 0x49 || header[0] == 0x4D else {
            return nil
        }
        var walker = TIFFWalker(FileBlock(source: source, base: 0, length: size), isFile: true)
        guard (try? walker.run()) != nil else { return nil }
        let candidates = walker.info.embeddedJPEGs
            .filter { $0.length > 64 && $0.offset + $0.length <= size }
            .sorted { $0.length > $1.length }
        for c in candidates.prefix(8) {
            if let soi = try? source.read(c.offset, 2), soi == [0xFF, 0xD8] { return c }
        }
        return nil
    }
}
