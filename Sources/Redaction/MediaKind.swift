/// The media formats photogate imports and serves.
public enum MediaKind: String, Sendable, Codable, CaseIterable {
    case jpeg, heif, png, gif, webp, tiff, mp4, mov
    /// Matroska and WebM movies.
    case mkv, webm
    /// Camera raw photos: Adobe DNG and the TIFF-based Canon CR2, Nikon NEF, Sony ARW, Olympus
    /// ORF, Panasonic RW2; Canon CR3 (ISO-BMFF, brand `crx `).
    case dng, cr2, nef, arw, orf, rw2, cr3
}

extension MediaKind {
    /// Movies (`mp4`, `mov`, `mkv`, `webm`); everything else is a still image.
    public var isVideo: Bool {
        switch self {
        case .mp4, .mov, .mkv, .webm: return true
        default: return false
        }
    }

    /// The file name extension photogate gives an asset of this kind, without the dot.
    public var preferredExtension: String {
        switch self {
        case .jpeg: return "jpg"
        case .heif: return "heic"
        case .png: return "png"
        case .gif: return "gif"
        case .webp: return "webp"
        case .tiff: return "tif"
        case .mp4: return "mp4"
        case .mov: return "mov"
        case .mkv: return "mkv"
        case .webm: return "webm"
        case .dng: return "dng"
        case .cr2: return "cr2"
        case .nef: return "nef"
        case .arw: return "arw"
        case .orf: return "orf"
        case .rw2: return "rw2"
        case .cr3: return "cr3"
        }
    }

    public var mimeType: String {
        switch self {
        case .jpeg: return "image/jpeg"
        case .heif: return "image/heic"
        case .png: return "image/png"
        case .gif: return "image/gif"
        case .webp: return "image/webp"
        case .tiff: return "image/tiff"
        case .mp4: return "video/mp4"
        case .mov: return "video/quicktime"
        case .mkv: return "video/x-matroska"
        case .webm: return "video/webm"
        case .dng: return "image/x-adobe-dng"
        case .cr2: return "image/x-canon-cr2"
        case .nef: return "image/x-nikon-nef"
        case .arw: return "image/x-sony-arw"
        case .orf: return "image/x-olympus-orf"
        case .rw2: return "image/x-panasonic-rw2"
        case .cr3: return "image/x-canon-cr3"
        }
    }
}

