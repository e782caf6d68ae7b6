import Foundation
import Testing
import TestSupport
@testable import Redaction

/// Matroska/WebM made by ffmpeg from an MP4 with a location, checked with exiftool and the decoder.
@Suite("Matroska and WebM")
struct MatroskaTests {
    /// An MP4 with `location` (ffmpeg writes ©xyz), remuxed or re-encoded to `name`.
    static func movie(_ s: Scratch, _ name: String, _ codec: [String], extra: [String] = []) throws -> String {
        let mp4 = try Fixture.movie(s, "src-\(UUID().uuidString).mp4", ["-metadata", "location=+48.8566+002.3522/"])
        let p = s.path(name)
        try Tools.must("ffmpeg", ["-v", "error", "-y", "-i", mp4] + extra + codec + [p])
        return p
    }

    /// The CRC-32 elements of the Tags element (found by its ID, parsed here by hand) hold the
    /// IEEE CRC-32 of the rest of their parent: checks ffmpeg's original and the served bytes alike.
    static func tagsCRCsHold(_ b: [UInt8]) -> Bool? { crcHolds(b, id: [0x12, 0x54, 0xC3, 0x67]) }

    static func crcHolds(_ b: [UInt8], id: [UInt8]) -> Bool? {
        // The ID also appears in the SeekHead (as a SeekID): the element is the occurrence whose
        // payload starts with a CRC-32 element.
        var from = 0
        while let at = b.firstIndex(of: id, from: from) {
            from = at + 1
            let s0 = b[at + 4]
            guard s0 != 0 else { continue }
            let n = s0.leadingZeroBitCount + 1
            var size = Int(s0) & ((1 << (8 - n)) - 1)
            for k in 1..<n { size = size << 8 | Int(b[at + 4 + k]) }
            let data = at + 4 + n
            guard data + size <= b.count, size >= 6, b[data] == 0xBF, b[data + 1] == 0x84 else { continue }
            let stored = UInt32(b[data + 2]) | UInt32(b[data + 3]) << 8 | UInt32(b[data + 4]) << 16 | UInt32(b[data + 5]) << 24
            return CRC32.checksum(b[(data + 6)..<(data + size)]) == stored
        }
        return nil
    }

    @Test func mkvFromMP4IsRedacted() throws {
        let s = try Scratch()
        let p = try Self.movie(s, "a.mkv", ["-c", "copy"])
        let original = try readBytes(p)
        #expect(Self.tagsCRCsHold(original) == true, "fixture: ffmpeg writes a CRC-32 in Tags")
        let (scan, _) = try verifyRedaction(p, Expectation(kind: .mkv, width: 64, height: 48, mustHaveBefore: ["Location"]),
                                            decode: .video)
        #expect(scan.kind.isVideo)
        guard case .plan(let plan) = scan.redaction else { return }
        #expect(Self.tagsCRCsHold(plan.applied(to: original)) == true, "Tags CRC-32 recomputed")
    }

    @Test func webmIsRedacted() throws {
        let s = try Scratch()
        let p = try Self.movie(s, "a.webm", ["-c:v", "libvpx", "-b:v", "200k"])
        try verifyRedaction(p, Expectation(kind: .webm, mustHaveBefore: ["Location"]), decode: .video)
    }

