import Foundation
import Testing
import TestSupport
@testable import Redaction

/// Lays out TIFF structures by hand (either byte order) for crafted EXIF.
struct TIFFWriter {
    let little: Bool
    var bytes: [UInt8]

    init(little: Bool) {
        self.little = little
        bytes = little ? [0x49, 0x49, 0x2A, 0x00, 0, 0, 0, 0] : [0x4D, 0x4D, 0x00, 0x2A, 0, 0, 0, 0]
    }

    func encode16(_ v: UInt16) -> [UInt8] { little ? [UInt8(v & 0xFF), UInt8(v >> 8)] : [UInt8(v >> 8), UInt8(v & 0xFF)] }
    func encode32(_ v: UInt32) -> [UInt8] {
        let be = [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)]
        return little ? be.reversed() : be
    }
    mutating func set32(_ at: Int, _ v: UInt32) { bytes.replaceSubrange(at..<(at + 4), with: encode32(v)) }

    struct Entry {
        var tag: UInt16
        var type: UInt16
        var count: UInt32
        var data: [UInt8]
    }

    static func rational(_ values: [(UInt32, UInt32)], _ w: TIFFWriter) -> [UInt8] {
        values.flatMap { w.encode32($0.0) + w.encode32($0.1) }
    }

    /// Appends an IFD (entries sorted as given) and its out-of-line data; returns its offset.
    @discardableResult
    mutating func ifd(_ entries: [Entry], next: UInt32 = 0, declaredCount: UInt16? = nil) -> UInt32 {
        if bytes.count % 2 == 1 { bytes.append(0) }
        let start = bytes.count
        bytes += encode16(declaredCount ?? UInt16(entries.count))
        var pending: [(Int, [UInt8])] = []
        for e in entries {
            bytes += encode16(e.tag) + encode16(e.type) + encode32(e.count)
            if e.data.count <= 4 {
                bytes += e.data + [UInt8](repeating: 0, count: 4 - e.data.count)
            } else {
                pending.append((bytes.count, e.data))
                bytes += [0, 0, 0, 0]
            }
        }
        bytes += encode32(next)
        for (at, data) in pending {
            set32(at, UInt32(bytes.count))
            bytes += data
        }
        return UInt32(start)
    }

    mutating func gpsEntries() -> [Entry] {
        [Entry(tag: 0, type: 1, count: 4, data: [2, 3, 0, 0]),
         Entry(tag: 1, type: 2, count: 2, data: Array("N\0".utf8)),
         Entry(tag: 2, type: 5, count: 3, data: TIFFWriter.rational([(48, 1), (51, 1), (2376, 100)], self)),
         Entry(tag: 3, type: 2, count: 2, data: Array("E\0".utf8)),
         Entry(tag: 4, type: 5, count: 3, data: TIFFWriter.rational([(2, 1), (21, 1), (792, 100)], self)),
         Entry(tag: 6, type: 5, count: 1, data: TIFFWriter.rational([(35, 1)], self))]
    }

    func pointer(_ tag: UInt16, _ offset: UInt32) -> Entry { Entry(tag: tag, type: 4, count: 1, data: encode32(offset)) }
}

/// A JPEG with `app1` (EXIF TIFF bytes) inserted after SOI.
func jpegWithEXIF(_ base: [UInt8], _ tiff: [UInt8]) -> [UInt8] {
    let payload = Array("Exif\0\0".utf8) + tiff
    let n = payload.count + 2
    return [0xFF, 0xD8, 0xFF, 0xE1, UInt8(n >> 8), UInt8(n & 0xFF)] + payload + base.dropFirst(2)
}

/// Checks a scan of hostile bytes: no crash; when it returns a plan, the plan stays inside the file.
func survive(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) -> Result<MediaScan, ScanError> {
    do {
        let scan = try MediaScanner.scan(bytes: bytes)
        if case .plan(let plan) = scan.redaction {
            #expect(plan.patches.allSatisfy { $0.end <= UInt64(bytes.count) }, "patch past the end", sourceLocation: sourceLocation)
            #expect((try? RedactionPlan(serialized: plan.serialized())) == plan, sourceLocation: sourceLocation)
        }
        return .success(scan)
    } catch {
        return .failure(error)
    }
}

@Suite("Hostile input")
struct HostileTests {
    /// A tiny JPEG made once by ImageMagick.
    static func baseJPEG() throws -> [UInt8] {
        let s = try Scratch()
        return try readBytes(try Fixture.image(s, "base.jpg", size: "8x8"))
    }

