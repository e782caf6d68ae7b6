import Foundation
import Testing
import TestSupport
@testable import Redaction

/// A file cut while being written (a writer killed, rsync stopped) must never become an asset: the
/// scan throws `.truncated`. Complete files, including those with trailers, still pass.
@Suite("Complete files only")
struct CompletenessTests {
    /// `bytes` cut at several points: every one must be `.truncated` (by bytes and by fd).
    static func expectTruncatedEverywhere(_ bytes: [UInt8], _ what: String, cuts: [Int]? = nil,
                                          sourceLocation: SourceLocation = #_sourceLocation) throws {
        let n = bytes.count
        let points = cuts ?? ([0.1, 0.25, 0.5, 0.75, 0.9, 0.99].map { Int(Double(n) * $0) } + [n - 1])
        let s = try Scratch()
        for cut in Set(points).sorted() where cut >= 64 && cut < n {
            let prefix = Array(bytes[..<cut])
            switch survive(prefix, sourceLocation: sourceLocation) {
            case .failure(.truncated):
                break
            case let other:
                Issue.record("\(what) cut at \(cut) of \(n): expected truncated, got \(other)", sourceLocation: sourceLocation)
            }
            try writeBytes(prefix, s.path("cut"))
            #expect(throws: ScanError.self, "\(what) cut at \(cut) by fd", sourceLocation: sourceLocation) { try scanFile(s.path("cut")) }
        }
    }

    static func expectComplete(_ bytes: [UInt8], _ kind: MediaKind, _ what: String,
                               sourceLocation: SourceLocation = #_sourceLocation) {
        switch survive(bytes, sourceLocation: sourceLocation) {
        case .success(let scan):
            #expect(scan.kind == kind, "\(what)", sourceLocation: sourceLocation)
        case .failure(let e):
            Issue.record("\(what): complete file failed: \(e)", sourceLocation: sourceLocation)
        }
    }

    // MARK: Images

    @Test(arguments: ["jpg", "png", "gif", "webp", "tif", "heic"])
    func imagesCutAnywhereAreTruncated(ext: String) throws {
        let s = try Scratch()
        let p = s.path("a.\(ext)")
        // Noise makes the image data most of the file, as in a camera file.
        try Tools.must("convert", ["-size", "96x64", "plasma:", "-depth", "8", p])
        try Fixture.exiftool(p, Fixture.gps + (ext == "gif" ? Fixture.xmp : []))
        let bytes = try readBytes(p)
        let kind = try MediaScanner.scan(bytes: bytes).kind
        Self.expectComplete(bytes, kind, ext)
        try Self.expectTruncatedEverywhere(bytes, ext)
    }

