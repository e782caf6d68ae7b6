import Foundation
import Testing
@testable import Redaction

/// Fixtures made with ImageMagick, exiftool and ffmpeg, checked with exiftool and the decoders.
enum Fixture {
    static let gps = ["-GPSLatitude=48.8566", "-GPSLatitudeRef=N", "-GPSLongitude=2.3522", "-GPSLongitudeRef=E",
                      "-GPSAltitude=35", "-GPSAltitudeRef=0", "-GPSTimeStamp=10:11:12", "-GPSDateStamp=2021:03:04"]
    static let xmp = ["-XMP-exif:GPSLatitude=48.8566", "-XMP-exif:GPSLongitude=2.3522", "-XMP-exif:GPSAltitude=35",
                      "-XMP-exif:GPSAltitudeRef=0", "-XMP-photoshop:City=Paris", "-XMP-photoshop:Country=France",
                      "-XMP-iptcCore:Location=Louvre", "-XMP-iptcExt:LocationShownCity=Paris",
                      "-XMP-exif:DateTimeOriginal=2021:03:04 05:06:07", "-XMP-dc:Title=Keep me"]
    static let xmpBlank = ["City", "Country", "Location", "LocationShownCity"]
    static let date = ["-DateTimeOriginal=2021:03:04 05:06:07"]
    static let dateUTC = utc(2021, 3, 4, 5, 6, 7)
    static let handXMP = """
        <?xpacket begin='\u{FEFF}' id='W5M0MpCehiHzreSzNTczkc9d'?>
        <x:xmpmeta xmlns:x='adobe:ns:meta/'>
        <!-- a comment with exif:GPSLatitude='1' inside -->
        <rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'>
         <rdf:Description rdf:about='' xmlns:exif='http://ns.adobe.com/exif/1.0/'
           xmlns:dc='http://purl.org/dc/elements/1.1/' xmlns:ph='http://ns.adobe.com/photoshop/1.0/'
           exif:GPSLatitude='48,51.396N' ph:City="Paris">
          <exif:GPSLongitude>2,21.132E</exif:GPSLongitude>
          <exif:GPSAltitude>35/1</exif:GPSAltitude>
          <dc:title><rdf:Alt><rdf:li xml:lang='x-default'>Keep me</rdf:li></rdf:Alt></dc:title>
         </rdf:Description>
        </rdf:RDF>
        </x:xmpmeta>
        <?xpacket end='w'?>
        """

    /// A small gradient image made by ImageMagick.
    static func image(_ scratch: Scratch, _ name: String, size: String = "48x32") throws -> String {
        let path = scratch.path(name)
        try Tools.must("convert", ["-size", size, "gradient:red-blue", path])
        return path
    }

    static func exiftool(_ path: String, _ arguments: [String]) throws {
        try Tools.must("exiftool", ["-q", "-q", "-overwrite_original"] + arguments + [path])
    }

    /// A 0.5 s 64x48 movie made by ffmpeg.
    static func movie(_ scratch: Scratch, _ name: String, _ extra: [String]) throws -> String {
        let path = scratch.path(name)
        try Tools.must("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=duration=0.5:size=64x48:rate=10",
                                  "-c:v", "mpeg4"] + extra + [path])
        return path
    }
}

@Suite("Formats: generated fixtures")
struct FormatTests {
    @Test func toolsArePresent() throws {
        for tool in ["exiftool", "convert", "identify", "ffmpeg", "ffprobe"] {
            #expect(Tools.path(tool) != nil, "\(tool) missing: scripts/test installs it")
        }
    }

    // MARK: JPEG

    @Test func jpegExifBigEndianWithOffsetTime() throws {
        let s = try Scratch()
        let p = try Fixture.image(s, "a.jpg")
        try Fixture.exiftool(p, Fixture.gps + Fixture.date + ["-OffsetTimeOriginal=+02:00", "-Make=KeepMe"])
        let (_, after) = try verifyRedaction(p, Expectation(kind: .jpeg, date: utc(2021, 3, 4, 3, 6, 7), width: 48, height: 32,
                                                            mustHaveBefore: ["GPSLatitude", "GPSLongitude"]), decode: .image)
        #expect(after["IFD0:Make"] as? String == "KeepMe")
        #expect(after["ExifIFD:DateTimeOriginal"] as? String == "2021:03:04 05:06:07")
    }

