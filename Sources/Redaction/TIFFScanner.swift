// Kept in one file (over ~400 lines): one container format, one recursive IFD walk.
/// Random access to one metadata block, in the block's own coordinates.
protocol BlockReader {
    var length: UInt64 { get }
    /// Exactly `count` bytes; callers check the range first.
    func read(_ offset: UInt64, _ count: Int) throws(ScanError) -> [UInt8]
}

struct MemoryBlock: BlockReader {
    let bytes: [UInt8]
    var length: UInt64 { UInt64(bytes.count) }
    func read(_ offset: UInt64, _ count: Int) throws(ScanError) -> [UInt8] {
        guard offset <= length, UInt64(count) <= length - offset else { throw .truncated("block read past its end") }
        return Array(bytes[Int(offset)..<(Int(offset) + count)])
    }
}

/// A contiguous range of the file (a TIFF file's whole content).
struct FileBlock: BlockReader {
    let source: ByteSource
    let base: UInt64
    let length: UInt64
    func read(_ offset: UInt64, _ count: Int) throws(ScanError) -> [UInt8] {
        guard offset <= length, UInt64(count) <= length - offset else { throw .truncated("block read past its end") }
        return try source.read(base + offset, count)
    }
}

/// What a TIFF structure walk found, besides the changes.
struct TIFFInfo {
    var dates = DateCandidates()
    var width: Int?
    var height: Int?
    var exifWidth: Int?
    var exifHeight: Int?
    var xmpDates = DateCandidates()
    /// Files only: IFD0's Make, whether IFD0 has a DNGVersion, and the Compression and
    /// PhotometricInterpretation values of the image IFDs (to tell a camera raw from a TIFF).
    var make = ""
    var dngVersion = false
    var compressions = Set<Int>()
    var photometrics = Set<Int>()
    /// Files only: embedded JPEG images (IFD JPEGInterchangeFormat, Panasonic JpgFromRaw), which
    /// carry their own metadata.
    var embeddedJPEGs: [(offset: UInt64, length: UInt64)] = []
}

/// Walks a TIFF structure (the body of an EXIF block, or a whole TIFF file) and finds the bytes
/// that carry location: the GPS IFD (entry count, entries, next pointer and out-of-line values,
/// all zeroed so readers see an empty GPS IFD), XMP (tag 700), IPTC (tag 33723) and Photoshop
/// resources (tag 34377). Both byte orders; loops and out-of-range offsets are skipped; the
/// number of IFDs is capped.
struct TIFFWalker<R: BlockReader> {
    enum Role { case chain(Int), exif, sub }
    /// What the first IFD is: IFD0 (EXIF blocks, TIFF files), or, in Canon CR3's separate
    /// structures, an EXIF IFD (`CMT2`) or a GPS IFD (`CMT4`).
    enum Root { case ifd0, exif, gps }

    let r: R
    let root: Root
    /// A TIFF file (follow the whole IFD chain and SubIFDs; image size from IFD0) or an EXIF block.
    let isFile: Bool
    private(set) var little = false
    private(set) var changes = BlockChanges()
    private(set) var info = TIFFInfo()
    private var visited = Set<UInt64>()
    private var gpsDone = Set<UInt64>()
    private var ifds = 0
    private var enqueued = 0
    private var entriesLeft = Limits.maxIFDEntries
    private var embeddedDone = Set<[UInt64]>()
    /// Files only: why the file is incomplete (an IFD, value, strip or tile past its end), if it is.
    private(set) var truncation: String?

    init(_ r: R, isFile: Bool, root: Root = .ifd0) {
        self.r = r
        self.isFile = isFile
        self.root = root
    }

    static func typeSize(_ type: UInt16) -> UInt64? {
        switch type {
        case 1, 2, 6, 7: return 1
        case 3, 8: return 2
        case 4, 9, 11, 13: return 4
        case 5, 10, 12, 16, 17, 18: return 8
        default: return nil
        }
    }

    private func u16(_ b: [UInt8], _ i: Int) -> UInt16 { little ? b.le16(i) : b.be16(i) }
    private func u32(_ b: [UInt8], _ i: Int) -> UInt32 { little ? b.le32(i) : b.be32(i) }

