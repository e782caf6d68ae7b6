// Kept in one file (over ~400 lines): one container format, one recursive box walk.
import Foundation

/// One ISO-BMFF / QuickTime box.
struct Box {
    var type: FourCC
    var start: UInt64
    var headerSize: UInt64
    var end: UInt64
    var userType: [UInt8]?
    var payload: UInt64 { start + headerSize }
    var payloadSize: UInt64 { end - payload }
}

/// Bounds-checked reading of an in-memory box payload; overruns throw `.malformed`.
struct Cursor {
    let b: [UInt8]
    var i: Int
    let what: String

    init(_ b: [UInt8], at i: Int = 0, _ what: String) {
        self.b = b
        self.i = i
        self.what = what
    }

    var remaining: Int { b.count - i }

    mutating func need(_ n: Int) throws(ScanError) {
        guard n >= 0, n <= b.count - i else { throw .malformed("\(what) cut short") }
    }
    mutating func u8() throws(ScanError) -> UInt8 { try need(1); defer { i += 1 }; return b[i] }
    mutating func u16() throws(ScanError) -> UInt16 { try need(2); defer { i += 2 }; return b.be16(i) }
    mutating func u32() throws(ScanError) -> UInt32 { try need(4); defer { i += 4 }; return b.be32(i) }
    mutating func u64() throws(ScanError) -> UInt64 { try need(8); defer { i += 8 }; return b.be64(i) }
    mutating func fourCC() throws(ScanError) -> FourCC { try need(4); defer { i += 4 }; return b.fourCC(i) }
    /// An unsigned integer of 0, 4 or 8 bytes (iloc fields).
    mutating func sized(_ n: Int) throws(ScanError) -> UInt64 {
        switch n {
        case 0: return 0
        case 4: return UInt64(try u32())
        case 8: return try u64()
        default: throw .malformed("\(what): field size \(n)")
        }
    }
    /// A NUL-terminated string; tolerates a missing terminator at the end.
    mutating func cString() -> [UInt8] {
        let start = i
        while i < b.count, b[i] != 0 { i += 1 }
        defer { if i < b.count { i += 1 } }
        return Array(b[start..<i])
    }
}

/// HEIF (and AVIF), MP4 and QuickTime: walks the box tree with explicit bounds.
///
/// HEIF: the `meta` box's `iinf`/`iloc` locate `Exif` items (4-byte TIFF header offset, then a TIFF
/// structure: GPS IFD zeroed) and `mime` XMP items (location properties blanked), wherever their
/// extents are (file or `idat`, several extents). Movies: `moov` is walked recursively; `©xyz`,
/// `loci`, `gps `/`gps0` payloads are zeroed; in `meta` boxes the `ilst` values whose `keys` name a
/// location (`com.apple.quicktime.location.ISO6709`, `…location.*`, `location`) or whose item type
/// is `©xyz` are zeroed; XMP (`XMP_`, XMP `uuid`) is blanked. The samples of timed metadata
/// tracks (GPS per frame: `mebx`, `gpmd`, `camm`, text...) are zeroed (see `TimedMetadata`).
/// Canon CR3: the TIFF structures in the Canon `uuid` box of `moov` (`CMT1` IFD0, `CMT2` EXIF,
/// `CMT4` the GPS IFD itself) are walked like EXIF; the GPS IFD is zeroed.
///
/// Complete files only (`.truncated` otherwise): top-level boxes must end inside the file; a movie
/// (or CR3) needs its `moov`, a HEIF its `meta`; every track's chunks (stco/co64 with stsc and
/// stsz/stz2), every movie fragment's sample data (`trun`) and every HEIF item extent (`iloc`) in
/// this file must lie inside it.
enum ISOBMFFScanner {
    static let canonUUID: [UInt8] = [0x85, 0xC0, 0xB6, 0x87, 0x82, 0x0F, 0x11, 0xE0, 0x81, 0x11, 0xF4, 0xCE, 0x46, 0x2B, 0x6A, 0x48]
    /// Box types that appear at the top level of ISO-BMFF / QuickTime files.
    static let topLevelTypes: Set<FourCC> = [
        FourCC("ftyp"), FourCC("moov"), FourCC("mdat"), FourCC("meta"), FourCC("free"), FourCC("skip"), FourCC("wide"),
        FourCC("uuid"), FourCC("moof"), FourCC("mfra"), FourCC("sidx"), FourCC("styp"), FourCC("udta"), FourCC("pnot"),
        FourCC("idat"), FourCC("emsg"), FourCC("prft"),
    ]
    static let xmpUUID: [UInt8] = [0xBE, 0x7A, 0xCF, 0xCB, 0x97, 0xA9, 0x42, 0xE8, 0x9C, 0x71, 0x99, 0x94, 0x91, 0xE3, 0xAF, 0xAC]
    static let xyz = FourCC(0xA9, UInt8(ascii: "x"), UInt8(ascii: "y"), UInt8(ascii: "z"))

