import Foundation
import Testing
import TestSupport
@testable import Redaction

typealias Patch = RedactionPlan.Patch

/// The served bytes computed the slow, obvious way: replacements in order, then zeros (zero wins).
func referenceApply(_ patches: [Patch], to bytes: [UInt8], at fileOffset: UInt64) -> [UInt8] {
    var out = bytes
    func paint(_ p: Patch) {
        for k in 0..<UInt64(p.length) {
            let at = p.offset &+ k
            guard at >= fileOffset, at < fileOffset + UInt64(bytes.count), at >= p.offset else { continue }
            let value: UInt8
            if let r = p.replacement { value = Int(k) < r.count ? r[Int(k)] : 0 } else { value = 0 }
            out[Int(at - fileOffset)] = value
        }
    }
    for p in patches where p.replacement != nil { paint(p) }
    for p in patches where p.replacement == nil { paint(p) }
    return out
}

func randomPatches(_ rng: inout SplitMix, span: UInt64, count: Int) -> [Patch] {
    (0..<count).map { _ in
        let offset = rng.next() % span
        let length = UInt32(rng.next() % 40)
        let replace = rng.next() % 2 == 0
        return Patch(offset: offset, length: length,
                     replacement: replace ? (0..<Int(length)).map { _ in UInt8(truncatingIfNeeded: rng.next() | 1) } : nil)
    }
}