    /// Walks everything. Throws only for I/O or the work limit; unparseable structure refuses.
    mutating func run() throws(ScanError) {
        // Fewer than 8 bytes hold no TIFF header, hence nothing any reader could find.
        guard r.length >= 8 else { return }
        let header = try r.read(0, 8)
        if header.has([0x49, 0x49, 0x2A, 0x00]) { little = true }
        else if header.has([0x4D, 0x4D, 0x00, 0x2A]) { little = false }
        else if isFile && (header.has([0x49, 0x49, 0x52, 0x4F]) || header.has([0x49, 0x49, 0x52, 0x53])
                           || header.has([0x49, 0x49, 0x55, 0x00])) { little = true }   // ORF, RW2
        else if isFile && header.has([0x4D, 0x4D, 0x4F, 0x52]) { little = false }   // ORF
        else if header.has([0x49, 0x49, 0x2B, 0x00]) || header.has([0x4D, 0x4D, 0x00, 0x2B]) {
            changes.refuse("BigTIFF is not supported")
            return
        } else {
            changes.refuse("bad TIFF header")
            return
        }
        let first = UInt64(u32(header, 4))
        if root == .gps {
            try zeroGPS(first)
            return
        }
        var queue: [(UInt64, Role)] = [(first, root == .exif ? .exif : .chain(0))]
        while let (offset, role) = queue.popLast() {
            try walkIFD(offset, role, &queue)
            if changes.refusal != nil { return }
        }
    }

    /// Queues an IFD to visit; past a bound, refuses (the structure references far more IFDs than any file has).
    private mutating func push(_ queue: inout [(UInt64, Role)], _ item: (UInt64, Role)) {
        enqueued += 1
        if enqueued > 4 * Limits.maxIFDs {
            changes.refuse("too many IFD references")
            return
        }
        queue.append(item)
    }

    /// Files only: records that the structure points past the end of the file (the first reason is kept).
    private mutating func cut(_ why: String) {
        if isFile && truncation == nil { truncation = why }
    }

    /// Files only: whether `offset ..< offset + size` is inside the file; records a truncation if not.
    @discardableResult
    private mutating func within(_ offset: UInt64, _ size: UInt64, _ what: String, _ tag: UInt16 = 0) -> Bool {
        if offset <= r.length, size <= r.length - offset { return true }
        let length = r.length
        cut("\(what)\(tag == 0 ? "" : " 0x" + String(tag, radix: 16)) at \(offset) (\(size) bytes) runs past the end (\(length))")
        return false
    }

    /// A table of `count` SHORT or LONG values (strip/tile offsets or byte counts).
    private func values(_ entries: [UInt8], _ p: Int, type: UInt16, count: UInt64, at valueOffset: UInt64) throws(ScanError) -> [UInt64]? {
        guard type == 3 || type == 4 || type == 13, count >= 1, count <= UInt64(Limits.maxBlock / 4) else { return nil }
        let unit: UInt64 = type == 3 ? 2 : 4
        let bytes: [UInt8]
        if unit * count <= 4 {
            bytes = Array(entries[(p + 8)..<(p + 12)])
        } else {
            guard valueOffset <= r.length, unit * count <= r.length - valueOffset else { return nil }
            bytes = try r.read(valueOffset, Int(unit * count))
        }
        return (0..<Int(count)).map { k in unit == 2 ? UInt64(u16(bytes, 2 * k)) : UInt64(u32(bytes, 4 * k)) }
    }

