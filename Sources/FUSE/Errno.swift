#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A POSIX error number: the only error channel of the FUSE wrapper.
///
/// Every `FileSystemOperations` method that can fail throws an `Errno`; the wrapper answers the
/// request with `fuse_reply_err(req, rawValue)` and the process that made the syscall sees that
/// errno. Modelled on swift-system's `Errno` (one type, named statics for the common values).
public struct Errno: Error, Equatable, Hashable, Sendable, CustomStringConvertible, RawRepresentable {
    public let rawValue: Int32

    public init(_ raw: Int32) { self.rawValue = raw }
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's current `errno`.
    public static var current: Errno { Errno(errno) }

    /// `strerror(rawValue)`, e.g. "No such file or directory".
    public var description: String {
        guard let text = strerror(rawValue) else { return "errno \(rawValue)" }
        return String(cString: text)
    }

    public static let permission = Errno(EPERM)
    public static let noEntry = Errno(ENOENT)
    public static let interrupted = Errno(EINTR)
    public static let io = Errno(EIO)
    public static let badFile = Errno(EBADF)
    public static let again = Errno(EAGAIN)
    public static let accessDenied = Errno(EACCES)
    public static let fault = Errno(EFAULT)
    public static let busy = Errno(EBUSY)
    public static let exists = Errno(EEXIST)
    public static let crossDevice = Errno(EXDEV)
    public static let noDevice = Errno(ENODEV)
    public static let notDirectory = Errno(ENOTDIR)
    public static let isDirectory = Errno(EISDIR)
    public static let invalid = Errno(EINVAL)
    public static let notTTY = Errno(ENOTTY)
    public static let tooBig = Errno(EFBIG)
    public static let noSpace = Errno(ENOSPC)
    public static let readOnly = Errno(EROFS)
    public static let range = Errno(ERANGE)
    public static let nameTooLong = Errno(ENAMETOOLONG)
    public static let noSys = Errno(ENOSYS)
    public static let notEmpty = Errno(ENOTEMPTY)
    public static let noData = Errno(ENODATA)
    /// ESTALE: the inode is no longer there. For path-based calls (open, stat, ...) the kernel
    /// then looks the name up again and retries once, so a name cached for an inode that was
    /// replaced reaches the new one, and a name that is gone answers ENOENT.
    public static let stale = Errno(ESTALE)
    /// EOPNOTSUPP (== ENOTSUP on Linux).
    public static let notSupported = Errno(EOPNOTSUPP)

    /// The value handed to `fuse_reply_err`: a positive errno. Zero, negative or absurd values
    /// (a bug in a filesystem) become EIO, because `fuse_reply_err(req, 0)` would be a success
    /// reply without the payload the kernel expects.
    var replyCode: Int32 { (rawValue > 0 && rawValue < 4096) ? rawValue : EIO }
}