    /// Issue 38: a GPS IFD without a position (what a camera without a fix writes: altitude, time,
    /// datum; or 0/1 degrees) does not make the photo "have location"; strip-location still zeroes
    /// the whole IFD, so nothing of it reaches an app. A latitude alone does place it.
    @Test func jpegGPSBlockWithoutCoordinates() throws {
        let s = try Scratch()
        let noFix = ["-GPSAltitude=35", "-GPSAltitudeRef=0", "-GPSTimeStamp=10:11:12", "-GPSDateStamp=2021:03:04", "-GPSMapDatum=WGS-84"]
        for (name, tags, has) in [("nofix.jpg", noFix, false), ("zero.jpg", noFix + ["-GPSLatitude=0", "-GPSLongitude=0"], false),
                                  ("lat.jpg", noFix + ["-GPSLatitude=48.8566", "-GPSLatitudeRef=N"], true),
                                  ("area.jpg", noFix + ["-GPSAreaInformation=Paris"], true)] {
            let p = try Fixture.image(s, name)
            try Fixture.exiftool(p, tags + Fixture.date)
            let (scan, after) = try verifyRedaction(p, Expectation(kind: .jpeg, hasLocation: has, date: Fixture.dateUTC,
                                                                    mustHaveBefore: ["GPSAltitude", "GPSMapDatum"]), decode: .image)
            guard case .plan(let plan) = scan.redaction else { Issue.record("\(name): refused"); continue }
            #expect(!plan.isEmpty, "\(name): the GPS IFD must still be zeroed")
            #expect(after.keys.filter { $0.contains("GPS") }.isEmpty, "\(name): \(after.keys.filter { $0.contains("GPS") })")
        }
    }

    @Test func jpegExifLittleEndianWithThumbnail() throws {
        let s = try Scratch()
        let p = try Fixture.image(s, "a.jpg")
        let thumb = try Fixture.image(s, "thumb.jpg", size: "8x8")
        try Fixture.exiftool(p, ["-ExifByteOrder=Little-endian"] + Fixture.gps + Fixture.date + ["-ThumbnailImage<=\(thumb)"])
        #expect(try readBytes(p).firstIndex(of: Array("II*\0".utf8)) != nil, "fixture is little-endian")
        let (_, after) = try verifyRedaction(p, Expectation(kind: .jpeg, date: Fixture.dateUTC, mustHaveBefore: ["GPSLatitude"]),
                                             decode: .image)
        #expect(after["IFD1:ThumbnailLength"] != nil, "the thumbnail IFD survives")
    }

    @Test func jpegXMP() throws {
        let s = try Scratch()
        let p = try Fixture.image(s, "a.jpg")
        try Fixture.exiftool(p, Fixture.xmp)
        let (scan, after) = try verifyRedaction(p, Expectation(kind: .jpeg, date: Fixture.dateUTC, blankTags: Fixture.xmpBlank,
                                                               mustHaveBefore: ["GPSLatitude", "City"]), decode: .image)
        #expect(after["XMP-dc:Title"] as? String == "Keep me", "non-location XMP survives")
        guard case .plan(let plan) = scan.redaction else { return }
        #expect(plan.patches.allSatisfy { $0.replacement?.allSatisfy { $0 == 0x20 } ?? false }, "XMP is blanked with spaces")
    }

    @Test func jpegExtendedXMP() throws {
        let s = try Scratch()
        let p = try Fixture.image(s, "a.jpg")
        // A huge GPS property: exiftool moves it to the extended XMP segments.
        let big = s.path("big.txt")
        try writeBytes(Array(String(repeating: "48.8566 N 2.3522 E ", count: 4000).utf8), big)
        try Fixture.exiftool(p, ["-XMP-exif:GPSAreaInformation<=\(big)", "-XMP-exif:GPSLatitude=48.8566", "-XMP-dc:Title=Keep me"])
        let bytes = try readBytes(p)
        #expect(bytes.firstIndex(of: Array("http://ns.adobe.com/xmp/extension/".utf8)) != nil, "fixture has extended XMP")
        let (_, after) = try verifyRedaction(p, Expectation(kind: .jpeg, mustHaveBefore: ["GPSAreaInformation"]), decode: .image)
        #expect(after["XMP-dc:Title"] as? String == "Keep me")
    }

