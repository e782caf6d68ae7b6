/// Where the library keeps the JPEGs it makes of HEIF photos for apps with the `compatible`
/// option (PhotoKit's `.compatible` representation): `<library>/cache/compatible/`, one folder per
/// first two digits of the asset id, one file per asset, version and variant:
/// `<asset id>-<version>-<converter>[-nogps].jpg`, and `<same>.failed` for a version that could
/// not be converted (not tried again). Private to the library's owner (folders 0700, files 0600),
/// made atomically (a temp file renamed into place), and evictable: a file that is gone is made
/// again, identical (the same original, the same libvips).
///
/// The version is the stored file's id (each version of an asset is a file of its own, so an edit
/// or a revert names another JPEG), or for an original imported in place (`--reference`), which
/// is refused once it changes, a hash of its path. The mount and the library (a photo deleted for
/// good takes its JPEGs with it) agree on these names through this type.
public enum CompatibleCache {
    /// Bumped when the conversion changes (its options, what it carries): older files are then
    /// never served again (and go by eviction).
    public static let converter = "c1"

    public static func root(_ cacheRoot: String) -> String { cacheRoot + "/compatible" }

    /// The folder of an asset's JPEGs.
    public static func folder(_ cacheRoot: String, assetID: String) -> String {
        root(cacheRoot) + "/" + String(assetID.prefix(2))
    }

    /// The JPEG of one version of an asset; `stripped`: with its location removed.
    public static func fileName(assetID: String, version: String, stripped: Bool) -> String {
        "\(assetID)-\(version)-\(converter)\(stripped ? "-nogps" : "").jpg"
    }

    /// Whether a file of the cache is one of this asset's (any version, any variant, failed or not).
    public static func belongs(_ fileName: String, toAsset assetID: String) -> Bool {
        fileName.hasPrefix(assetID + "-")
    }

    /// Whether an asset id can name a folder and file here (the catalog's are 16 hex digits).
    public static func isSafe(assetID: String) -> Bool {
        assetID.utf8.count >= 2 && assetID.utf8.count <= 64
            && assetID.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x7a) || ($0 >= 0x41 && $0 <= 0x5a) }
    }
}
