import Foundation
import Testing
import TestSupport
@testable import Redaction

@Suite("XMP scanner")
struct XMPTests {
    /// The packet with the scanner's changes applied, as text.
    func blanked(_ xml: String) -> (String, XMPScanner.Result) {
        let bytes = Array(xml.utf8)
        let result = XMPScanner.scan(bytes)
        return (String(decoding: result.changes.applied(to: bytes), as: UTF8.self), result)
    }

    @Test func attributeAndElementForms() {
        let xml = """
            <x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">
            <rdf:Description xmlns:e="http://ns.adobe.com/exif/1.0/" e:GPSLatitude="48,51N" e:ExposureTime="1/50">
            <e:GPSLongitude>2,21E</e:GPSLongitude><e:GPSTimeStamp/>
            <Iptc4xmpExt:LocationShown xmlns:Iptc4xmpExt="http://iptc.org/std/Iptc4xmpExt/2008-02-29/">
             <rdf:Bag><rdf:li><Iptc4xmpExt:City>Paris</Iptc4xmpExt:City></rdf:li></rdf:Bag>
            </Iptc4xmpExt:LocationShown>
            <photoshop:State xmlns:photoshop="http://ns.adobe.com/photoshop/1.0/">IDF</photoshop:State>
            <e:DateTimeOriginal>2021-03-04T05:06:07+02:00</e:DateTimeOriginal>
            </rdf:Description></rdf:RDF></x:xmpmeta>
            """
        let (out, result) = blanked(xml)
        #expect(result.changes.sawLocation)
        for gone in ["GPSLatitude", "48,51N", "GPSLongitude", "2,21E", "GPSTimeStamp", "LocationShown", "Paris", "State", "IDF"] {
            #expect(!out.contains(gone), "\(gone) still there")
        }
        #expect(out.contains(#"e:ExposureTime="1/50""#))
        #expect(out.utf8.count == xml.utf8.count)
        #expect(result.dates.xmpOriginal == "2021-03-04T05:06:07+02:00")
        // The result still tokenizes: blanking keeps the XML well formed.
        #expect(XMPScanner.scan(Array(out.utf8)).changes.isEmpty)
    }

    @Test func unknownPrefixesFallBackToConventionalOnes() {
        let (out, result) = blanked(#"<rdf:Description exif:GPSAltitude="35/1" photoshop:City="Paris" xmp:CreateDate="2020-01-02"/>"#)
        #expect(result.changes.sawLocation)
        #expect(!out.contains("35/1") && !out.contains("Paris"))
        #expect(result.dates.xmpCreated == "2020-01-02")
    }

    @Test func unparseablePacketWithLocationIsBlankedWhole() {
        for xml in [#"<a exif:GPSLatitude="1"#, "<a><b>GPS</a>", #"<!DOCTYPE x [<!ENTITY e "GPS">]><a>&e;</a>"#, "<a><exif:GPSLatitude>1"] {
            let (out, result) = blanked(xml)
            #expect(result.changes.sawLocation, "\(xml)")
            #expect(out.allSatisfy { $0 == " " }, "\(xml)")
        }
        // No location words: left alone even if broken.
        let (out, result) = blanked("<a><b>hello</a>")
        #expect(out == "<a><b>hello</a>")
        #expect(!result.changes.sawLocation)
    }

    @Test func utf16PacketWithLocationIsBlankedWhole() {
        let xml = #"<rdf:Description exif:GPSLatitude="1"/>"#
        var bytes: [UInt8] = [0xFF, 0xFE]
        for u in xml.utf16 { bytes += [UInt8(u & 0xFF), UInt8(u >> 8)] }
        let result = XMPScanner.scan(bytes)
        #expect(result.changes.sawLocation)
        #expect(result.changes.applied(to: bytes).allSatisfy { $0 == 0x20 })
    }

    @Test func commentsCDATAAndProcessingInstructionsAreSkipped() {
        let xml = #"<?xpacket begin="GPS"?><a><!-- exif:GPSLatitude="1" --><b><![CDATA[ <exif:GPSLatitude> ]]></b></a>"#
        let (out, result) = blanked(xml)
        #expect(out == xml)
        #expect(!result.changes.sawLocation)
    }
}

/// Issue 37: a sidecar read by a strip-location app (SidecarScanner).
@Suite("Sidecar scanner")
struct SidecarScannerTests {
    func applied(_ bytes: [UInt8], _ r: RedactionResult) -> [UInt8] {
        guard case .plan(let p) = r else { return [] }
        var out = bytes
        out.withUnsafeMutableBytes { p.apply(to: $0, fileOffset: 0) }
        return out
    }

