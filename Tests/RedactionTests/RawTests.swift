import Foundation
import Testing
import TestSupport
@testable import Redaction

/// Camera raw files laid out by hand (the TIFF structure each format is built on, with the
/// header or tags that name it), each with a GPS IFD exiftool reads; checked with exiftool.
enum RawBuilder {
    typealias E = TIFFWriter.Entry

    static func ascii(_ s: String) -> [UInt8] { Array(s.utf8) + [0] }

    /// header magic: nil = TIFF; extra: bytes after the 8-byte header (CR2's "CR" block).
    /// `gpsIn`: where the GPS IFD pointer is (IFD0 or the raw SubIFD). Returns the file and the
    /// GPS IFD's offset.
    static func file(little: Bool = true, magic: [UInt8]? = nil, extra: [UInt8] = [], make: String,
                     ifd0Extra: [E] = [], subIFD: [E]? = nil, gpsInSubIFD: Bool = false) -> (bytes: [UInt8], gps: Int) {
        var w = TIFFWriter(little: little)
        if let magic { w.bytes.replaceSubrange(2..<4, with: magic) }
        w.bytes += extra
        let stripAt = UInt32(w.bytes.count)
        w.bytes += [UInt8](repeating: 0x80, count: 64)
        let gps = w.ifd(w.gpsEntries())
        let exif = w.ifd([E(tag: 0x9003, type: 2, count: 20, data: ascii("2021:03:04 05:06:07"))])
        var sub: UInt32?
        if let subIFD {
            var entries = subIFD + [E(tag: 0x0100, type: 3, count: 1, data: w.encode16(8)),
                                    E(tag: 0x0101, type: 3, count: 1, data: w.encode16(8)),
                                    w.pointer(0x0111, stripAt), E(tag: 0x0117, type: 4, count: 1, data: w.encode32(64))]
            if gpsInSubIFD { entries.append(w.pointer(0x8825, gps)) }
            sub = w.ifd(entries.sorted { $0.tag < $1.tag })
        }
        var entries = ifd0Extra + [
            E(tag: 0x00FE, type: 4, count: 1, data: w.encode32(subIFD == nil ? 0 : 1)),
            E(tag: 0x0100, type: 3, count: 1, data: w.encode16(8)),
            E(tag: 0x0101, type: 3, count: 1, data: w.encode16(8)),
            E(tag: 0x0102, type: 3, count: 1, data: w.encode16(8)),
            E(tag: 0x0103, type: 3, count: 1, data: w.encode16(1)),
            E(tag: 0x0106, type: 3, count: 1, data: w.encode16(1)),
            E(tag: 0x010F, type: 2, count: UInt32(make.utf8.count + 1), data: ascii(make)),
            w.pointer(0x0111, stripAt),
            E(tag: 0x0115, type: 3, count: 1, data: w.encode16(1)),
            E(tag: 0x0116, type: 3, count: 1, data: w.encode16(8)),
            E(tag: 0x0117, type: 4, count: 1, data: w.encode32(64)),
            w.pointer(0x8769, exif),
        ]
        if let sub { entries.append(w.pointer(0x014A, sub)) }
        if !gpsInSubIFD { entries.append(w.pointer(0x8825, gps)) }
        let ifd0 = w.ifd(entries.sorted { $0.tag < $1.tag })
        w.set32(4, ifd0)
        return (w.bytes, Int(gps))
    }

    static let cfa = E(tag: 0x0106, type: 3, count: 1, data: [0x23, 0x80])   // 32803, little-endian
}

