/// Whether the media data a movie's index points to is in the file (a file cut while being
/// written has a complete `moov` only when the writer put it first, `+faststart`; its chunks then
/// point past the end), and Canon CR3 metadata.
extension ISOBMFFScanner {
    /// Records in `walk` a track whose chunks (stco/co64 offsets, sizes from stsc and stsz/stz2)
    /// run past the end of the file. Tables this cannot follow are left to the other checks
    /// (timed metadata tracks refuse on them): they prove nothing about the file's end.
    static func sampleDataExtent(_ f: inout Findings, _ trak: Box, walk: inout Walk) throws(ScanError) {
        let source = f.source
        var stbl: Box?
        var external = false
        for b in try children(source, of: trak, walk: &walk) where b.type == FourCC("mdia") {
            for m in try children(source, of: b, walk: &walk) where m.type == FourCC("minf") {
                for n in try children(source, of: m, walk: &walk) {
                    if n.type == FourCC("stbl") { stbl = n }
                    // Data in another file (a reference movie): its offsets are not this file's.
                    if n.type == FourCC("dinf"), n.payloadSize >= 28 {
                        let d = try source.read(n.payload, 28)
                        if d.fourCC(4) == FourCC("dref"), d.be32(12) >= 1, d[8 + 8 + 8 + 3] & 1 == 0 { external = true }
                    }
                }
            }
        }
        guard let stbl, !external else { return }
        var tables: [FourCC: [UInt8]] = [:]
        for b in try children(source, of: stbl, walk: &walk)
        where [FourCC("stsc"), FourCC("stsz"), FourCC("stz2"), FourCC("stco"), FourCC("co64")].contains(b.type) {
            guard b.payloadSize <= UInt64(Limits.maxBlock) else { return }
            tables[b.type] = try source.read(b.payload, Int(b.payloadSize))
        }
        let wide = tables[FourCC("co64")] != nil
        guard let offsets = tables[FourCC("co64")] ?? tables[FourCC("stco")], offsets.count >= 8 else { return }
        let chunkCount = Int(offsets.be32(4))
        guard chunkCount <= (offsets.count - 8) / (wide ? 8 : 4) else { return }
        func chunkOffset(_ k: Int) -> UInt64 { wide ? offsets.be64(8 + 8 * k) : UInt64(offsets.be32(8 + 4 * k)) }

        // Sample sizes: constant, or a table of 32-bit (stsz) or 4/8/16-bit (stz2) fields.
        var constant: UInt64?
        var sizes: [UInt8] = []
        var bits = 32
        var sampleCount: UInt64 = 0
        if let stsz = tables[FourCC("stsz")], stsz.count >= 12 {
            sampleCount = UInt64(stsz.be32(8))
            if stsz.be32(4) != 0 { constant = UInt64(stsz.be32(4)) } else {
                guard sampleCount <= UInt64((stsz.count - 12) / 4) else { return }
                sizes = Array(stsz[12...])
            }
        } else if let stz2 = tables[FourCC("stz2")], stz2.count >= 12 {
            bits = Int(stz2[7])
            sampleCount = UInt64(stz2.be32(8))
            guard bits == 4 || bits == 8 || bits == 16, sampleCount <= UInt64(stz2.count - 12) * 8 / UInt64(bits) else { return }
            sizes = Array(stz2[12...])
        } else {
            return
        }
        func size(_ i: UInt64) -> UInt64 {
            if let constant { return constant }
            let i = Int(i)
            switch bits {
            case 4: return UInt64(i % 2 == 0 ? sizes[i / 2] >> 4 : sizes[i / 2] & 0x0F)
            case 8: return UInt64(sizes[i])
            case 16: return UInt64(sizes.be16(2 * i))
            default: return UInt64(sizes.be32(4 * i))
            }
        }
        guard let stsc = tables[FourCC("stsc")], stsc.count >= 8 else { return }
        let runs = Int(stsc.be32(4))
        guard runs <= (stsc.count - 8) / 12 else { return }
        func firstChunk(_ r: Int) -> UInt64 { UInt64(stsc.be32(8 + 12 * r)) }
        func perChunk(_ r: Int) -> UInt64 { UInt64(stsc.be32(8 + 12 * r + 4)) }

        var sample: UInt64 = 0
        var run = 0
        for k in 0..<chunkCount where runs > 0 {
            while run + 1 < runs, firstChunk(run + 1) <= UInt64(k + 1) { run += 1 }
            guard firstChunk(run) <= UInt64(k + 1) else { return }
            let n = perChunk(run)
            guard n <= sampleCount - sample else { return }   // inconsistent tables: not our question
            var length: UInt64 = 0
            if let constant { length = constant * n } else {
                for i in sample..<(sample + n) { length += size(i) }
            }
            sample += n
            let offset = chunkOffset(k)
            if offset > source.size || length > source.size - offset {
                walk.cut("chunk \(k + 1) of a track at \(offset) (\(length) bytes) runs past the end (\(source.size))")
                return
            }
        }
    }

