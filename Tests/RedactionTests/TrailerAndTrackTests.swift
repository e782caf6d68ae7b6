import Foundation
import Testing
import TestSupport
@testable import Redaction

// MARK: - Builders

func be16(_ v: UInt16) -> [UInt8] { [UInt8(v >> 8), UInt8(v & 0xFF)] }

/// An APP2 "MPF" segment indexing a primary image and one secondary image (little-endian MP
/// index; the secondary's offset counts from the MP header, as the format says).
func mpfSegment(primarySize: UInt32, secondSize: Int, secondOffset: UInt32) -> [UInt8] {
    var w = TIFFWriter(little: true)
    var entries = w.encode32(0x0003_0000) + w.encode32(primarySize) + w.encode32(0) + [0, 0, 0, 0]
    entries += w.encode32(0) + w.encode32(UInt32(secondSize)) + w.encode32(secondOffset) + [0, 0, 0, 0]
    let ifd = w.ifd([TIFFWriter.Entry(tag: 0xB000, type: 7, count: 4, data: Array("0100".utf8)),
                     TIFFWriter.Entry(tag: 0xB001, type: 4, count: 1, data: w.encode32(2)),
                     TIFFWriter.Entry(tag: 0xB002, type: 7, count: 32, data: entries)])
    w.set32(4, ifd)
    let payload = Array("MPF\0".utf8) + w.bytes
    return [0xFF, 0xE2] + be16(UInt16(payload.count + 2)) + payload
}
func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
func be64(_ v: UInt64) -> [UInt8] { be32(UInt32(v >> 32)) + be32(UInt32(v & 0xFFFF_FFFF)) }

/// Hand-assembled ISO-BMFF pieces: a movie whose only track is a timed metadata track.
enum MovieBuilder {
    static func box(_ type: String, _ payload: [UInt8]) -> [UInt8] { raw(Array(type.utf8), payload) }
    static func raw(_ type: [UInt8], _ payload: [UInt8]) -> [UInt8] { be32(UInt32(payload.count + 8)) + type + payload }
    static func full(_ type: String, _ payload: [UInt8], version: UInt8 = 0) -> [UInt8] { box(type, [version, 0, 0, 0] + payload) }

    static let location = "+48.8566+002.3522+035.000/"
    static let locationKey = "com.apple.quicktime.location.ISO6709"
    static let identity: [UInt8] = be32(0x10000) + be32(0) + be32(0) + be32(0) + be32(0x10000) + be32(0) + be32(0) + be32(0) + be32(0x4000_0000)

    /// A `mebx` sample entry declaring `keys` (local ids 1, 2...), all UTF-8.
    static func mebx(_ keys: [String]) -> [UInt8] {
        var list: [UInt8] = []
        for (i, k) in keys.enumerated() {
            list += raw(be32(UInt32(i + 1)), box("keyd", Array("mdta".utf8) + Array(k.utf8)) + box("dtyp", be32(0) + be32(1)))
        }
        return box("mebx", [0, 0, 0, 0, 0, 0, 0, 1] + box("keys", list))
    }

    /// A `mebx` sample: one item (local key id 1) holding `value`.
    static func mebxSample(_ value: String) -> [UInt8] { be32(UInt32(value.utf8.count + 8)) + be32(1) + Array(value.utf8) }

    /// GoPro GPMF: DEVC > STRM > SCAL, GPS5 (48.8566, 2.3522, 35 m).
    static func gpmfSample() -> [UInt8] {
        func klv(_ key: String, _ type: UInt8, _ size: UInt8, _ count: UInt16, _ data: [UInt8]) -> [UInt8] {
            var d = data
            while d.count % 4 != 0 { d.append(0) }
            return Array(key.utf8) + [type, size] + be16(count) + d
        }
        let scal = klv("SCAL", UInt8(ascii: "l"), 4, 5, [10_000_000, 10_000_000, 1000, 1000, 100].flatMap { be32($0) })
        let gps5 = klv("GPS5", UInt8(ascii: "l"), 20, 1, [488_566_000, 23_522_000, 35_000, 0, 0].flatMap { be32($0) })
        let fix = klv("GPSF", UInt8(ascii: "L"), 4, 1, be32(3))
        let strm = klv("STRM", 0, 4, UInt16((scal.count + fix.count + gps5.count) / 4), scal + fix + gps5)
        return klv("DEVC", 0, 4, UInt16(strm.count / 4), strm)
    }

