import PGSystem
#if canImport(Glibc)
import Glibc
#endif

/// The kernel's control folder of one FUSE connection (fusectl: /sys/fs/fuse/connections/N, N the
/// mount's device number), held by a descriptor from the moment the mount is made. While the
/// connection's file system lives, that folder holds `waiting` and `abort`; once the kernel lets go
/// of it they are gone, and a connection made later with the same device number gets a folder of
/// its own. So the descriptor answers, for this connection and no other:
/// - whether it is still alive: a device number seen in mountinfo is this session's only while it
///   is (mount ids and devices are handed out again once free);
/// - abort: fails every request waiting on it, whoever else holds a copy of the device (a child
///   forked and not yet exec'd holds one; closing ours then does not end the connection, and a
///   request that child makes waits for ever).
/// nil where fusectl is not mounted; callers then fall back to what /dev/fuse tells.
final class ConnectionControl: Sendable {
    private let fd: Int32
    /// Its `abort`, opened with the folder: at the end, aborting needs no new descriptor (none
    /// may be left) and does not depend on the file's mode then. Written after the connection is
    /// gone, it does nothing.
    private let abortFD: Int32

    /// fusectl's superblock magic ("fuse" control).
    private static let magic: Int = 0x6573_5543

    /// Whether fusectl is mounted at /sys/fs/fuse/connections (the folder is there either way).
    static var available: Bool {
        let fd = open("/sys/fs/fuse/connections", MountIdentity.oPath | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return pg_fs_type(fd) == magic
    }

    /// Opens the control folder of the connection behind `mount`, just made. The caller must
    /// then check that its own connection still lives (its /dev/fuse reports no error): only
    /// then is the device number, and so the folder opened by it, this connection's (a mount
    /// unmounted before INIT frees its number at once, and the next mount made takes it). The
    /// folder is owned by the user who mounted; others cannot open it.
    init?(of mount: MountIdentity) {
        // The kernel names it by its own dev_t: major << 20 | minor.
        let name = (UInt64(mount.major) << 20) | UInt64(mount.minor)
        let fd = open("/sys/fs/fuse/connections/\(name)", MountIdentity.oPath | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        guard pg_fs_type(fd) == ConnectionControl.magic else {
            close(fd)
            return nil
        }
        let abortFD = openat(fd, "abort", O_WRONLY | O_CLOEXEC)
        guard abortFD >= 0 else {
            close(fd)
            return nil
        }
        self.fd = fd
        self.abortFD = abortFD
    }

    deinit {
        close(abortFD)
        close(fd)
    }

    /// Whether this connection's file system still lives (mounted, or detached and still in use);
    /// nil when that cannot be told.
    var alive: Bool? {
        let f = openat(fd, "waiting", O_RDONLY | O_CLOEXEC)
        if f < 0 { return errno == ENOENT ? false : nil }
        defer { close(f) }
        // A file opened just before the folder went reads as empty.
        var buf = (UInt8(0), UInt8(0), UInt8(0), UInt8(0), UInt8(0), UInt8(0), UInt8(0), UInt8(0))
        let n = withUnsafeMutableBytes(of: &buf) { read(f, $0.baseAddress, $0.count) }
        return n < 0 ? nil : n > 0
    }

    /// Aborts the connection (as `echo 1 > .../abort` does): every request waiting fails with
    /// ENOTCONN, and every later one at once. The mount stays listed until it is unmounted.
    @discardableResult
    func abort() -> Bool {
        var one = UInt8(ascii: "1")
        return write(abortFD, &one, 1) == 1
    }
}