    @Test(arguments: [false, true])
    func craftedEXIFIsRedactedAndReadable(little: Bool) throws {
        var w = TIFFWriter(little: little)
        let gps = w.ifd(w.gpsEntries())
        let exif = w.ifd([TIFFWriter.Entry(tag: 0x9003, type: 2, count: 20, data: Array("2021:03:04 05:06:07\0".utf8))])
        // IFD1 (thumbnail chain) has its own GPS pointer too.
        let gps2 = w.ifd(w.gpsEntries())
        let ifd1 = w.ifd([w.pointer(0x8825, gps2)])
        let ifd0 = w.ifd([TIFFWriter.Entry(tag: 0x010F, type: 2, count: 7, data: Array("KeepMe\0".utf8)),
                          w.pointer(0x8769, exif), w.pointer(0x8825, gps)], next: ifd1)
        w.set32(4, ifd0)
        let s = try Scratch()
        let p = s.path("crafted.jpg")
        try writeBytes(jpegWithEXIF(try HostileTests.baseJPEG(), w.bytes), p)
        let (scan, after) = try verifyRedaction(p, Expectation(kind: .jpeg, date: utc(2021, 3, 4, 5, 6, 7), mustHaveBefore: ["GPSLatitude"]),
                                                decode: .image)
        guard case .plan(let plan) = scan.redaction else { return }
        // Both GPS IFDs: count + 6 entries + next pointer, plus three 24/24/8-byte values each.
        #expect(plan.patchedByteCount == 2 * (2 + 6 * 12 + 4 + 24 + 24 + 8))
        #expect(after["IFD0:Make"] as? String == "KeepMe")
    }

    /// An MPF index (APP2) pointing at a second JPEG appended after the first: its EXIF GPS is zeroed too.
    @Test func mpfSecondaryImage() throws {
        let base = try HostileTests.baseJPEG()
        var g = TIFFWriter(little: false)
        let gps = g.ifd(g.gpsEntries())
        let ifd0 = g.ifd([g.pointer(0x8825, gps)])
        g.set32(4, ifd0)
        let second = jpegWithEXIF(base, g.bytes)

        func app2(_ secondOffset: UInt32) -> [UInt8] {
            mpfSegment(primarySize: UInt32(base.count), secondSize: second.count, secondOffset: secondOffset)
        }
        let segmentLength = app2(0).count
        let primaryLength = base.count + segmentLength
        let mpHeader = 2 + 4 + 4   // SOI, APP2 marker and length, "MPF\0"
        let file = [0xFF, 0xD8] + app2(UInt32(primaryLength - mpHeader)) + base.dropFirst(2) + second
        #expect(file.count == primaryLength + second.count)

        let scan = try MediaScanner.scan(bytes: file)
        #expect(scan.hasLocation)
        guard case .plan(let plan) = scan.redaction else { Issue.record("refused"); return }
        #expect(!plan.isEmpty)
        #expect(plan.patches.allSatisfy { $0.offset >= UInt64(primaryLength) }, "only the second image has GPS")
        // exiftool on the second image, as served.
        let s = try Scratch()
        let served = plan.applied(to: file)
        try writeBytes(Array(file[primaryLength...]), s.path("before.jpg"))
        try writeBytes(Array(served[primaryLength...]), s.path("after.jpg"))
        #expect(!locationTags(try exiftoolTags(s.path("before.jpg"))).isEmpty)
        #expect(locationTags(try exiftoolTags(s.path("after.jpg"))).filter { isNonzero($0.value) }.isEmpty)
        try writeBytes(served, s.path("served.jpg"))
        try writeBytes(file, s.path("original.jpg"))
        #expect(try decoded(s.path("served.jpg"), .image) == decoded(s.path("original.jpg"), .image))
    }