    struct Walk {
        var boxes = 0
        var movieCreation: UInt64?
        var sawVideoSize = false
        /// Timed metadata tracks and where their samples are (zeroed once the file is walked).
        var metadata = TimedMetadata.Samples()
        /// Payload ranges of the top-level `mdat` boxes, and whether there are movie fragments.
        var mdats: [(UInt64, UInt64)] = []
        var sawFragments = false
        /// Why the file is incomplete (sample data or an item past its end), if it is.
        var incomplete: String?
        /// Default sample sizes of fragmented tracks (`trex`), by track id.
        var trexSizes: [UInt32: UInt32] = [:]

        mutating func cut(_ why: @autoclosure () -> String) {
            if incomplete == nil { incomplete = why() }
        }
    }

    /// The box at `pos`, which must end by `limit`; nil if fewer than 8 bytes remain.
    static func box(_ source: ByteSource, at pos: UInt64, limit: UInt64, walk: inout Walk) throws(ScanError) -> Box? {
        guard pos < limit, limit - pos >= 8 else { return nil }
        walk.boxes += 1
        guard walk.boxes <= Limits.maxBoxes else { throw .malformed("more than \(Limits.maxBoxes) boxes") }
        let remaining = limit - pos
        let h = try source.read(pos, 8)
        let size32 = h.be32(0)
        let type = h.fourCC(4)
        var header: UInt64 = 8
        var size: UInt64
        switch size32 {
        case 1:
            guard remaining >= 16 else { throw .truncated("box \(type) at \(pos): 64-bit size cut short") }
            size = try source.read(pos + 8, 8).be64(0)
            header = 16
        case 0:
            size = remaining
        default:
            size = UInt64(size32)
        }
        var userType: [UInt8]?
        if type == FourCC("uuid") {
            guard remaining >= header + 16 else { throw .truncated("uuid box at \(pos) cut short") }
            userType = try source.read(pos + header, 16)
            header += 16
        }
        guard size >= header else { throw .malformed("box \(type) at \(pos) has size \(size)") }
        guard size <= remaining else { throw .truncated("box \(type) at \(pos) runs past the end (\(size) bytes)") }
        return Box(type: type, start: pos, headerSize: header, end: pos + size, userType: userType)
    }

    /// Children of `parent` from `offset` (past any version/flags) to its end.
    static func children(_ source: ByteSource, of parent: Box, skipping offset: UInt64 = 0,
                         walk: inout Walk) throws(ScanError) -> [Box] {
        var out: [Box] = []
        var pos = parent.payload + offset
        while let b = try box(source, at: pos, limit: parent.end, walk: &walk) {
            out.append(b)
            pos = b.end
        }
        return out
    }

    static func scan(_ f: inout Findings, kind: MediaKind) throws(ScanError) {
        let source = f.source
        var walk = Walk()
        var pos: UInt64 = 0
        var sawMoov = false
        var sawMeta = false
        while pos < source.size {
            guard let b = try box(source, at: pos, limit: source.size, walk: &walk) else {
                break   // fewer than 8 trailing bytes (QuickTime writers sometimes pad)
            }
            switch b.type {
            case FourCC("moov"):
                sawMoov = true
                try guarded(&f, "moov") { (f: inout Findings) throws(ScanError) in
                    try movieContainer(&f, b, depth: 1, walk: &walk)
                }
            case FourCC("meta"):
                sawMeta = true
                try guarded(&f, "meta") { (f: inout Findings) throws(ScanError) in
                    if kind == .heif {
                        try heifMeta(&f, b, walk: &walk)
                    } else {
                        try movieMeta(&f, b, depth: 1, walk: &walk)
                    }
                }
            case FourCC("udta"):
                try guarded(&f, "udta") { (f: inout Findings) throws(ScanError) in
                    try movieContainer(&f, b, depth: 1, walk: &walk)
                }
            case FourCC("uuid"):
                if b.userType == xmpUUID {
                    try guarded(&f, "XMP uuid") { (f: inout Findings) throws(ScanError) in try xmpBox(&f, b) }
                }
            case FourCC("mdat"):
                walk.mdats.append((b.payload, b.end))
            case FourCC("moof"):
                walk.sawFragments = true
                do {
                    try fragmentData(&f, b, walk: &walk)
                } catch {
                    // A fragment this cannot follow proves nothing about the file's end (and its
                    // metadata, if any, is refused by TimedMetadata).
                    if case .io = error { throw error }
                }
            default:
                break
            }
            pos = b.end
        }
        if let why = walk.incomplete { throw .truncated(why) }
        // A writer stopped before it wrote the index leaves a file without it.
        if kind.isVideo || kind == .cr3 {
            guard sawMoov else { throw .truncated("movie without a moov box") }
        } else {
            guard sawMeta || sawMoov else { throw .truncated("HEIF without a meta box") }
        }
        try TimedMetadata.finish(&f, walk)
        if let t = walk.movieCreation, t > DateParsing.quickTimeEpochOffset {
            f.dates.movieHeader = Date(timeIntervalSince1970: Double(t - DateParsing.quickTimeEpochOffset))
        }
    }

