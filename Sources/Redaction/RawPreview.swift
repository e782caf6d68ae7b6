/// The largest JPEG image a TIFF-based camera raw (DNG, CR2, NEF, ARW, ORF, RW2) carries, for a
/// thumbnail of it (issue 35): image decoders cannot decode most raws, but every camera stores a
/// preview. Found by the same walk the redaction does (bounded, both byte orders, no loops), so
/// a hostile file gets no more from this than from a read of its view.
public enum RawPreview {
    /// Canon CR3's preview: the `PRVW` box inside this top-level `uuid` box holds a JPEG.
    public static let cr3PreviewUUID: [UInt8] = [0xEA, 0xF4, 0x2B, 0x5E, 0x1C, 0x98, 0x4B, 0x88, 0xB9, 0xFB, 0xB7, 0xDC, 0x40, 0x6E, 0x4D, 0x16]

    /// (offset, length) of the largest embedded JPEG that starts with a JPEG marker, or nil.
    public static func locate(fd: Int32, size: UInt64) -> (offset: UInt64, length: UInt64)? {
        let source = ByteSource(fd: fd, size: size)
        if size >= 12, let head = try? source.read(4, 8), head[0..<4].elementsEqual(Array("ftyp".utf8)) {
            return cr3Preview(source, size: size)
        }
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

    /// CR3 (ISO-BMFF): the top-level boxes are walked (at most 64, each inside the file) to the
    /// preview `uuid` box; its `PRVW` box (after 8 bytes of its own) ends with a JPEG whose
    /// length the box gives 16 bytes in.
    static func cr3Preview(_ source: ByteSource, size: UInt64) -> (offset: UInt64, length: UInt64)? {
        var at: UInt64 = 0
        for _ in 0..<64 {
            guard at + 8 <= size, let h = try? source.read(at, 8) else { return nil }
            var boxSize = UInt64(h.be32(0))
            var header: UInt64 = 8
            if boxSize == 1 {
                guard at + 16 <= size, let big = try? source.read(at + 8, 8) else { return nil }
                boxSize = big.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
                header = 16
            } else if boxSize == 0 {
                boxSize = size - at
            }
            guard boxSize >= header, at + boxSize <= size else { return nil }
            if h[4..<8].elementsEqual(Array("uuid".utf8)), boxSize >= header + 16 + 8 + 8,
               let uuid = try? source.read(at + header, 16), uuid == cr3PreviewUUID {
                // uuid payload: 8 bytes, then the PRVW box.
                let prvw = at + header + 16 + 8
                guard let b = try? source.read(prvw, 8), b[4..<8].elementsEqual(Array("PRVW".utf8)) else { return nil }
                let prvwSize = UInt64(b.be32(0))
                guard prvwSize >= 32, prvw + prvwSize <= at + boxSize, let fields = try? source.read(prvw + 8, 16) else { return nil }
                let length = UInt64(fields.be32(12))
                let jpeg = prvw + 24
                guard length > 64, jpeg + length <= prvw + prvwSize, let soi = try? source.read(jpeg, 2), soi == [0xFF, 0xD8] else { return nil }
                return (jpeg, length)
            }
            at += boxSize
        }
        return nil
    }
}