@Suite("Camera raw files")
struct RawTests {
    /// Scans, redacts and checks with exiftool; the GPS IFD's bytes are zero in the served file.
    static func check(_ bytes: [UInt8], gps: Int, name: String, kind: MediaKind,
                      sourceLocation: SourceLocation = #_sourceLocation) throws {
        let s = try Scratch()
        let p = s.path(name)
        try writeBytes(bytes, p)
        let before = try exiftoolTags(p)
        #expect(before.keys.contains { $0.hasSuffix(":GPSLatitude") }, "fixture: exiftool reads the GPS IFD", sourceLocation: sourceLocation)
        let (scan, _) = try verifyRedaction(p, Expectation(kind: kind, date: Fixture.dateUTC, mustHaveBefore: ["GPSLatitude"],
                                                           mustDecode: false),
                                            decode: .image, sourceLocation: sourceLocation)
        #expect(!scan.kind.isVideo, sourceLocation: sourceLocation)
        guard case .plan(let plan) = scan.redaction else { return }
        let served = plan.applied(to: bytes)
        #expect(served[gps..<(gps + 2 + 6 * 12 + 4)].allSatisfy { $0 == 0 }, "GPS IFD zeroed", sourceLocation: sourceLocation)
    }

    @Test(arguments: [true, false])
    func dng(little: Bool) throws {
        let (b, gps) = RawBuilder.file(little: little, make: "Canon",
                                       ifd0Extra: [.init(tag: 0xC612, type: 1, count: 4, data: [1, 4, 0, 0])],
                                       subIFD: [little ? RawBuilder.cfa : .init(tag: 0x0106, type: 3, count: 1, data: [0x80, 0x23])])
        try Self.check(b, gps: gps, name: "a.dng", kind: .dng)
    }

    /// The GPS IFD pointer in a SubIFD rather than IFD0 is followed too.
    @Test func dngWithGPSPointerInSubIFD() throws {
        let (b, gps) = RawBuilder.file(make: "Canon", ifd0Extra: [.init(tag: 0xC612, type: 1, count: 4, data: [1, 4, 0, 0])],
                                       subIFD: [RawBuilder.cfa], gpsInSubIFD: true)
        let scan = try MediaScanner.scan(bytes: b)
        #expect(scan.kind == .dng)
        #expect(scan.hasLocation)
        guard let plan = plan(scan) else { return }
        #expect(plan.applied(to: b)[gps..<(gps + 2 + 6 * 12 + 4)].allSatisfy { $0 == 0 }, "GPS IFD in the SubIFD zeroed")
    }

    @Test func cr2() throws {
        // "CR", version 2.0, then the raw IFD's offset (0: none here).
        let (b, gps) = RawBuilder.file(extra: [0x43, 0x52, 0x02, 0x00, 0, 0, 0, 0], make: "Canon")
        try Self.check(b, gps: gps, name: "a.cr2", kind: .cr2)
    }

    @Test func nef() throws {
        let (b, gps) = RawBuilder.file(make: "NIKON CORPORATION", subIFD: [RawBuilder.cfa])
        try Self.check(b, gps: gps, name: "a.nef", kind: .nef)
    }

    @Test func arw() throws {
        let (b, gps) = RawBuilder.file(make: "SONY", subIFD: [RawBuilder.cfa, .init(tag: 0x0103, type: 3, count: 1, data: [0xFF, 0x7F])])
        try Self.check(b, gps: gps, name: "a.arw", kind: .arw)
    }

    /// A Nikon TIFF without raw data (a scanner's file) stays a TIFF.
    @Test func nikonTIFFWithoutRawDataIsATIFF() throws {
        let (b, _) = RawBuilder.file(make: "NIKON CORPORATION")
        #expect(try MediaScanner.scan(bytes: b).kind == .tiff)
    }

    @Test func orf() throws {
        let (b, gps) = RawBuilder.file(magic: [0x52, 0x4F], make: "OLYMPUS IMAGING CORP.")
        try Self.check(b, gps: gps, name: "a.orf", kind: .orf)
    }