    /// Records in `walk` a movie fragment whose sample data (`trun`) runs past the end of the file.
    static func fragmentData(_ f: inout Findings, _ moof: Box, walk: inout Walk) throws(ScanError) {
        let source = f.source
        var previousEnd: UInt64?
        for traf in try children(source, of: moof, walk: &walk) where traf.type == FourCC("traf") {
            var base = moof.start
            var runEnd: UInt64?
            var defaultSize: UInt32?
            var explicitBase = false
            var moofBase = false
            for b in try children(source, of: traf, walk: &walk) {
                guard b.payloadSize <= UInt64(Limits.maxBlock) else { return }
                if b.type == FourCC("tfhd") {
                    var c = Cursor(try source.read(b.payload, Int(b.payloadSize)), "tfhd")
                    let flags = try c.u32() & 0xFF_FFFF
                    let track = try c.u32()
                    defaultSize = walk.trexSizes[track]
                    if flags & 0x1 != 0 { base = try c.u64(); explicitBase = true }
                    if flags & 0x2 != 0 { _ = try c.u32() }
                    if flags & 0x8 != 0 { _ = try c.u32() }
                    if flags & 0x10 != 0 { defaultSize = try c.u32() }
                    moofBase = flags & 0x20000 != 0
                    if !explicitBase && !moofBase, let previousEnd { base = previousEnd }
                } else if b.type == FourCC("trun") {
                    var c = Cursor(try source.read(b.payload, Int(b.payloadSize)), "trun")
                    let flags = try c.u32() & 0xFF_FFFF
                    let count = try c.u32()
                    var start = runEnd ?? base
                    if flags & 0x1 != 0 {
                        let offset = Int64(Int32(bitPattern: try c.u32()))
                        let s = Int64(bitPattern: base) &+ offset
                        guard s >= 0 else { return }
                        start = UInt64(s)
                    }
                    if flags & 0x4 != 0 { _ = try c.u32() }
                    let fields = [0x100, 0x200, 0x400, 0x800].filter { flags & UInt32($0) != 0 }.count
                    guard UInt64(count) * UInt64(fields * 4) <= UInt64(c.remaining) else { return }
                    var length: UInt64 = 0
                    for _ in 0..<count {
                        if flags & 0x100 != 0 { _ = try c.u32() }
                        if flags & 0x200 != 0 { length += UInt64(try c.u32()) } else if let defaultSize { length += UInt64(defaultSize) } else { return }
                        if flags & 0x400 != 0 { _ = try c.u32() }
                        if flags & 0x800 != 0 { _ = try c.u32() }
                    }
                    if start > source.size || length > source.size - start {
                        walk.cut("movie fragment data at \(start) (\(length) bytes) runs past the end (\(source.size))")
                        return
                    }
                    previousEnd = start + length
                    runEnd = start + length
                }
            }
        }
    }

    /// Canon CR3: `CMT1` (IFD0), `CMT2` (EXIF IFD), `CMT3` (maker notes), `CMT4` (GPS IFD) are TIFF
    /// structures of their own; their location is zeroed like EXIF's.
    static func canonMetadata(_ f: inout Findings, _ uuid: Box, walk: inout Walk) throws(ScanError) {
        let source = f.source
        for b in try children(source, of: uuid, walk: &walk) {
            let root: TIFFWalker<MemoryBlock>.Root
            switch b.type {
            case FourCC("CMT1"), FourCC("CMT3"): root = .ifd0
            case FourCC("CMT2"): root = .exif
            case FourCC("CMT4"): root = .gps
            default: continue
            }
            guard b.payloadSize <= UInt64(Limits.maxBlock) else { throw .malformed("\(b.type) box too large") }
            var walker = TIFFWalker(MemoryBlock(bytes: try source.read(b.payload, Int(b.payloadSize))), isFile: false, root: root)
            try walker.run()
            f.apply(walker.changes, through: ExtentMap(file: b.payload, length: b.payloadSize))
            if root == .exif { f.dates.takeEXIF(walker.info.dates) }
            if root == .exif { f.setSize(walker.info.exifWidth, walker.info.exifHeight) }
        }
    }
}
