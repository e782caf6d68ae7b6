import FUSE
import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

/// The errno a failed library call becomes at the syscall: the one mapping of the mount. Every
/// handler that calls the library throws this for what it cannot handle itself. Errors the port
/// names (`PortError`) map to the errno that means the same; anything else is EIO.
func mountErrno(for error: any Error) -> Errno {
    if let e = error as? Errno { return e }
    switch error as? PortError {
    case .noSpace?: return .noSpace
    case .exists?: return .exists
    case .notEmpty?: return .notEmpty
    // Too many pending requests of a kind (issue 14): EBUSY until the person answers them.
    case .tooManyRequests?: return .busy
    // Not complete media, or a name the library does not take.
    case .refused?, .invalid?: return .invalid
    case .denied?: return .accessDenied
    case .overDailyLimit?: return Errno(EDQUOT)
    case .notDurable?, nil: return .io
    }
}

extension Errno {
    /// The errno an app gets for a failed system call of the daemon's own (on a temp file it is
    /// writing, a stored original or JPEG it reads, a descriptor it opens): the one policy of which
    /// raw OS errors reach an app. Those that describe the app's own request and what it can do
    /// about it pass: no space or quota left, a file too large, too many files open, no memory.
    /// Anything else (ENOENT, EACCES, ELOOP, ESTALE of the library's own files...) would describe
    /// the library's folders, not the app's request: EIO.
    static func system(_ e: Int32) -> Errno {
        switch e {
        case ENOSPC, EDQUOT, EFBIG, EMFILE, ENFILE, ENOMEM: return Errno(e)
        default: return .io
        }
    }
}
