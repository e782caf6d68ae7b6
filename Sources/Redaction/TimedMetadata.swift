/// Timed metadata tracks in movies: location recorded per frame or per second as a *track*
/// (Apple `mebx` with `com.apple.quicktime.location.*` keys, GoPro GPMF `gpmd`, Google `camm`,
/// DJI `djmd`, any `meta`-handler track; text/subtitle tracks, which drones fill with GPS text).
///
/// A track is sensitive when its `hdlr` (in `mdia`) is `meta`, `camm`, `text`, `sbtl` or `subt`, or
/// when a sample entry is one of `entryTypes`. Exception: a `meta` track whose only sample entries
/// are `mebx` declaring keys that are all readable and none about location (Live Photo
/// `still-image-time`, ...) is kept. Every sample of a sensitive track is located through its sample
/// tables (stsc, stsz/stz2, stco/co64) and zeroed. Tables that are inconsistent, or samples outside
/// the file or outside every top-level `mdat`, refuse the file (fail closed), as does a sensitive
/// track in a fragmented movie (its samples are in `moof` fragments, which are not located).
enum TimedMetadata {
    static let handlers: Set<FourCC> = [FourCC("meta"), FourCC("camm"), FourCC("text"), FourCC("sbtl"), FourCC("subt")]
    static let textHandlers: Set<FourCC> = [FourCC("text"), FourCC("sbtl"), FourCC("subt")]
    static let entryTypes: Set<FourCC> = [
        FourCC("mebx"), FourCC("gpmd"), FourCC("camm"), FourCC("djmd"), FourCC("dbgi"), FourCC("mett"), FourCC("metx"),
        FourCC("urim"), FourCC("tx3g"), FourCC("text"), FourCC("wvtt"), FourCC("stpp"),
    ]
    static let textEntries: Set<FourCC> = [FourCC("tx3g"), FourCC("text"), FourCC("wvtt"), FourCC("stpp")]
    /// Chunks of sensitive tracks located in one file, at most.
    static let maxRanges = 1_000_000

    /// Sample data of the sensitive tracks found so far (file ranges), and whether any is text.
    struct Samples {
        var tracks = 0
        var ranges: [(offset: UInt64, length: UInt64, text: Bool)] = []
    }