    private mutating func walkIFD(_ offset: UInt64, _ role: Role, _ queue: inout [(UInt64, Role)]) throws(ScanError) {
        if offset >= 8, offset > r.length || r.length - offset < 2 { cut("IFD at \(offset) past the end (\(r.length))") }
        guard offset >= 8, offset < r.length, r.length - offset >= 2 else { return }
        guard visited.insert(offset).inserted else { return }
        ifds += 1
        guard ifds <= Limits.maxIFDs else {
            changes.refuse("more than \(Limits.maxIFDs) IFDs")
            return
        }
        let declared = Int(u16(try r.read(offset, 2), 0))
        let available = Int((r.length - offset - 2) / 12)
        let n = min(declared, available)
        if n < declared { cut("IFD at \(offset) declares \(declared) entries, the file ends after \(n)") }
        entriesLeft -= n
        guard entriesLeft >= 0 else {
            changes.refuse("more than \(Limits.maxIFDEntries) IFD entries")
            return
        }
        let entries = try r.read(offset + 2, n * 12)
        var index = 0
        if case .chain(let i) = role { index = i }
        // Image data this IFD points to (files: must lie inside the file).
        var dataOffsets: [UInt16: [UInt64]] = [:]
        var dataCounts: [UInt16: [UInt64]] = [:]

        for e in 0..<n {
            let p = e * 12
            let tag = u16(entries, p)
            let type = u16(entries, p + 2)
            let count = UInt64(u32(entries, p + 4))
            guard let unit = TIFFWalker.typeSize(type) else { continue }
            let size = unit * count
            let valueOffset = size <= 4 ? offset + 2 + UInt64(p) + 8 : UInt64(u32(entries, p + 8))
            if isFile && size > 4 { within(valueOffset, size, "value of tag", tag) }
            if isFile {
                switch (tag, role) {
                case (0x0111, .chain), (0x0111, .sub), (0x0144, .chain), (0x0144, .sub), (0x0201, .chain), (0x0201, .sub):
                    dataOffsets[tag] = try values(entries, p, type: type, count: count, at: valueOffset)
                case (0x0117, .chain), (0x0117, .sub), (0x0145, .chain), (0x0145, .sub), (0x0202, .chain), (0x0202, .sub):
                    dataCounts[tag] = try values(entries, p, type: type, count: count, at: valueOffset)
                case (0x0103, .chain), (0x0103, .sub):
                    if let v = number(entries, p, type) { info.compressions.insert(v) }
                case (0x0106, .chain), (0x0106, .sub):
                    if let v = number(entries, p, type) { info.photometrics.insert(v) }
                case (0x010F, .chain(0)):
                    info.make = try string(valueOffset, size) ?? ""
                case (0xC612, .chain(0)):
                    info.dngVersion = true
                case (0x002E, .chain(0)) where size > 4 && valueOffset <= r.length && size <= r.length - valueOffset:
                    info.embeddedJPEGs.append((valueOffset, size))   // Panasonic JpgFromRaw
                default:
                    break
                }
            }
            func pointers() -> [UInt64] {
                guard count >= 1, type == 4 || type == 13 || type == 3 else { return [] }
                if size <= 4 {
                    return [type == 3 ? UInt64(u16(entries, p + 8)) : UInt64(u32(entries, p + 8))]
                }
                return []
            }
            switch (tag, role) {
            case (0x8769, .chain), (0x8769, .sub):
                for ptr in pointers() { push(&queue, (ptr, .exif)) }
            case (0x8825, _):
                for ptr in pointers() { try zeroGPS(ptr) }
            case (0x014A, .chain), (0x014A, .sub):
                guard type == 4 || type == 13, count >= 1, count <= 256 else { break }
                if size <= 4 {
                    push(&queue, (UInt64(u32(entries, p + 8)), .sub))
                } else if valueOffset <= r.length, size <= r.length - valueOffset {
                    let list = try r.read(valueOffset, Int(size))
                    for k in 0..<Int(count) { push(&queue, (UInt64(u32(list, k * 4)), .sub)) }
                }
            case (0x02BC, .chain), (0x02BC, .sub):
                if let bytes = try embeddedBytes(valueOffset, size) {
                    let x = XMPScanner.scan(bytes)
                    changes.merge(x.changes, at: valueOffset)
                    if info.xmpDates.xmpOriginal == nil && info.xmpDates.xmpCreated == nil { info.xmpDates = x.dates }
                }
            case (0x83BB, .chain), (0x83BB, .sub):
                if let bytes = try embeddedBytes(valueOffset, size) { changes.merge(IPTCScanner.scan(bytes), at: valueOffset) }
            case (0x8649, .chain), (0x8649, .sub):
                if let bytes = try embeddedBytes(valueOffset, size) { changes.merge(PhotoshopResources.scan(bytes), at: valueOffset) }
            case (0x9003, .exif): info.dates.exifOriginal = try string(valueOffset, size)
            case (0x9004, .exif): info.dates.exifDigitized = try string(valueOffset, size)
            case (0x9011, .exif): info.dates.exifOriginalOffset = try string(valueOffset, size)
            case (0x9012, .exif): info.dates.exifDigitizedOffset = try string(valueOffset, size)
            case (0x9010, .exif): info.dates.exifDateTimeOffset = try string(valueOffset, size)
            case (0x0132, .chain(0)): info.dates.exifDateTime = try string(valueOffset, size)
            case (0x0100, .chain(0)) where isFile: info.width = number(entries, p, type)
            case (0x0101, .chain(0)) where isFile: info.height = number(entries, p, type)
            case (0xA002, .exif): info.exifWidth = number(entries, p, type)
            case (0xA003, .exif): info.exifHeight = number(entries, p, type)
            default: break
            }
        }
        // Strips, tiles and a JPEG thumbnail: offsets with byte counts, inside the file.
        for (offsetsTag, countsTag, what) in [(UInt16(0x0111), UInt16(0x0117), "strip"), (0x0144, 0x0145, "tile"),
                                              (0x0201, 0x0202, "JPEG thumbnail")] {
            guard let starts = dataOffsets[offsetsTag], let counts = dataCounts[countsTag] else { continue }
            for (start, length) in zip(starts, counts) where length > 0 {
                guard within(start, length, what) else { break }
                if offsetsTag == 0x0201 { info.embeddedJPEGs.append((start, length)) }
            }
        }
        // Next IFD of the main chain (IFD1 = thumbnail in EXIF; more pages in TIFF files).
        if case .chain = role, n == declared {
            let at = offset + 2 + UInt64(n) * 12
            if at > r.length || r.length - at < 4 { cut("next-IFD pointer of the IFD at \(offset) past the end") }
            if at <= r.length, r.length - at >= 4 {
                let next = UInt64(u32(try r.read(at, 4), 0))
                if next != 0 { push(&queue, (next, .chain(index + 1))) }
            }
        }
    }