    static func gpmd() -> [UInt8] { box("gpmd", [0, 0, 0, 0, 0, 0, 0, 1]) }
    static func camm() -> [UInt8] { box("camm", [0, 0, 0, 0, 0, 0, 0, 1]) }
    static func tx3g() -> [UInt8] {
        box("tx3g", [0, 0, 0, 0, 0, 0, 0, 1] + be32(0) + [1, 0xFF] + be32(0) + [UInt8](repeating: 0, count: 8)
            + [UInt8](repeating: 0, count: 12) + box("ftab", be16(1) + be16(1) + [5] + Array("Serif".utf8)))
    }
    /// camm type 6 (GPS): reserved, type, then doubles/floats; latitude 48.8566 first.
    static func cammSample() -> [UInt8] {
        let lat = (48.8566).bitPattern, lon = (2.3522).bitPattern
        var out: [UInt8] = [0, 0, 6, 0]
        out += be64(0) + [0, 0, 0, 3]   // time_gps_epoch, gps_fix_type (little-endian in the spec: not read here)
        out += be64(lat).reversed() + be64(lon).reversed()
        return out
    }

    struct Track {
        var handler = "meta"
        var entry: [UInt8]
        var samples: [[UInt8]]
        var perChunk = 1
        var co64 = false
        var stz2 = false
        var trackID: UInt32 = 1
    }

    /// The sample table boxes, which tests may replace with hostile ones.
    struct Tables {
        var stsc: [UInt8]
        var stsz: [UInt8]
        var stco: [UInt8]
    }

    static func tables(_ t: Track, offsets: [UInt64]) -> Tables {
        let chunks = offsets.count
        let stsc = full("stsc", be32(1) + be32(1) + be32(UInt32(t.perChunk)) + be32(1))
        let stsz: [UInt8]
        if t.stz2 {
            stsz = full("stz2", [0, 0, 0, 16] + be32(UInt32(t.samples.count)) + t.samples.flatMap { be16(UInt16($0.count)) })
        } else {
            stsz = full("stsz", be32(0) + be32(UInt32(t.samples.count)) + t.samples.flatMap { be32(UInt32($0.count)) })
        }
        let stco = t.co64 ? full("co64", be32(UInt32(chunks)) + offsets.flatMap { be64($0) })
                          : full("stco", be32(UInt32(chunks)) + offsets.flatMap { be32(UInt32($0)) })
        return Tables(stsc: stsc, stsz: stsz, stco: stco)
    }

    static func trak(_ t: Track, _ tables: Tables) -> [UInt8] {
        let tkhd = full("tkhd", be32(0) + be32(0) + be32(t.trackID) + be32(0) + be32(UInt32(t.samples.count * 1000))
                        + [UInt8](repeating: 0, count: 16) + identity + be32(0) + be32(0), version: 0)
        let mdhd = full("mdhd", be32(0) + be32(0) + be32(1000) + be32(UInt32(t.samples.count * 1000)) + be16(0x55C4) + be16(0))
        let hdlr = full("hdlr", be32(0) + Array(t.handler.utf8) + [UInt8](repeating: 0, count: 12) + Array("Meta\0".utf8))
        let stsd = full("stsd", be32(1) + t.entry)
        let stts = full("stts", be32(1) + be32(UInt32(t.samples.count)) + be32(1000))
        let dinf = box("dinf", full("dref", be32(1) + box("url ", [0, 0, 0, 1])))   // flags 1: data in this file
        let stbl = box("stbl", stsd + stts + tables.stsc + tables.stsz + tables.stco)
        let minf = box("minf", full("nmhd", []) + dinf + stbl)
        return box("trak", tkhd + box("mdia", mdhd + hdlr + minf))
    }

    static func mvhd(nextTrack: UInt32 = 2) -> [UInt8] {
        full("mvhd", be32(0) + be32(0) + be32(1000) + be32(1000) + be32(0x10000) + be16(0x100) + [UInt8](repeating: 0, count: 10)
             + identity + [UInt8](repeating: 0, count: 24) + be32(nextTrack))
    }

    static let filler = [UInt8](repeating: 0xAB, count: 24)

    /// ftyp, mdat (filler before each chunk, as if interleaved with video), moov; `tamper` may
    /// replace the sample tables. Returns the file and the byte ranges of the samples.
    static func file(_ t: Track, extraTopLevel: [UInt8] = [], tamper: (inout Tables, _ mdatPayload: Int) -> Void = { _, _ in })
        -> (bytes: [UInt8], samples: [Range<Int>]) {
        let ftyp = box("ftyp", Array("isom".utf8) + be32(0x200) + Array("isommp41".utf8))
        var payload: [UInt8] = []
        var offsets: [UInt64] = []
        var ranges: [Range<Int>] = []
        let base = ftyp.count + 8
        for start in stride(from: 0, to: t.samples.count, by: t.perChunk) {
            payload += filler
            offsets.append(UInt64(base + payload.count))
            for s in t.samples[start..<min(t.samples.count, start + t.perChunk)] {
                ranges.append((base + payload.count)..<(base + payload.count + s.count))
                payload += s
            }
        }
        payload += filler
        var tables = tables(t, offsets: offsets)
        tamper(&tables, base)
        let moov = box("moov", mvhd(nextTrack: t.trackID + 1) + trak(t, tables))
        return (ftyp + box("mdat", payload) + moov + extraTopLevel, ranges)
    }
}

