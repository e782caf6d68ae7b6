/// Display names: what a file is called in every view. Unique within the library; an app that
/// created an asset keeps seeing the name it chose (see `ViewNaming`).
public enum DisplayName {
    /// Names at the top of every mount that no asset may take.
    public static let reserved: Set<String> = ["Albums", "Shared", ".photogate", ".", ".."]
    public static let maxBytes = 255

    /// Why a name given by an app through a mount is unusable, as the errno class the mount returns.
    public enum Problem: Error, Equatable, Sendable {
        case empty, tooLong, invalidCharacter, reserved, notUTF8
    }

    /// Characters no name may hold, because they steer a terminal or a script that prints the
    /// name: C0 controls (ESC, newline, tab...), DEL, C1 controls (U+0080-U+009F, which some
    /// terminals obey like ESC sequences), and the bidirectional formatting characters that make
    /// text display in another order than it is (U+061C, U+200E/F, U+202A-U+202E, U+2066-U+2069),
    /// and the Unicode line and paragraph separators (U+2028/9), which split rows in some viewers.
    public static func isUnsafe(_ u: Unicode.Scalar) -> Bool {
        switch u.value {
        case 0x00...0x1F, 0x7F...0x9F: return true
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069, 0x2028, 0x2029: return true
        default: return false
        }
    }

    /// Whether a text holds any character of `isUnsafe`.
    public static func containsUnsafe(_ s: String) -> Bool {
        s.unicodeScalars.contains(where: isUnsafe)
    }

    /// Checks a name given through a mount (raw bytes from the kernel).
    public static func validate(_ bytes: [UInt8]) -> Result<String, Problem> {
        if bytes.isEmpty { return .failure(.empty) }
        if bytes.count > maxBytes { return .failure(.tooLong) }
        if bytes.contains(0) || bytes.contains(UInt8(ascii: "/")) { return .failure(.invalidCharacter) }
        guard let s = String(validating: bytes, as: UTF8.self) else { return .failure(.notUTF8) }
        if containsUnsafe(s) { return .failure(.invalidCharacter) }
        if reserved.contains(s) { return .failure(.reserved) }
        return .success(s)
    }

    /// Turns a file name from disk (any bytes) into a usable display name: valid UTF-8, no '/',
    /// no control or bidirectional formatting characters (`isUnsafe`: each becomes '_'), not
    /// reserved, at most 255 bytes.
    public static func sanitize(_ bytes: [UInt8]) -> String {
        var s = String(decoding: bytes, as: UTF8.self)   // invalid sequences become U+FFFD
        s = String(s.unicodeScalars.map { ($0 == "/" || isUnsafe($0)) ? "_" : Character($0) })
        if s.isEmpty || s == "." || s == ".." { s = "untitled" }
        if reserved.contains(s) { s = "_" + s }
        if s.utf8.count <= maxBytes { return s }
        let (stem, ext) = split(s)   // keep the extension when shortening
        return truncate(stem, to: maxBytes - ext.utf8.count) + ext
    }

    /// Splits "IMG_0001.jpg" into ("IMG_0001", ".jpg"). A leading dot is part of the stem.
    public static func split(_ name: String) -> (stem: String, ext: String) {
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return (name, "") }
        let ext = String(name[dot...])
        if ext.utf8.count > 16 { return (name, "") }
        return (String(name[..<dot]), ext)
    }

    /// The name a HEIF photo has in a view that shows it as a JPEG (the `compatible` option): its
    /// stem and `.jpg`, "IMG_0001.HEIC" -> "IMG_0001.jpg", still within 255 bytes.
    public static func compatibleName(_ name: String) -> String {
        let (stem, _) = split(name)
        return truncate(stem, to: maxBytes - 4) + ".jpg"
    }

    /// The n-th alternative of a name: "IMG_0001.jpg" -> "IMG_0001-2.jpg". Deterministic, and
    /// still within 255 bytes.
    public static func alternative(_ name: String, _ n: Int) -> String {
        precondition(n >= 1)
        let (stem, ext) = split(name)
        let suffix = "-\(n)"
        let room = maxBytes - suffix.utf8.count - ext.utf8.count
        return truncate(stem, to: max(room, 1)) + suffix + ext
    }

    /// The first of `name`, `name-1`, `name-2`, ... that `isTaken` refuses.
    public static func unique(_ name: String, isTaken: (String) -> Bool) -> String {
        if !isTaken(name) { return name }
        var n = 1
        while true {
            let candidate = alternative(name, n)
            if !isTaken(candidate) { return candidate }
            n += 1
        }
    }

    static func truncate(_ s: String, to maxBytes: Int) -> String {
        if s.utf8.count <= maxBytes { return s }
        var out = ""
        var used = 0
        for ch in s {
            let n = ch.utf8.count
            if used + n > maxBytes { break }
            out.append(ch)
            used += n
        }
        return out
    }
}