    /// RW2: the GPS IFD, and the EXIF GPS of the JPEG preview embedded as JpgFromRaw (0x002E).
    @Test func rw2WithEmbeddedJPEG() throws {
        let s = try Scratch()
        let jpeg = try JPEGTrailerTests.jpegWithGPS(s, size: "16x16")
        let (b, gps) = RawBuilder.file(magic: [0x55, 0x00], make: "Panasonic",
                                       ifd0Extra: [.init(tag: 0x002E, type: 7, count: UInt32(jpeg.count), data: jpeg)])
        let scan = try MediaScanner.scan(bytes: b)
        #expect(scan.kind == .rw2)
        #expect(scan.hasLocation)
        guard let plan = plan(scan) else { return }
        let served = plan.applied(to: b)
        #expect(served[gps..<(gps + 2 + 6 * 12 + 4)].allSatisfy { $0 == 0 }, "GPS IFD zeroed")
        let at = try #require(b.firstIndex(of: jpeg))
        try writeBytes(Array(served[at..<(at + jpeg.count)]), s.path("preview.jpg"))
        try writeBytes(jpeg, s.path("original-preview.jpg"))
        #expect(!locationTags(try exiftoolTags(s.path("original-preview.jpg"))).isEmpty, "fixture: the preview has GPS")
        let leaks = locationTags(try exiftoolTags(s.path("preview.jpg"))).filter { isNonzero($0.value) }
        #expect(leaks.isEmpty, "embedded JPEG still has \(leaks)")
        try writeBytes(served, s.path("served.rw2"))
        let all = locationTags(try exiftoolTags(s.path("served.rw2"))).filter { isNonzero($0.value) }
        #expect(all.isEmpty, "exiftool still shows \(all)")
    }

    /// CR3: ISO-BMFF, brand `crx `, EXIF-like TIFF structures in Canon's `uuid` box in `moov`.
    static func cr3(gpsTIFF: [UInt8]? = nil) -> [UInt8] {
        typealias M = MovieBuilder
        var w1 = TIFFWriter(little: true)
        w1.set32(4, w1.ifd([.init(tag: 0x010F, type: 2, count: 6, data: RawBuilder.ascii("Canon"))]))
        var w2 = TIFFWriter(little: true)
        w2.set32(4, w2.ifd([.init(tag: 0x9003, type: 2, count: 20, data: RawBuilder.ascii("2021:03:04 05:06:07"))]))
        var w4 = TIFFWriter(little: true)
        w4.set32(4, w4.ifd(w4.gpsEntries()))
        let canon: [UInt8] = [0x85, 0xC0, 0xB6, 0x87, 0x82, 0x0F, 0x11, 0xE0, 0x81, 0x11, 0xF4, 0xCE, 0x46, 0x2B, 0x6A, 0x48]
        let uuid = M.box("uuid", canon + M.box("CMT1", w1.bytes) + M.box("CMT2", w2.bytes) + M.box("CMT4", gpsTIFF ?? w4.bytes))
        let ftyp = M.box("ftyp", Array("crx ".utf8) + be32(1) + Array("crx isom".utf8))
        // One picture track whose one sample (the "raw data") is the mdat's payload.
        let track = M.Track(handler: "vide", entry: M.box("CRAW", [0, 0, 0, 0, 0, 0, 0, 1]), samples: [[UInt8](repeating: 7, count: 32)])
        func moov(_ offset: UInt64) -> [UInt8] { M.box("moov", uuid + M.mvhd() + M.trak(track, M.tables(track, offsets: [offset]))) }
        let offset = UInt64(ftyp.count + moov(0).count + 8)
        return ftyp + moov(offset) + M.box("mdat", [UInt8](repeating: 7, count: 32))
    }