/// `exiftool -ee` (embedded streams: timed metadata, trailers), one flat dictionary.
func exiftoolEmbedded(_ path: String) throws -> [String: Any] {
    let o = try Tools.run("exiftool", ["-ee", "-a", "-G1", "-n", "-j", path])
    guard let list = try JSONSerialization.jsonObject(with: o.stdout) as? [[String: Any]], let first = list.first else {
        throw Failure("exiftool printed no JSON for \(path): \(o.stderr)")
    }
    return first
}

func plan(_ scan: MediaScan, sourceLocation: SourceLocation = #_sourceLocation) -> RedactionPlan? {
    guard case .plan(let p) = scan.redaction else {
        Issue.record("refused: \(scan.redaction)", sourceLocation: sourceLocation)
        return nil
    }
    return p
}

func isRefused(_ scan: MediaScan) -> Bool {
    if case .refuse = scan.redaction { return true }
    return false
}

// MARK: - Timed metadata tracks

@Suite("Timed metadata tracks")
struct TimedMetadataTrackTests {
    /// Every sample byte zeroed, every other byte the original's; exiftool -ee finds nothing after.
    func check(_ t: MovieBuilder.Track, exiftoolSeesBefore: Bool, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let (bytes, samples) = MovieBuilder.file(t)
        let scan = try MediaScanner.scan(bytes: bytes)
        #expect(scan.kind == .mp4, sourceLocation: sourceLocation)
        #expect(scan.hasLocation, sourceLocation: sourceLocation)
        guard let p = plan(scan, sourceLocation: sourceLocation) else { return }
        let served = p.applied(to: bytes)
        var inSample = [Bool](repeating: false, count: bytes.count)
        for r in samples { for i in r { inSample[i] = true } }
        for i in 0..<bytes.count {
            if inSample[i] {
                guard served[i] == 0 else { Issue.record("sample byte \(i) not zeroed", sourceLocation: sourceLocation); break }
            } else {
                guard served[i] == bytes[i] else { Issue.record("byte \(i) outside the samples changed", sourceLocation: sourceLocation); break }
            }
        }
        #expect(try RedactionPlan(serialized: p.serialized()) == p, sourceLocation: sourceLocation)
        let s = try Scratch()
        try writeBytes(bytes, s.path("before.mp4"))
        try writeBytes(served, s.path("after.mp4"))
        if exiftoolSeesBefore {
            let before = locationTags(try exiftoolEmbedded(s.path("before.mp4"))).filter { isNonzero($0.value) }
            #expect(!before.isEmpty, "exiftool -ee sees no location in the fixture", sourceLocation: sourceLocation)
        }
        let after = locationTags(try exiftoolEmbedded(s.path("after.mp4"))).filter { isNonzero($0.value) }
        #expect(after.isEmpty, "exiftool -ee still shows \(after)", sourceLocation: sourceLocation)
        #expect(try MediaScanner.scan(bytes: served).hasLocation == false, sourceLocation: sourceLocation)
    }

    @Test func appleMebxLocationTrack() throws {
        let samples = (0..<5).map { _ in MovieBuilder.mebxSample(MovieBuilder.location) }
        try check(.init(entry: MovieBuilder.mebx([MovieBuilder.locationKey]), samples: samples), exiftoolSeesBefore: true)
    }

    @Test func goProGPMFTrack() throws {
        let samples = (0..<3).map { _ in MovieBuilder.gpmfSample() }
        try check(.init(entry: MovieBuilder.gpmd(), samples: samples, perChunk: 1), exiftoolSeesBefore: true)
    }

    @Test func cammTrackSeveralSamplesPerChunkAndCo64() throws {
        let samples = (0..<6).map { _ in MovieBuilder.cammSample() }
        try check(.init(handler: "camm", entry: MovieBuilder.camm(), samples: samples, perChunk: 3, co64: true), exiftoolSeesBefore: false)
    }

    @Test func subtitleTrackWithGPSTextAndStz2() throws {
        let samples = (0..<4).map { i in
            let text = Array("GPS(2.3522,48.8566,35) frame \(i)".utf8)
            return be16(UInt16(text.count)) + text
        }
        try check(.init(handler: "sbtl", entry: MovieBuilder.tx3g(), samples: samples, perChunk: 2, stz2: true), exiftoolSeesBefore: false)
    }

