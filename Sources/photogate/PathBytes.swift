#if canImport(Glibc)
import Glibc
#endif

// Paths as the kernel names them: bytes, not necessarily UTF-8, compared byte for byte.

/// A path of bytes (not necessarily UTF-8) as the C string a system call takes.
func withCPath<R>(_ path: [UInt8], _ body: (UnsafePointer<CChar>) -> R) -> R {
    (path + [0]).withUnsafeBufferPointer { b in body(UnsafeRawPointer(b.baseAddress!).assumingMemoryBound(to: CChar.self)) }
}

/// O_PATH (Linux; Glibc hides it behind _GNU_SOURCE): a descriptor that names a file without
/// opening it for reading, for any file the caller can look up.
let oPath: Int32 = 0o10000000   // O_PATH (not imported from Glibc)

/// The bytes of `path` after `folder` (empty when they are the same folder, else starting with
/// "/") when `path` is `folder` or inside it, else nil. Byte for byte, as the kernel names files:
/// String's comparison would call canonically equivalent names (`café` and `cafe` + U+0301, two
/// folders on disk) the same, and folds a combining mark that follows a "/" into the "/", so a
/// path inside a folder (`folder/` + U+0301 `lib`) would not have `folder/` as its prefix.
func pathBytes<P: Collection, F: Collection>(_ path: P, within folder: F) -> [UInt8]?
where P.Element == UInt8, F.Element == UInt8 {
    var f = Array(folder)
    while f.count > 1 && f.last == UInt8(ascii: "/") { f.removeLast() }
    let p = Array(path)
    guard p.starts(with: f) else { return nil }
    let rest = p[f.count...]
    if rest.isEmpty { return [] }
    if f == [UInt8(ascii: "/")] { return p }
    return rest.first == UInt8(ascii: "/") ? Array(rest) : nil
}

/// An absolute path with ".", ".." and repeated "/" taken out, by its text (for sandbox paths,
/// which cannot be resolved from here).
func lexicallyNormal(_ path: [UInt8]) -> [UInt8] {
    var parts: [ArraySlice<UInt8>] = []
    for c in path.split(separator: UInt8(ascii: "/")) {
        if c.elementsEqual([UInt8(ascii: ".")]) { continue }
        if c.elementsEqual([UInt8(ascii: "."), UInt8(ascii: ".")]) { _ = parts.popLast(); continue }
        parts.append(c)
    }
    return parts.isEmpty ? [UInt8(ascii: "/")] : parts.flatMap { [UInt8(ascii: "/")] + $0 }
}

/// `folder` followed by `rest` (empty, or starting with "/"), with no doubled "/".
func joinedPath(_ folder: [UInt8], _ rest: [UInt8]) -> [UInt8] {
    var f = folder
    while !f.isEmpty && f.last == UInt8(ascii: "/") { f.removeLast() }
    if f.isEmpty && rest.isEmpty { return [UInt8(ascii: "/")] }
    return f + rest
}
