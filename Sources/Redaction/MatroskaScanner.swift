import Foundation

/// Matroska and WebM: walks the EBML header and the Segment's top-level elements.
///
/// - Kind: the EBML header's DocType (`matroska` or `webm`); a file with no video track (`.mka`
///   audio) is not media.
/// - Location lives in `Tags`: the values (`TagString`, `TagBinary`) of every `SimpleTag` whose
///   `TagName` names a location (`LOCATION`, `com.apple.quicktime.location.ISO6709`, anything with
///   location, ISO6709, GPS), and of the SimpleTags nested in it, are zeroed in place (Matroska
///   strings may be zero padded). A `CRC-32` element of an enclosing master is recomputed (a
///   replacement patch), innermost first.
/// - Attached photos (cover art) are redacted as files of their own, CRC-32s recomputed.
/// - Refused (fail closed): subtitle, metadata or other non audio/video tracks (their frames can
///   carry GPS text, as in MP4 subtitle tracks), attached videos or photos that are refused, a
///   `Tags` element too large to read, structure that cannot be walked.
/// - Complete files only (`.truncated` otherwise): the EBML header, a Segment whose size fits the
///   file (or is unknown), every top-level element inside the file, at least one Cluster, and
///   SeekHead entries pointing inside the file.
enum MatroskaScanner {
    static let ebmlID: UInt32 = 0x1A45DFA3
    static let segmentID: UInt32 = 0x18538067
    static let clusterID: UInt32 = 0x1F43B675
    static let seekHeadID: UInt32 = 0x114D9B74
    static let infoID: UInt32 = 0x1549A966
    static let tracksID: UInt32 = 0x1654AE6B
    static let cuesID: UInt32 = 0x1C53BB6B
    static let attachmentsID: UInt32 = 0x1941A469
    static let chaptersID: UInt32 = 0x1043A770
    static let tagsID: UInt32 = 0x1254C367
    static let crcID: UInt32 = 0xBF
    static let voidID: UInt32 = 0xEC
    static let levelOne: Set<UInt32> = [seekHeadID, infoID, tracksID, clusterID, cuesID, attachmentsID, chaptersID, tagsID,
                                        ebmlID, segmentID]

    /// One element: `start` (its ID), `data` (its payload) and `end`; `end` is nil for unknown size.
    struct Element {
        var id: UInt32
        var start: UInt64
        var data: UInt64
        var end: UInt64?
    }

    /// An element header from bytes (nil: not a valid header in these bytes).
    static func header(_ b: [UInt8], at i: Int) -> (id: UInt32, idLength: Int, size: UInt64?, length: Int)? {
        guard i < b.count else { return nil }
        let first = b[i]
        guard first != 0 else { return nil }
        let idLength = first.leadingZeroBitCount + 1
        guard idLength <= 4, i + idLength < b.count else { return nil }
        var id: UInt32 = 0
        for k in 0..<idLength { id = id << 8 | UInt32(b[i + k]) }
        let s0 = b[i + idLength]
        guard s0 != 0 else { return nil }
        let sizeLength = s0.leadingZeroBitCount + 1
        guard i + idLength + sizeLength <= b.count else { return nil }
        var size = UInt64(s0) & ((1 << (8 - sizeLength)) - 1)
        var allOnes = size == (1 << (8 - sizeLength)) - 1
        for k in 1..<sizeLength {
            let v = b[i + idLength + k]
            size = size << 8 | UInt64(v)
            if v != 0xFF { allOnes = false }
        }
        return (id, idLength, allOnes ? nil : size, idLength + sizeLength)
    }

    /// The element at `pos` of the file; `.truncated` if its header or (known) size runs past the end.
    static func element(_ source: ByteSource, at pos: UInt64) throws(ScanError) -> Element {
        let b = try source.readAvailable(pos, 12)
        guard let h = header(b, at: 0) else {
            if b.count < 12 { throw .truncated("Matroska element header at \(pos) cut short") }
            throw .malformed("bad Matroska element header at \(pos)")
        }
        let data = pos + UInt64(h.length)
        var end: UInt64?
        if let size = h.size {
            guard size <= source.size - data else {
                throw .truncated("Matroska element 0x\(String(h.id, radix: 16)) at \(pos) (\(size) bytes) runs past the end (\(source.size))")
            }
            end = data + size
        }
        return Element(id: h.id, start: pos, data: data, end: end)
    }