    @Test func unknownMetaTrackIsZeroed() throws {
        let entry = MovieBuilder.box("xyzw", [0, 0, 0, 0, 0, 0, 0, 1])
        try check(.init(handler: "meta", entry: entry, samples: [Array("lat=48.8566 lon=2.3522".utf8)]), exiftoolSeesBefore: false)
    }

    /// A Live Photo style mebx track without location keys is left alone.
    @Test func mebxWithoutLocationKeysIsKept() throws {
        let t = MovieBuilder.Track(entry: MovieBuilder.mebx(["com.apple.quicktime.still-image-time"]), samples: [[0, 0, 0, 9, 0, 0, 0, 1, 0xFF]])
        let scan = try MediaScanner.scan(bytes: MovieBuilder.file(t).bytes)
        #expect(scan.hasLocation == false)
        #expect(scan.redaction == .plan(.empty))
        // The same track with a key that cannot be read: zeroed (fail closed).
        var broken = MovieBuilder.mebx(["com.apple.quicktime.still-image-time"])
        broken[broken.count - 16 - 48] = 0xFF   // the keyd box's size (keyd 48 bytes, then dtyp 16): does not fit
        let t2 = MovieBuilder.Track(entry: broken, samples: [[0, 0, 0, 9, 0, 0, 0, 1, 0xFF]])
        let (bytes2, samples2) = MovieBuilder.file(t2)
        guard let p = plan(try MediaScanner.scan(bytes: bytes2)) else { return }
        #expect(p.patches.map { $0.offset } == samples2.map { UInt64($0.lowerBound) })
    }

    /// A real ffmpeg movie with a location track added: frames decode the same, exiftool -ee sees no location.
    @Test func ffmpegMovieWithInjectedLocationTrack() throws {
        let s = try Scratch()
        let original = try readBytes(try Fixture.movie(s, "base.mp4", []))
        // ffmpeg writes moov last: grow it by a trak, then append an mdat with the samples.
        var pos = 0
        var moovStart = -1
        while pos + 8 <= original.count {
            let size = Int(original.be32(pos))
            if original.fourCC(pos + 4) == FourCC("moov") { moovStart = pos }
            pos += size
        }
        try #require(moovStart >= 0 && Int(original.be32(moovStart)) + moovStart == original.count, "moov is last")
        let samples = (0..<5).map { _ in MovieBuilder.mebxSample(MovieBuilder.location) }
        let t = MovieBuilder.Track(entry: MovieBuilder.mebx([MovieBuilder.locationKey]), samples: samples, trackID: 7)
        let sampleBytes = samples.flatMap { $0 }
        let dummy = MovieBuilder.trak(t, MovieBuilder.tables(t, offsets: [0, 0, 0, 0, 0]))
        let oldMoov = Array(original[(moovStart + 8)...])
        let mdatPayload = UInt64(moovStart + 8 + oldMoov.count + dummy.count + 8)
        let offsets = (0..<5).map { mdatPayload + UInt64($0 * samples[0].count) }
        let trak = MovieBuilder.trak(t, MovieBuilder.tables(t, offsets: offsets))
        let file = Array(original[..<moovStart]) + MovieBuilder.box("moov", oldMoov + trak) + MovieBuilder.box("mdat", sampleBytes)
        let p = s.path("injected.mp4")
        try writeBytes(file, p)
        try verifyRedaction(p, Expectation(kind: .mp4), decode: .video)
        let before = locationTags(try exiftoolEmbedded(p)).filter { isNonzero($0.value) }
        #expect(!before.isEmpty, "exiftool -ee sees the injected track")
        let after = locationTags(try exiftoolEmbedded(s.path("injected-redacted.mp4"))).filter { isNonzero($0.value) }
        #expect(after.isEmpty, "exiftool -ee still shows \(after)")
    }

    // MARK: Hostile sample tables

    static let track = MovieBuilder.Track(entry: MovieBuilder.mebx([MovieBuilder.locationKey]),
                                          samples: (0..<4).map { _ in MovieBuilder.mebxSample(MovieBuilder.location) }, perChunk: 2)

    func refuses(_ what: String, extra: [UInt8] = [], _ tamper: @escaping (inout MovieBuilder.Tables, Int) -> Void,
                 sourceLocation: SourceLocation = #_sourceLocation) {
        let (bytes, _) = MovieBuilder.file(Self.track, extraTopLevel: extra, tamper: tamper)
        let clock = ContinuousClock()
        var result: Result<MediaScan, ScanError>?
        let elapsed = clock.measure { result = survive(bytes, sourceLocation: sourceLocation) }
        #expect(elapsed < .seconds(2), "\(what) took \(elapsed)", sourceLocation: sourceLocation)
        guard case .success(let scan) = result else { Issue.record("\(what): scan failed \(String(describing: result))", sourceLocation: sourceLocation); return }
        #expect(isRefused(scan), "\(what) must refuse, got \(scan.redaction)", sourceLocation: sourceLocation)
    }

