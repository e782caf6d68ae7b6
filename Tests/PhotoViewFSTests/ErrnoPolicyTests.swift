import FUSE
import Testing
@testable import PhotoViewFS
#if canImport(Glibc)
import Glibc
#endif

/// The one policy of which raw OS errors of the daemon's own calls reach an app (`Errno.system`):
/// those about the app's own request pass; those that would describe the library's folders
/// (a store file missing, unreadable, a link where none belongs) are EIO.
@Suite struct ErrnoPolicy {
    @Test func theAppsOwnLimitsPass() {
        for e in [ENOSPC, EDQUOT, EFBIG, EMFILE, ENFILE, ENOMEM] {
            #expect(Errno.system(e) == Errno(e), "\(String(cString: strerror(e))) is the app's to know")
        }
    }

    @Test func theLibrarysOwnStateIsEIO() {
        for e in [ENOENT, EACCES, EPERM, ELOOP, ESTALE, ENOTDIR, EISDIR, EROFS, EXDEV, EBADF, EINVAL, EIO, ENAMETOOLONG] {
            #expect(Errno.system(e) == .io, "\(String(cString: strerror(e))) would describe the library, not the request")
        }
    }
}