    /// Children of an in-memory master payload `from ..< to` (nil if they do not tile it).
    static func children(_ b: [UInt8], _ from: Int, _ to: Int) -> [(id: UInt32, start: Int, data: Int, end: Int)]? {
        var out: [(UInt32, Int, Int, Int)] = []
        var i = from
        while i < to {
            guard out.count < 1_000_000, let h = header(b, at: i), let size = h.size,
                  size <= UInt64(to - i - h.length) else { return nil }
            out.append((h.id, i, i + h.length, i + h.length + Int(size)))
            i += h.length + Int(size)
        }
        return out
    }

    static func uint(_ b: [UInt8], _ from: Int, _ to: Int) -> UInt64 {
        var v: UInt64 = 0
        for i in from..<min(to, from + 8) { v = v << 8 | UInt64(b[i]) }
        return v
    }

    static func scan(_ f: inout Findings, sniffed: MediaKind) throws(ScanError) {
        let source = f.source
        let head = try element(source, at: 0)
        guard head.id == ebmlID, let headEnd = head.end, headEnd - head.data <= 4096 else {
            throw .malformed("bad EBML header")
        }
        let headBytes = try source.read(head.data, Int(headEnd - head.data))
        guard let headChildren = children(headBytes, 0, headBytes.count) else { throw .malformed("bad EBML header") }
        var docType = ""
        for c in headChildren where c.id == 0x4282 {
            docType = String(decoding: headBytes[c.data..<c.end].prefix { $0 != 0 }, as: UTF8.self)
        }
        switch docType {
        case "matroska": f.kind = .mkv
        case "webm": f.kind = .webm
        default: throw .notMedia
        }

        var pos = headEnd
        // Void elements may sit between the header and the Segment.
        var segment = try element(source, at: pos)
        while segment.id == voidID, let end = segment.end {
            pos = end
            segment = try element(source, at: pos)
        }
        guard segment.id == segmentID else { throw .malformed("no Matroska Segment after the EBML header") }
        let segmentEnd = segment.end ?? source.size

        var clusters = 0
        var videoTracks = 0
        var sawTracks = false
        var seekTargets: [UInt64] = []
        var count = 0
        pos = segment.data
        scanning: while pos < segmentEnd {
            count += 1
            guard count <= Limits.maxChunks else { throw .malformed("too many Matroska elements") }
            let e = try element(source, at: pos)
            if e.id == ebmlID || e.id == segmentID { break }   // another Segment (chained): only the first one counts
            guard let end = e.end else {
                guard e.id == clusterID else { throw .malformed("element 0x\(String(e.id, radix: 16)) of unknown size") }
                clusters += 1
                pos = try unknownSizeClusterEnd(source, e)
                continue scanning
            }
            guard end <= segmentEnd else { throw .malformed("element at \(e.start) runs past its Segment") }
            switch e.id {
            case clusterID:
                clusters += 1
            case tracksID:
                sawTracks = true
                try ISOBMFFScanner.guarded(&f, "Matroska Tracks") { (f: inout Findings) throws(ScanError) in
                    videoTracks += try tracks(&f, e)
                }
            case tagsID:
                try ISOBMFFScanner.guarded(&f, "Matroska Tags") { (f: inout Findings) throws(ScanError) in
                    try tags(&f, e)
                }
            case attachmentsID:
                try ISOBMFFScanner.guarded(&f, "Matroska Attachments") { (f: inout Findings) throws(ScanError) in
                    try attachments(&f, e)
                }
            case infoID:
                try info(&f, e)
            case seekHeadID:
                guard end - e.data <= UInt64(Limits.maxBlock) else { break }
                let b = try source.read(e.data, Int(end - e.data))
                for seek in children(b, 0, b.count) ?? [] where seek.id == 0x4DBB {
                    for c in children(b, seek.data, seek.end) ?? [] where c.id == 0x53AC {
                        seekTargets.append(uint(b, c.data, c.end))
                    }
                }
            default:
                break
            }
            pos = end
        }
        for target in seekTargets where target >= source.size - segment.data {
            throw .truncated("the SeekHead points to \(segment.data + target), past the end (\(source.size))")
        }
        guard clusters > 0 else { throw .truncated("Matroska file without a Cluster") }
        guard sawTracks else { throw .malformed("Matroska file without Tracks") }
        if videoTracks == 0 && f.refusal == nil { throw .notMedia }   // audio only
    }

    /// Where a Cluster of unknown size ends: at the first element that is not one of its children
    /// (a top-level element), or the end of the file.
    static func unknownSizeClusterEnd(_ source: ByteSource, _ cluster: Element) throws(ScanError) -> UInt64 {
        var pos = cluster.data
        var count = 0
        while pos < source.size {
            count += 1
            guard count <= Limits.maxChunks else { throw .malformed("too many Matroska elements") }
            let e = try element(source, at: pos)
            if levelOne.contains(e.id) { return pos }
            guard let end = e.end else { throw .malformed("element of unknown size in a Cluster") }
            pos = end
        }
        return pos
    }

