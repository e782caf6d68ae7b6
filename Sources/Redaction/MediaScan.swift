import Foundation

/// What redaction of a file's location amounts to.
public enum RedactionResult: Sendable, Equatable {
    /// Serve these patches over the original bytes.
    case plan(RedactionPlan)
    /// Fail closed: some metadata structure could not be parsed with confidence, so the file
    /// cannot be served with its location removed.
    case refuse(reason: String)
}

/// What an import needs to know about a media file.
public struct MediaScan: Sendable, Equatable {
    public var kind: MediaKind
    /// EXIF DateTimeOriginal (else CreateDate, else DateTime), a local time read as UTC unless an
    /// EXIF offset tag gives the zone; else an XMP date. Movies: Apple's
    /// `com.apple.quicktime.creationdate` when present, else `mvhd` creation_time.
    public var captureDate: Date?
    /// Location data that the plan removes was seen (true also when refused but GPS was seen).
    public var hasLocation: Bool
    public var redaction: RedactionResult
    /// Best effort.
    public var pixelWidth: Int?
    public var pixelHeight: Int?

    public init(kind: MediaKind, captureDate: Date? = nil, hasLocation: Bool = false,
                redaction: RedactionResult = .plan(.empty), pixelWidth: Int? = nil, pixelHeight: Int? = nil) {
        self.kind = kind
        self.captureDate = captureDate
        self.hasLocation = hasLocation
        self.redaction = redaction
        self.pixelWidth = pixelWidth
        self.pixelHeight = pixelHeight
    }
}

public enum ScanError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The content is none of the supported kinds.
    case notMedia
    /// The container ends before its structure does.
    case truncated(String)
    /// The container structure is invalid.
    case malformed(String)
    /// Reading failed with this errno.
    case io(Int32)

    public var description: String {
        switch self {
        case .notMedia: return "not a supported photo or video file"
        case .truncated(let why): return "truncated file: \(why)"
        case .malformed(let why): return "malformed file: \(why)"
        case .io(let code): return "read error: \(String(cString: strerror(code))) (errno \(code))"
        }
    }
}

/// Media sniffing, import metadata and byte-exact location finders.
///
/// The scanners are written by hand on purpose: general EXIF/XMP/ISO-BMFF readers return values,
/// not the exact byte ranges that hold them, and redaction must zero those bytes in place (keeping
/// the file's size and every offset). Each scanner walks its container with explicit bounds, caps
/// reads and counts (`Limits`), and detects offset loops, so any input costs bounded memory and time.
public enum MediaScanner {
    /// The version of what the scanners find. Plans stored by an older version are recomputed
    /// before they are used: 1 had EXIF/XMP/box locations; 2 added data after a JPEG's end of
    /// image (Motion Photo movies, trailers, MPF images) and timed metadata tracks; 3 camera raw
    /// files (DNG, CR2, NEF, ARW, ORF, RW2, CR3), Matroska/WebM tags, and refuses incomplete files.
    public static let version = 3

    /// Scan by reading with `pread` from `fd` (file size `size`).
    public static func scan(fd: Int32, size: UInt64) throws(ScanError) -> MediaScan {
        try scan(ByteSource(fd: fd, size: size))
    }

    public static func scan(bytes: [UInt8]) throws(ScanError) -> MediaScan {
        try scan(ByteSource(bytes: bytes))
    }

    /// `forcing` skips the sniff and runs that kind's scanner whatever the content (for fuzzing).
    static func scan(_ source: ByteSource, forcing: MediaKind? = nil) throws(ScanError) -> MediaScan {
        let header = try source.readAvailable(0, 64)
        guard let kind = forcing ?? sniffMediaKind(header) else { throw .notMedia }
        var findings = Findings(source: source)
        switch kind {
        case .jpeg: try JPEGScanner.scan(&findings)
        case .png: try PNGScanner.scan(&findings)
        case .gif: try GIFScanner.scan(&findings)
        case .webp: try WebPScanner.scan(&findings)
        case .tiff, .dng, .cr2, .nef, .arw, .orf, .rw2: try TIFFFileScanner.scan(&findings, sniffed: kind)
        case .heif, .cr3: try ISOBMFFScanner.scan(&findings, kind: kind)
        case .mp4, .mov: try ISOBMFFScanner.scan(&findings, kind: kind)
        case .mkv, .webm: try MatroskaScanner.scan(&findings, sniffed: kind)
        }
        return findings.result(kind: findings.kind ?? kind)
    }
}