    /// Runs `body`; structure errors inside metadata refuse instead of failing the scan (I/O still throws).
    static func guarded(_ f: inout Findings, _ what: String,
                        _ body: (inout Findings) throws(ScanError) -> Void) throws(ScanError) {
        do {
            try body(&f)
        } catch {
            if case .io = error { throw error }
            f.refuse("\(what): \(error)")
        }
    }

    // MARK: Movies

    static func movieContainer(_ f: inout Findings, _ parent: Box, depth: Int, walk: inout Walk) throws(ScanError) {
        guard depth <= Limits.maxDepth else { throw .malformed("boxes nested deeper than \(Limits.maxDepth)") }
        for b in try children(f.source, of: parent, walk: &walk) {
            try movieChild(&f, b, depth: depth, walk: &walk)
        }
    }

    static func movieChild(_ f: inout Findings, _ b: Box, depth: Int, walk: inout Walk) throws(ScanError) {
        let source = f.source
        switch b.type {
        case FourCC("trak"):
            try movieContainer(&f, b, depth: depth + 1, walk: &walk)
            try sampleDataExtent(&f, b, walk: &walk)   // first: completeness is not a question of metadata
            try TimedMetadata.track(&f, b, walk: &walk)
        case FourCC("moov"), FourCC("mdia"), FourCC("minf"), FourCC("udta"), FourCC("mvex"):
            try movieContainer(&f, b, depth: depth + 1, walk: &walk)
        case FourCC("trex"):
            guard b.payloadSize >= 24 else { break }
            let p = try source.read(b.payload, 24)
            walk.trexSizes[p.be32(4)] = p.be32(16)
        case FourCC("uuid") where b.userType == canonUUID:
            try canonMetadata(&f, b, walk: &walk)
        case FourCC("meta"):
            try movieMeta(&f, b, depth: depth + 1, walk: &walk)
        case FourCC("mvhd"):
            guard b.payloadSize >= 12 else { break }
            let p = try source.read(b.payload, 12)
            let t = p[0] == 1 ? p.be64(4) : UInt64(p.be32(4))
            if walk.movieCreation == nil, t != 0 { walk.movieCreation = t }
        case FourCC("tkhd"):
            guard !walk.sawVideoSize, b.payloadSize >= 84 else { break }
            let p = try source.read(b.end - 8, 8)
            let w = Int(p.be32(0) >> 16), h = Int(p.be32(4) >> 16)
            if w > 0 && h > 0 {
                walk.sawVideoSize = true
                f.setSize(w, h)
            }
        case xyz, FourCC("loci"), FourCC("gps "), FourCC("gps0"):
            // The box becomes a `free` box (which every reader skips) and its payload is zeroed.
            f.replace(b.start + 4, FourCC("free").bytes)
            f.zero(b.payload, b.payloadSize)
            f.hasLocation = true
        case FourCC("XMP_"):
            try xmpBox(&f, b)
        case FourCC("uuid") where b.userType == xmpUUID:
            try xmpBox(&f, b)
        default:
            break
        }
    }

    static func xmpBox(_ f: inout Findings, _ b: Box) throws(ScanError) {
        guard b.payloadSize <= UInt64(Limits.maxBlock) else {
            f.refuse("XMP box of \(b.payloadSize) bytes is too large")
            return
        }
        let packet = try f.source.read(b.payload, Int(b.payloadSize))
        let x = XMPScanner.scan(packet)
        f.apply(x.changes, through: ExtentMap(file: b.payload, length: b.payloadSize))
        f.dates.takeXMP(x.dates)
    }

