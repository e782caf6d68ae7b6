import Foundation
import Testing
@testable import Redaction

/// Real camera and phone files from the shared samples folder, when it exists (a fresh clone of
/// the project has none: these tests then skip with a message).
enum Samples {
    static let folder: String? = {
        let here = URL(fileURLWithPath: #filePath)   // <repo>/Tests/RedactionTests/SampleTests.swift
        let repo = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        for candidate in [repo.deletingLastPathComponent().appendingPathComponent("shared/samples").path, "/work/shared/samples"]
        where FileManager.default.fileExists(atPath: candidate + "/README.md") {
            return candidate
        }
        return nil
    }()

    /// name, kind, has location, decode
    static let expectations: [(String, MediaKind, Bool)] = [
        ("DSCN0010.jpg", .jpeg, true), ("DSCN0012.jpg", .jpeg, true), ("iphone_hdr_NO.jpg", .jpeg, true),
        ("IMG_5195.HEIC", .heif, true), ("Canon_40D.jpg", .jpeg, false), ("45-gps_ifd.jpg", .jpeg, false),
        ("exiftool-Apple.jpg", .jpeg, true), ("exiftool-GPS.jpg", .jpeg, true), ("exiftool-ExifTool.tif", .tiff, true),
        ("exiftool-PNG.png", .png, false), ("exiftool-QuickTime.heic", .heif, false), ("exiftool-QuickTime.mov", .mov, false),
        ("exiftool-RIFF.webp", .webp, false),
    ]
}

@Suite("Shared samples", .enabled(if: Samples.folder != nil, "no ../shared/samples folder: sample tests skipped"))
struct SampleTests {
    @Test(arguments: Samples.expectations.map(\.0))
    func sample(_ name: String) throws {
        let folder = try #require(Samples.folder)
        guard let (_, kind, location) = Samples.expectations.first(where: { $0.0 == name }) else { return }
        let s = try Scratch()
        let p = s.path(name)
        try writeBytes(try readBytes(folder + "/" + name), p)
        let decode: Decode = kind.isVideo ? .video : .image
        try verifyRedaction(p, Expectation(kind: kind, hasLocation: location,
                                           blankTags: ["City", "Country-PrimaryLocationName", "Sub-location", "Province-State"],
                                           mustDecode: false),
                            decode: decode)
    }

    @Test func iPhoneHEICDate() throws {
        let folder = try #require(Samples.folder)
        let scan = try scanFile(folder + "/IMG_5195.HEIC")
        // DateTimeOriginal 2021:04:11 15:47:53 with OffsetTimeOriginal -05:00.
        #expect(scan.captureDate == utc(2021, 4, 11, 20, 47, 53))
        #expect(scan.pixelWidth != nil)
    }
}