    @Test func cr3() throws {
        let b = Self.cr3()
        let s = try Scratch()
        let p = s.path("a.cr3")
        try writeBytes(b, p)
        let scan = try scanFile(p)
        #expect(scan.kind == .cr3)
        #expect(!scan.kind.isVideo)
        #expect(scan.captureDate == Fixture.dateUTC)
        let before = locationTags(try exiftoolTags(p)).filter { isNonzero($0.value) }
        #expect(!before.isEmpty, "fixture: exiftool reads CMT4's GPS")
        #expect(scan.hasLocation)
        guard let plan = plan(scan) else { return }
        try writeBytes(plan.applied(to: b), s.path("served.cr3"))
        let after = locationTags(try exiftoolTags(s.path("served.cr3"))).filter { isNonzero($0.value) }
        #expect(after.isEmpty, "exiftool still shows \(after)")
        #expect(try MediaScanner.scan(bytes: plan.applied(to: b)).hasLocation == false)
        // A CMT4 that is not a TIFF structure: refused, not served.
        guard case .success(let bad) = survive(Self.cr3(gpsTIFF: Array("not a TIFF at all".utf8))) else { Issue.record("scan"); return }
        #expect(isRefused(bad))
    }

    @Test func rawFilesCutAnywhereAreTruncated() throws {
        let (cr2, _) = RawBuilder.file(extra: [0x43, 0x52, 0x02, 0x00, 0, 0, 0, 0], make: "Canon")
        try CompletenessTests.expectTruncatedEverywhere(cr2, "CR2", cuts: Array(64..<cr2.count))
        var rawPastEnd = cr2
        rawPastEnd.replaceSubrange(12..<16, with: [0, 0, 1, 0])   // the raw IFD at 65536
        guard case .failure(.truncated) = survive(rawPastEnd) else { Issue.record("CR2 raw IFD past the end"); return }
        let (dng, _) = RawBuilder.file(make: "Canon", ifd0Extra: [.init(tag: 0xC612, type: 1, count: 4, data: [1, 4, 0, 0])],
                                       subIFD: [RawBuilder.cfa])
        try CompletenessTests.expectTruncatedEverywhere(dng, "DNG", cuts: Array(64..<dng.count))
        let cr3 = Self.cr3()
        try CompletenessTests.expectTruncatedEverywhere(cr3, "CR3", cuts: Array(64..<cr3.count))
    }
}

@Suite("Hostile input: raw and Matroska")
struct NewFormatHostileTests {
    /// Random mutations and every prefix of small raw and Matroska files: no crash, plans inside
    /// the file; each kind's scanner is also forced onto the others' bytes.
    @Test func mutationsAndPrefixesSurvive() throws {
        let s = try Scratch()
        var seeds: [[UInt8]] = []
        seeds.append(RawBuilder.file(extra: [0x43, 0x52, 0x02, 0x00, 0, 0, 0, 0], make: "Canon").bytes)
        seeds.append(RawBuilder.file(little: false, make: "NIKON", subIFD: [.init(tag: 0x0106, type: 3, count: 1, data: [0x80, 0x23])]).bytes)
        let preview = try JPEGTrailerTests.jpegWithGPS(s, size: "8x8")
        seeds.append(RawBuilder.file(magic: [0x55, 0x00], make: "Panasonic",
                                     ifd0Extra: [.init(tag: 0x002E, type: 7, count: UInt32(preview.count), data: preview)]).bytes)
        seeds.append(RawTests.cr3())
        let mkv = try readBytes(try MatroskaTests.movie(s, "a.mkv", ["-c", "copy"], extra: ["-t", "0.1"]))
        seeds.append(mkv)
        var rng = SplitMix(seed: 4242)
        for seed in seeds {
            for n in stride(from: 0, to: seed.count, by: max(1, seed.count / 400)) { _ = survive(Array(seed[..<n])) }
            for _ in 0..<300 {
                var m = seed
                for _ in 0..<(1 + Int(rng.next() % 8)) {
                    let at = Int(rng.next() % UInt64(m.count))
                    switch rng.next() % 3 {
                    case 0: m[at] = UInt8(truncatingIfNeeded: rng.next())
                    case 1: m[at] = [0, 0xFF, 0x7F, 0x80, 0x01][Int(rng.next() % 5)]
                    default: m.removeSubrange(at..<min(m.count, at + Int(rng.next() % 16)))
                    }
                    if m.isEmpty { break }
                }
                _ = survive(m)
            }
            for kind in [MediaKind.mkv, .webm, .dng, .cr2, .orf, .rw2, .cr3] {
                _ = try? MediaScanner.scan(ByteSource(bytes: seed), forcing: kind)
            }
        }
    }
}

