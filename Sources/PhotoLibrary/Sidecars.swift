import Foundation

/// How a sidecar's name follows its photo's (issue 37): `photo.jpg.xmp` (darktable, RawTherapee's
/// `.pp3`, DxO's `.dop`: the photo's whole name and an extension) or `photo.xmp` (Lightroom,
/// a camera's `IMG_0001.THM`, Apple's `IMG_0001.AAE`: the photo's name with its extension replaced).
public enum SidecarForm: String, Sendable, Equatable, Hashable, Comparable {
    case appended, replaced

    public static func < (a: SidecarForm, b: SidecarForm) -> Bool { a.rawValue < b.rawValue }
}

/// One sidecar of an asset: its form and extension (with its dot, as the app wrote it: `.XMP`,
/// `.xmp`). An asset has at most one sidecar of each; the name each app sees follows the name it
/// sees the photo under.
public struct SidecarKey: Sendable, Equatable, Hashable, Comparable {
    public var rowID: Int64
    public var form: SidecarForm
    public var ext: String

    public init(rowID: Int64, form: SidecarForm, ext: String) {
        self.rowID = rowID
        self.form = form
        self.ext = ext
    }

    public static func < (a: SidecarKey, b: SidecarKey) -> Bool {
        (a.rowID, a.form, a.ext) < (b.rowID, b.form, b.ext)
    }

    /// The sidecar's name beside a photo named `photo`.
    public func name(besidePhoto photo: String) -> String { Sidecars.name(form: form, ext: ext, photo: photo) }
}

/// The current version of a sidecar of a visible asset, as a view carries it.
public struct ViewSidecar: Sendable, Equatable {
    public var key: SidecarKey
    /// 1, 2, 3...: each write that changed its content.
    public var version: Int
    /// The stored file's id (16 hex digits): each version has its own file, and its own inode.
    public var fileID: String
    public var size: UInt64
    /// Relative to the store.
    public var storePath: String
    public var date: Date
    public var hasLocation: Bool
    /// What a strip-location reader gets.
    public var redaction: Redaction

    public enum Redaction: Sendable, Equatable {
        /// Serialized `RedactionPlan` bytes (empty: nothing to remove).
        case plan([UInt8])
        case refuse(String)
    }

    public init(key: SidecarKey, version: Int, fileID: String, size: UInt64, storePath: String, date: Date, hasLocation: Bool,
                redaction: Redaction) {
        self.key = key
        self.version = version
        self.fileID = fileID
        self.size = size
        self.storePath = storePath
        self.date = date
        self.hasLocation = hasLocation
        self.redaction = redaction
    }
}

/// Names of sidecars and of files no library takes: the rules a mount asks at create, and the
/// library at commit.
public enum Sidecars {
    /// Sidecar extensions (compared without case): XMP metadata and edit histories (Adobe,
    /// darktable, digiKam, exiftool), RawTherapee's processing profile, DxO PhotoLab's, a camera's
    /// thumbnail of a video (a small JPEG), Apple Photos' adjustments.
    public static let extensions: Set<String> = ["xmp", "pp3", "dop", "thm", "aae"]

    /// Extensions that say a file is neither a photo, a video nor a sidecar: refused at create,
    /// where the name already says it, not at the close after the bytes were sent (compared
    /// without case). Names with other extensions (a temp name, `.part`, rsync's `.XXXXXX`) are
    /// judged by their content at the close, as before.
    public static let refusedExtensions: Set<String> = [
        "txt", "text", "md", "rtf", "pdf", "doc", "docx", "odt", "xls", "xlsx", "ods", "ppt", "pptx", "odp", "csv", "tsv",
        "json", "html", "htm", "css", "js", "log", "ini", "cfg", "conf", "yaml", "yml", "toml",
        "zip", "tar", "gz", "tgz", "bz2", "xz", "zst", "7z", "rar", "exe", "dll", "so", "sh", "bat", "py", "db", "sqlite",
        "ctg", "bin", "dat", "ind", "mpl", "bdm", "cpi",
    ]

    /// The largest sidecar a library keeps: edit histories and metadata, not media.
    public static let maxSize: UInt64 = 16 << 20

    /// Media extensions a sidecar's photo may have, in the order a replaced-extension sidecar
    /// (`IMG_1.XMP`) picks among photos that share its stem (`IMG_1.CR2` and `IMG_1.JPG`: an XMP
    /// sidecar is the raw file's); a `.THM` picks a video first (a camera's thumbnail of it).
    static let photoExtensions = ["dng", "cr2", "cr3", "nef", "arw", "orf", "rw2", "tif", "tiff", "heic", "heif", "hif",
                                  "jpg", "jpeg", "png", "webp", "gif"]
    static let videoExtensions = ["mov", "mp4", "m4v", "mkv", "webm"]