    @Test func offsetLoopsTerminate() throws {
        var w = TIFFWriter(little: true)
        // IFD0 -> next = IFD0; ExifIFD pointer -> IFD0; GPS IFD whose next pointer is itself.
        let ifd0Offset: UInt32 = 8
        let gps = UInt32(8 + 2 + 3 * 12 + 4)
        w.ifd([w.pointer(0x8769, ifd0Offset), w.pointer(0x8825, gps), w.pointer(0x014A, ifd0Offset)], next: ifd0Offset)
        #expect(w.bytes.count == Int(gps))
        w.ifd(w.gpsEntries(), next: gps)
        w.set32(4, ifd0Offset)
        let bytes = jpegWithEXIF(try HostileTests.baseJPEG(), w.bytes)
        let clock = ContinuousClock()
        let elapsed = try clock.measure {
            let scan = try MediaScanner.scan(bytes: bytes)
            #expect(scan.hasLocation)
            guard case .plan(let plan) = scan.redaction else { Issue.record("refused"); return }
            #expect(!plan.isEmpty)
        }
        #expect(elapsed < .seconds(1))
    }

    @Test func hugeCountsAndOffsetsPastTheEnd() throws {
        let base = try HostileTests.baseJPEG()
        var w = TIFFWriter(little: false)
        // GPS IFD claiming 65535 entries; entries with giant counts and offsets past the end.
        let gps = w.ifd([TIFFWriter.Entry(tag: 2, type: 5, count: 0xFFFF_FFFF, data: w.encode32(0x10)),
                         TIFFWriter.Entry(tag: 4, type: 12, count: 0x2000_0000, data: w.encode32(0xFFFF_FF00)),
                         TIFFWriter.Entry(tag: 5, type: 999, count: 7, data: w.encode32(0x10))], declaredCount: 0xFFFF)
        let ifd0 = w.ifd([w.pointer(0x8825, gps), w.pointer(0x8769, 0xFFFF_FFF0), w.pointer(0x014A, 0x7FFF_FFFF),
                          TIFFWriter.Entry(tag: 0x02BC, type: 7, count: 0xFFFF_FFFF, data: w.encode32(0xFFFF))],
                         next: 0xFFFF_FFFF, declaredCount: 4000)
        w.set32(4, ifd0)
        let jpeg = jpegWithEXIF(base, w.bytes)
        guard case .success(let scan) = survive(jpeg) else { Issue.record("scan failed"); return }
        #expect(scan.hasLocation)
        guard case .plan(let plan) = scan.redaction else { Issue.record("refused: \(scan.redaction)"); return }
        // Everything zeroed lies inside the APP1 segment.
        let segmentEnd = UInt64(6 + 6 + w.bytes.count)
        #expect(plan.patches.allSatisfy { $0.end <= segmentEnd })

        // A GPS pointer past the end: nothing to zero, nothing found.
        var v = TIFFWriter(little: true)
        let ifd = v.ifd([v.pointer(0x8825, 0xFFFF_FFF0)])
        v.set32(4, ifd)
        let scan2 = try MediaScanner.scan(bytes: jpegWithEXIF(base, v.bytes))
        #expect(scan2.hasLocation == false)
        #expect(scan2.redaction == .plan(.empty))

        // A bad TIFF header inside APP1: fail closed.
        let scan3 = try MediaScanner.scan(bytes: jpegWithEXIF(base, Array("XX*\0garbage".utf8)))
        guard case .refuse = scan3.redaction else { Issue.record("bad EXIF header must refuse"); return }
        #expect(scan3.kind == .jpeg)
    }

    @Test func zeroLengthSegmentsAndChunks() throws {
        let base = try HostileTests.baseJPEG()
        // APP1 with length 2 (empty payload).
        let emptyApp1 = [0xFF, 0xD8, 0xFF, 0xE1, 0x00, 0x02] + base.dropFirst(2)
        guard case .success = survive(Array(emptyApp1)) else { Issue.record("empty APP1"); return }
        // JPEG segment length 0 or 1: malformed.
        guard case .failure(.malformed) = survive([0xFF, 0xD8, 0xFF, 0xE1, 0x00, 0x01] + base.dropFirst(2)) else {
            Issue.record("length-1 segment must be malformed"); return
        }
        // PNG with zero-length eXIf and iTXt chunks.
        let s = try Scratch()
        var png = try readBytes(try Fixture.image(s, "a.png", size: "4x4"))
        png.insert(contentsOf: PNGBuilder.chunk("eXIf", []) + PNGBuilder.chunk("iTXt", []) + PNGBuilder.chunk("zTXt", [0]), at: 33)
        guard case .success(let ps) = survive(png) else { Issue.record("png"); return }
        #expect(ps.hasLocation == false)
        // PNG without IHDR.
        guard case .failure(.malformed) = survive(Array(png[..<8]) + PNGBuilder.chunk("IEND", [])) else {
            Issue.record("PNG without IHDR must be malformed"); return
        }
        // WebP with an empty EXIF chunk.
        var webp = try readBytes(try Fixture.image(s, "a.webp", size: "4x4"))
        webp += Array("EXIF".utf8) + [0, 0, 0, 0]
        let riff = UInt32(webp.count - 8)
        webp.replaceSubrange(4..<8, with: [UInt8(riff & 0xFF), UInt8(riff >> 8 & 0xFF), UInt8(riff >> 16 & 0xFF), UInt8(riff >> 24)])
        guard case .success(let ws) = survive(webp) else { Issue.record("webp"); return }
        #expect(ws.redaction == .plan(.empty), "an empty EXIF chunk holds nothing")
        // An EXIF chunk with a bad TIFF header: fail closed.
        webp += Array("EXIF".utf8) + [8, 0, 0, 0] + Array("XX*\0\0\0\0\0".utf8)
        let riff2 = UInt32(webp.count - 8)
        webp.replaceSubrange(4..<8, with: [UInt8(riff2 & 0xFF), UInt8(riff2 >> 8 & 0xFF), UInt8(riff2 >> 16 & 0xFF), UInt8(riff2 >> 24)])
        guard case .success(let ws2) = survive(webp) else { Issue.record("webp 2"); return }
        guard case .refuse = ws2.redaction else { Issue.record("bad TIFF header must refuse"); return }
    }

