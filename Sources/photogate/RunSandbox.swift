import PhotoViewFS
#if canImport(Glibc)
import Glibc
#endif

/// What `photogate run` keeps out of the sandbox, and how, for the folders the user passes in with
/// --bind and --ro-bind (bubblewrap binds them recursively, with every mount below them).
///
/// A hidden path is matched by where it really is, not by how it is spelled: every path is
/// resolved (`realpath`: symlinks, ".", "..", "//", relative paths, /proc/self/root), and the
/// mount table adds every other place the same folder shows up (a bind mount of it, of a folder
/// above it, or of a folder inside it). Then, for each bound folder:
/// - a place of the photo library (or of /proc) inside it gets an empty tmpfs on top;
/// - a place of another app's view inside it refuses the run: a mask would leave that mount in
///   the sandbox's mount table, with its app id;
/// - a bound folder inside any hidden place refuses the run (it would bypass the mask).
/// Paths are compared byte for byte, as the kernel names files (String's comparison calls
/// canonically equivalent names equal, and folds a combining mark after "/" into the "/").
struct SandboxHiding {
    struct Hidden {
        let path: String
        /// What it is, for the error message ("the photo library", ...).
        let what: String
        /// Masked with a tmpfs when inside a bound folder; else that bind is refused.
        let maskable: Bool
    }

    struct Refusal: Error, CustomStringConvertible {
        let description: String
    }

    let hidden: [Hidden]
    let mounts: [MountTable.Entry]

    /// The tmpfs masks (sandbox paths) for `bound` (host source, sandbox destination) folders, the
    /// outermost only (a mask inside another would show up there as an empty folder).
    func masks(for bound: [(src: String, dest: String)]) throws(Refusal) -> [String] {
        let places = hidden.map { (h: $0, at: Self.places(of: $0.path, mounts: mounts)) }
        var masks = Set<[UInt8]>()
        for b in bound {
            // bubblewrap opens the source following symlinks; one that does not resolve fails there.
            guard let src = Self.realPathBytes(b.src) else { continue }
            for (h, at) in places {
                for p in at {
                    if let rest = pathBytes(p, within: src) {
                        guard h.maskable else {
                            throw Refusal(description: "\(b.src) holds \(h.what) at \(String(decoding: p, as: UTF8.self)); "
                                + "it cannot be hidden inside the sandbox without showing in its mount table: "
                                + "unmount it, or pass a folder beside it")
                        }
                        masks.insert(joinedPath(Array(b.dest.utf8), rest))
                    } else if pathBytes(src, within: p) != nil {
                        throw Refusal(description: "\(b.src) is inside \(h.what) (\(String(decoding: p, as: UTF8.self))), "
                            + "which the sandbox must not reach")
                    }
                }
            }
        }
        let outermost = masks.filter { m in !masks.contains { $0 != m && pathBytes(m, within: $0) != nil } }
        return outermost.sorted { $0.lexicographicallyPrecedes($1) }.map { String(decoding: $0, as: UTF8.self) }
    }

    /// Every place in this mount namespace where `path`, or a part of it, can be reached: its real
    /// path; the same folder under every mount of its filesystem whose root holds it (bind mounts
    /// of it or of a folder above it); and the mount points of mounts of its filesystem whose root
    /// is inside it (bind mounts of a folder inside it).
    static func places(of path: String, mounts: [MountTable.Entry]) -> [[UInt8]] {
        let real = realPathBytes(path) ?? Array(path.utf8)
        // The mount it is on: the deepest mount point holding it, the last listed if stacked.
        var home: MountTable.Entry?
        var depth = -1
        for m in mounts {
            let mp = Array(m.mountPoint.utf8)
            if pathBytes(real, within: mp) != nil && mp.count >= depth { home = m; depth = mp.count }
        }
        var out: Set<[UInt8]> = [real]
        guard let home, let below = pathBytes(real, within: Array(home.mountPoint.utf8)) else { return Array(out) }
        let inside = joinedPath(Array(home.root.utf8), below)
        for m in mounts where m.device == home.device {
            let root = Array(m.root.utf8)
            if let rest = pathBytes(inside, within: root) {
                out.insert(joinedPath(Array(m.mountPoint.utf8), rest))
            } else if pathBytes(root, within: inside) != nil {
                out.insert(Array(m.mountPoint.utf8))
            }
        }
        return Array(out)
    }

    static func realPathBytes(_ path: String) -> [UInt8]? {
        guard let r = realpath(path, nil) else { return nil }
        defer { free(r) }
        return Array(UnsafeRawBufferPointer(start: r, count: strlen(r)))
    }
}

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

/// `folder` followed by `rest` (empty, or starting with "/"), with no doubled "/".
func joinedPath(_ folder: [UInt8], _ rest: [UInt8]) -> [UInt8] {
    var f = folder
    while !f.isEmpty && f.last == UInt8(ascii: "/") { f.removeLast() }
    if f.isEmpty && rest.isEmpty { return [UInt8(ascii: "/")] }
    return f + rest
}
