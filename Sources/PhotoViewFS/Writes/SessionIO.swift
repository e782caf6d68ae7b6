import FUSE
import Foundation
import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

extension PhotoFS {
    /// truncate, chmod and utimes of a file being written: kept (times on the temp file, where
    /// the commit reads the date of a file without a capture date). Nil when `ino` is not one.
    func setSessionAttributes(_ ino: Inode, _ changes: SetAttributes, handle: UInt64?) throws(Errno) -> Attributes? {
        // truncate through an edit's handle (open(O_TRUNC) arrives as open, then this) or by path
        // while an edit of the asset is open.
        let viaEdit: Bool = {
            if let handle, let h = openHandle(handle) as? SessionHandle { return h.edit }
            return handle == nil && editSession(ino) != nil
        }()
        guard let f = viaEdit ? editSession(ino) : session(ino) else { return nil }
        return try f.run { () throws(Errno) -> Attributes? in
            if case .committed = f.state {
                // Read-write: an asset, the view answers. Add-only: the file is the library's now;
                // times and mode set after close (`rsync -a`, `tar x`) are kept for this mount
                // only, so a second run finds it unchanged.
                guard access == .addOnly else { return nil }
                guard changes.size == nil else { throw .accessDenied }
                if let mode = changes.mode { f.mode = mode & 0o7777 }
                if changes.mtimeNow { f.mtime = .now } else if let m = changes.mtime { f.mtime = m }
                return sessionAttributes(f)
            }
            guard f.isWriting, f.fd >= 0 else { throw .noEntry }
            if let size = changes.size {
                if size > f.counted { try admitGrowth(f, to: size) }
                if ftruncate(f.fd, off_t(size)) != 0 { f.hash?.invalidate(); throw Errno(errno) }
                f.hash?.noteTruncate(to: size)
                f.size = size
                f.dirty = true
                if let handle { f.handles[handle] = false }
            }
            if let mode = changes.mode { f.mode = mode & 0o7777 }
            if changes.mtime != nil || changes.mtimeNow || changes.atime != nil || changes.atimeNow {
                let now = Timespec.now
                let m = changes.mtimeNow ? now : (changes.mtime ?? f.mtime)
                let a = changes.atimeNow ? now : (changes.atime ?? m)
                var times = [timespec(tv_sec: Int(a.seconds), tv_nsec: Int(a.nanoseconds)),
                             timespec(tv_sec: Int(m.seconds), tv_nsec: Int(m.nanoseconds))]
                if futimens(f.fd, &times) != 0 { throw Errno(errno) }
                f.mtime = m
            }
            return sessionAttributes(f)
        }
    }

    func sessionAttributes(_ f: SessionFile) -> Attributes {
        Attributes(ino: f.ino, mode: FileMode.regular | f.mode, nlink: 1, size: f.size, uid: uid, gid: gid,
                   atime: f.mtime, mtime: f.mtime, ctime: f.mtime)
    }

    func readSession(_ ino: Inode, edit: Bool = false, offset: Int64, size: Int) throws(Errno) -> ReadReply {
        // The app's own bytes while it writes them (add-only included); never a committed file.
        guard let f = edit ? editSession(ino) : session(ino) else { throw .accessDenied }
        return try f.run { () throws(Errno) -> ReadReply in
            guard f.isWriting, f.fd >= 0 else { throw .accessDenied }
            // An edit reads only while the app still sees the asset as it opened it (a revoke, a
            // denial, strip-location turned on or a newer version end it), as reads of originals do.
            if let row = f.editing, !stillVisible(rowID: row, ino: f.ino) { throw .accessDenied }
            var buf = [UInt8](repeating: 0, count: size)
            let n = buf.withUnsafeMutableBytes { b in pread(f.fd, b.baseAddress, size, off_t(offset)) }
            if n < 0 { throw Errno(errno) }
            buf.removeLast(size - n)
            return .bytes(buf)
        }
    }

    func fsyncSession(_ ino: Inode, edit: Bool = false) throws(Errno) {
        guard let f = edit ? editSession(ino) : session(ino) else { return }
        try f.run { () throws(Errno) in
            guard f.isWriting, f.fd >= 0 else { return }
            if Glibc.fsync(f.fd) != 0 { throw Errno(errno) }
        }
    }
}