    /// Whether a `keys` name (or `----` item name) designates location data.
    static func isLocationKey(_ key: String) -> Bool {
        let k = key.lowercased()
        return k.contains("location") || k.contains("iso6709") || k.contains("gps") || k.hasSuffix("xyz")
    }

    /// QuickTime `meta` (no version/flags) or ISO `meta` (full box): `hdlr`, `keys`, `ilst`.
    static func movieMeta(_ f: inout Findings, _ meta: Box, depth: Int, walk: inout Walk) throws(ScanError) {
        guard depth <= Limits.maxDepth else { throw .malformed("boxes nested deeper than \(Limits.maxDepth)") }
        let source = f.source
        guard meta.payloadSize >= 8 else { return }
        let peek = try source.read(meta.payload, Int(min(meta.payloadSize, 12)))
        let isFullBox = !(peek.fourCC(4) == FourCC("hdlr"))
        let list = try children(source, of: meta, skipping: isFullBox ? 4 : 0, walk: &walk)
        var keys: [String] = []
        for b in list where b.type == FourCC("keys") {
            guard b.payloadSize <= UInt64(Limits.maxBlock) else { throw .malformed("keys box too large") }
            var c = Cursor(try source.read(b.payload, Int(b.payloadSize)), "keys")
            _ = try c.u32()
            let count = Int(try c.u32())
            guard count <= c.remaining / 8 else { throw .malformed("keys count \(count) past the box end") }
            for _ in 0..<count {
                let size = Int(try c.u32())
                guard size >= 8 else { throw .malformed("keys entry size \(size)") }
                _ = try c.u32()   // namespace ('mdta')
                try c.need(size - 8)
                keys.append(String(decoding: c.b[c.i..<(c.i + size - 8)], as: UTF8.self))
                c.i += size - 8
            }
        }
        for b in list {
            switch b.type {
            case FourCC("ilst"):
                for item in try children(source, of: b, walk: &walk) {
                    let index = Int(item.type.value)
                    var name: String?
                    if !keys.isEmpty, index >= 1, index <= keys.count { name = keys[index - 1] }
                    var isLocation = item.type == xyz || (name.map(isLocationKey) ?? false)
                    let isCreationDate = name == "com.apple.quicktime.creationdate"
                    let parts = try children(source, of: item, walk: &walk)
                    if item.type == FourCC("----") {
                        for p in parts where p.type == FourCC("name") && p.payloadSize > 4 && p.payloadSize < 4096 {
                            let n = try source.read(p.payload + 4, Int(p.payloadSize - 4))
                            if isLocationKey(String(decoding: n, as: UTF8.self)) { isLocation = true }
                        }
                    }
                    for p in parts where p.type == FourCC("data") && p.payloadSize > 8 {
                        if isLocation {
                            f.zero(p.payload + 8, p.payloadSize - 8)
                            if p.payloadSize > 65_536 {
                                f.hasLocation = true
                            } else if try source.read(p.payload + 8, Int(p.payloadSize - 8)).contains(where: { $0 != 0 }) {
                                f.hasLocation = true   // (an already zeroed value is no location)
                            }
                        } else if isCreationDate, p.payloadSize < 128, f.dates.quickTimeCreation == nil {
                            let v = try source.read(p.payload + 8, Int(p.payloadSize - 8))
                            f.dates.quickTimeCreation = String(decoding: v, as: UTF8.self)
                        }
                    }
                }
            case xyz, FourCC("loci"), FourCC("gps "), FourCC("gps0"), FourCC("XMP_"), FourCC("udta"), FourCC("uuid"):
                // Some writers nest these in meta.
                try movieChild(&f, b, depth: depth, walk: &walk)
            default:
                break
            }
        }
    }

    // MARK: HEIF

    struct Item {
        var type = FourCC(0)
        var contentType = ""
        var contentEncoding = ""
    }

    struct Location {
        var method = 0
        var dataReference = 0
        var base: UInt64 = 0
        var extents: [(offset: UInt64, length: UInt64)] = []
    }