/// The web app's thumbnails of camera raws come from their largest embedded JPEG (issue 35).
@Suite struct RawPreviewTests {
    @Test(arguments: [true, false]) func theLargestEmbeddedJPEGIsFound(little: Bool) throws {
        let small = try TestMedia.jpeg(tag: "thumbnail")
        let large = try TestMedia.jpeg(tag: "preview") + [UInt8](repeating: 0, count: 4096)
        let extra = small + large
        var w = TIFFWriter(little: little)
        let jpegTags: [RawBuilder.E] = [
            RawBuilder.E(tag: 0x0201, type: 4, count: 1, data: w.encode32(8 + UInt32(small.count))),
            RawBuilder.E(tag: 0x0202, type: 4, count: 1, data: w.encode32(UInt32(large.count))),
        ]
        let (bytes, _) = RawBuilder.file(little: little, extra: extra, make: "NIKON CORPORATION",
                                         ifd0Extra: jpegTags + [RawBuilder.cfa])
        let s = try Scratch()
        let p = s.path("preview.nef")
        try writeBytes(bytes, p)
        let fd = open(p, O_RDONLY)
        defer { close(fd) }
        let found = try #require(RawPreview.locate(fd: fd, size: UInt64(bytes.count)))
        #expect(found.offset == UInt64(8 + small.count) && found.length == UInt64(large.count))
        // Not a TIFF: nothing.
        let jpegPath = s.path("plain.jpg")
        try writeBytes(small, jpegPath)
        let jfd = open(jpegPath, O_RDONLY)
        defer { close(jfd) }
        #expect(RawPreview.locate(fd: jfd, size: UInt64(small.count)) == nil)
    }
}

extension RawPreviewTests {
    /// Canon CR3: the preview JPEG in the PRVW box of the preview uuid box (lclevy's layout).
    @Test func aCR3PreviewIsFound() throws {
        func be32(_ v: Int) -> [UInt8] { [UInt8(v >> 24 & 255), UInt8(v >> 16 & 255), UInt8(v >> 8 & 255), UInt8(v & 255)] }
        func box(_ type: String, _ payload: [UInt8]) -> [UInt8] { be32(payload.count + 8) + Array(type.utf8) + payload }
        let jpeg = try TestMedia.jpeg(tag: "cr3 preview")
        let prvw = box("PRVW", [0, 0, 0, 0] + [0, 1] + [6, 84] + [4, 56] + [0, 1] + be32(jpeg.count) + jpeg)
        let uuid = box("uuid", RawPreview.cr3PreviewUUID + [UInt8](repeating: 0, count: 8) + prvw)
        let bytes = box("ftyp", Array("crx ".utf8) + [0, 0, 0, 1]) + box("moov", [UInt8](repeating: 0, count: 32)) + uuid
            + box("mdat", [UInt8](repeating: 7, count: 100))
        let s = try Scratch()
        let p = s.path("preview.cr3")
        try writeBytes(bytes, p)
        let fd = open(p, O_RDONLY)
        defer { close(fd) }
        let found = try #require(RawPreview.locate(fd: fd, size: UInt64(bytes.count)))
        #expect(Array(bytes[Int(found.offset)..<Int(found.offset + found.length)]) == jpeg)
        // A box running past the end: nothing, and no read outside the file.
        let cut = Array(bytes.prefix(bytes.count - 150))
        let q = s.path("cut.cr3")
        try writeBytes(cut, q)
        let cfd = open(q, O_RDONLY)
        defer { close(cfd) }
        #expect(RawPreview.locate(fd: cfd, size: UInt64(cut.count)) == nil)
    }
}