    @Test func jpegIPTC() throws {
        let s = try Scratch()
        let p = try Fixture.image(s, "a.jpg")
        try Fixture.exiftool(p, ["-IPTC:City=Paris", "-IPTC:Sub-location=Louvre", "-IPTC:Province-State=IDF",
                                 "-IPTC:Country-PrimaryLocationName=France", "-IPTC:ObjectName=Keep me"])
        let (_, after) = try verifyRedaction(p, Expectation(kind: .jpeg, blankTags: ["City", "Sub-location", "Province-State", "Country-PrimaryLocationName"],
                                                            mustHaveBefore: ["City"]), decode: .image)
        #expect(after["IPTC:ObjectName"] as? String == "Keep me")
    }

    @Test func jpegWithoutLocation() throws {
        let s = try Scratch()
        let p = try Fixture.image(s, "a.jpg")
        try Fixture.exiftool(p, Fixture.date + ["-XMP-dc:Title=Hello"])
        let scan = try scanFile(p)
        #expect(scan.hasLocation == false)
        #expect(scan.redaction == .plan(.empty))
        #expect(scan.captureDate == Fixture.dateUTC)
    }

    // MARK: PNG

    @Test func pngEXIf() throws {
        let s = try Scratch()
        let p = try Fixture.image(s, "a.png")
        try Fixture.exiftool(p, Fixture.gps + Fixture.date)
        let (scan, _) = try verifyRedaction(p, Expectation(kind: .png, date: Fixture.dateUTC, width: 48, height: 32,
                                                           mustHaveBefore: ["GPSLatitude"]), decode: .image)
        guard case .plan(let plan) = scan.redaction else { return }
        #expect(plan.patches.contains { $0.length == 4 && $0.replacement != nil }, "the chunk CRC is recomputed")
        try Tools.must("identify", ["-regard-warnings", s.path("a-redacted.png")])
    }

    @Test func pngXMP() throws {
        let s = try Scratch()
        let p = try Fixture.image(s, "a.png")
        try Fixture.exiftool(p, Fixture.xmp)
        let (_, after) = try verifyRedaction(p, Expectation(kind: .png, date: Fixture.dateUTC, blankTags: Fixture.xmpBlank,
                                                            mustHaveBefore: ["GPSLatitude"]), decode: .image)
        #expect(after["XMP-dc:Title"] as? String == "Keep me")
    }

    /// Compressed iTXt XMP (exiftool does not write it: built by hand, compressed with gzip).
    @Test func pngCompressedXMP() throws {
        let s = try Scratch()
        let p = try Fixture.image(s, "a.png")
        var png = try readBytes(p)
        let text = Array(Fixture.handXMP.utf8)
        let chunk = PNGBuilder.chunk("iTXt", Array("XML:com.adobe.xmp".utf8) + [0, 1, 0, 0, 0] + (try PNGBuilder.deflate(text)))
        png.insert(contentsOf: chunk, at: 33)
        try writeBytes(png, p)
        #expect(try readBytes(p).firstIndex(of: Array("GPSLongitude".utf8)) == nil, "fixture XMP is compressed")
        try verifyRedaction(p, Expectation(kind: .png, blankTags: ["City"], mustHaveBefore: ["GPSLatitude", "GPSLongitude", "City"]),
                            decode: .image)
    }

