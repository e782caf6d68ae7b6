import FUSE
import Glibc

/// The kernel's mount table, read whole.
///
/// Files under /proc report a size of 0 and are produced a page at a time: Foundation's
/// `String(contentsOfFile:)` and `Data(contentsOf:)` return only the first read (about 4 KB), so
/// on a machine with a few dozen mounts every later mount was invisible: `photogate unmount` said
/// "nothing is mounted", `mounts` lost entries and `run` failed to hide other views. The readers
/// of /proc files that can be longer than a page go through `readWhole` (FUSE's `WholeFile`),
/// which reads until end of file.
public enum MountTable {
    /// The whole content of a file, read until EOF (nil when it cannot be opened or read).
    public static func readWhole(_ path: String) -> String? {
        readWholeBytes(path).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The whole content of a file as bytes, read until EOF (nil when it cannot be opened or read).
    public static func readWholeBytes(_ path: String) -> [UInt8]? { WholeFile.bytes(path) }

    /// The rest of an open file as bytes, read until EOF (nil when a read fails).
    public static func readWholeBytes(fd: Int32) -> [UInt8]? { WholeFile.bytes(fd: fd) }

    /// One line of /proc/self/mountinfo: the mount's id, its mount point, its device ("major:minor"),
    /// its type, and its root: the folder of that filesystem shown at the mount point ("/" unless a
    /// bind mount of a folder inside it). Names are kept as the kernel's bytes (a mount point need
    /// not be UTF-8); the String forms are for display and for paths photogate made itself.
    public struct Entry: Sendable {
        public let id: Int
        /// The id of the mount it is mounted on (0: unknown).
        public var parentID: Int = 0
        public let mountPointBytes: [UInt8]
        public let device: String
        public let type: String
        public let rootBytes: [UInt8]
        /// The filesystem's own options, as listed (escaped; see `overlayLayers`).
        public var superOptionsBytes: [UInt8] = []
        public var mountPoint: String { String(decoding: mountPointBytes, as: UTF8.self) }

        /// For an overlay mount, the folders it shows merged (its lower layers and its upper
        /// one), as the mount named them; empty for any other mount. mountinfo writes a comma as
        /// \054 and a backslash as \134; in `lowerdir=` and `upperdir=`, overlayfs escapes ':'
        /// and ',' in a name with a backslash and separates lower layers with ':' ("::" before
        /// data-only layers); `lowerdir+=` and `datadir+=` (the new mount API) name one layer each,
        /// with no escapes of its own.
        public var overlayLayers: [[UInt8]] {
            guard type == "overlay" else { return [] }
            var layers: [[UInt8]] = []
            for option in superOptionsBytes.split(separator: UInt8(ascii: ",")) {
                let o = MountTable.unescape(option)
                // One layer each, named as given: the kernel undoes no backslash in these.
                if o.starts(with: "lowerdir+=".utf8) || o.starts(with: "datadir+=".utf8) {
                    let name = Array(o.drop { $0 != UInt8(ascii: "=") }.dropFirst())
                    if !name.isEmpty { layers.append(name) }
                    continue
                }
                let list: Bool
                let value: ArraySlice<UInt8>
                if o.starts(with: "lowerdir=".utf8) { list = true; value = o.dropFirst(9) }
                else if o.starts(with: "upperdir=".utf8) { list = false; value = o.dropFirst(9) }
                else { continue }
                var cur: [UInt8] = [], escaped = false
                for c in value {
                    if escaped { cur.append(c); escaped = false }
                    else if c == UInt8(ascii: "\\") { escaped = true }
                    else if list && c == UInt8(ascii: ":") { if !cur.isEmpty { layers.append(cur) }; cur = [] }
                    else { cur.append(c) }
                }
                if !cur.isEmpty { layers.append(cur) }
            }
            return layers
        }
    }

    /// Every mount in this mount namespace (FUSE's `MountIdentity.listed`, the one reader of
    /// mountinfo).
    public static func entries() -> [Entry] {
        MountIdentity.listed().map { l in
            var entry = Entry(id: Int(l.identity.id), mountPointBytes: l.mountPoint, device: l.device,
                              type: String(decoding: l.type, as: UTF8.self), rootBytes: l.rootBytes)
            entry.superOptionsBytes = l.superOptionsBytes
            entry.parentID = Int(l.parentID)
            return entry
        }
    }

    /// Mount points of photogate's FUSE mounts in this namespace.
    public static func photogateMounts() -> [Entry] { entries().filter { $0.type == "fuse.photogate" } }

    /// True if `path` is a mount point (of any file system) in this namespace.
    public static func isMountPoint(_ path: String) -> Bool { entries().contains { $0.mountPointBytes.elementsEqual(path.utf8) } }

    /// The same path, byte for byte, as the kernel names files. String's == calls canonically
    /// equivalent names equal (`café` precomposed and `cafe` + U+0301), which are two folders.
    public static func samePath(_ a: String, _ b: String) -> Bool { a.utf8.elementsEqual(b.utf8) }

    /// /proc/self/mountinfo writes space, tab, newline and backslash as octal escapes.
    public static func unescape<C: Collection>(_ b: C) -> [UInt8] where C.Element == UInt8 { MountIdentity.unescape(b) }

    /// "major:minor" of the filesystem at `path` (the FUSE connection once mounted), as mountinfo
    /// writes it (`Entry.device`).
    public static func device(of path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        let dev = UInt64(st.st_dev)
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & ~0xfff)
        let minor = (dev & 0xff) | ((dev >> 12) & ~0xff)
        return "\(major):\(minor)"
    }
}