    @Test func anXMPSidecarLosesItsLocationAndStaysXMP() {
        let xml = Array("""
            <?xpacket begin='' id='W5M0MpCehiHzreSzNTczkc9d'?>
            <x:xmpmeta xmlns:x='adobe:ns:meta/'><rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'>
            <rdf:Description xmlns:exif='http://ns.adobe.com/exif/1.0/' exif:GPSLatitude='43,17.79N' exif:GPSLongitude='5,22.188E'>
            <exif:GPSPosition>43.2965 5.3698</exif:GPSPosition><exif:ExposureTime>1/50</exif:ExposureTime>
            </rdf:Description></rdf:RDF></x:xmpmeta>
            <?xpacket end='w'?>
            """.utf8)
        let (has, r) = SidecarScanner.scan(xml)
        #expect(has)
        let out = String(decoding: applied(xml, r), as: UTF8.self)
        for gone in ["GPSLatitude", "43,17", "GPSLongitude", "GPSPosition", "5.3698"] { #expect(!out.contains(gone), "\(gone)") }
        #expect(out.contains("ExposureTime") && out.utf8.count == xml.count)
        #expect(XMPScanner.scan(Array(out.utf8)).changes.isEmpty)
    }

    /// What a red team read through a strip-location view (issue 37): each is refused now.
    @Test func sidecarsThatCouldCarryAPlaceUnseenAreRefused() throws {
        func refused(_ b: [UInt8], _ what: String) {
            if case .refuse = SidecarScanner.scan(b).redaction {} else { Issue.record("\(what) was served") }
        }
        // A JPEG with GPS cut short (no end marker: its metadata cannot be parsed with
        // confidence): refused as such a photo is, never searched as text.
        let jpeg = try TestMedia.jpeg(tag: "thm", gps: true)
        for bytes in [jpeg, Array(jpeg.dropLast(2))] {
            if case .plan(let p) = SidecarScanner.scan(bytes).redaction { #expect(!p.isEmpty, "a JPEG's GPS is not zeroed") }
        }
        // A JPEG whose first segment runs past the end: the scanner throws, and the bytes were
        // then searched as text (binary EXIF names no field in words) and served as they are.
        let broken: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE1, 0xFF, 0xF0] + Array("Exif".utf8) + [0, 0] + [UInt8](repeating: 0x4D, count: 200)
        refused(broken, "a JPEG whose metadata cannot be parsed, under a sidecar name")
        // UTF-16 XMP, with or without a byte-order mark.
        let xmp = "<x:xmpmeta xmlns:x='adobe:ns:meta/'><rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'><rdf:Description xmlns:exif='http://ns.adobe.com/exif/1.0/' exif:GPSLatitude='48,51.5N'/></rdf:RDF></x:xmpmeta>"
        refused([0xFF, 0xFE] + xmp.utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }, "UTF-16 XMP")
        refused(xmp.utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }, "UTF-16 XMP without a BOM")
        // Places the XMP scanner does not know, and prefixes it does not expect.
        let otherPrefix = Array("<R:RDF xmlns:R='http://www.w3.org/1999/02/22-rdf-syntax-ns#'><R:Description xmlns:photoshop='http://ns.adobe.com/photoshop/1.0/' photoshop:City='Paris' photoshop:city='Lyon'/></R:RDF>".utf8)
        let shown = String(decoding: applied(otherPrefix, SidecarScanner.scan(otherPrefix).redaction), as: UTF8.self)
        #expect(!shown.contains("Paris") && !shown.contains("Lyon"), "a city under another rdf prefix was served: \(shown)")
        refused(Array("<x:xmpmeta xmlns:x='adobe:ns:meta/'><rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'><rdf:Description xmlns:xmpDM='http://ns.adobe.com/xmp/1.0/DynamicMedia/' xmpDM:shotLocation='Eiffel Tower'/></rdf:RDF></x:xmpmeta>".utf8), "xmpDM:shotLocation")
        refused(Array("<x:xmpmeta><rdf:RDF><rdf:Description xmlns:dwc='http://rs.tdwg.org/dwc/terms/' dwc:locality='Paris'/></rdf:RDF></x:xmpmeta>".utf8), "dwc:locality")
        refused(Array("<plist><dict><key>lat</key><real>48.85</real><key>lng</key><real>2.29</real></dict></plist>".utf8), "a property list's lat/lng")
        refused(Array("[Location]\nLat=48.85\nLon=2.29\n".utf8), "a profile's Lat=/Lon=")
    }

    /// Namespace declarations are looked up by a walk of a list: a packet of thousands cost
    /// minutes of a daemon's CPU at a close. Past 256 the packet is not tokenized (blanked whole
    /// when it names a place, like any packet that cannot be parsed with confidence).
    @Test func aPacketOfThousandsOfNamespacesIsNotTokenized() {
        var x = "<x:xmpmeta xmlns:x='adobe:ns:meta/'><rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'><rdf:Description"
        for i in 0..<300 { x += " xmlns:n\(i)='u\(i)'" }
        x += " xmlns:exif='http://ns.adobe.com/exif/1.0/' exif:GPSLatitude='48,51.5N'>"
        for i in 0..<300 { x += "<n\(i):a/>" }
        x += "</rdf:Description></rdf:RDF></x:xmpmeta>"
        let (_, r) = SidecarScanner.scan(Array(x.utf8))
        let out = String(decoding: applied(Array(x.utf8), r), as: UTF8.self)
        #expect(!out.contains("48,51"), "the location of a packet with 300 namespaces was served")
        // Not tokenized: blanked whole (a tokenized packet keeps its other elements).
        #expect(!out.contains("<n299:a/>"), "a packet of 300 namespace declarations was tokenized")
    }

    @Test func otherSidecarsAreServedOrRefused() {
        let pp3 = Array("[Version]\nAppVersion=5.9\n[Exposure]\nCompensation=0\n".utf8)
        #expect(SidecarScanner.scan(pp3) == (false, .plan(.empty)))
        let located = Array("[Exif]\nExif.GPSInfo.GPSLatitude=43/1\n".utf8)
        let (has, r) = SidecarScanner.scan(located)
        #expect(has)
        if case .refuse = r {} else { Issue.record("a non-XMP sidecar naming a GPS field was not refused: \(r)") }
    }
}
