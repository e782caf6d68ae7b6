import FUSE
import PhotoLibrary

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
    case .notDurable?, nil: return .io
    }
}