/// What the scanners of one file found so far.
struct Findings {
    let source: ByteSource
    private(set) var patches: [RedactionPlan.Patch] = []
    var hasLocation = false
    private(set) var refusal: String?
    var dates = DateCandidates()
    var width: Int?
    var height: Int?
    /// The kind the content turned out to be when the sniff could not tell (a TIFF that is a DNG...).
    var kind: MediaKind?

    init(source: ByteSource) { self.source = source }

    mutating func zero(_ offset: UInt64, _ length: UInt64) {
        var start = offset
        var left = min(length, source.size > offset ? source.size - offset : 0)
        while left > 0 {
            let n = min(left, UInt64(UInt32.max))
            patches.append(.init(offset: start, length: UInt32(n)))
            start += n
            left -= n
        }
    }

    mutating func replace(_ offset: UInt64, _ bytes: [UInt8]) {
        guard !bytes.isEmpty, offset < source.size, UInt64(bytes.count) <= source.size - offset else { return }
        patches.append(.init(offset: offset, length: UInt32(bytes.count), replacement: bytes))
    }

    /// Apply logical changes (relative to a block) through its extent map.
    mutating func apply(_ changes: BlockChanges, through map: ExtentMap) {
        for (offset, length) in changes.zeros {
            for (file, n) in map.fileRanges(offset, length) { zero(file, n) }
        }
        for (offset, bytes) in changes.replacements {
            var consumed = 0
            for (file, n) in map.fileRanges(offset, UInt64(bytes.count)) {
                replace(file, Array(bytes[consumed..<(consumed + Int(n))]))
                consumed += Int(n)
            }
        }
        if changes.sawLocation { hasLocation = true }
        if let reason = changes.refusal { refuse(reason) }
    }

    /// Fail closed; the first reason is kept.
    mutating func refuse(_ reason: String) {
        if refusal == nil { refusal = reason }
    }

    mutating func setSize(_ w: Int?, _ h: Int?) {
        guard width == nil, let w, let h, w > 0, h > 0 else { return }
        width = w
        height = h
    }

    func result(kind: MediaKind) -> MediaScan {
        let redaction: RedactionResult
        if let refusal {
            redaction = .refuse(reason: refusal)
        } else {
            redaction = .plan(RedactionPlan(patches: patches))
        }
        return MediaScan(kind: kind, captureDate: dates.best(video: kind.isVideo), hasLocation: hasLocation,
                         redaction: redaction, pixelWidth: width, pixelHeight: height)
    }
}

/// Changes inside one metadata block, in the block's own coordinates.
struct BlockChanges {
    var zeros: [(UInt64, UInt64)] = []
    var replacements: [(UInt64, [UInt8])] = []
    var sawLocation = false
    var refusal: String?

    var isEmpty: Bool { zeros.isEmpty && replacements.isEmpty }

    mutating func zero(_ offset: UInt64, _ length: UInt64) {
        if length > 0 { zeros.append((offset, length)) }
    }

    mutating func refuse(_ reason: String) {
        if refusal == nil { refusal = reason }
    }

    mutating func merge(_ other: BlockChanges, at base: UInt64) {
        zeros += other.zeros.map { ($0.0 + base, $0.1) }
        replacements += other.replacements.map { ($0.0 + base, $0.1) }
        if other.sawLocation { sawLocation = true }
        if let r = other.refusal { refuse(r) }
    }

    /// `bytes` (the block) with the changes applied.
    func applied(to bytes: [UInt8]) -> [UInt8] {
        var out = bytes
        for (offset, r) in replacements where offset < UInt64(out.count) {
            for (k, b) in r.enumerated() where Int(offset) + k < out.count { out[Int(offset) + k] = b }
        }
        // Zeros win over replacements, as in RedactionPlan.
        for (offset, length) in zeros where offset < UInt64(out.count) {
            let end = Int(min(UInt64(out.count), offset + length))
            for i in Int(offset)..<end { out[i] = 0 }
        }
        return out
    }
}