@Suite("RedactionPlan")
struct PlanTests {
    @Test func normalizesSortsAndMerges() {
        let plan = RedactionPlan(patches: [
            Patch(offset: 50, length: 10),
            Patch(offset: 10, length: 5),
            Patch(offset: 15, length: 5),          // touches the previous zero patch: merged
            Patch(offset: 0, length: 0),           // empty: dropped
            Patch(offset: 100, length: 4, replacement: [1, 2, 3, 4]),
            Patch(offset: 102, length: 4),         // zero wins over the replacement's tail
        ])
        #expect(plan.patches == [
            Patch(offset: 10, length: 10),
            Patch(offset: 50, length: 10),
            Patch(offset: 100, length: 2, replacement: [1, 2]),
            Patch(offset: 102, length: 4),
        ])
        #expect(RedactionPlan(patches: plan.patches) == plan, "normalizing is idempotent")
        #expect(RedactionPlan.empty.isEmpty)
        #expect(RedactionPlan(patches: [Patch(offset: 3, length: 0)]).isEmpty)
    }

    @Test func replacementLengthIsFixedUp() {
        let plan = RedactionPlan(patches: [Patch(offset: 0, length: 4, replacement: [9]),
                                           Patch(offset: 10, length: 2, replacement: [1, 2, 3])])
        #expect(plan.patches[0].replacement == [9, 0, 0, 0])
        #expect(plan.patches[1].replacement == [1, 2])
    }

    @Test func clampsAtTheEndOfTheOffsetSpace() {
        let plan = RedactionPlan(patches: [Patch(offset: UInt64.max - 2, length: 10)])
        #expect(plan.patches == [Patch(offset: UInt64.max - 2, length: 2)])
        var buffer = [UInt8](repeating: 7, count: 8)
        buffer.withUnsafeMutableBytes { plan.apply(to: $0, fileOffset: UInt64.max - 4) }
        #expect(buffer == [7, 7, 0, 0, 7, 7, 7, 7])
        #expect(plan.intersects(offset: UInt64.max - 1, length: 100))
    }

    @Test func laterReplacementWinsOverlap() {
        let plan = RedactionPlan(patches: [Patch(offset: 0, length: 4, replacement: [1, 1, 1, 1]),
                                           Patch(offset: 2, length: 4, replacement: [2, 2, 2, 2])])
        #expect(plan.applied(to: [UInt8](repeating: 9, count: 8)) == [1, 1, 2, 2, 2, 2, 9, 9])
    }

    @Test func applyAndIntersectsMatchTheReference() {
        var rng = SplitMix(seed: 42)
        for round in 0..<300 {
            let span: UInt64 = 2000
            let patches = randomPatches(&rng, span: span, count: Int(rng.next() % 30))
            let plan = RedactionPlan(patches: patches)
            // Invariants.
            for (a, b) in zip(plan.patches, plan.patches.dropFirst()) { #expect(a.end <= b.offset) }
            #expect(plan.patches.allSatisfy { $0.length > 0 && ($0.replacement == nil || $0.replacement!.count == Int($0.length)) })
            // Any window of the file.
            let fileOffset = rng.next() % span
            let window = (0..<Int(rng.next() % 300)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            var served = window
            served.withUnsafeMutableBytes { plan.apply(to: $0, fileOffset: fileOffset) }
            #expect(served == referenceApply(patches, to: window, at: fileOffset), "round \(round)")
            let len = Int(rng.next() % 50)
            let naive = patches.contains { p in
                p.length > 0 && len > 0 && p.offset < fileOffset + UInt64(len) && fileOffset < p.offset + UInt64(p.length)
            }
            #expect(plan.intersects(offset: fileOffset, length: len) == naive, "round \(round)")
        }
    }

    @Test func applyHandlesEmptyBuffersAndFarOffsets() {
        let plan = RedactionPlan(patches: [Patch(offset: 5, length: 5)])
        var empty: [UInt8] = []
        empty.withUnsafeMutableBytes { plan.apply(to: $0, fileOffset: 0) }
        var far = [UInt8](repeating: 1, count: 4)
        far.withUnsafeMutableBytes { plan.apply(to: $0, fileOffset: 1 << 40) }
        #expect(far == [1, 1, 1, 1])
        #expect(!plan.intersects(offset: 0, length: 0))
        #expect(!plan.intersects(offset: 0, length: -3))
        #expect(!plan.intersects(offset: 0, length: 5))
        #expect(plan.intersects(offset: 0, length: 6))
        #expect(plan.intersects(offset: 9, length: 1))
        #expect(!plan.intersects(offset: 10, length: 100))
    }

    @Test func serializationRoundTrips() throws {
        var rng = SplitMix(seed: 7)
        for _ in 0..<200 {
            let plan = RedactionPlan(patches: randomPatches(&rng, span: 1 << 40, count: Int(rng.next() % 20)))
            let bytes = plan.serialized()
            #expect(try RedactionPlan(serialized: bytes) == plan)
        }
        let big = RedactionPlan(patches: [Patch(offset: UInt64.max - UInt64(UInt32.max), length: UInt32.max)])
        #expect(try RedactionPlan(serialized: big.serialized()) == big)
        #expect(try RedactionPlan(serialized: RedactionPlan.empty.serialized()) == .empty)
    }

    @Test func serializationRejectsGarbage() {
        var rng = SplitMix(seed: 9)
        let plan = RedactionPlan(patches: [Patch(offset: 10, length: 3, replacement: [1, 2, 3]), Patch(offset: 100, length: 50)])
        let good = plan.serialized()
        // Every truncation.
        for n in 0..<good.count {
            #expect(throws: RedactionPlan.DecodingError.self) { try RedactionPlan(serialized: Array(good[..<n])) }
        }
        // Every single-bit flip.
        for i in 0..<good.count {
            for bit in 0..<8 {
                var bad = good
                bad[i] ^= 1 << bit
                #expect(throws: RedactionPlan.DecodingError.self) { try RedactionPlan(serialized: bad) }
            }
        }
        // Trailing bytes, random bytes.
        #expect(throws: RedactionPlan.DecodingError.self) { try RedactionPlan(serialized: good + [0]) }
        for _ in 0..<500 {
            let junk = (0..<Int(rng.next() % 64)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            #expect(throws: RedactionPlan.DecodingError.self) { try RedactionPlan(serialized: junk) }
        }
        // A well-formed frame (valid CRC) with a lying count.
        var lying: [UInt8] = Array("PGRP".utf8) + [1, 0, 0xFF, 0xFF, 0x03, 0, 1, 0]
        let crc = CRC32.checksum(lying)
        lying += [UInt8(crc & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 24)]
        #expect(throws: RedactionPlan.DecodingError.self) { try RedactionPlan(serialized: lying) }
    }

    @Test func codableRoundTripNormalizes() throws {
        let plan = RedactionPlan(patches: [Patch(offset: 4, length: 2, replacement: [1, 2]), Patch(offset: 0, length: 2)])
        let json = try JSONEncoder().encode(plan)
        #expect(try JSONDecoder().decode(RedactionPlan.self, from: json) == plan)
        let messy = #"{"patches":[{"offset":10,"length":5},{"offset":0,"length":0},{"offset":12,"length":5}]}"#
        let decoded = try JSONDecoder().decode(RedactionPlan.self, from: Data(messy.utf8))
        #expect(decoded.patches == [Patch(offset: 10, length: 7)])
    }

    /// The read path: one 128 KiB read against a plan of a few thousand patches.
    @Test func applyIsFast() {
        let patches = (0..<4096).map { Patch(offset: UInt64($0) * 4096, length: 64, replacement: $0 % 2 == 0 ? nil : [UInt8](repeating: 32, count: 64)) }
        let plan = RedactionPlan(patches: patches)
        var buffer = [UInt8](repeating: 1, count: 128 << 10)
        let clock = ContinuousClock()
        let elapsed = clock.measure {
            buffer.withUnsafeMutableBytes { raw in
                for i in 0..<2000 { plan.apply(to: raw, fileOffset: UInt64(i % 100) * (128 << 10)) }
            }
        }
        #expect(buffer[0] == 0)
        #expect(elapsed < .seconds(2), "2000 applies took \(elapsed)")
    }
}

@Suite("Sniffing")
struct SniffTests {
    static let headers: [(MediaKind?, [UInt8])] = [
        (.jpeg, [0xFF, 0xD8, 0xFF, 0xE0]),
        (.png, [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13]),
        (.gif, Array("GIF89a".utf8) + [1, 0]),
        (.gif, Array("GIF87a".utf8)),
        (.webp, Array("RIFF".utf8) + [0, 0, 0, 0] + Array("WEBPVP8 ".utf8)),
        (.tiff, [0x49, 0x49, 0x2A, 0x00, 8, 0, 0, 0]),
        (.tiff, [0x4D, 0x4D, 0x00, 0x2A, 0, 0, 0, 8]),
        (.heif, ftyp("heic", ["mif1", "heic"])),
        (.heif, ftyp("mif1", ["mif1", "heic"])),
        (.heif, ftyp("avif", ["avif", "mif1"])),
        (.mp4, ftyp("isom", ["isom", "iso2", "mp41"])),
        (.mp4, ftyp("mp42", ["mp42", "isom"])),
        (.mp4, ftyp("M4V ", ["M4V ", "mp42"])),
        (.mov, ftyp("qt  ", ["qt  "])),
        (.mov, [0, 0, 0, 8] + Array("wide".utf8) + [0, 0, 0, 8] + Array("mdat".utf8)),
        (.mov, [0, 0, 0, 100] + Array("moov".utf8)),
        (nil, ftyp("M4A ", ["M4A ", "mp42"])),
        (.cr3, ftyp("crx ", ["crx "])),
        (.cr2, [0x49, 0x49, 0x2A, 0x00, 0x10, 0, 0, 0, 0x43, 0x52, 0x02, 0x00]),
        (.orf, [0x49, 0x49, 0x52, 0x4F, 0x08, 0, 0, 0]),
        (.orf, [0x4D, 0x4D, 0x4F, 0x52, 0, 0, 0, 0x08]),
        (.rw2, [0x49, 0x49, 0x55, 0x00, 0x18, 0, 0, 0]),
        (.tiff, [0x49, 0x49, 0x2A, 0x00, 0x08, 0, 0, 0, 0x10, 0x00]),   // DNG, NEF, ARW: named by the TIFF scanner
        (.mkv, [0x1A, 0x45, 0xDF, 0xA3, 0xA3, 0x42, 0x86, 0x81, 0x01, 0x42, 0x82, 0x88] + Array("matroska".utf8)),
        (.webm, [0x1A, 0x45, 0xDF, 0xA3, 0x9F, 0x42, 0x86, 0x81, 0x01, 0x42, 0x82, 0x84] + Array("webm".utf8)),
        (nil, [0x1A, 0x45, 0xDF, 0xA3, 0x9F, 0x42, 0x86, 0x81, 0x01, 0x42, 0x82, 0x84] + Array("mka?".utf8)),
        (nil, Array("hello world, this is text".utf8)),
        (nil, Array("RIFF".utf8) + [0, 0, 0, 0] + Array("WAVEfmt ".utf8)),
        (nil, []),
    ]

    static func ftyp(_ major: String, _ compatible: [String]) -> [UInt8] {
        let size = 16 + 4 * compatible.count
        return [0, 0, 0, UInt8(size)] + Array("ftyp".utf8) + Array(major.utf8) + [0, 0, 0, 0] + compatible.flatMap { Array($0.utf8) }
    }

    @Test func recognisesContent() {
        for (kind, header) in SniffTests.headers {
            #expect(sniffMediaKind(header + [UInt8](repeating: 0, count: 64)) == kind, "\(header)")
        }
    }

    @Test func anyPrefixIsSafe() {
        var rng = SplitMix(seed: 1)
        for (_, header) in SniffTests.headers {
            let padded = header + (0..<64).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            for n in 0...padded.count { _ = sniffMediaKind(Array(padded[..<n])) }
        }
        for _ in 0..<5000 {
            _ = sniffMediaKind((0..<Int(rng.next() % 70)).map { _ in UInt8(truncatingIfNeeded: rng.next()) })
        }
    }

    @Test func kindProperties() {
        #expect(MediaKind.allCases.filter(\.isVideo) == [.mp4, .mov, .mkv, .webm])
        #expect(MediaKind.allCases.map(\.preferredExtension) == ["jpg", "heic", "png", "gif", "webp", "tif", "mp4", "mov",
                                                                 "mkv", "webm", "dng", "cr2", "nef", "arw", "orf", "rw2", "cr3"])
        #expect(MediaKind.webm.mimeType == "video/webm")
        #expect(MediaKind.mov.mimeType == "video/quicktime")
        #expect(MediaKind.heif.mimeType == "image/heic")
    }

    @Test func readErrorsAreIOErrors() {
        #expect(throws: ScanError.io(EBADF)) { try MediaScanner.scan(fd: -1, size: 100) }
    }

    @Test func notMediaThrows() {
        #expect(throws: ScanError.notMedia) { try MediaScanner.scan(bytes: Array("just text".utf8)) }
        #expect(throws: ScanError.notMedia) { try MediaScanner.scan(bytes: []) }
    }
}