    /// Master payload bytes, bounded.
    static func payload(_ f: Findings, _ e: Element) throws(ScanError) -> [UInt8] {
        let end = e.end!
        guard end - e.data <= UInt64(Limits.maxBlock) else { throw .malformed("element of \(end - e.data) bytes is too large") }
        return try f.source.read(e.data, Int(end - e.data))
    }

    /// Counts video tracks; refuses tracks that are neither video nor audio.
    static func tracks(_ f: inout Findings, _ e: Element) throws(ScanError) -> Int {
        let b = try payload(f, e)
        guard let list = children(b, 0, b.count) else { throw .malformed("bad Tracks") }
        var video = 0
        for entry in list where entry.id == 0xAE {
            guard let parts = children(b, entry.data, entry.end) else { throw .malformed("bad TrackEntry") }
            var type: UInt64 = 0
            for p in parts {
                if p.id == 0x83 { type = uint(b, p.data, p.end) }
                if p.id == 0xE0, let v = children(b, p.data, p.end) {
                    var w: Int?, h: Int?
                    for x in v where x.id == 0xB0 { w = Int(uint(b, x.data, x.end)) }
                    for x in v where x.id == 0xBA { h = Int(uint(b, x.data, x.end)) }
                    f.setSize(w, h)
                }
            }
            switch type {
            case 1: video += 1
            case 2: break
            default: f.refuse("Matroska track of type \(type) (subtitles or metadata can carry location in their frames)")
            }
        }
        return video
    }

    /// DateUTC (nanoseconds since 2001-01-01 UTC), the recording date.
    static func info(_ f: inout Findings, _ e: Element) throws(ScanError) {
        guard let end = e.end, end - e.data <= 1 << 16 else { return }
        let b = try f.source.read(e.data, Int(end - e.data))
        for c in children(b, 0, b.count) ?? [] where c.id == 0x4461 && c.end - c.data == 8 {
            let ns = Int64(bitPattern: uint(b, c.data, c.end))
            f.dates.movieHeader = Date(timeIntervalSinceReferenceDate: Double(ns) / 1e9)
        }
    }