    static func box(_ type: String, _ payload: [UInt8]) -> [UInt8] {
        let n = UInt32(payload.count + 8)
        return [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] + Array(type.utf8) + payload
    }

    @Test func boxSizes() throws {
        let ftyp = HostileTests.box("ftyp", Array("qt  ".utf8) + [0, 0, 0, 0] + Array("qt  ".utf8))
        let moov = HostileTests.box("moov", HostileTests.box("udta", HostileTests.box("free", [])))
        // Size 0 at top level: runs to the end of the file.
        let size0 = ftyp + moov + [0, 0, 0, 0] + Array("mdat".utf8) + [1, 2, 3]
        guard case .success = survive(size0) else { Issue.record("size 0"); return }
        // Size 1 with a 64-bit size: valid, and huge.
        let size1 = ftyp + moov + [0, 0, 0, 1] + Array("mdat".utf8) + [0, 0, 0, 0, 0, 0, 0, 20] + [1, 2, 3, 4]
        guard case .success = survive(size1) else { Issue.record("size 1"); return }
        let size1Huge = ftyp + moov + [0, 0, 0, 1] + Array("mdat".utf8) + [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xF0]
        guard case .failure(.truncated) = survive(size1Huge) else { Issue.record("huge 64-bit size must be truncated"); return }
        let huge32 = ftyp + moov + [0xFF, 0xFF, 0xFF, 0xF0] + Array("mdat".utf8)
        guard case .failure(.truncated) = survive(huge32) else { Issue.record("huge size must be truncated"); return }
        // Size 4 (smaller than a header).
        guard case .failure(.malformed) = survive(ftyp + moov + [0, 0, 0, 4] + Array("mdat".utf8)) else {
            Issue.record("size 4 must be malformed"); return
        }
        // A bad box inside moov/udta: metadata not parsed with confidence, refuse (kind still known).
        let badInner = ftyp + HostileTests.box("moov", HostileTests.box("udta", [0, 0, 0, 3] + Array("loci".utf8)))
        guard case .success(let scan) = survive(badInner) else { Issue.record("bad inner box"); return }
        guard case .refuse = scan.redaction else { Issue.record("bad inner box must refuse"); return }
        #expect(scan.kind == .mov)
        // Movie without moov: the file ends before its index (cut while being written).
        guard case .failure(.truncated) = survive(ftyp + HostileTests.box("mdat", [1, 2])) else { Issue.record("no moov"); return }
        guard case .failure(.truncated) = survive(ftyp + HostileTests.box("free", [1, 2])) else { Issue.record("no moov, no mdat"); return }
        // Deep nesting: refused, no stack overflow.
        var deep = HostileTests.box("loci", [0, 0, 0, 0, 1, 2, 3])
        for _ in 0..<200 { deep = HostileTests.box("udta", deep) }
        guard case .success(let d) = survive(ftyp + HostileTests.box("moov", deep)) else { Issue.record("deep"); return }
        guard case .refuse = d.redaction else { Issue.record("too deep must refuse"); return }
        // Many boxes: bounded.
        let many = ftyp + HostileTests.box("moov", [UInt8]((0..<100_000).flatMap { _ in HostileTests.box("free", []) }))
        let clock = ContinuousClock()
        let elapsed = clock.measure { _ = survive(many) }
        #expect(elapsed < .seconds(5))
    }

