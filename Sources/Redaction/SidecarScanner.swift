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
        if sniffMediaKind(Array(bytes.prefix(64))) != nil {
            if let m = try? MediaScanner.scan(bytes: bytes) { return (m.hasLocation, m.redaction) }
            // Media whose metadata cannot be read with confidence (a JPEG cut short): refused as
            // such a photo is, never searched as text (binary EXIF names no field in words).
            return (false, .refuse(reason: "a sidecar holding media whose metadata cannot be parsed with confidence"))
        }
        // Text only, in UTF-8: a NUL byte (UTF-16, UTF-32, binary) cannot be searched or blanked
        // with confidence (a UTF-16 XMP was served with its GPS).
        if bytes.contains(0) || bytes.starts(with: [0xFE, 0xFF]) || bytes.starts(with: [0xFF, 0xFE]) {
            return (false, .refuse(reason: "a sidecar that is not UTF-8 text cannot be redacted with confidence"))
        }
        var plan = RedactionPlan.empty
        var sawLocation = false
        let lower = bytes.map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }
        if contains(lower, "xmpmeta") || contains(lower, "rdf:") || contains(lower, ":rdf") {
            let found = XMPScanner.scan(bytes)
            if let why = found.changes.refusal { return (true, .refuse(reason: why)) }
            var patches: [RedactionPlan.Patch] = []
            for (offset, length) in found.changes.zeros where length > 0 {
                patches.append(.init(offset: offset, length: UInt32(length)))
            }
            for (offset, replacement) in found.changes.replacements where !replacement.isEmpty {
                patches.append(.init(offset: offset, length: UInt32(replacement.count), replacement: replacement))
            }
            plan = RedactionPlan(patches: patches)
            sawLocation = found.changes.sawLocation
        }
        // What is left once the plan is applied must name no place at all: the XMP scanner knows
        // the standard properties, and a sidecar may hold others (xmpDM:shotLocation, mediapro,
        // Darwin Core, a property list's lat/lng, a profile's Lat=). Any word of a place left is a
        // refusal (fail closed, as for a photo that cannot be parsed with confidence).
        var shown = bytes
        shown.withUnsafeMutableBytes { plan.apply(to: $0, fileOffset: 0) }
        if let word = placeWord(in: shown) {
            return (true, .refuse(reason: "the sidecar names a place (\(word)) that cannot be removed with confidence"))
        }
        return (sawLocation, .plan(plan))
    }

    /// Words of a place: tokens (letters and digits) compared without case; any token that
    /// starts with "gps" counts.
    static let placeWords: Set<String> = [
        "lat", "lon", "lng", "long", "latitude", "longitude", "altitude", "latlong", "latlng", "coordinates", "coords",
        "location", "locations", "locationcreated", "locationshown", "shotlocation", "sublocation", "locality", "city",
        "country", "countrycode", "countryname", "province", "provincestate", "state", "address", "geo", "geolocation",
        "geotag", "placename", "position", "worldregion", "postalcode", "street",
    ]

    /// The first word of a place in the text (zero bytes are blanks), or nil.
    static func placeWord(in bytes: [UInt8]) -> String? {
        var token: [UInt8] = []
        func check() -> String? {
            defer { token.removeAll(keepingCapacity: true) }
            guard !token.isEmpty else { return nil }
            let t = String(decoding: token, as: UTF8.self)
            if t.hasPrefix("gps") || placeWords.contains(t) { return t }
            return nil
        }
        for b in bytes {
            let c = b >= 65 && b <= 90 ? b + 32 : b
            if (c >= 97 && c <= 122) || (c >= 48 && c <= 57) {
                token.append(c)
            } else if let w = check() {
                return w
            }
        }
        return check()
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