    /// Looks at one `trak`: if sensitive, appends where its samples are to `walk.metadata`.
    static func track(_ f: inout Findings, _ trak: Box, walk: inout ISOBMFFScanner.Walk) throws(ScanError) {
        let source = f.source
        var handler: FourCC?
        var stbl: Box?
        for b in try ISOBMFFScanner.children(source, of: trak, walk: &walk) where b.type == FourCC("mdia") {
            for m in try ISOBMFFScanner.children(source, of: b, walk: &walk) {
                if m.type == FourCC("hdlr"), handler == nil {
                    guard m.payloadSize >= 12 else { throw .malformed("hdlr box cut short") }
                    handler = try source.read(m.payload + 8, 4).fourCC(0)
                } else if m.type == FourCC("minf") {
                    for n in try ISOBMFFScanner.children(source, of: m, walk: &walk) where n.type == FourCC("stbl") {
                        guard stbl == nil else { throw .malformed("track with two sample tables") }
                        stbl = n
                    }
                }
            }
        }
        guard let stbl else { return }   // no sample table: no samples in this file
        let tables = try ISOBMFFScanner.children(source, of: stbl, walk: &walk)
        func unique(_ type: FourCC) throws(ScanError) -> Box? {
            let list = tables.filter { $0.type == type }
            guard list.count <= 1 else { throw .malformed("two \(type) boxes in one sample table") }
            return list.first
        }
        func payload(_ b: Box) throws(ScanError) -> [UInt8] {
            guard b.payloadSize <= UInt64(Limits.maxBlock) else { throw .malformed("\(b.type) box too large") }
            return try source.read(b.payload, Int(b.payloadSize))
        }

        // Sample entries.
        var entries: [FourCC] = []
        var mebxHarmless = true
        if let stsd = try unique(FourCC("stsd")) {
            var c = Cursor(try payload(stsd), "stsd")
            _ = try c.u32()
            let count = Int(try c.u32())
            guard count <= c.remaining / 8 else { throw .malformed("stsd entry count \(count) past the box end") }
            for _ in 0..<count {
                let start = c.i
                let size = Int(try c.u32())
                let type = try c.fourCC()
                guard size >= 8, size - 8 <= c.remaining else { throw .malformed("stsd entry size \(size)") }
                entries.append(type)
                if type == FourCC("mebx") {
                    let body = Array(c.b[(start + 8)..<(start + size)])
                    if mebxKeys(body).map({ $0.contains(where: ISOBMFFScanner.isLocationKey) }) ?? true { mebxHarmless = false }
                }
                c.i = start + size
            }
        }
        var sensitive = handler.map(handlers.contains) ?? false || entries.contains(where: entryTypes.contains)
        if sensitive, !entries.isEmpty, entries.allSatisfy({ $0 == FourCC("mebx") }), mebxHarmless,
           handler == nil || handler == FourCC("meta") {
            sensitive = false
        }
        guard sensitive else { return }
        let isText = handler.map(textHandlers.contains) ?? false || entries.contains(where: textEntries.contains)
        walk.metadata.tracks += 1

        // Sample sizes.
        let stsz = try unique(FourCC("stsz")), stz2 = try unique(FourCC("stz2"))
        let stco = try unique(FourCC("stco")), co64 = try unique(FourCC("co64"))
        guard let stsc = try unique(FourCC("stsc")) else {
            if stsz == nil && stz2 == nil && stco == nil && co64 == nil { return }   // an empty track (fragmented)
            throw .malformed("metadata track without stsc")
        }
        guard (stsz == nil) != (stz2 == nil) else { throw .malformed("metadata track needs exactly one of stsz, stz2") }
        guard (stco == nil) != (co64 == nil) else { throw .malformed("metadata track needs exactly one of stco, co64") }

        var sizes: SampleSizes
        if let stsz {
            var c = Cursor(try payload(stsz), "stsz")
            _ = try c.u32()
            let constant = try c.u32()
            let count = UInt64(try c.u32())
            if constant != 0 {
                sizes = SampleSizes(count: count, constant: UInt64(constant), table: [], bits: 0, at: 0)
            } else {
                guard count <= UInt64(c.remaining / 4) else { throw .malformed("stsz sample count \(count) past the box end") }
                sizes = SampleSizes(count: count, constant: nil, table: c.b, bits: 32, at: c.i)
            }
        } else {
            var c = Cursor(try payload(stz2!), "stz2")
            _ = try c.u32()
            _ = try c.u16()
            _ = try c.u8()
            let bits = Int(try c.u8())
            guard bits == 4 || bits == 8 || bits == 16 else { throw .malformed("stz2 field size \(bits)") }
            let count = UInt64(try c.u32())
            guard count <= UInt64(c.remaining) * 8 / UInt64(bits) else { throw .malformed("stz2 sample count \(count) past the box end") }
            sizes = SampleSizes(count: count, constant: nil, table: c.b, bits: bits, at: c.i)
        }

        // Chunk offsets.
        let wide = co64 != nil
        var oc = Cursor(try payload(stco ?? co64!), wide ? "co64" : "stco")
        _ = try oc.u32()
        let chunkCount = Int(try oc.u32())
        guard chunkCount <= oc.remaining / (wide ? 8 : 4) else { throw .malformed("chunk count \(chunkCount) past the box end") }
        let offsetsAt = oc.i
        func chunkOffset(_ k: Int) -> UInt64 {
            wide ? oc.b.be64(offsetsAt + 8 * k) : UInt64(oc.b.be32(offsetsAt + 4 * k))
        }

        // Sample-to-chunk runs.
        var sc = Cursor(try payload(stsc), "stsc")
        _ = try sc.u32()
        let runs = Int(try sc.u32())
        guard runs <= sc.remaining / 12 else { throw .malformed("stsc entry count \(runs) past the box end") }
        let runsAt = sc.i
        func firstChunk(_ r: Int) -> UInt64 { UInt64(sc.b.be32(runsAt + 12 * r)) }
        func perChunk(_ r: Int) -> UInt64 { UInt64(sc.b.be32(runsAt + 12 * r + 4)) }
        if runs > 0 {
            guard firstChunk(0) == 1 else { throw .malformed("stsc does not start at chunk 1") }
            for r in 1..<max(runs, 1) where firstChunk(r) <= firstChunk(r - 1) || firstChunk(r) > UInt64(chunkCount) {
                throw .malformed("stsc first chunks out of order or past the chunk count")
            }
        } else if chunkCount > 0 || sizes.count > 0 {
            throw .malformed("metadata track with samples but an empty stsc")
        }

        var sample: UInt64 = 0
        var run = 0
        for k in 0..<chunkCount {
            while run + 1 < runs, firstChunk(run + 1) <= UInt64(k + 1) { run += 1 }
            let n = perChunk(run)
            guard n <= sizes.count - sample else { throw .malformed("stsc lists more samples than stsz (\(sizes.count))") }
            let length = sizes.total(from: sample, count: n)
            sample += n
            let offset = chunkOffset(k)
            guard offset <= source.size, length <= source.size - offset else {
                throw .malformed("metadata chunk at \(offset) (\(length) bytes) runs past the end of the file")
            }
            if length > 0 {
                guard walk.metadata.ranges.count < maxRanges else { throw .malformed("more than \(maxRanges) metadata chunks") }
                walk.metadata.ranges.append((offset, length, isText))
            }
        }
        guard sample == sizes.count else { throw .malformed("stsz lists \(sizes.count) samples, the chunks hold \(sample)") }
    }