@Suite("Dates")
struct DateTests {
    @Test func exifDates() {
        #expect(DateParsing.exif("2021:03:04 05:06:07", offset: nil) == utc(2021, 3, 4, 5, 6, 7))
        #expect(DateParsing.exif("2021:03:04 05:06:07", offset: "+02:00") == utc(2021, 3, 4, 3, 6, 7))
        #expect(DateParsing.exif("2021:03:04 05:06:07", offset: "-0530") == utc(2021, 3, 4, 10, 36, 7))
        #expect(DateParsing.exif("0000:00:00 00:00:00", offset: nil) == nil)
        #expect(DateParsing.exif("    :  :     :  :  ", offset: nil) == nil)
        #expect(DateParsing.exif("1969:12:31 23:59:59", offset: nil) == Date(timeIntervalSince1970: -1))
        #expect(DateParsing.iso8601("2021-03-04T05:06:07+0100") == utc(2021, 3, 4, 4, 6, 7))
        #expect(DateParsing.iso8601("2021-03-04T05:06:07.5Z") == utc(2021, 3, 4, 5, 6, 7).addingTimeInterval(0.5))
        #expect(DateParsing.iso8601("2021-03-04") == utc(2021, 3, 4, 0, 0, 0))
        #expect(DateParsing.iso8601("2021-03-04T05:06") == utc(2021, 3, 4, 5, 6, 0))
        #expect(DateParsing.iso8601("garbage") == nil)
    }

    @Test func scanErrorsDescribeThemselves() {
        #expect(ScanError.truncated("x").description.contains("truncated"))
        #expect(ScanError.io(5).description.contains("errno 5"))
    }
}
