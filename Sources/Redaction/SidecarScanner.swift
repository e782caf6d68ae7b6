import Foundation

/// Location in a sidecar file (issue 37): the file a photo tool keeps beside a photo
/// (`photo.jpg.xmp`, `IMG_1.XMP`, RawTherapee's `.pp3`, DxO's `.dop`, a camera's `.THM`, Apple's
/// `.AAE`). A strip-location app reads its sidecars as it reads the photo: with every location
/// property removed, or not at all.
///
/// - an XMP packet (the file holds `x:xmpmeta` or `rdf:RDF`): `XMPScanner` blanks each location
///   property with spaces (`exif:GPSLatitude`, `GPSLongitude`, `GPSPosition`... in attribute or
///   element form), which keeps the XML well formed and the size; a packet that mentions location
///   but cannot be tokenized with confidence is blanked whole;
/// - a photo (a `.THM` is a small JPEG): the media scanners, as for any photo;
/// - anything else (a `.pp3` or `.dop` profile, an `.AAE` property list): no location format is
///   known, so a file that names a GPS or latitude/longitude field is refused (fail closed, as for
///   a photo whose metadata cannot be parsed with confidence), and one that does not is served.
public enum SidecarScanner {
    /// Whether the bytes place the photo, and how a strip-location reader gets them.
    public static func scan(_ bytes: [UInt8]) -> (hasLocation: Bool, redaction: RedactionResult) {
        if bytes.isEmpty { return (false, .plan(.empty)) }
        if sniffMediaKind(Array(bytes.prefix(64))) != nil, let m = try? MediaScanner.scan(bytes: bytes) {
            return (m.hasLocation, m.redaction)
        }
        if contains(bytes, "x:xmpmeta") || contains(bytes, "rdf:RDF") {
            let found = XMPScanner.scan(bytes)
            if let why = found.changes.refusal { return (true, .refuse(reason: why)) }
            var patches: [RedactionPlan.Patch] = []
            for (offset, length) in found.changes.zeros where length > 0 {
                patches.append(.init(offset: offset, length: UInt32(length)))
            }
            for (offset, replacement) in found.changes.replacements where !replacement.isEmpty {
                patches.append(.init(offset: offset, length: UInt32(replacement.count), replacement: replacement))
            }
            return (found.changes.sawLocation, .plan(RedactionPlan(patches: patches)))
        }
        let lower = bytes.map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }
        for word in ["gpslat", "gpslon", "gpspos", "gpscoord", "latitude", "longitude"] where contains(lower, word) {
            return (true, .refuse(reason: "a sidecar that is not XMP names a location field (\(word)); it cannot be redacted with confidence"))
        }
        return (false, .plan(.empty))
    }

    private static func contains(_ b: [UInt8], _ s: String) -> Bool {
        let needle = Array(s.utf8)
        guard b.count >= needle.count, let first = needle.first else { return false }
        var i = 0
        let last = b.count - needle.count
        while i <= last {
            if b[i] == first && b[i..<(i + needle.count)].elementsEqual(needle) { return true }
            i += 1
        }
        return false
    }
}