    static func heifMeta(_ f: inout Findings, _ meta: Box, walk: inout Walk) throws(ScanError) {
        let source = f.source
        let list = try children(source, of: meta, skipping: 4, walk: &walk)
        func payload(_ b: Box) throws(ScanError) -> [UInt8] {
            guard b.payloadSize <= UInt64(Limits.maxBlock) else { throw .malformed("\(b.type) box too large") }
            return try source.read(b.payload, Int(b.payloadSize))
        }
        var items: [UInt32: Item] = [:]
        var locations: [UInt32: Location] = [:]
        defer {
            // Every item stored in this file (construction method 0) must be inside it.
            for (id, loc) in locations where loc.method == 0 && loc.dataReference == 0 {
                for e in loc.extents {
                    let start = loc.base &+ e.offset
                    if start < loc.base || start > source.size || e.length > source.size - start {
                        walk.cut("item \(id) extent at \(start) (\(e.length) bytes) runs past the end (\(source.size))")
                    }
                }
            }
        }
        var idat: Box?
        var primary: UInt32?
        for b in list {
            switch b.type {
            case FourCC("pitm"):
                var c = Cursor(try payload(b), "pitm")
                let v = try c.u8()
                c.i = 4
                primary = v == 0 ? UInt32(try c.u16()) : try c.u32()
            case FourCC("iinf"):
                var c = Cursor(try payload(b), "iinf")
                let v = try c.u8()
                c.i = 4
                _ = v == 0 ? UInt32(try c.u16()) : try c.u32()   // entry count: the child boxes are what counts
                for infe in try children(source, of: b, skipping: UInt64(c.i), walk: &walk) where infe.type == FourCC("infe") {
                    var e = Cursor(try payload(infe), "infe")
                    let ev = try e.u8()
                    e.i = 4
                    guard ev >= 2 else { continue }
                    let id = ev == 2 ? UInt32(try e.u16()) : try e.u32()
                    _ = try e.u16()
                    var item = Item(type: try e.fourCC())
                    _ = e.cString()
                    if item.type == FourCC("mime") {
                        item.contentType = String(decoding: e.cString(), as: UTF8.self)
                        item.contentEncoding = String(decoding: e.cString(), as: UTF8.self)
                    }
                    items[id] = item
                }
            case FourCC("iloc"):
                var c = Cursor(try payload(b), "iloc")
                let v = try c.u8()
                c.i = 4
                guard v <= 2 else { throw .malformed("iloc version \(v)") }
                let sizes = try c.u8(), more = try c.u8()
                let offsetSize = Int(sizes >> 4), lengthSize = Int(sizes & 15), baseSize = Int(more >> 4)
                let indexSize = v >= 1 ? Int(more & 15) : 0
                let count = v < 2 ? Int(try c.u16()) : Int(try c.u32())
                guard count <= c.remaining / 2 else { throw .malformed("iloc item count \(count) past the box end") }
                for _ in 0..<count {
                    let id = v < 2 ? UInt32(try c.u16()) : try c.u32()
                    var loc = Location()
                    if v >= 1 { loc.method = Int(try c.u16() & 0xF) }
                    loc.dataReference = Int(try c.u16())
                    loc.base = try c.sized(baseSize)
                    let extents = Int(try c.u16())
                    for _ in 0..<extents {
                        if indexSize > 0 { _ = try c.sized(indexSize) }
                        let offset = try c.sized(offsetSize)
                        let length = try c.sized(lengthSize)
                        loc.extents.append((offset, length))
                    }
                    locations[id] = loc
                }
            case FourCC("idat"):
                idat = b
            case FourCC("iprp"):
                try heifSize(&f, b, primary: primary, walk: &walk)
            case FourCC("uuid") where b.userType == xmpUUID:
                try xmpBox(&f, b)
            default:
                break
            }
        }

        for (id, item) in items.sorted(by: { $0.key < $1.key }) {
            let ct = item.contentType.lowercased()
            let isExif = item.type == FourCC("Exif")
            let isXMP = item.type == FourCC("mime") && (ct.contains("rdf+xml") || ct.contains("xmp"))
            guard isExif || isXMP, let loc = locations[id] else { continue }
            guard loc.dataReference == 0 else { continue }   // data in another file
            var map = ExtentMap()
            for e in loc.extents {
                switch loc.method {
                case 0:
                    let start = loc.base &+ e.offset
                    guard start >= loc.base, start <= source.size else { throw .truncated("\(item.type) item extent past the end") }
                    let length = e.length == 0 ? source.size - start : e.length
                    guard length <= source.size - start else { throw .truncated("\(item.type) item extent past the end") }
                    map.append(file: start, length: length)
                case 1:
                    guard let idat else { throw .malformed("item in idat without an idat box") }
                    let start = loc.base &+ e.offset
                    guard start >= loc.base, start <= idat.payloadSize else { throw .malformed("item extent past the idat end") }
                    let length = e.length == 0 ? idat.payloadSize - start : e.length
                    guard length <= idat.payloadSize - start else { throw .malformed("item extent past the idat end") }
                    map.append(file: idat.payload + start, length: length)
                default:
                    throw .malformed("\(item.type) item with construction method \(loc.method)")
                }
                guard map.length <= UInt64(Limits.maxBlock) else { throw .malformed("\(item.type) item too large") }
            }
            var bytes: [UInt8] = []
            for e in map.extents { bytes += try source.read(e.file, Int(e.length)) }

            if isExif {
                guard bytes.count >= 4 else { throw .malformed("Exif item cut short") }
                func isTIFF(_ i: Int) -> Bool {
                    bytes.has([0x49, 0x49, 0x2A, 0x00], at: i) || bytes.has([0x4D, 0x4D, 0x00, 0x2A], at: i)
                        || bytes.has([0x49, 0x49, 0x2B, 0x00], at: i) || bytes.has([0x4D, 0x4D, 0x00, 0x2B], at: i)
                }
                var start = 4 + Int(bytes.be32(0))
                if !isTIFF(start) {
                    // Older writers: no offset prefix, or one that does not point at the header.
                    guard let other = [10, 6, 4, 0].first(where: isTIFF) else {
                        throw .malformed("Exif item without a TIFF header")
                    }
                    start = other
                }
                var walker = TIFFWalker(MemoryBlock(bytes: Array(bytes[start...])), isFile: false)
                try walker.run()
                f.apply(walker.changes, through: map.slice(UInt64(start), UInt64(bytes.count - start)))
                f.dates.takeEXIF(walker.info.dates)
                f.dates.takeXMP(walker.info.xmpDates)
            } else if item.contentEncoding.isEmpty {
                let x = XMPScanner.scan(bytes)
                f.apply(x.changes, through: map)
                f.dates.takeXMP(x.dates)
            } else {
                // Compressed XMP: look inside; if it has location (or cannot be read), zero the item.
                let text = Inflate.zlib(bytes[...], limit: Limits.maxInflated)
                if text.map({ !XMPScanner.scan($0).changes.isEmpty }) ?? true {
                    for e in map.extents { f.zero(e.file, e.length) }
                    f.hasLocation = true
                }
            }
        }
    }