    /// Chunks past the end of the file: the file is incomplete (see CompletenessTests), not just refused.
    func truncated(_ what: String, _ tamper: @escaping (inout MovieBuilder.Tables, Int) -> Void,
                   sourceLocation: SourceLocation = #_sourceLocation) {
        let (bytes, _) = MovieBuilder.file(Self.track, tamper: tamper)
        guard case .failure(.truncated) = survive(bytes, sourceLocation: sourceLocation) else {
            Issue.record("\(what) must be truncated, got \(survive(bytes))", sourceLocation: sourceLocation); return
        }
    }

    @Test func hostileTablesRefuse() {
        typealias B = MovieBuilder
        truncated("chunk offset past the end") { t, _ in t.stco = B.full("stco", be32(2) + be32(0xFFFF_FF00) + be32(100)) }
        truncated("co64 offset near 2^64") { t, _ in t.stco = B.full("co64", be32(2) + be64(UInt64.max - 4) + be64(100)) }
        refuses("chunk outside every mdat") { t, base in
            t.stco = B.full("stco", be32(2) + be32(UInt32(base)) + be32(8))
        }
        refuses("huge chunk count") { t, base in t.stco = B.full("stco", be32(0xFFFF_FFFF) + be32(UInt32(base))) }
        refuses("huge sample count") { t, _ in t.stsz = B.full("stsz", be32(0) + be32(0xFFFF_FFFF) + be32(34)) }
        truncated("constant size times huge count") { t, base in
            t.stsz = B.full("stsz", be32(0xFFFF_FFFF) + be32(0xFFFF_FFFF))
            t.stsc = B.full("stsc", be32(1) + be32(1) + be32(0xFFFF_FFFF) + be32(1))
            t.stco = B.full("stco", be32(1) + be32(UInt32(base)))
        }
        refuses("huge samples per chunk") { t, _ in t.stsc = B.full("stsc", be32(1) + be32(1) + be32(0xFFFF_FFFF) + be32(1)) }
        refuses("fewer samples in chunks than sizes") { t, _ in t.stsc = B.full("stsc", be32(1) + be32(1) + be32(1) + be32(1)) }
        refuses("stsc not starting at 1") { t, _ in t.stsc = B.full("stsc", be32(1) + be32(2) + be32(2) + be32(1)) }
        refuses("stsc out of order") { t, _ in
            t.stsc = B.full("stsc", be32(2) + be32(1) + be32(2) + be32(1) + be32(1) + be32(2) + be32(1))
        }
        refuses("stsc past the chunk count") { t, _ in
            t.stsc = B.full("stsc", be32(2) + be32(1) + be32(2) + be32(1) + be32(9) + be32(2) + be32(1))
        }
        refuses("stsc entry count past the box") { t, _ in t.stsc = B.full("stsc", be32(0x4000_0000) + be32(1)) }
        refuses("no stsc") { t, _ in t.stsc = B.box("free", []) }
        refuses("stsz and stz2") { t, _ in t.stsz += B.full("stz2", [0, 0, 0, 8] + be32(0)) }
        refuses("stz2 field size 7") { t, _ in t.stsz = B.full("stz2", [0, 0, 0, 7] + be32(4) + [1, 2, 3, 4]) }
        refuses("fragmented", extra: B.box("moof", B.full("mfhd", be32(1)))) { _, _ in }
    }

    @Test func overlappingChunksAreZeroedNotCrashing() throws {
        // Both chunks at the same offset, and a third overlapping halfway.
        let t = MovieBuilder.Track(entry: MovieBuilder.mebx([MovieBuilder.locationKey]),
                                   samples: (0..<3).map { _ in MovieBuilder.mebxSample(MovieBuilder.location) })
        var first = 0
        let (bytes, _) = MovieBuilder.file(t) { tables, base in
            first = base + MovieBuilder.filler.count
            tables.stco = MovieBuilder.full("stco", be32(3) + be32(UInt32(first)) + be32(UInt32(first)) + be32(UInt32(first + 10)))
        }
        guard case .success(let scan) = survive(bytes) else { Issue.record("scan failed"); return }
        guard let p = plan(scan) else { return }
        let n = MovieBuilder.mebxSample(MovieBuilder.location).count
        #expect(p.patches == [RedactionPlan.Patch(offset: UInt64(first), length: UInt32(n + 10))])
    }