    /// Hand-written XMP: attribute and element forms, a non-conventional prefix for photoshop.
    @Test func jpegHandWrittenXMP() throws {
        let s = try Scratch()
        let p = try Fixture.image(s, "a.jpg")
        var jpeg = try readBytes(p)
        let payload = Array("http://ns.adobe.com/xap/1.0/\0".utf8) + Array(Fixture.handXMP.utf8)
        let n = payload.count + 2
        jpeg.insert(contentsOf: [0xFF, 0xE1, UInt8(n >> 8), UInt8(n & 0xFF)] + payload, at: 2)
        try writeBytes(jpeg, p)
        let (_, after) = try verifyRedaction(p, Expectation(kind: .jpeg, blankTags: ["City"], mustHaveBefore: ["GPSLatitude", "GPSLongitude", "City"]),
                                             decode: .image)
        #expect(after["XMP-dc:Title"] as? String == "Keep me")
    }

    /// ImageMagick copies EXIF into tEXt chunks ("exif:GPSLatitude") besides eXIf.
    @Test func pngFromImageMagickConversion() throws {
        let s = try Scratch()
        let j = try Fixture.image(s, "a.jpg")
        try Fixture.exiftool(j, Fixture.gps + Fixture.date)
        let p = s.path("b.png")
        try Tools.must("convert", [j, p])
        let before = try exiftoolTags(p)
        #expect(before.keys.contains { $0.hasPrefix("PNG:") && $0.contains("GPS") }, "fixture has GPS text chunks")
        try verifyRedaction(p, Expectation(kind: .png, date: Fixture.dateUTC), decode: .image)
    }

    /// "Raw profile type exif" (hex EXIF in tEXt and in zTXt), built by hand.
    @Test func pngRawProfiles() throws {
        let s = try Scratch()
        let j = try Fixture.image(s, "a.jpg")
        try Fixture.exiftool(j, Fixture.gps)
        let jpeg = try readBytes(j)
        let start = try #require(jpeg.firstIndex(of: Array("Exif\0\0".utf8)))
        let length = (Int(jpeg[start - 2]) << 8 | Int(jpeg[start - 1])) - 2
        let exif = Array(jpeg[start..<(start + length)])
        let hex = exif.map { String(format: "%02x", $0) }.joined()
        var lines = ""
        var i = hex.startIndex
        while i < hex.endIndex {
            let e = hex.index(i, offsetBy: 72, limitedBy: hex.endIndex) ?? hex.endIndex
            lines += hex[i..<e] + "\n"
            i = e
        }
        let profile = Array("\nexif\n\(String(repeating: " ", count: 8))\(exif.count)\n\(lines)".utf8)
        for mode in 0..<3 {
            let p = try Fixture.image(s, "raw\(mode).png")
            var png = try readBytes(p)
            let keyword = Array("Raw profile type exif".utf8) + [0]
            let chunk = mode == 0 ? PNGBuilder.chunk("tEXt", keyword + profile)
                : PNGBuilder.chunk("zTXt", keyword + [0] + (mode == 1 ? PNGBuilder.storedZlib(profile) : try PNGBuilder.deflate(profile)))
            png.insert(contentsOf: chunk, at: 8 + 25)   // after IHDR
            try writeBytes(png, p)
            try verifyRedaction(p, Expectation(kind: .png, mustHaveBefore: ["GPSLatitude"]), decode: .image)
        }
    }

    // MARK: TIFF, WebP, HEIF, GIF

    @Test func tiffEXIFAndXMPAndIPTC() throws {
        let s = try Scratch()
        let p = try Fixture.image(s, "a.tif")
        try Fixture.exiftool(p, Fixture.gps + Fixture.date + ["-IPTC:City=Paris"])
        try Fixture.exiftool(p, Fixture.xmp)
        let (_, after) = try verifyRedaction(p, Expectation(kind: .tiff, date: Fixture.dateUTC, width: 48, height: 32,
                                                            blankTags: Fixture.xmpBlank, mustHaveBefore: ["GPSLatitude", "City"]),
                                             decode: .image)
        #expect(after["XMP-dc:Title"] as? String == "Keep me")
    }

