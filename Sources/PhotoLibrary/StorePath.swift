import Redaction
#if canImport(Glibc)
import Glibc
#endif

/// Where the catalog says a file of the store is (`store_path`, relative to the library's store/):
/// photogate itself only ever writes `<ab>/<abcdef0123456789>.<ext>`, the file id's first two hex
/// digits as a folder, then the file id (16 lowercase hex digits: an asset's id, or a version's
/// file id) and the extension of its media kind (LibraryRun's `LibraryLayout.storeRelativePath`).
///
/// The catalog is a file, and what it holds is text: a value of another shape ("../../etc/x",
/// "/etc/shadow", a NUL) was not written by photogate, and joined to the store's path it would
/// name a file anywhere. So a path is built from a store path only once it passed `isValid`; an
/// asset whose store path does not is damaged (treated as missing: not shown in views, never
/// read, written, renamed or deleted), and `photogate verify` reports it.
public enum StorePath {
    /// The extensions photogate gives stored files (one per media kind, and a sidecar's own in
    /// lowercase: `ab/<file id>.xmp`).
    static let extensions: [[UInt8]] = MediaKind.allCases.map { Array($0.preferredExtension.utf8) }
        + Sidecars.extensions.sorted().map { Array($0.utf8) }

    @inline(__always) static func isHexDigit(_ c: UInt8) -> Bool {
        (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "f"))
    }

    /// Whether `bytes` is a store path of the shape photogate writes (see the type).
    public static func isValid(_ bytes: UnsafeRawBufferPointer) -> Bool {
        // "ab/" + 16 hex digits + "." + an extension of 2 to 4 letters.
        guard bytes.count > 20, bytes.count <= 24 else { return false }
        guard bytes[2] == UInt8(ascii: "/"), bytes[19] == UInt8(ascii: "."), bytes[0] == bytes[3], bytes[1] == bytes[4] else {
            return false
        }
        for i in 3..<19 where !isHexDigit(bytes[i]) { return false }
        let ext = UnsafeRawBufferPointer(rebasing: bytes[20...])
        return extensions.contains { $0.elementsEqual(ext) }
    }

    public static func isValid(_ path: String) -> Bool {
        var p = path
        return p.withUTF8 { isValid(UnsafeRawBufferPointer($0)) }
    }
}

/// Whether an opened original is still the file the catalog describes: the one rule every reader
/// asks (a mount's opens, `photogate explain`), so that what one says the other does.
public enum OriginalCheck {
    public enum Outcome: Equatable, Sendable {
        case same
        /// A referenced original (import --reference) edited, replaced or no longer a regular
        /// file since import: refused to apps (EACCES); `verify` reports it.
        case referenceChanged
        /// A store file of another size than the catalog's (truncated, appended to): damaged
        /// (EIO); `verify` reports it.
        case storeDamaged
    }

    /// `st`: the opened file's stat; `size`: the catalog's byte size; `added`: when it was
    /// imported (seconds), which a referenced original's modification and its inode change must
    /// not be past. The change time too: its owner can set the modification time back
    /// (`touch -d`) after rewriting bytes in place, but not that (a chmod or chown since import
    /// also counts: import it again).
    public static func check(_ st: stat, inStore: Bool, size: UInt64, added: Int) -> Outcome {
        if inStore { return UInt64(st.st_size) == size ? .same : .storeDamaged }
        let changed = (st.st_mode & S_IFMT) != S_IFREG || UInt64(st.st_size) != size || Int(st.st_mtim.tv_sec) > added + 1
            || Int(st.st_ctim.tv_sec) > added + 1
        return changed ? .referenceChanged : .same
    }
}