    /// Pixel size of the primary item (its `ispe` property), else the largest `ispe`.
    static func heifSize(_ f: inout Findings, _ iprp: Box, primary: UInt32?, walk: inout Walk) throws(ScanError) {
        let source = f.source
        var properties: [Box] = []
        var associations: [UInt32: [Int]] = [:]
        for b in try children(source, of: iprp, walk: &walk) {
            if b.type == FourCC("ipco") {
                properties = try children(source, of: b, walk: &walk)
            } else if b.type == FourCC("ipma"), b.payloadSize <= UInt64(Limits.maxBlock) {
                var c = Cursor(try source.read(b.payload, Int(b.payloadSize)), "ipma")
                let v = try c.u8()
                c.i = 1
                let flags = (UInt32(try c.u8()) << 16) | UInt32(try c.u16())
                let count = Int(try c.u32())
                guard count <= c.remaining / 3 else { break }
                for _ in 0..<count {
                    let id = v < 1 ? UInt32(try c.u16()) : try c.u32()
                    let n = Int(try c.u8())
                    var list: [Int] = []
                    for _ in 0..<n {
                        if flags & 1 != 0 { list.append(Int(try c.u16() & 0x7FFF)) } else { list.append(Int(try c.u8() & 0x7F)) }
                    }
                    associations[id] = list
                }
            }
        }
        func ispe(_ b: Box) throws(ScanError) -> (Int, Int)? {
            guard b.type == FourCC("ispe"), b.payloadSize >= 12 else { return nil }
            let p = try source.read(b.payload, 12)
            return (Int(p.be32(4)), Int(p.be32(8)))
        }
        if let primary, let list = associations[primary] {
            for index in list where index >= 1 && index <= properties.count {
                if let (w, h) = try ispe(properties[index - 1]) {
                    f.setSize(w, h)
                    return
                }
            }
        }
        var best: (Int, Int)?
        for p in properties {
            if let s = try ispe(p), s.0 * s.1 > (best.map { $0.0 * $0.1 } ?? -1) { best = s }
        }
        if let best { f.setSize(best.0, best.1) }
    }
}