    @Test func manyChunksAreBounded() throws {
        // 200,000 one-byte samples in 200,000 chunks: located and zeroed within seconds.
        let count = 200_000
        let t = MovieBuilder.Track(handler: "meta", entry: MovieBuilder.gpmd(), samples: [[1]])
        let (bytes, _) = MovieBuilder.file(t) { tables, base in
            tables.stsz = MovieBuilder.full("stsz", be32(1) + be32(UInt32(count)))
            tables.stco = MovieBuilder.full("stco", be32(UInt32(count)) + (0..<count).flatMap { _ in be32(UInt32(base + 24)) })
        }
        let clock = ContinuousClock()
        var scan: MediaScan?
        let elapsed = try clock.measure { scan = try MediaScanner.scan(bytes: bytes) }
        #expect(elapsed < .seconds(5), "took \(elapsed)")
        guard let scan, let p = plan(scan) else { return }
        #expect(p.patches.count == 1)
    }
}

// MARK: - JPEG trailers

@Suite("JPEG trailers")
struct JPEGTrailerTests {
    static func jpegWithGPS(_ s: Scratch, _ extra: [String] = [], size: String = "48x32") throws -> [UInt8] {
        let p = try Fixture.image(s, "base-\(UUID().uuidString).jpg", size: size)
        try Fixture.exiftool(p, Fixture.gps + extra)
        return try readBytes(p)
    }

    static func movie(_ s: Scratch) throws -> [UInt8] {
        let p = try Fixture.movie(s, "motion-\(UUID().uuidString).mp4", ["-t", "0.3"])
        try Fixture.exiftool(p, ["-UserData:GPSCoordinates=48.8566, 2.3522, 35"])   // a ©xyz box
        return try readBytes(p)
    }

    /// Offset one past the primary image's EOI, found independently (ImageMagick's files end with EOI).
    static func primaryEnd(_ jpeg: [UInt8]) -> Int { jpeg.count }

    /// Checks the served file: primary image bytes only changed inside its metadata, decoded the same;
    /// exiftool -ee sees no location.
    func servedIsClean(_ file: [UInt8], _ p: RedactionPlan, _ s: Scratch, sourceLocation: SourceLocation = #_sourceLocation) throws -> [UInt8] {
        let served = p.applied(to: file)
        try writeBytes(file, s.path("orig.jpg"))
        try writeBytes(served, s.path("served.jpg"))
        let leaks = locationTags(try exiftoolEmbedded(s.path("served.jpg"))).filter { isNonzero($0.value) }
        #expect(leaks.isEmpty, "exiftool -ee still shows \(leaks)", sourceLocation: sourceLocation)
        #expect(try decoded(s.path("served.jpg"), .image) == decoded(s.path("orig.jpg"), .image), sourceLocation: sourceLocation)
        #expect(p.patches.allSatisfy { $0.end <= UInt64(file.count) }, sourceLocation: sourceLocation)
        #expect(try MediaScanner.scan(bytes: served).hasLocation == false, "location found again", sourceLocation: sourceLocation)
        return served
    }

    /// A Motion Photo: the appended movie is redacted in place and still plays.
    @Test func motionPhotoMovieIsRedactedAndPlayable() throws {
        let s = try Scratch()
        let jpeg = try Self.jpegWithGPS(s)
        let movie = try Self.movie(s)
        try #require(movie.firstIndex(of: Array("\u{A9}xyz".unicodeScalars.map { UInt8($0.value) })) != nil, "fixture movie has ©xyz")
        let file = jpeg + movie
        try writeBytes(file, s.path("motion-before.jpg"))
        #expect(!locationTags(try exiftoolEmbedded(s.path("motion-before.jpg"))).isEmpty)
        let scan = try MediaScanner.scan(bytes: file)
        #expect(scan.hasLocation)
        guard let p = plan(scan) else { return }
        let served = try servedIsClean(file, p, s)
        let trailer = Array(served[jpeg.count...])
        #expect(trailer.count == movie.count && trailer.has(Array("ftyp".utf8), at: 4), "the movie is kept")
        let changed = zip(trailer, movie).filter { $0 != $1 }.count
        #expect(changed > 0 && changed < 200, "only the location box changed in the movie (\(changed) bytes)")
        try writeBytes(movie, s.path("m-before.mp4"))
        try writeBytes(trailer, s.path("m-after.mp4"))
        #expect(try decoded(s.path("m-after.mp4"), .video) == decoded(s.path("m-before.mp4"), .video))
        #expect(locationTags(try exiftoolEmbedded(s.path("m-after.mp4"))).filter { isNonzero($0.value) }.isEmpty)
    }

