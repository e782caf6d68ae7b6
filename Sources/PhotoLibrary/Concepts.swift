import Foundation

/// An app id: reverse-DNS, like `org.example.Editor`.
public struct AppID: Hashable, Comparable, Sendable, CustomStringConvertible, Codable {
    public let rawValue: String

    public static let rule =
        "an app id is reverse-DNS: 2 to 16 parts separated by '.', each part made of ASCII letters, digits, '-' or '_' and starting with a letter, at most 128 characters in all (for example org.example.Editor)"
    public static let maxLength = 128

    public init?(_ raw: String) {
        guard AppID.isValid(raw) else { return nil }
        rawValue = raw
    }

    public static func isValid(_ raw: String) -> Bool {
        let bytes = Array(raw.utf8)
        guard !bytes.isEmpty, bytes.count <= maxLength else { return false }
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count >= 2, parts.count <= 16 else { return false }
        for part in parts {
            guard let first = part.first, isLetter(first) else { return false }
            for b in part where !(isLetter(b) || isDigit(b) || b == UInt8(ascii: "-") || b == UInt8(ascii: "_")) {
                return false
            }
        }
        return true
    }

    private static func isLetter(_ b: UInt8) -> Bool { (b | 0x20) >= 0x61 && (b | 0x20) <= 0x7a }
    private static func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }

    public var description: String { rawValue }
    public static func < (a: AppID, b: AppID) -> Bool { a.rawValue < b.rawValue }
}

/// PhotoKit's `PHAccessLevel`.
public enum AccessLevel: String, CaseIterable, Sendable, Codable {
    case readWrite = "read-write"
    case addOnly = "add-only"
}

/// PhotoKit's `PHAuthorizationStatus`, per app and access level.
public enum AuthorizationStatus: String, CaseIterable, Sendable, Codable {
    case notDetermined = "not-determined"
    case restricted
    case denied
    case authorized
    case limited

    /// `limited` only exists for read-write access, as in PhotoKit.
    public func isValid(for access: AccessLevel) -> Bool {
        self != .limited || access == .readWrite
    }
}

/// Per-app options (the picker's Options menu and PhotoKit's prevent-automatic-alert key),
/// `editAny`: the app may edit every asset it can see without asking (a trusted editor), and
/// `compatible`: the app reads HEIC/HEIF photos as JPEG (PhotoKit's `.compatible`
/// representation, iOS's "Transfer to Mac or PC: Automatic"), for apps that cannot decode HEIC.
public struct AppOptions: Equatable, Sendable, Codable {
    public var stripLocation: Bool
    public var preventPrompt: Bool
    public var editAny: Bool
    public var compatible: Bool
    public init(stripLocation: Bool = false, preventPrompt: Bool = false, editAny: Bool = false, compatible: Bool = false) {
        self.stripLocation = stripLocation
        self.preventPrompt = preventPrompt
        self.editAny = editAny
        self.compatible = compatible
    }

    enum CodingKeys: String, CodingKey { case stripLocation, preventPrompt, editAny, compatible }

    /// Options written before `editAny` or `compatible` existed decode with them off.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        stripLocation = try c.decode(Bool.self, forKey: .stripLocation)
        preventPrompt = try c.decode(Bool.self, forKey: .preventPrompt)
        editAny = try c.decodeIfPresent(Bool.self, forKey: .editAny) ?? false
        compatible = try c.decodeIfPresent(Bool.self, forKey: .compatible) ?? false
    }
}

/// The kind of request an app can make of the person.
public enum RequestKind: String, CaseIterable, Sendable, Codable {
    case readWrite = "read-write"
    case addOnly = "add-only"
    case picker
    /// The app opened a visible asset for writing without the person's consent to edit it: the
    /// request names the asset, and `photogate grant APP --edit ASSET` answers it. Only the
    /// library records these (never `.photogate/request`).
    case edit
}

/// Whether an asset is a still image or a movie (picker filters, listings).
public enum MediaClass: String, Sendable, Codable {
    case photo, video
}