/// From the first bytes (64 are enough; fewer never crash) decide the kind by content, never by name.
///
/// - `heif`: an ISO-BMFF `ftyp` whose major (or else a compatible) brand is a HEIF/MIAF/AVIF brand.
/// - `mp4`: `ftyp` with an ISO/MP4/3GPP video brand (`isom`, `iso2`…`iso9`, `mp41`, `mp42`, `avc1`, `M4V `, `dash`…).
/// - `mov`: `ftyp` with brand `qt  `, or a file that starts with a `moov`/`mdat`/`wide`/`free`/`skip`/`pnot` atom.
/// - `cr3`: `ftyp` with major brand `crx ` (Canon).
/// - `mkv`/`webm`: an EBML header whose DocType (in the first bytes) is `matroska` / `webm`.
/// - `cr2` (`II*\0` with `CR` at 8), `orf` (`IIRO`, `IIRS`, `MMOR`), `rw2` (`IIU\0`); other TIFF
///   raws (DNG, NEF, ARW) sniff as `tiff` and the TIFF scanner names them from their tags.
public func sniffMediaKind(_ header: [UInt8]) -> MediaKind? {
    let n = header.count
    func has(_ prefix: [UInt8], at offset: Int = 0) -> Bool {
        guard offset >= 0, n >= offset + prefix.count else { return false }
        for i in 0..<prefix.count where header[offset + i] != prefix[i] { return false }
        return true
    }
    if has([0xFF, 0xD8, 0xFF]) { return .jpeg }
    if has([0x49, 0x49, 0x2A, 0x00]) && has([0x43, 0x52], at: 8) { return .cr2 }
    if has([0x49, 0x49, 0x52, 0x4F]) || has([0x49, 0x49, 0x52, 0x53]) || has([0x4D, 0x4D, 0x4F, 0x52]) { return .orf }
    if has([0x49, 0x49, 0x55, 0x00]) { return .rw2 }
    if has([0x1A, 0x45, 0xDF, 0xA3]) {
        // EBML: the DocType string sits in the header, a few bytes in.
        if header.firstIndex(of: Array("webm".utf8)) != nil { return .webm }
        if header.firstIndex(of: Array("matroska".utf8)) != nil { return .mkv }
        return nil
    }
    if has([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
    if has(Array("GIF87a".utf8)) || has(Array("GIF89a".utf8)) { return .gif }
    if has(Array("RIFF".utf8)) && has(Array("WEBP".utf8), at: 8) { return .webp }
    // Classic TIFF and BigTIFF, both byte orders (BigTIFF is sniffed, then refused by the scanner).
    if has([0x49, 0x49, 0x2A, 0x00]) || has([0x4D, 0x4D, 0x00, 0x2A])
        || has([0x49, 0x49, 0x2B, 0x00]) || has([0x4D, 0x4D, 0x00, 0x2B]) { return .tiff }
    guard n >= 8 else { return nil }
    let size = UInt32(header[0]) << 24 | UInt32(header[1]) << 16 | UInt32(header[2]) << 8 | UInt32(header[3])
    let type = FourCC(header[4], header[5], header[6], header[7])
    if type == FourCC("ftyp") {
        guard n >= 12, size >= 16 || size == 0 || size == 1 else { return nil }
        var brands = [FourCC(header[8], header[9], header[10], header[11])]
        // Compatible brands follow the minor version (offset 16), up to the box end or the bytes we have.
        let end = size >= 16 ? min(Int(size), n) : n
        var i = 16
        while i + 4 <= end {
            brands.append(FourCC(header[i], header[i + 1], header[i + 2], header[i + 3]))
            i += 4
        }
        // Audio-only brands: not a photo or a video, whatever they are compatible with.
        if ["M4A ", "M4B ", "M4P ", "F4A ", "F4B "].contains(brands[0].string) { return nil }
        if brands[0] == FourCC("crx ") { return .cr3 }
        for brand in brands {
            if let kind = brandKind(brand) { return kind }
        }
        return nil
    }
    // A QuickTime movie without `ftyp` starts with one of these atoms.
    let leadingAtoms: Set<FourCC> = [FourCC("moov"), FourCC("mdat"), FourCC("wide"), FourCC("free"),
                                     FourCC("skip"), FourCC("pnot")]
    if leadingAtoms.contains(type), size == 0 || size == 1 || size >= 8 { return .mov }
    return nil
}

private func brandKind(_ brand: FourCC) -> MediaKind? {
    switch brand.string {
    case "heic", "heix", "hevc", "hevx", "heim", "heis", "hevm", "hevs", "mif1", "msf1", "miaf", "avif", "avis":
        return .heif
    case "qt  ":
        return .mov
    case "isom", "iso2", "iso3", "iso4", "iso5", "iso6", "iso7", "iso8", "iso9", "mp41", "mp42", "mp71",
         "avc1", "M4V ", "M4VH", "M4VP", "dash", "f4v ", "3gp4", "3gp5", "3gp6", "3gp7", "3ge6", "3ge7",
         "3gg6", "3g2a", "3g2b", "3g2c", "mmp4", "MSNV", "NDAS", "XAVC", "hvc1", "av01":
        return .mp4
    default:
        return nil
    }
}

/// A four-character code (box, chunk or brand type), big-endian.
struct FourCC: Hashable, Sendable, CustomStringConvertible {
    let value: UInt32
    init(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) {
        value = UInt32(a) << 24 | UInt32(b) << 16 | UInt32(c) << 8 | UInt32(d)
    }
    init(_ value: UInt32) { self.value = value }
    init(_ s: StaticString) {
        precondition(s.utf8CodeUnitCount == 4)
        let p = s.utf8Start
        self.init(p[0], p[1], p[2], p[3])
    }
    var bytes: [UInt8] { [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
    var string: String { String(decoding: bytes.map { $0 < 0x20 || $0 > 0x7E ? UInt8(ascii: "?") : $0 }, as: UTF8.self) }
    var description: String { string }
}