    @Test func heifItemsPointingAnywhere() throws {
        let s = try Scratch()
        let p = try Fixture.image(s, "a.heic", size: "8x8")
        try Fixture.exiftool(p, Fixture.gps)
        let bytes = try readBytes(p)
        // Corrupt every 4-byte word of the meta box in turn with 0xFFFFFFFF or 0: no crash, plans in bounds.
        let meta = try #require(bytes.firstIndex(of: Array("meta".utf8)))
        let end = min(bytes.count, meta + 400)
        var i = meta
        while i + 4 <= end {
            for v: [UInt8] in [[0xFF, 0xFF, 0xFF, 0xFF], [0, 0, 0, 0], [0, 0, 0, 1]] {
                var bad = bytes
                bad.replaceSubrange(i..<(i + 4), with: v)
                _ = survive(bad)
            }
            i += 2
        }
    }

    /// Every prefix of small files of each kind: no crash, bounded time.
    @Test func truncatedPrefixes() throws {
        let s = try Scratch()
        var files: [[UInt8]] = []
        for ext in ["jpg", "png", "tif", "webp", "heic", "gif"] {
            let p = try Fixture.image(s, "a.\(ext)", size: "8x8")
            try Fixture.exiftool(p, Fixture.gps + (ext == "gif" ? Fixture.xmp : []))
            files.append(try readBytes(p))
        }
        for ext in ["mp4", "mov"] {
            let p = try Fixture.movie(s, "a.\(ext)", ["-t", "0.1", "-metadata", "location=+48.8566+002.3522/"])
            files.append(try readBytes(p))
        }
        let clock = ContinuousClock()
        let elapsed = clock.measure {
            for file in files {
                let full = survive(file)
                guard case .success(let scan) = full else { Issue.record("full file failed: \(full)"); continue }
                #expect(scan.hasLocation)
                // Movies are a few KB of mdat first: step through it, then every byte of the moov.
                for n in 0..<file.count where file.count < 8000 || n % 7 == 0 || n > file.count - 2000 {
                    _ = survive(Array(file[..<n]))
                }
            }
        }
        #expect(elapsed < .seconds(30), "prefix scans took \(elapsed)")
        // A JPEG cut inside its header segments is truncated.
        let jpeg = files[0]
        guard case .failure(.truncated) = survive(Array(jpeg[..<40])) else { Issue.record("cut JPEG"); return }
    }

    /// Random byte mutations of every format: no crash, plans in bounds.
    @Test func randomMutations() throws {
        let s = try Scratch()
        var seeds: [[UInt8]] = []
        for ext in ["jpg", "png", "tif", "webp", "heic", "gif"] {
            let p = try Fixture.image(s, "a.\(ext)", size: "8x8")
            try Fixture.exiftool(p, Fixture.gps + Fixture.xmp)
            seeds.append(try readBytes(p))
        }
        var rng = SplitMix(seed: 2024)
        for seed in seeds {
            for _ in 0..<300 {
                var m = seed
                for _ in 0..<(1 + Int(rng.next() % 8)) {
                    let at = Int(rng.next() % UInt64(m.count))
                    switch rng.next() % 3 {
                    case 0: m[at] = UInt8(truncatingIfNeeded: rng.next())
                    case 1: m[at] = [0, 0xFF, 0x7F, 0x80][Int(rng.next() % 4)]
                    default: m.removeSubrange(at..<min(m.count, at + Int(rng.next() % 16)))
                    }
                    if m.isEmpty { break }
                }
                _ = survive(m)
            }
        }
    }

    @Test func inflateRejectsGarbage() {
        var rng = SplitMix(seed: 3)
        for _ in 0..<2000 {
            let junk = (0..<Int(rng.next() % 200)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            if let out = Inflate.zlib(junk[...], limit: 1 << 16) { #expect(out.count <= 1 << 16) }
        }
        let text = Array("hello hello hello".utf8)
        #expect(Inflate.zlib(PNGBuilder.storedZlib(text)[...], limit: 100) == text)
        #expect(Inflate.zlib(PNGBuilder.storedZlib(text)[...], limit: 5) == nil, "output limit")
    }
}