    @Test func tiffLittleEndianMultiPage() throws {
        let s = try Scratch()
        let a = try Fixture.image(s, "a.tif"), b = try Fixture.image(s, "b.tif", size: "16x16")
        let p = s.path("pages.tif")
        try Tools.must("convert", [a, b, "-endian", "LSB", p])
        try Fixture.exiftool(p, Fixture.gps + Fixture.date)
        try verifyRedaction(p, Expectation(kind: .tiff, date: Fixture.dateUTC, mustHaveBefore: ["GPSLatitude"]), decode: .image)
    }

    @Test func webpEXIF() throws {
        let s = try Scratch()
        let p = try Fixture.image(s, "a.webp")
        try Fixture.exiftool(p, Fixture.gps + Fixture.date)
        try verifyRedaction(p, Expectation(kind: .webp, date: Fixture.dateUTC, width: 48, height: 32,
                                           mustHaveBefore: ["GPSLatitude"]), decode: .image)
    }

    @Test func webpXMP() throws {
        let s = try Scratch()
        let p = try Fixture.image(s, "a.webp")
        try Fixture.exiftool(p, Fixture.xmp)
        try verifyRedaction(p, Expectation(kind: .webp, date: Fixture.dateUTC, blankTags: Fixture.xmpBlank,
                                           mustHaveBefore: ["GPSLatitude"]), decode: .image)
    }

    @Test func heifEXIFAndXMP() throws {
        let s = try Scratch()
        let p = try Fixture.image(s, "a.heic")
        try Fixture.exiftool(p, Fixture.gps + Fixture.date + ["-OffsetTimeOriginal=-05:00"])
        try Fixture.exiftool(p, Fixture.xmp)
        let (_, after) = try verifyRedaction(p, Expectation(kind: .heif, date: utc(2021, 3, 4, 10, 6, 7), width: 48, height: 32,
                                                            blankTags: Fixture.xmpBlank, mustHaveBefore: ["GPSLatitude", "City"]),
                                             decode: .image)
        #expect(after["XMP-dc:Title"] as? String == "Keep me")
    }

    @Test func avifEXIFAndXMP() throws {
        let s = try Scratch()
        let p = try Fixture.image(s, "a.avif")
        try Fixture.exiftool(p, Fixture.gps + Fixture.date + Fixture.xmp)
        try verifyRedaction(p, Expectation(kind: .heif, date: Fixture.dateUTC, width: 48, height: 32, blankTags: Fixture.xmpBlank,
                                           mustHaveBefore: ["GPSLatitude", "City"]), decode: .image)
    }

    @Test func gifXMP() throws {
        let s = try Scratch()
        let p = try Fixture.image(s, "a.gif")
        #expect(try scanFile(p).redaction == .plan(.empty))
        try Fixture.exiftool(p, Fixture.xmp)
        try verifyRedaction(p, Expectation(kind: .gif, date: Fixture.dateUTC, width: 48, height: 32, blankTags: Fixture.xmpBlank,
                                           mustHaveBefore: ["GPSLatitude"]), decode: .image)
    }

    // MARK: Movies

    @Test func mp4Loci() throws {
        let s = try Scratch()
        let p = try Fixture.movie(s, "a.mp4", ["-metadata", "location=+48.8566+002.3522/", "-metadata", "creation_time=2021-03-04T05:06:07Z"])
        try verifyRedaction(p, Expectation(kind: .mp4, date: Fixture.dateUTC, width: 64, height: 48, mustHaveBefore: ["GPSLatitude"]),
                            decode: .video)
    }

    @Test func movUserDataXYZ() throws {
        let s = try Scratch()
        let p = try Fixture.movie(s, "a.mov", ["-metadata", "location=+48.8566+002.3522/", "-metadata", "creation_time=2021-03-04T05:06:07Z"])
        try verifyRedaction(p, Expectation(kind: .mov, date: Fixture.dateUTC, mustHaveBefore: ["GPSCoordinates"]), decode: .video)
    }

