import Glibc

/// The kernel's mount table, read whole.
///
/// Files under /proc report a size of 0 and are produced a page at a time: Foundation's
/// `String(contentsOfFile:)` and `Data(contentsOf:)` return only the first read (about 4 KB), so
/// on a machine with a few dozen mounts every later mount was invisible: `photogate unmount` said
/// "nothing is mounted", `mounts` lost entries and `run` failed to hide other views. Every reader
/// of /proc in photogate goes through `readWhole`, which reads until end of file.
public enum MountTable {
    /// The whole content of a file, read until EOF (nil when it cannot be opened or read).
    public static func readWhole(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 { if errno == EINTR { continue }; return nil }
            if n == 0 { break }
            bytes.append(contentsOf: chunk[0..<n])
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// One line of /proc/self/mountinfo: the mount point (unescaped), its device, its type, and
    /// its root: the folder of that filesystem shown at the mount point ("/" unless a bind mount
    /// of a folder inside it).
    public struct Entry: Sendable {
        public let mountPoint: String
        public let device: String
        public let type: String
        public let root: String
    }

    /// Every mount in this mount namespace.
    public static func entries() -> [Entry] {
        guard let text = readWhole("/proc/self/mountinfo") else { return [] }
        var out: [Entry] = []
        for line in text.split(separator: "\n") {
            let parts = line.components(separatedBy: " - ")
            guard parts.count >= 2 else { continue }
            let fields = parts[0].split(separator: " ")
            guard fields.count > 4, let type = parts[1].split(separator: " ").first else { continue }
            out.append(Entry(mountPoint: unescape(String(fields[4])), device: String(fields[2]), type: String(type),
                             root: unescape(String(fields[3]))))
        }
        return out
    }

    /// Mount points of photogate's FUSE mounts in this namespace.
    public static func photogateMounts() -> [Entry] { entries().filter { $0.type == "fuse.photogate" } }

    /// True if `path` is a mount point (of any file system) in this namespace.
    public static func isMountPoint(_ path: String) -> Bool { entries().contains { samePath($0.mountPoint, path) } }

    /// The same path, byte for byte, as the kernel names files. String's == calls canonically
    /// equivalent names equal (`café` precomposed and `cafe` + U+0301), which are two folders.
    public static func samePath(_ a: String, _ b: String) -> Bool { a.utf8.elementsEqual(b.utf8) }

    /// /proc/self/mountinfo writes space, tab, newline and backslash as octal escapes.
    public static func unescape(_ s: String) -> String {
        guard s.contains("\\") else { return s }
        var out = [UInt8](), b = Array(s.utf8), i = 0
        while i < b.count {
            if b[i] == UInt8(ascii: "\\"), i + 3 < b.count,
               let v = UInt8(String(decoding: b[(i + 1)...(i + 3)], as: UTF8.self), radix: 8) {
                out.append(v); i += 4
            } else { out.append(b[i]); i += 1 }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
