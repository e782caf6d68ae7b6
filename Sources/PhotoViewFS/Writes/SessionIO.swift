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
        // Through a handle of a file being written (ftruncate; open(O_TRUNC) arrives as open, then
        // this): the session that handle was opened on. By path: the edit of the asset open now,
        // else the file being written.
        // An inode that stands for an asset's current version (an older version's, or a file
        // renamed over it: `aliases`) reaches that version's edit, as its opens do.
        let opened = handle.flatMap { openHandle($0) as? SessionHandle }
        let found: SessionFile? = if let opened { opened.file } else if handle == nil, let e = editSession(ino) { e }
            else if handle == nil, let n = aliasedNode(ino), let e = editSession(n.ino) { e } else { session(ino) }
        guard let f = found else { return nil }
        return try f.run { () throws(Errno) -> Attributes? in
            if let opened, !opened.isCurrentLocked {
                // A handle of an earlier session of this file (add-only: a name written again):
                // it truncates nothing of the current one; times and mode are accepted without effect.
                guard changes.size == nil else {
                    log("truncate of \(f.name) through a descriptor of an earlier session: refused")
                    throw .accessDenied
                }
                return sessionAttributes(f)
            }
            if case .committed = f.state {
                // Read-write: an asset, the view answers. Add-only: the file is the library's now;
                // times and mode set after close (`rsync -a`, `tar x`) are kept for this mount
                // only, so a second run finds it unchanged, and a modification time takes effect
                // as one set while writing (`rclone` sets it after closing the file): the capture
                // date of a file whose content has none.
                guard access == .addOnly else { return nil }
                guard changes.size == nil else { throw .accessDenied }
                if let mode = changes.mode { f.mode = mode & 0o7777 }
                if let m = changes.mtimeNow ? Timespec.now : changes.mtime, let row = f.committedRowID {
                    let date = Date(timeIntervalSince1970: Double(m.seconds) + Double(m.nanoseconds) / 1e9)
                    do { _ = try library.setOwnFileDate(rowID: row, app: appID, access: access, to: date) } catch {
                        log("the file time of \(f.name) from \(appID) was refused: \(error)")
                        throw mountErrno(for: error)
                    }
                    f.mtime = m
                }
                return sessionAttributes(f)
            }
            guard f.isWriting, f.fd >= 0 else { throw .noEntry }
            if let size = changes.size {
                // Changed after a close told saved: no longer that file (as a write makes it),
                // so its commit asks the limits again.
                if f.ready {
                    writer.clearReady(tempPath: f.tempPath)
                    f.ready = false
                }
                if size > f.counted { try admitGrowth(f, to: size) }
                if ftruncate(f.fd, off_t(size)) != 0 { f.hash?.invalidate(); throw .system(errno) }
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
                if futimens(f.fd, &times) != 0 { throw .system(errno) }
                f.mtime = m
                // Through an open of the app's own file (`touch -d` opens it for writing, then sets
                // the time through it): the file's time, as once it is closed (Create.swift's
                // `setattr`), whether or not anything is written. An edit of the person's photo
                // sets no date (its dates are the person's).
                if let row = f.editing, changes.mtime != nil || changes.mtimeNow, model.withLock({ $0.nodes[row]?.owned ?? false }) {
                    let date = Date(timeIntervalSince1970: Double(m.seconds) + Double(m.nanoseconds) / 1e9)
                    do {
                        if try library.setOwnFileDate(rowID: row, app: appID, access: access, to: date) { refresh() }
                    } catch {
                        log("the file time of \(f.name) from \(appID) was refused: \(error)")
                        throw mountErrno(for: error)
                    }
                }
            }
            return sessionAttributes(f)
        }
    }

    func sessionAttributes(_ f: SessionFile) -> Attributes {
        Attributes(ino: f.ino, mode: FileMode.regular | f.mode, nlink: 1, size: f.size, uid: uid, gid: gid,
                   atime: f.mtime, mtime: f.mtime, ctime: f.mtime)
    }

    func readSession(_ h: SessionHandle, offset: Int64, size: Int) throws(Errno) -> ReadReply {
        // The app's own bytes while it writes them (add-only included), through a handle of that
        // session; never a committed file, nor a later session of it.
        let f = h.file
        return try f.run { () throws(Errno) -> ReadReply in
            guard h.isCurrentLocked, f.isWriting, f.fd >= 0 else { throw .accessDenied }
            // An edit reads only while the app still sees the asset as it opened it (a revoke, a
            // denial, strip-location turned on or a newer version end it), as reads of originals do.
            if let row = f.editing, !stillVisible(rowID: row, ino: f.ino) { throw .accessDenied }
            var buf = [UInt8](repeating: 0, count: size)
            let n = buf.withUnsafeMutableBytes { b in pread(f.fd, b.baseAddress, size, off_t(offset)) }
            if n < 0 { throw .system(errno) }
            buf.removeLast(size - n)
            return .bytes(buf)
        }
    }

    func fsyncSession(_ h: SessionHandle) throws(Errno) {
        let f = h.file
        try f.run { () throws(Errno) in
            guard h.isCurrentLocked, f.isWriting, f.fd >= 0 else { return }
            if Glibc.fsync(f.fd) != 0 { throw .system(errno) }
        }
    }
}