    @Test func movKeysISO6709() throws {
        let s = try Scratch()
        let p = try Fixture.movie(s, "a.mov", ["-movflags", "use_metadata_tags",
                                               "-metadata", "com.apple.quicktime.location.ISO6709=+48.8566+002.3522+035.000/",
                                               "-metadata", "com.apple.quicktime.creationdate=2021-03-04T05:06:07+0100",
                                               "-metadata", "com.apple.quicktime.make=KeepMe"])
        let (_, after) = try verifyRedaction(p, Expectation(kind: .mov, date: utc(2021, 3, 4, 4, 6, 7), mustHaveBefore: ["GPSCoordinates"]),
                                             decode: .video)
        #expect(after["Keys:Make"] as? String == "KeepMe")
    }

    @Test func mp4KeysAndLoci() throws {
        let s = try Scratch()
        let p = try Fixture.movie(s, "a.mp4", ["-movflags", "use_metadata_tags", "-metadata", "location=+48.8566+002.3522/"])
        try verifyRedaction(p, Expectation(kind: .mp4, mustHaveBefore: ["Location"]), decode: .video)
    }

    @Test(arguments: ["mp4", "mov"])
    func moviesWrittenByExiftool(ext: String) throws {
        let s = try Scratch()
        let base = try Fixture.movie(s, "base.\(ext)", ["-metadata", "creation_time=2021-03-04T05:06:07Z"])
        for group in ["Keys", "UserData", "ItemList"] {
            let p = s.path("\(group).\(ext)")
            try FileManager.default.copyItem(atPath: base, toPath: p)
            try Fixture.exiftool(p, ["-\(group):GPSCoordinates=48.8566, 2.3522, 35"])
            try verifyRedaction(p, Expectation(kind: ext == "mp4" ? .mp4 : .mov, date: Fixture.dateUTC,
                                               mustHaveBefore: ["GPSCoordinates"]), decode: .video)
        }
        let x = s.path("xmp.\(ext)")
        try FileManager.default.copyItem(atPath: base, toPath: x)
        try Fixture.exiftool(x, ["-XMP-exif:GPSLatitude=48.8566", "-XMP-exif:GPSLongitude=2.3522", "-XMP-dc:Title=Keep me"])
        let (_, after) = try verifyRedaction(x, Expectation(kind: ext == "mp4" ? .mp4 : .mov, mustHaveBefore: ["GPSLatitude"]),
                                             decode: .video)
        #expect(after["XMP-dc:Title"] as? String == "Keep me")
    }
}

/// Builds PNG chunks by hand.
enum PNGBuilder {
    static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let t = Array(type.utf8)
        let n = UInt32(data.count)
        let crc = CRC32.checksum(t + data)
        return [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] + t + data
            + [UInt8(crc >> 24), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc & 0xFF)]
    }

    /// A zlib stream compressed by gzip (its raw deflate data between a zlib header and Adler-32).
    static func deflate(_ data: [UInt8]) throws -> [UInt8] {
        let s = try Scratch()
        let path = s.path("data")
        try writeBytes(data, path)
        let gz = [UInt8](try Tools.must("gzip", ["-n", "-9", "-c", path]).stdout)
        guard gz.count > 18, gz[0] == 0x1F, gz[1] == 0x8B, gz[3] == 0 else { throw Failure("unexpected gzip output") }
        let raw = gz[10..<(gz.count - 8)]
        return [0x78, 0xDA] + raw + adler32(data)
    }

    static func adler32(_ data: [UInt8]) -> [UInt8] {
        var a: UInt32 = 1, b: UInt32 = 0
        for x in data { a = (a + UInt32(x)) % 65_521; b = (b + a) % 65_521 }
        let adler = b << 16 | a
        return [UInt8(adler >> 24), UInt8(adler >> 16 & 0xFF), UInt8(adler >> 8 & 0xFF), UInt8(adler & 0xFF)]
    }

    /// A zlib stream made of stored (uncompressed) deflate blocks.
    static func storedZlib(_ data: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x78, 0x01]
        var i = 0
        repeat {
            let n = min(65_535, data.count - i)
            let last: UInt8 = i + n == data.count ? 1 : 0
            out += [last, UInt8(n & 0xFF), UInt8(n >> 8), UInt8(~n & 0xFF), UInt8(~n >> 8 & 0xFF)]
            out += data[i..<(i + n)]
            i += n
        } while i < data.count
        return out + adler32(data)
    }
}