    private func number(_ entries: [UInt8], _ p: Int, _ type: UInt16) -> Int? {
        switch type {
        case 3: return Int(u16(entries, p + 8))
        case 4: return Int(u32(entries, p + 8))
        default: return nil
        }
    }

    private func string(_ offset: UInt64, _ size: UInt64) throws(ScanError) -> String? {
        guard size > 0, size <= 64, offset <= r.length, size <= r.length - offset else { return nil }
        let bytes = try r.read(offset, Int(size)).prefix { $0 != 0 }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The bytes of an embedded block (XMP, IPTC, Photoshop resources), clamped to the structure.
    private mutating func embeddedBytes(_ offset: UInt64, _ size: UInt64) throws(ScanError) -> [UInt8]? {
        guard size > 0, offset < r.length else { return nil }
        let n = min(size, r.length - offset)
        guard embeddedDone.insert([offset, n]).inserted else { return nil }
        guard embeddedDone.count <= Limits.maxEmbeddedBlocks else {
            changes.refuse("more than \(Limits.maxEmbeddedBlocks) embedded metadata blocks")
            return nil
        }
        guard n <= UInt64(Limits.maxBlock) else {
            changes.refuse("embedded metadata of \(n) bytes is too large")
            return nil
        }
        return try r.read(offset, Int(n))
    }

    /// GPS tags that place the photo: latitude and longitude (2, 4), those of the destination
    /// (0x14, 0x16), and the name of the GPS area (0x1C). A GPS IFD with only a version, a
    /// timestamp, an altitude or a map datum (what cameras write without a fix) places nothing.
    static func isPlacingGPSTag(_ tag: UInt16) -> Bool { [0x02, 0x04, 0x14, 0x16, 0x1C].contains(tag) }

    /// Whether a GPS entry gives a position (issue 38: "has location" means one is there): a
    /// placing tag whose value is not all zero (a rational's numerators: 0/1 degrees is what a
    /// camera without a fix writes, and 0, 0 is no place anyone means). A value that cannot be
    /// read counts as a position. This decides the has-location flag only: the whole GPS IFD is
    /// zeroed for strip-location whatever it holds.
    private func gpsPlaces(tag: UInt16, type: UInt16, count: UInt64, entry: [UInt8]) throws(ScanError) -> Bool {
        guard Self.isPlacingGPSTag(tag), count > 0 else { return false }
        if tag == 0x1C { return count > 8 }   // an 8-byte character code, then the name
        guard let unit = TIFFWalker.typeSize(type) else { return true }
        let size = unit * count
        guard size <= 64 else { return true }
        let value: [UInt8]
        if size <= 4 {
            value = Array(entry[8..<(8 + Int(size))])
        } else {
            let v = UInt64(u32(entry, 8))
            guard v <= r.length, size <= r.length - v else { return true }
            value = try r.read(v, Int(size))
        }
        if type == 5 || type == 10 {
            return stride(from: 0, to: value.count, by: 8).contains { value[$0..<($0 + 4)].contains { $0 != 0 } }
        }
        return value.contains { $0 != 0 }
    }

    /// Zeroes the GPS IFD at `offset`: count, entries, next pointer and out-of-line values.
    private mutating func zeroGPS(_ offset: UInt64) throws(ScanError) {
        if offset >= 8, offset > r.length || r.length - offset < 2 { cut("GPS IFD at \(offset) past the end (\(r.length))") }
        guard offset < r.length, r.length - offset >= 2 else { return }
        guard gpsDone.insert(offset).inserted else { return }
        guard gpsDone.count <= Limits.maxGPSIFDs else {
            changes.refuse("more than \(Limits.maxGPSIFDs) GPS IFDs")
            return
        }
        let declared = UInt64(u16(try r.read(offset, 2), 0))
        let available = (r.length - offset - 2) / 12
        let n = min(declared, available)
        if n < declared { cut("GPS IFD at \(offset) declares \(declared) entries, the file ends after \(n)") }
        entriesLeft -= Int(n)
        guard entriesLeft >= 0 else {
            changes.refuse("more than \(Limits.maxIFDEntries) IFD entries")
            return
        }
        changes.zero(offset, min(r.length - offset, 2 + declared * 12 + 4))
        let entries = try r.read(offset + 2, Int(n) * 12)
        for e in 0..<Int(n) {
            let p = e * 12
            let tag = u16(entries, p)
            let type = u16(entries, p + 2)
            let count = UInt64(u32(entries, p + 4))
            if !changes.sawLocation, try gpsPlaces(tag: tag, type: type, count: count, entry: Array(entries[p..<(p + 12)])) {
                changes.sawLocation = true
            }
            guard let unit = TIFFWalker.typeSize(type) else { continue }
            let size = unit * count
            if size > 4 {
                let v = UInt64(u32(entries, p + 8))
                within(v, size, "GPS value")
                if v < r.length { changes.zero(v, min(size, r.length - v)) }
            }
        }
    }
}

/// IPTC-IIM records (Photoshop resource 0x0404, TIFF tag 33723): zero the values of the location
/// datasets (2:26 location code, 2:27 location name, 2:90 city, 2:92 sublocation, 2:95 province/state,
/// 2:100 country code, 2:101 country).
enum IPTCScanner {
    static let locationDatasets: Set<UInt8> = [26, 27, 90, 92, 95, 100, 101]