    /// Anything else after EOI (a Samsung-style SEFT block, text) is zeroed; the EXIF thumbnail's
    /// own FFD9 is not mistaken for the end of the image.
    @Test func otherTrailersAreZeroedFromTheRealEOI() throws {
        let s = try Scratch()
        let thumb = try Fixture.image(s, "thumb.jpg", size: "8x8")
        let jpeg = try Self.jpegWithGPS(s, ["-ThumbnailImage<=\(thumb)"])
        let eois = (0..<(jpeg.count - 1)).filter { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xD9 }
        try #require(eois.count >= 2, "the thumbnail brings an earlier FFD9")
        let seft = Array("\0\0\u{1}\u{A}Image_UTC_Data1700000000000 GPS +48.8566+002.3522".utf8) + [0xFF, 0xD9, 0xFF, 0xD8]
            + Array("SEFH".utf8) + be32(0x6B) + Array("SEFT".utf8)
        let file = jpeg + seft
        let scan = try MediaScanner.scan(bytes: file)
        guard let p = plan(scan) else { return }
        let served = try servedIsClean(file, p, s)
        #expect(served[jpeg.count...].allSatisfy { $0 == 0 }, "the whole trailer is zeroed")
        #expect(p.patches.last == RedactionPlan.Patch(offset: UInt64(jpeg.count), length: UInt32(seft.count)))
    }

    @Test func progressiveJPEGWithRestartMarkersAndTrailer() throws {
        let s = try Scratch()
        let p0 = s.path("prog.jpg")
        try Tools.must("convert", ["-size", "64x64", "plasma:", "-interlace", "Plane", "-define", "jpeg:restart-interval=1", p0])
        try Fixture.exiftool(p0, Fixture.gps)
        let jpeg = try readBytes(p0)
        let sos = (0..<(jpeg.count - 1)).filter { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xDA }.count
        try #require(sos > 1, "progressive: several scans")
        let file = jpeg + Array("trailing GPS 48.8566,2.3522".utf8)
        guard let p = plan(try MediaScanner.scan(bytes: file)) else { return }
        let served = try servedIsClean(file, p, s)
        #expect(served[jpeg.count...].allSatisfy { $0 == 0 })
        #expect(p.patches.allSatisfy { $0.end <= 4096 || $0.offset >= UInt64(jpeg.count) }, "scan data untouched")
    }

    /// MPF: the secondary image after EOI is kept with its GPS zeroed; bytes between images and a
    /// movie after them are handled as trailer.
    @Test func mpfSecondaryImageThenMovie() throws {
        let s = try Scratch()
        let base = try readBytes(try Fixture.image(s, "base.jpg", size: "16x16"))
        var g = TIFFWriter(little: false)
        let gps = g.ifd(g.gpsEntries())
        let ifd0 = g.ifd([g.pointer(0x8825, gps)])
        g.set32(4, ifd0)
        let second = jpegWithEXIF(try readBytes(try Fixture.image(s, "second.jpg", size: "8x8")), g.bytes)
        let junk = Array("JUNK between images 48.8566".utf8)
        func app2(_ secondOffset: UInt32) -> [UInt8] { mpfSegment(primarySize: 0, secondSize: second.count, secondOffset: secondOffset) }
        let primaryLength = base.count + app2(0).count
        let secondStart = primaryLength + junk.count
        let movie = try Self.movie(s)
        // MPF offsets count from its TIFF header, at 10.
        let file: [UInt8] = [0xFF, 0xD8] + app2(UInt32(secondStart - 10)) + base.dropFirst(2) + junk + second + movie
        let scan = try MediaScanner.scan(bytes: file)
        #expect(scan.hasLocation)
        guard let p = plan(scan) else { return }
        let served = try servedIsClean(file, p, s)
        #expect(served[primaryLength..<secondStart].allSatisfy { $0 == 0 }, "bytes between the images are zeroed")
        let secondServed = Array(served[secondStart..<(secondStart + second.count)])
        try writeBytes(second, s.path("second-before.jpg"))
        try writeBytes(secondServed, s.path("second-after.jpg"))
        #expect(try decoded(s.path("second-after.jpg"), .image) == decoded(s.path("second-before.jpg"), .image), "secondary image kept")
        #expect(!locationTags(try exiftoolTags(s.path("second-before.jpg"))).isEmpty)
        #expect(locationTags(try exiftoolTags(s.path("second-after.jpg"))).filter { isNonzero($0.value) }.isEmpty)
        let movieServed = Array(served[(secondStart + second.count)...])
        #expect(movieServed.has(Array("ftyp".utf8), at: 4), "the movie is redacted, not zeroed")
        try writeBytes(movieServed, s.path("m.mp4"))
        #expect(locationTags(try exiftoolEmbedded(s.path("m.mp4"))).filter { isNonzero($0.value) }.isEmpty)
    }

