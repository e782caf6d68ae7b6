#if canImport(Glibc)
import Glibc
#endif

/// Files of /proc read whole. Foundation's `FileManager.contents(atPath:)` returns only the first
/// page of a /proc file (its size says 0): past a few dozen mounts, later ones were invisible.
/// Readers of /proc files that can be longer than a page go through this (LibraryRun's
/// MountTable.readWhole forwards here).
public enum WholeFile {
    /// The whole content of a file as bytes, read until EOF (nil when it cannot be opened or read).
    public static func bytes(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return bytes(fd: fd)
    }

    /// At most `limit` bytes from the start of a file (nil when it cannot be opened or read): for
    /// a /proc file read on a hot path whose wanted line comes first (`status`'s Tgid), without
    /// zeroing and filling a 64 KiB buffer for the whole of it.
    public static func prefix(_ path: String, limit: Int) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: limit)
        var got = 0
        while got < limit {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + got, limit - got) }
            if n < 0 { if errno == EINTR { continue }; return nil }
            if n == 0 { break }
            got += n
        }
        bytes.removeLast(limit - got)
        return bytes
    }

    /// The rest of an open file as bytes, read until EOF (nil when a read fails).
    public static func bytes(fd: Int32) -> [UInt8]? {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 { if errno == EINTR { continue }; return nil }
            if n == 0 { break }
            bytes.append(contentsOf: chunk[0..<n])
        }
        return bytes
    }
}