    @Test func mkvWithoutLocationIsUntouched() throws {
        let s = try Scratch()
        let p = s.path("plain.mkv")
        try Tools.must("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=duration=0.3:size=32x32:rate=10",
                                  "-c:v", "mpeg4", p])
        let scan = try scanFile(p)
        #expect(scan.kind == .mkv)
        #expect(!scan.hasLocation)
        #expect(scan.redaction == .plan(.empty))
    }

    /// Cover art with its own EXIF GPS: redacted in place (CRC-32s kept valid); a movie attached: refused.
    @Test func attachedPhotoIsRedacted() throws {
        let s = try Scratch()
        let cover = try JPEGTrailerTests.jpegWithGPS(s, size: "16x16")
        try writeBytes(cover, s.path("cover.jpg"))
        let mp4 = try Fixture.movie(s, "src.mp4", [])
        let p = s.path("cover.mkv")
        try Tools.must("ffmpeg", ["-v", "error", "-y", "-i", mp4, "-attach", s.path("cover.jpg"),
                                  "-metadata:s:t", "mimetype=image/jpeg", "-c", "copy", p])
        let bytes = try readBytes(p)
        let at = try #require(bytes.firstIndex(of: cover), "fixture: the cover is stored as is")
        let scan = try scanFile(p)
        #expect(scan.kind == .mkv)
        #expect(scan.hasLocation)
        guard let plan = plan(scan) else { return }
        let served = plan.applied(to: bytes)
        try writeBytes(Array(served[at..<(at + cover.count)]), s.path("served-cover.jpg"))
        #expect(!locationTags(try exiftoolTags(s.path("cover.jpg"))).filter { isNonzero($0.value) }.isEmpty, "fixture: cover has GPS")
        let leaks = locationTags(try exiftoolTags(s.path("served-cover.jpg"))).filter { isNonzero($0.value) }
        #expect(leaks.isEmpty, "cover still has \(leaks)")
        #expect(try decoded(s.path("served-cover.jpg"), .image) == decoded(s.path("cover.jpg"), .image))
        #expect(Self.crcHolds(served, id: [0x19, 0x41, 0xA4, 0x69]) == true, "Attachments CRC-32 recomputed")
        #expect(Self.crcHolds(bytes, id: [0x19, 0x41, 0xA4, 0x69]) == true, "fixture: ffmpeg writes a CRC-32 in Attachments")
        // A movie as an attachment: not followed, refused.
        let q = s.path("movie-attached.mkv")
        try Tools.must("ffmpeg", ["-v", "error", "-y", "-i", mp4, "-attach", mp4, "-metadata:s:t", "mimetype=video/mp4", "-c", "copy", q])
        #expect(isRefused(try scanFile(q)))
    }

    /// Subtitle frames can carry GPS text: refused, never served.
    @Test func subtitleTrackIsRefused() throws {
        let s = try Scratch()
        let srt = s.path("a.srt")
        try Data("1\n00:00:00,000 --> 00:00:00,400\nGPS 48.8566 2.3522\n".utf8).write(to: URL(fileURLWithPath: srt))
        let mp4 = try Fixture.movie(s, "src.mp4", [])
        let p = s.path("sub.mkv")
        try Tools.must("ffmpeg", ["-v", "error", "-y", "-i", mp4, "-i", srt, "-map", "0", "-map", "1", "-c", "copy", "-c:s", "srt", p])
        let scan = try scanFile(p)
        #expect(scan.kind == .mkv)
        #expect(isRefused(scan), "got \(scan.redaction)")
    }

    /// Audio-only Matroska is not a video.
    @Test func audioOnlyIsNotMedia() throws {
        let s = try Scratch()
        let p = s.path("a.mka")
        try Tools.must("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=duration=0.3", "-c:a", "pcm_s16le", "-f", "matroska", p])
        #expect(throws: ScanError.notMedia) { try scanFile(p) }
    }

    @Test(arguments: ["mkv", "webm"])
    func cutAnywhereIsTruncated(ext: String) throws {
        let s = try Scratch()
        let p = try Self.movie(s, "a.\(ext)", ext == "webm" ? ["-c:v", "libvpx"] : ["-c", "copy"])
        let bytes = try readBytes(p)
        CompletenessTests.expectComplete(bytes, ext == "webm" ? .webm : .mkv, ext)
        try CompletenessTests.expectTruncatedEverywhere(bytes, ext)
    }

    /// An element with an 8-byte size.
    static func el(_ id: [UInt8], _ payload: [UInt8]) -> [UInt8] { id + [0x01] + be64(UInt64(payload.count)).dropFirst() + payload }
    static func crc(_ rest: [UInt8]) -> [UInt8] {
        let v = CRC32.checksum(rest)
        return [0xBF, 0x84, UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24)] + rest
    }

    /// Hand-built: nested CRC-32s (Tags and Tag), a nested SimpleTag under LOCATION, a Void
    /// holding stale tag text. Checks the exact served bytes.
    @Test func nestedTagsCRCsAndVoid() throws {
        let header = Self.el([0x1A, 0x45, 0xDF, 0xA3], Self.el([0x42, 0x82], Array("matroska".utf8)))
        let tracks = Self.el([0x16, 0x54, 0xAE, 0x6B], Self.el([0xAE], Self.el([0x83], [1])))
        let nested = Self.el([0x67, 0xC8], Self.el([0x45, 0xA3], Array("LATITUDE".utf8)) + Self.el([0x44, 0x87], Array("48.8566".utf8)))
        let location = Self.el([0x67, 0xC8], Self.el([0x45, 0xA3], Array("LOCATION".utf8))
                               + Self.el([0x44, 0x87], Array("+48.8566+002.3522/".utf8)) + nested)
        let title = Self.el([0x67, 0xC8], Self.el([0x45, 0xA3], Array("TITLE".utf8)) + Self.el([0x44, 0x87], Array("Keep me".utf8)))
        let void = Self.el([0xEC], Array("old LOCATION +48.8566".utf8))
        let tag = Self.el([0x73, 0x73], Self.crc(title + location))
        let tags = Self.el([0x12, 0x54, 0xC3, 0x67], Self.crc(tag + void))
        let cluster = Self.el([0x1F, 0x43, 0xB6, 0x75], Self.el([0xE7], [0]))
        let segment = Self.el([0x18, 0x53, 0x80, 0x67], tracks + tags + cluster)
        let file = header + segment
        let scan = try MediaScanner.scan(bytes: file)
        #expect(scan.kind == .mkv)
        #expect(scan.hasLocation)
        guard let plan = plan(scan) else { return }
        let served = plan.applied(to: file)
        for text in ["+48.8566+002.3522/", "48.8566", "old LOCATION"] {
            #expect(served.firstIndex(of: Array(text.utf8)) == nil, "\(text) still served")
        }
        #expect(served.firstIndex(of: Array("Keep me".utf8)) != nil)
        #expect(Self.tagsCRCsHold(served) == true, "outer CRC-32")
        // The inner CRC-32 (Tag's) covers the rest of the Tag.
        let tagAt = try #require(served.firstIndex(of: [0x73, 0x73, 0x01]))
        let tagData = tagAt + 2 + 8
        let tagEnd = tagData + tag.count - 10
        let stored = UInt32(served[tagData + 2]) | UInt32(served[tagData + 3]) << 8 | UInt32(served[tagData + 4]) << 16
            | UInt32(served[tagData + 5]) << 24
        #expect(CRC32.checksum(served[(tagData + 6)..<tagEnd]) == stored, "inner CRC-32")
        #expect(try MediaScanner.scan(bytes: served).hasLocation == false)
    }

    /// A browser recording (MediaRecorder): Segment and Clusters of unknown size. A Cluster ends
    /// at the next top-level element.
    @Test func unknownSizeClusters() throws {
        let s = try Scratch()
        let p = try Self.movie(s, "a.webm", ["-c:v", "libvpx"])
        var bytes = try readBytes(p)
        let segment = try #require(bytes.firstIndex(of: [0x18, 0x53, 0x80, 0x67]))
        #expect(bytes[segment + 4] == 0x01, "fixture: 8-byte Segment size")
        bytes.replaceSubrange((segment + 4)..<(segment + 12), with: [0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
        var clusters = 0
        var from = 0
        while let at = bytes.firstIndex(of: [0x1F, 0x43, 0xB6, 0x75], from: from) {
            from = at + 4
            guard bytes[at + 4] & 0xC0 == 0x40 else { continue }   // 2-byte sizes, as ffmpeg writes them
            bytes.replaceSubrange((at + 4)..<(at + 6), with: [0x7F, 0xFF])
            clusters += 1
        }
        #expect(clusters > 0)
        guard case .success(let scan) = survive(bytes) else { Issue.record("unknown sizes: \(survive(bytes))"); return }
        #expect(scan.kind == .webm)
        #expect(scan.hasLocation)
        guard let plan = plan(scan) else { return }
        try writeBytes(plan.applied(to: bytes), s.path("served.webm"))
        let after = locationTags(try exiftoolTags(s.path("served.webm"))).filter { isNonzero($0.value) }
        #expect(after.isEmpty, "exiftool still shows \(after)")
    }

    /// A live recording's Segment of unknown size: complete with its Clusters; without any, truncated.
    @Test func unknownSizeSegment() throws {
        let s = try Scratch()
        let p = try Self.movie(s, "a.mkv", ["-c", "copy"])
        var bytes = try readBytes(p)
        let at = try #require(bytes.firstIndex(of: [0x18, 0x53, 0x80, 0x67]))
        #expect(bytes[at + 4] == 0x01, "fixture: 8-byte Segment size")
        bytes.replaceSubrange((at + 4)..<(at + 12), with: [0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
        guard case .success(let scan) = survive(bytes) else { Issue.record("unknown size: \(survive(bytes))"); return }
        #expect(scan.hasLocation)
        let cluster = try #require(bytes.firstIndex(of: [0x1F, 0x43, 0xB6, 0x75]))
        guard case .failure(.truncated) = survive(Array(bytes[..<cluster])) else {
            Issue.record("no Cluster must be truncated: \(survive(Array(bytes[..<cluster])))"); return
        }
    }
}