    // MARK: Hostile

    /// Scan data that runs to the end of the file without an EOI: a file cut while being written.
    @Test func jpegWithoutEOIIsTruncated() throws {
        let s = try Scratch()
        let jpeg = try Self.jpegWithGPS(s)
        let cut = Array(jpeg.dropLast(2)) + Array("appended GPS 48.8566 with no FF at all".utf8)
        guard case .failure(.truncated) = survive(cut) else { Issue.record("no EOI must be truncated, got \(survive(cut))"); return }
    }

    @Test func brokenMarkerAfterScanIsRefused() throws {
        let s = try Scratch()
        let jpeg = try Self.jpegWithGPS(s)
        // Replace EOI with a segment whose length (1) is impossible: where the image ends is unknown.
        let bad = Array(jpeg.dropLast(2)) + [0xFF, 0xC4, 0x00, 0x01] + Array("GPS 48.8566".utf8) + [0xFF, 0xD9]
        guard case .success(let scan) = survive(bad) else { Issue.record("scan failed: \(survive(bad))"); return }
        #expect(isRefused(scan), "got \(scan.redaction)")
        // A segment after the scan whose length runs past the end: cut while being written.
        let cut = Array(jpeg.dropLast(2)) + [0xFF, 0x02, 0xFF, 0xFF]
        guard case .failure(.truncated) = survive(cut) else { Issue.record("must be truncated: \(survive(cut))"); return }
        // A header problem before the scan still fails the scan as before.
        guard case .failure = survive(Array(jpeg[..<30])) else { Issue.record("cut header must fail"); return }
    }

    /// Trailer movies that are not clean are zeroed whole, never refused nor served.
    @Test func brokenTrailerMoviesAreZeroedWhole() throws {
        let s = try Scratch()
        let jpeg = try Self.jpegWithGPS(s)
        let t = TimedMetadataTrackTests.track
        // (a) a metadata track whose chunk points past the movie; (b) offsets counted from the
        // JPEG's start rather than the movie's (outside the movie's mdat).
        let (pastEnd, _) = MovieBuilder.file(t) { tables, _ in tables.stco = MovieBuilder.full("stco", be32(2) + be32(0xFFFF_0000) + be32(8)) }
        let (absolute, _) = MovieBuilder.file(t) { tables, base in
            let o = UInt32(base + 24 + jpeg.count)
            tables.stco = MovieBuilder.full("stco", be32(2) + be32(o) + be32(o + 100))
        }
        for (name, movie) in [("past end", pastEnd), ("absolute offsets", absolute)] {
            let file = jpeg + movie
            guard case .success(let scan) = survive(file) else { Issue.record("\(name): scan failed"); continue }
            guard let p = plan(scan) else { continue }
            let served = p.applied(to: file)
            #expect(served[jpeg.count...].allSatisfy { $0 == 0 }, "\(name): the movie must be zeroed whole")
        }
        // (c) A movie cut short at the end of the file: the file was cut while being written.
        let truncated = jpeg + Array(try Self.movie(s).dropLast(10))
        guard case .failure(.truncated) = survive(truncated) else { Issue.record("cut movie: \(survive(truncated))"); return }
        // A well-formed metadata track movie as a trailer is redacted in place.
        let (good, samples) = MovieBuilder.file(t)
        guard let p = plan(try MediaScanner.scan(bytes: jpeg + good)) else { return }
        let served = p.applied(to: jpeg + good)
        #expect(served[jpeg.count..<(jpeg.count + 8)] == good[0..<8], "kept")
        for r in samples { #expect(served[(jpeg.count + r.lowerBound)..<(jpeg.count + r.upperBound)].allSatisfy { $0 == 0 }) }
    }

    @Test func randomTrailerMutationsSurvive() throws {
        let s = try Scratch()
        let jpeg = try Self.jpegWithGPS(s, size: "8x8")
        let seed = jpeg + MovieBuilder.file(TimedMetadataTrackTests.track).bytes
        var rng = SplitMix(seed: 77)
        for _ in 0..<400 {
            var m = seed
            for _ in 0..<(1 + Int(rng.next() % 6)) {
                let at = jpeg.count - 64 + Int(rng.next() % UInt64(m.count - jpeg.count + 64))
                m[at] = [0, 0xFF, 0x7F, 0x80, UInt8(truncatingIfNeeded: rng.next())][Int(rng.next() % 5)]
            }
            _ = survive(m)   // no crash, plans inside the file
        }
    }
}