    /// The issue's case: a 1.7 MB camera-like JPEG cut at 300 KB, and cut just before its EOI.
    @Test func largeJPEGCutInItsScanData() throws {
        let s = try Scratch()
        let p = s.path("big.jpg")
        try Tools.must("convert", ["-size", "1200x900", "plasma:", "-quality", "98", p])
        try Fixture.exiftool(p, Fixture.gps)
        let bytes = try readBytes(p)
        #expect(bytes.count > 400_000, "fixture is \(bytes.count) bytes")
        Self.expectComplete(bytes, .jpeg, "big JPEG")
        try Self.expectTruncatedEverywhere(bytes, "big JPEG", cuts: [300_000, bytes.count - 2, bytes.count - 1])
        // Through the import path's entry point (fd) too.
        try writeBytes(Array(bytes[..<300_000]), s.path("cut.jpg"))
        #expect(throws: ScanError.truncated("JPEG scan data runs to the end of the file without an end of image")) {
            try scanFile(s.path("cut.jpg"))
        }
    }

    /// EOI followed by trailers is complete: an appended movie (Motion Photo) and other bytes.
    @Test func jpegWithTrailersIsComplete() throws {
        let s = try Scratch()
        let jpeg = try JPEGTrailerTests.jpegWithGPS(s)
        let movie = try JPEGTrailerTests.movie(s)
        Self.expectComplete(jpeg + movie, .jpeg, "Motion Photo")
        Self.expectComplete(jpeg + Array("SEFHxxxx trailer bytes".utf8), .jpeg, "other trailer")
        // The movie cut inside its boxes: truncated.
        try Self.expectTruncatedEverywhere(jpeg + movie, "Motion Photo",
                                           cuts: [jpeg.count + movie.count / 2, jpeg.count + movie.count - 1])
    }

    /// MPF lists the secondary image with its size: a file that ends before it is truncated.
    @Test func jpegWithMPFImagesCutIsTruncated() throws {
        let s = try Scratch()
        let second = try JPEGTrailerTests.jpegWithGPS(s, size: "16x16")
        let base = try JPEGTrailerTests.jpegWithGPS(s)
        // MPF segment after SOI; the primary is `base` plus the segment; the second follows it.
        let probe = mpfSegment(primarySize: 0, secondSize: second.count, secondOffset: 0)
        let primarySize = base.count + probe.count
        let mpfHeaderAt = 2 + 4 + 4   // SOI, APP2 marker and length, "MPF\0"
        let segment = mpfSegment(primarySize: UInt32(primarySize), secondSize: second.count,
                                 secondOffset: UInt32(primarySize - mpfHeaderAt))
        let file = [0xFF, 0xD8] + segment + Array(base.dropFirst(2)) + second
        #expect(file.count == primarySize + second.count)
        Self.expectComplete(file, .jpeg, "MPF")
        try Self.expectTruncatedEverywhere(file, "MPF", cuts: [primarySize, primarySize + second.count / 2, file.count - 1])
    }

    /// TIFF strips and IFD values that point past the end; a TIFF whose IFD comes last.
    @Test func tiffPointersPastTheEnd() throws {
        for little in [true, false] {
            var w = TIFFWriter(little: little)
            let pixels = [UInt8](repeating: 0x80, count: 64)
            let stripAt = UInt32(w.bytes.count)
            w.bytes += pixels
            let gpsAt = w.ifd(w.gpsEntries())
            let ifd0 = w.ifd([TIFFWriter.Entry(tag: 0x0100, type: 3, count: 1, data: w.encode16(8)),
                              TIFFWriter.Entry(tag: 0x0101, type: 3, count: 1, data: w.encode16(8)),
                              TIFFWriter.Entry(tag: 0x0103, type: 3, count: 1, data: w.encode16(1)),
                              TIFFWriter.Entry(tag: 0x0106, type: 3, count: 1, data: w.encode16(1)),
                              w.pointer(0x0111, stripAt),
                              TIFFWriter.Entry(tag: 0x0117, type: 4, count: 1, data: w.encode32(64)),
                              w.pointer(0x8825, gpsAt)])
            w.set32(4, ifd0)
            let good = w.bytes
            guard case .success(let scan) = survive(good) else { Issue.record("complete TIFF: \(survive(good))"); continue }
            #expect(scan.hasLocation)
            // The IFD is last: every cut loses it or its entries.
            try Self.expectTruncatedEverywhere(good, "TIFF", cuts: Array(stride(from: Int(gpsAt), to: good.count, by: 7)))
            // A strip byte count past the end.
            var bad = good
            let entry = Int(ifd0) + 2 + 5 * 12
            bad.replaceSubrange((entry + 8)..<(entry + 12), with: w.encode32(10_000))
            guard case .failure(.truncated) = survive(bad) else { Issue.record("strip past the end: \(survive(bad))"); continue }
        }
    }

    /// A GPS IFD pointer past the end of a TIFF file (cut before it was written).
    @Test func tiffGPSIFDPastTheEnd() throws {
        var w = TIFFWriter(little: true)
        let ifd0 = w.ifd([w.pointer(0x8825, 5000)])
        w.set32(4, ifd0)
        guard case .failure(.truncated) = survive(w.bytes + [UInt8](repeating: 0, count: 64)) else {
            Issue.record("GPS IFD past the end must be truncated"); return
        }
    }

    // MARK: Movies

    @Test(arguments: [("mp4", ["-movflags", "+faststart"]), ("mp4", []), ("mov", []),
                      ("mp4", ["-movflags", "frag_keyframe+empty_moov"]),
                      ("mp4", ["-movflags", "frag_keyframe+empty_moov+default_base_moof"])])
    func moviesCutAnywhereAreTruncated(ext: String, flags: [String]) throws {
        let s = try Scratch()
        let p = try Fixture.movie(s, "a.\(ext)", ["-g", "2", "-metadata", "location=+48.8566+002.3522/"] + flags)
        let bytes = try readBytes(p)
        Self.expectComplete(bytes, ext == "mov" ? .mov : .mp4, "\(ext) \(flags)")
        try Self.expectTruncatedEverywhere(bytes, "\(ext) \(flags)")
        // Cut exactly at each top-level box boundary (a writer stopped between two boxes).
        var boundaries: [Int] = []
        var pos = 0
        while pos + 8 <= bytes.count {
            let size = Int(bytes[pos]) << 24 | Int(bytes[pos + 1]) << 16 | Int(bytes[pos + 2]) << 8 | Int(bytes[pos + 3])
            guard size >= 8 else { break }
            pos += size
            if pos < bytes.count { boundaries.append(pos) }
        }
        let types = boundaries.map { String(decoding: bytes[($0 + 4)..<($0 + 8)], as: UTF8.self) }
        // Boundaries before data the index points to (mdat): truncated. (After the last mdat of a
        // plain file only moov is missing: also truncated. Fragmented files can end between two
        // fragments: that prefix is a complete shorter movie.)
        let fragmented = flags.contains { $0.hasPrefix("frag_keyframe") }
        let checked = zip(boundaries, types).filter { fragmented ? $0.1 == "mdat" : true }.map(\.0)
        #expect(!checked.isEmpty)
        try Self.expectTruncatedEverywhere(bytes, "\(ext) \(flags) at box boundaries", cuts: checked)
    }

    /// A faststart movie whose chunk offsets (stco) point past the end, with all boxes complete.
    @Test func chunkOffsetsPastTheEnd() throws {
        let (good, _) = MovieBuilder.file(TimedMetadataTrackTests.track)
        guard case .success = survive(good) else { Issue.record("complete movie"); return }
        let (bad, _) = MovieBuilder.file(TimedMetadataTrackTests.track) { tables, _ in
            tables.stco = MovieBuilder.full("stco", be32(2) + be32(40) + be32(0x0100_0000))
        }
        guard case .failure(.truncated) = survive(bad) else { Issue.record("stco past the end: \(survive(bad))"); return }
    }

    /// A track whose data is in another file (dref `url ` without the self-contained flag): its
    /// offsets are not this file's, so they prove nothing about this file's end.
    @Test func externalDataReferenceIsNotTruncation() throws {
        var (bytes, _) = MovieBuilder.file(TimedMetadataTrackTests.track) { tables, _ in
            tables.stco = MovieBuilder.full("stco", be32(2) + be32(40) + be32(0x0100_0000))
        }
        guard case .failure(.truncated) = survive(bytes) else { Issue.record("self-contained: truncated"); return }
        let at = try #require(bytes.firstIndex(of: Array("url ".utf8) + [0, 0, 0, 1]))
        bytes[at + 7] = 0
        guard case .success(let scan) = survive(bytes) else { Issue.record("external data: \(survive(bytes))"); return }
        // The timed metadata track's samples cannot be located: refused, not served.
        #expect(isRefused(scan))
    }

    /// HEIF: `meta` complete but the item data (iloc extents) missing.
    @Test func heifItemsPastTheEnd() throws {
        let s = try Scratch()
        let p = try Fixture.image(s, "a.heic", size: "64x64")
        let bytes = try readBytes(p)
        Self.expectComplete(bytes, .heif, "HEIF")
        let mdat = try #require(bytes.firstIndex(of: Array("mdat".utf8))) - 4
        try Self.expectTruncatedEverywhere(bytes, "HEIF", cuts: [mdat, mdat + 8, mdat + 20])
    }
}