    /// The extension (with its dot) and the rest of `name` when it is a sidecar's name.
    public static func parse(_ name: String) -> (base: String, ext: String)? {
        let (stem, ext) = DisplayName.split(name)
        guard ext.count > 1, !stem.isEmpty, extensions.contains(String(ext.dropFirst()).lowercased()) else { return nil }
        return (stem, ext)
    }

    public static func isSidecarName(_ name: String) -> Bool { parse(name) != nil }

    /// The name a tool's temp file stands for, or nil: rsync's (`.IMG_1.XMP.a1B2c3` -> `IMG_1.XMP`)
    /// and exiftool's (`photo.xmp_exiftool_tmp` -> `photo.xmp`), each renamed over it once written.
    public static func tempTarget(_ name: String) -> String? {
        let exiftool = "_exiftool_tmp"
        if name.hasSuffix(exiftool), name.count > exiftool.count { return String(name.dropLast(exiftool.count)) }
        guard name.hasPrefix("."), let dot = name.lastIndex(of: "."), dot != name.startIndex else { return nil }
        let suffix = name[name.index(after: dot)...]
        guard suffix.count == 6, suffix.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else { return nil }
        let target = String(name[name.index(after: name.startIndex)..<dot])
        return target.isEmpty ? nil : target
    }

    /// Why a file may not be created under `name`, or nil: an extension that says it is not media
    /// (`notes.txt`; also rsync's temp name for it, `.notes.txt.a1B2c3`).
    public static func refusal(forNewName name: String) -> String? {
        let target = tempTarget(name) ?? name
        let ext = DisplayName.split(target).ext
        guard ext.count > 1, refusedExtensions.contains(String(ext.dropFirst()).lowercased()) else { return nil }
        return "a \(ext) file is not a photo, a video or a sidecar of one (sidecars: \(extensions.sorted().map { "." + $0 }.joined(separator: ", ")))"
    }

    public static func name(form: SidecarForm, ext: String, photo: String) -> String {
        switch form {
        case .appended: return photo + ext
        case .replaced: return DisplayName.split(photo).stem + ext
        }
    }

    /// The photo a sidecar named `name` belongs with, among names `lookup` knows (a view's, the
    /// files written in a folder): a photo named exactly the rest of the name (`photo.jpg` for
    /// `photo.jpg.xmp`), else one whose name without its extension is (`IMG_1.CR2` for
    /// `IMG_1.XMP`; among several, a raw file before a JPEG before a video, a video first for a
    /// `.THM`). `lookup` answers a row id for a name, or nil.
    public static func photo(for name: String, lookup: (String) -> Int64?) -> (rowID: Int64, form: SidecarForm, ext: String)? {
        guard let (base, ext) = parse(name) else { return nil }
        if let r = lookup(base) { return (r, .appended, ext) }
        let thm = ext.lowercased() == ".thm"
        for e in thm ? videoExtensions + photoExtensions : photoExtensions + videoExtensions {
            for candidate in [base + "." + e, base + "." + e.uppercased()] {
                if let r = lookup(candidate) { return (r, .replaced, ext) }
            }
        }
        return nil
    }

    /// Whether a photo named `photo` is the one a sidecar named `name` waits for (see `photo(for:)`).
    public static func matches(sidecar name: String, photo: String) -> (form: SidecarForm, ext: String)? {
        guard let (base, ext) = parse(name) else { return nil }
        if photo == base { return (.appended, ext) }
        let (stem, pext) = DisplayName.split(photo)
        guard stem == base, pext.count > 1 else { return nil }
        let e = String(pext.dropFirst()).lowercased()
        guard photoExtensions.contains(e) || videoExtensions.contains(e) else { return nil }
        return (.replaced, ext)
    }

    /// The names of the sidecars of a view: each sidecar named after the name its photo has in
    /// this view; a name some asset of the view has, a reserved name or one an earlier sidecar took
    /// (two photos sharing a stem, each with its `IMG_1.XMP`) leaves that sidecar unlisted there.
    /// `photoName` answers the view name of a row; `taken`, whether an asset has a name.
    public static func assignNames(_ sidecars: [SidecarKey], photoName: (Int64) -> String?, taken: (String) -> Bool) -> [SidecarKey: String] {
        var out: [SidecarKey: String] = [:]
        var used = Set<String>()
        for key in sidecars.sorted() {
            guard let photo = photoName(key.rowID) else { continue }
            let n = key.name(besidePhoto: photo)
            guard n.utf8.count <= DisplayName.maxBytes, !DisplayName.reserved.contains(n), !taken(n), used.insert(n).inserted else { continue }
            out[key] = n
        }
        return out
    }
}