    static func scan(_ b: [UInt8]) -> BlockChanges {
        var changes = BlockChanges()
        var i = 0
        var records = 0
        while i + 5 <= b.count, b[i] == 0x1C, records < 100_000 {
            records += 1
            let record = b[i + 1], dataset = b[i + 2]
            var length = Int(b.be16(i + 3))
            i += 5
            if length & 0x8000 != 0 {
                let k = length & 0x7FFF
                guard k >= 1, k <= 4, i + k <= b.count else { break }
                length = 0
                for j in 0..<k { length = length << 8 | Int(b[i + j]) }
                i += k
            }
            let n = min(length, b.count - i)
            if record == 2, locationDatasets.contains(dataset), n > 0 {
                changes.zero(UInt64(i), UInt64(n))
                if b[i..<(i + n)].contains(where: { $0 != 0 }) { changes.sawLocation = true }
            }
            i += n
        }
        return changes
    }
}

/// Photoshop image resource blocks (JPEG APP13 "Photoshop 3.0", TIFF tag 34377): IPTC (0x0404) and
/// XMP (0x0424) inside are scanned.
enum PhotoshopResources {
    static func scan(_ b: [UInt8]) -> BlockChanges {
        var changes = BlockChanges()
        let signatures: [[UInt8]] = ["8BIM", "PHUT", "AgHg", "DCSR", "MeSa"].map { Array($0.utf8) }
        var i = 0
        var blocks = 0
        while i + 12 <= b.count, blocks < 100_000, signatures.contains(where: { b.has($0, at: i) }) {
            blocks += 1
            let id = b.be16(i + 4)
            let nameLength = Int(b[i + 6])
            let nameTotal = (1 + nameLength + 1) & ~1
            let j = i + 6 + nameTotal
            guard j + 4 <= b.count else { break }
            let size = Int(b.be32(j))
            let data = j + 4
            let n = min(size, b.count - data)
            let body = Array(b[data..<(data + n)])
            if id == 0x0404 {
                changes.merge(IPTCScanner.scan(body), at: UInt64(data))
            } else if id == 0x0424 {
                changes.merge(XMPScanner.scan(body).changes, at: UInt64(data))
            }
            guard size <= b.count - data else { break }
            i = data + size + (size & 1)
        }
        return changes
    }
}