    /// Zeroes the values of location SimpleTags; recomputes the CRC-32 of the masters around them.
    static func tags(_ f: inout Findings, _ e: Element) throws(ScanError) {
        let b = try payload(f, e)
        var zeros: [(Int, Int)] = []
        var crcs: [(value: Int, from: Int, to: Int)] = []   // CRC-32 value offset, covered range
        func master(_ from: Int, _ to: Int, depth: Int, location: Bool) throws(ScanError) {
            guard depth <= Limits.maxDepth else { throw .malformed("Tags nested deeper than \(Limits.maxDepth)") }
            guard let list = children(b, from, to) else { throw .malformed("bad Tags structure") }
            if let first = list.first, first.id == crcID {
                guard first.end - first.data == 4 else { throw .malformed("CRC-32 element of \(first.end - first.data) bytes") }
                crcs.append((first.data, first.end, to))
            }
            // Void elements: stale bytes of tags an editor replaced may remain in them; readers skip them.
            for c in list where c.id == voidID && b[c.data..<c.end].contains(where: { $0 != 0 }) {
                zeros.append((c.data, c.end))
            }
            for c in list where c.id == 0x7373 || c.id == 0x63C0 {   // Tag, Targets
                try master(c.data, c.end, depth: depth + 1, location: location)
            }
            for c in list where c.id == 0x67C8 {   // SimpleTag
                var isLocation = location
                for n in children(b, c.data, c.end) ?? [] where n.id == 0x45A3 {
                    let name = String(decoding: b[n.data..<n.end].prefix { $0 != 0 }, as: UTF8.self)
                    if ISOBMFFScanner.isLocationKey(name) { isLocation = true }
                }
                if isLocation {
                    for n in children(b, c.data, c.end) ?? [] where n.id == 0x4487 || n.id == 0x4485 {
                        zeros.append((n.data, n.end))
                        if b[n.data..<n.end].contains(where: { $0 != 0 }) { f.hasLocation = true }
                    }
                }
                try master(c.data, c.end, depth: depth + 1, location: isLocation)
            }
        }
        try master(0, b.count, depth: 0, location: false)
        guard !zeros.isEmpty else { return }
        var served = b
        for (from, to) in zeros {
            for i in from..<to { served[i] = 0 }
            f.zero(e.data + UInt64(from), UInt64(to - from))
        }
        // Innermost first: an inner master's covered range starts after its outer's.
        for crc in crcs.sorted(by: { $0.from > $1.from })
        where zeros.contains(where: { $0.0 < crc.to && $0.1 > crc.from }) {
            let v = CRC32.checksum(served[crc.from..<crc.to])
            let bytes = [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24)]
            served.replaceSubrange(crc.value..<(crc.value + 4), with: bytes)
            f.replace(e.data + UInt64(crc.value), bytes)
        }
    }

    /// Attachments that are photos (cover art...) carry their own metadata: each is scanned as a
    /// file of its own and its plan applied in place, with the CRC-32 of the AttachedFile and of
    /// Attachments recomputed. One that is refused, cannot be scanned, or is a movie, refuses the file.
    static func attachments(_ f: inout Findings, _ e: Element) throws(ScanError) {
        guard let end = e.end else { return }
        let source = f.source
        var patches: [RedactionPlan.Patch] = []
        var pos = e.data
        var count = 0
        while pos < end {
            count += 1
            guard count <= 100_000 else { throw .malformed("too many attachments") }
            let file = try element(source, at: pos)
            guard let fileEnd = file.end, fileEnd <= end else { throw .malformed("bad AttachedFile") }
            if file.id == 0x61A7 {
                var p = file.data
                while p < fileEnd {
                    let c = try element(source, at: p)
                    guard let cEnd = c.end, cEnd <= fileEnd else { throw .malformed("bad AttachedFile child") }
                    if c.id == 0x465C, let kind = sniffMediaKind(try source.readAvailable(c.data, Int(min(64, cEnd - c.data)))) {
                        // Movies (and Matroska inside Matroska) are not followed: bounded work, no recursion.
                        guard !kind.isVideo, let window = source.window(c.data, cEnd - c.data) else {
                            f.refuse("Matroska attachment at \(c.data) is a video")
                            return
                        }
                        let scan: MediaScan
                        do {
                            scan = try MediaScanner.scan(window)
                        } catch {
                            if case .io = error { throw error }
                            f.refuse("Matroska attachment at \(c.data): \(error)")
                            return
                        }
                        guard case .plan(let plan) = scan.redaction else {
                            f.refuse("Matroska attachment at \(c.data) is refused")
                            return
                        }
                        patches += plan.patches.map { .init(offset: $0.offset + c.data, length: $0.length, replacement: $0.replacement) }
                        if scan.hasLocation { f.hasLocation = true }
                    }
                    p = cEnd
                }
            }
            pos = fileEnd
        }
        guard !patches.isEmpty else { return }
        for p in patches {
            if let r = p.replacement { f.replace(p.offset, r) } else { f.zero(p.offset, UInt64(p.length)) }
        }
        // CRC-32 elements of the AttachedFiles and of Attachments, over the served bytes.
        let head = try source.readAvailable(e.data, 2)
        var b: [UInt8]?
        func served() throws(ScanError) -> [UInt8] {
            if let b { return b }
            var bytes = try payload(f, e)   // bounded: too large refuses (through guarded)
            let plan = RedactionPlan(patches: patches.map { .init(offset: $0.offset - e.data, length: $0.length, replacement: $0.replacement) })
            bytes.withUnsafeMutableBytes { plan.apply(to: $0, fileOffset: 0) }
            b = bytes
            return bytes
        }
        var masters: [(value: Int, from: Int, to: Int)] = []
        if end - e.data <= UInt64(Limits.maxBlock) || head == [0xBF, 0x84] {
            let bytes = try served()
            guard let files = children(bytes, 0, bytes.count) else { throw .malformed("bad Attachments") }
            for file in files where file.id == 0x61A7 {
                if let first = children(bytes, file.data, file.end)?.first, first.id == crcID, first.end - first.data == 4 {
                    masters.append((first.data, first.end, file.end))
                }
            }
            if let first = files.first, first.id == crcID, first.end - first.data == 4 {
                masters.append((first.data, first.end, bytes.count))   // last: covers the others
            }
        }
        guard !masters.isEmpty else { return }
        var bytes = try served()
        for m in masters where patches.contains(where: { $0.offset - e.data < UInt64(m.to) && $0.end - e.data > UInt64(m.from) }) {
            let v = CRC32.checksum(bytes[m.from..<m.to])
            let crc = [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24)]
            bytes.replaceSubrange(m.value..<(m.value + 4), with: crc)
            f.replace(e.data + UInt64(m.value), crc)
        }
    }
}