    /// The sizes of a track's samples: one constant, or a table of 4-, 8-, 16- or 32-bit fields.
    struct SampleSizes {
        var count: UInt64
        var constant: UInt64?
        var table: [UInt8]
        var bits: Int
        var at: Int

        func size(_ i: Int) -> UInt64 {
            switch bits {
            case 4:
                let byte = table[at + i / 2]
                return UInt64(i % 2 == 0 ? byte >> 4 : byte & 0x0F)
            case 8: return UInt64(table[at + i])
            case 16: return UInt64(table.be16(at + 2 * i))
            default: return UInt64(table.be32(at + 4 * i))
            }
        }

        /// Bytes of samples `from ..< from + count` (all within `self.count`). Table sizes are at
        /// most 32-bit and a table holds at most `Limits.maxBlock` entries: no overflow.
        func total(from: UInt64, count: UInt64) -> UInt64 {
            if let constant { return constant * count }   // both < 2^32
            var sum: UInt64 = 0
            for i in Int(from)..<Int(from + count) { sum += size(i) }
            return sum
        }
    }

    /// Key names a `mebx` sample entry declares (`keys` > one box per local key id > `keyd`),
    /// or nil if they cannot be read. `body` starts after the entry's size and type.
    static func mebxKeys(_ body: [UInt8]) -> [String]? {
        // SampleEntry: 6 reserved bytes and a data reference index, then boxes.
        let i = 8
        var names: [String] = []
        var sawKeys = false
        func boxes(_ from: Int, _ to: Int) -> [(type: FourCC, start: Int, end: Int)]? {
            var out: [(FourCC, Int, Int)] = []
            var p = from
            while p < to {
                guard to - p >= 8 else { return nil }
                let size = Int(body.be32(p))
                guard size >= 8, size <= to - p else { return nil }
                out.append((body.fourCC(p + 4), p + 8, p + size))
                p += size
            }
            return out
        }
        guard body.count >= i, let top = boxes(i, body.count) else { return nil }
        for b in top where b.type == FourCC("keys") {
            sawKeys = true
            guard let keys = boxes(b.start, b.end) else { return nil }
            for key in keys {
                guard let parts = boxes(key.start, key.end) else { return nil }
                guard let keyd = parts.first(where: { $0.type == FourCC("keyd") }), keyd.end - keyd.start >= 4 else { return nil }
                names.append(String(decoding: body[(keyd.start + 4)..<keyd.end], as: UTF8.self))
            }
        }
        return sawKeys ? names : nil
    }

    /// Zeroes the located samples, or refuses: after the whole file was walked (`mdat` boxes may
    /// come after `moov`).
    static func finish(_ f: inout Findings, _ walk: ISOBMFFScanner.Walk) throws(ScanError) {
        let m = walk.metadata
        guard m.tracks > 0 else { return }
        if walk.sawFragments {
            f.refuse("fragmented movie with a timed metadata track (samples in movie fragments are not located)")
            return
        }
        let mdats = walk.mdats.sorted { $0.0 < $1.0 }
        func insideMdat(_ offset: UInt64, _ length: UInt64) -> Bool {
            // The last mdat starting at or before offset.
            var lo = 0, hi = mdats.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if mdats[mid].0 <= offset { lo = mid + 1 } else { hi = mid }
            }
            guard lo > 0 else { return false }
            let (start, end) = mdats[lo - 1]
            return offset >= start && offset <= end && length <= end - offset
        }
        for r in m.ranges where !insideMdat(r.offset, r.length) {
            f.refuse("timed metadata sample at \(r.offset) (\(r.length) bytes) lies outside every mdat box")
            return
        }
        var budget = 1 << 20
        for r in m.ranges {
            f.zero(r.offset, r.length)
            guard !f.hasLocation else { continue }
            if budget <= 0 {
                f.hasLocation = true
                continue
            }
            let n = Int(min(r.length, UInt64(budget)))
            budget -= n
            let bytes = try f.source.read(r.offset, n)
            if r.text {
                let text = String(decoding: bytes, as: UTF8.self).lowercased()
                if ["gps", "lat", "lon", "location"].contains(where: text.contains) { f.hasLocation = true }
            } else if bytes.contains(where: { $0 != 0 }) {
                f.hasLocation = true
            }
        }
    }
}
