import FUSE
import Foundation
import GrantStore
import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

/// A file an app creates through its mount: a temp file in the library's `tmp/` until the close(2)
/// of its last writer commits it as an asset, before that close returns.
///
/// Why the commit happens at the last FLUSH and not at RELEASE: the kernel sends RELEASE after
/// close(2) has returned, so a commit there raced with the next writer of the same name, who
/// shared the temp file that had just become the store's original (issue 13's data loss). Here a
/// committed file's descriptor is closed under the same lock every write takes, so nothing can
/// write into an original.
///
/// Locking: `lock` guards every field and every use of `fd`. Lock order: a session's lock first,
/// then `PhotoFS.refreshLock`, then the leaf mutexes (`files`, `sessionNames`, `handles`,
/// `model`). Never take a session's lock while holding one of those.
final class SessionFile: @unchecked Sendable {
    enum State: Equatable {
        /// Being written (or created and not written yet).
        case writing
        /// An asset now; `fd` is closed.
        case committed(rowID: Int64)
        /// Refused, empty or unlinked: its temp file is gone.
        case discarded
    }

    let ino: Inode
    let album: String?
    private let lock = NSLock()

    var id: String
    var tempPath: String
    var name: String
    var fd: Int32
    var state: State = .writing
    /// The handles open on this file: true once the app closed (flushed) it after its last write.
    var handles: [UInt64: Bool] = [:]
    /// Written (or truncated) since the last commit attempt.
    var dirty = false
    /// Durable and marked complete, but not committed: the database refused the commit at close
    /// (busy, failing). Retried at the last release; recovery commits it after a crash.
    var ready = false
    var size: UInt64 = 0
    var mtime: Timespec
    var mode: UInt32 = 0o644
    /// The errno of a write that failed (a full disk): such a file never becomes an asset, since
    /// part of what the app wrote is missing; its close fails with that errno.
    var failedWrite: Int32 = 0

    init(id: String, ino: Inode, tempPath: String, fd: Int32, name: String, album: String?) {
        self.id = id
        self.ino = ino
        self.tempPath = tempPath
        self.fd = fd
        self.name = name
        self.album = album
        mtime = .now
    }

    func run<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    var isWriting: Bool { state == .writing }
    var committedRowID: Int64? {
        if case .committed(let r) = state { return r }
        return nil
    }
}

extension PhotoFS {
    /// Committed add-only files this mount keeps by name, so that tools can still set their times
    /// or rename them right after close (`cp -a`, `rsync -a`, `tar x`): the oldest are forgotten.
    static let keptCommittedNames = 1024

    /// A new, empty file being written under `name`.
    func newSession(name: String, album: String?) throws(Errno) -> SessionFile {
        let temp: (id: String, path: String, fd: Int32)
        do { temp = try writer.makeTemp() } catch {
            if case .noSpace = error as? LibraryError { throw .noSpace }
            log("cannot make a temp file: \(error)")
            throw .io
        }
        let key = model.withLock { $0.app.inodeKey }
        let ino = ViewModel.assetInode(key: key, id: temp.id, strip: false)
        let f = SessionFile(id: temp.id, ino: ino, tempPath: temp.path, fd: temp.fd, name: name, album: album)
        files.withLock { $0[ino] = f }
        if album == nil { sessionNames.withLock { $0[name] = ino } }
        return f
    }

    func session(_ ino: Inode) -> SessionFile? { files.withLock { $0[ino] } }

    /// Opens a file this mount created. Throws ENOENT for what the app may not open.
    func openSession(_ ino: Inode, flags: Int32) throws(Errno) -> OpenReply {
        guard let f = session(ino) else { throw .noEntry }
        let accmode = flags & O_ACCMODE
        let wantsWrite = accmode == O_WRONLY || accmode == O_RDWR || (flags & O_TRUNC) != 0
        let h = nextHandle.add(1, ordering: .relaxed).oldValue
        try f.run { () throws(Errno) in
            switch f.state {
            case .discarded:
                throw .noEntry
            case .committed(let rowID):
                // A committed file is an asset: in a read-write mount only the view opens it (asked
                // first). An add-only app writing a name it wrote before makes a new file, which
                // becomes another asset at its close; reading stays impossible.
                guard access == .addOnly, accmode == O_WRONLY else { throw .noEntry }
                try restartLocked(f, copyFrom: flags & O_TRUNC == 0 ? rowID : nil)
            case .writing:
                if access == .addOnly && !wantsWrite { throw .noEntry }
            }
            f.handles[h] = false
        }
        handles.withLock { $0[h] = .session(ino: ino) }
        return OpenReply(handle: h, directIO: true)
    }

    /// An add-only app writes again a name whose file is already an asset: the same inode gets a
    /// fresh temp file (and asset id). Without O_TRUNC it starts from the committed bytes.
    private func restartLocked(_ f: SessionFile, copyFrom rowID: Int64?) throws(Errno) {
        let temp: (id: String, path: String, fd: Int32)
        do { temp = try writer.makeTemp() } catch {
            if case .noSpace = error as? LibraryError { throw .noSpace }
            throw .io
        }
        var size: UInt64 = 0
        if let rowID {
            do {
                size = try library.copyOriginal(rowID: rowID, to: temp.fd)
            } catch {
                Glibc.close(temp.fd)
                Glibc.unlink(temp.path)
                if case .noSpace = error as? LibraryError { throw .noSpace }
                log("cannot reopen \(f.name) for writing: \(error)")
                throw .io
            }
        }
        forgetCommitted(f.ino)
        f.id = temp.id
        f.tempPath = temp.path
        f.fd = temp.fd
        f.state = .writing
        f.dirty = rowID != nil
        f.ready = false
        f.size = size
        f.failedWrite = 0
        f.mtime = .now
        sessionNames.withLock { $0[f.name] = f.ino }
    }

    func writeSession(_ ino: Inode, handle: UInt64, offset: Int64, data: UnsafeRawBufferPointer) throws(Errno) -> Int {
        guard let f = session(ino) else { throw .badFile }
        return try f.run { () throws(Errno) -> Int in
            guard f.isWriting, f.fd >= 0 else {
                // A descriptor kept (dup, fork) past the close that committed the file: the
                // original is never modified.
                log("write to \(f.name) after it became an asset: refused")
                throw .accessDenied
            }
            f.handles[handle] = false
            if f.ready {
                writer.clearReady(tempPath: f.tempPath)
                f.ready = false
            }
            var done = 0
            while done < data.count {
                let n = pwrite(f.fd, data.baseAddress! + done, data.count - done, off_t(offset) + done)
                if n < 0 {
                    let e = errno
                    if e == EINTR { continue }
                    f.failedWrite = e
                    f.dirty = true
                    throw Errno(e)   // ENOSPC reaches the writer
                }
                done += n
            }
            f.dirty = true
            f.size = max(f.size, UInt64(offset) + UInt64(done))
            f.mtime = .now
            return done
        }
    }

    /// truncate, chmod and utimes of a file being written: kept (times on the temp file, where
    /// the commit reads the date of a file without a capture date). Nil when `ino` is not one.
    func setSessionAttributes(_ ino: Inode, _ changes: SetAttributes, handle: UInt64?) throws(Errno) -> Attributes? {
        guard let f = session(ino) else { return nil }
        return try f.run { () throws(Errno) -> Attributes? in
            if case .committed = f.state { return nil }   // an asset: the view answers
            guard f.isWriting, f.fd >= 0 else { throw .noEntry }
            if let size = changes.size {
                if ftruncate(f.fd, off_t(size)) != 0 { throw Errno(errno) }
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

    func readSession(_ ino: Inode, offset: Int64, size: Int) throws(Errno) -> ReadReply {
        // Add-only: what an app writes is never read back. Read-write: its own pending bytes.
        guard access == .readWrite, let f = session(ino) else { throw .accessDenied }
        return try f.run { () throws(Errno) -> ReadReply in
            guard f.isWriting, f.fd >= 0 else { throw .accessDenied }
            var buf = [UInt8](repeating: 0, count: size)
            let n = buf.withUnsafeMutableBytes { b in pread(f.fd, b.baseAddress, size, off_t(offset)) }
            if n < 0 { throw Errno(errno) }
            buf.removeLast(size - n)
            return .bytes(buf)
        }
    }

    func fsyncSession(_ ino: Inode) throws(Errno) {
        guard let f = session(ino) else { return }
        try f.run { () throws(Errno) in
            guard f.isWriting, f.fd >= 0 else { return }
            if Glibc.fsync(f.fd) != 0 { throw Errno(errno) }
        }
    }

    /// At each close(2) of a descriptor: when no other handle of the file has unflushed writes,
    /// the file is validated and committed now, so that a close returning 0 means an asset. A
    /// file not written yet is left alone (`cmd > file` closes the shell's descriptor first).
    func flushSession(_ ino: Inode, handle: UInt64) throws(Errno) {
        guard let f = session(ino) else { return }
        try f.run { () throws(Errno) in
            guard f.isWriting else { return }
            f.handles[handle] = true
            guard !f.handles.values.contains(false) else { return }   // another writer has it open
            guard f.dirty || f.ready else { return }
            try commitLocked(f)
        }
    }

    /// The last release of a handle. An empty or uncommitted file is discarded at the last one; a
    /// committed one is forgotten (read-write: the view shows it) or kept by name for a while
    /// (add-only: see `keptCommittedNames`).
    func releaseSession(_ ino: Inode, handle: UInt64) {
        guard let f = session(ino) else { return }
        let drop: Bool = f.run {
            f.handles[handle] = nil
            guard f.handles.isEmpty else { return false }
            if f.isWriting && (f.dirty || f.ready) {
                // Its last close did not commit it (the database was unavailable then): try again.
                do throws(Errno) { try commitLocked(f) } catch { log("\(f.name) was not added: \(error)") }
            }
            switch f.state {
            case .writing:
                if f.ready { return false }   // durable and marked: the next mount's recovery commits it
                discardLocked(f)              // created and never written: nothing stays
                return true
            case .discarded:
                return true
            case .committed:
                return access == .readWrite
            }
        }
        if drop {
            files.withLock { $0[ino] = nil }
            sessionNames.withLock { n in if n[f.name] == ino { n[f.name] = nil } }
        } else if f.committedRowID != nil {
            keepCommitted(ino)
        }
    }

    /// Validates, makes durable and catalogs the file; refuses (and discards) what is not complete
    /// media. On success the view shows the asset before the caller's close returns.
    func commitLocked(_ f: SessionFile) throws(Errno) {
        if f.failedWrite != 0 {
            let e = f.failedWrite
            log("\(f.name) from \(appID) is incomplete (a write failed: \(String(cString: strerror(e)))): not added")
            discardLocked(f)
            throw Errno(e)
        }
        let result: AppFileCommit
        do {
            result = try writer.commitAppFile(tempPath: f.tempPath, fd: f.fd, id: f.id, app: appID, name: f.name,
                                             album: f.album, reuseSameContent: access == .addOnly ? .anyName : .sameName)
        } catch {
            switch error as? LibraryError {
            case .badInput(let why)?:
                log("refused \(f.name) from \(appID): \(why)")
                discardLocked(f)
                throw .invalid
            case .noSpace?:
                log("no space to add \(f.name)")
                discardLocked(f)
                throw .noSpace
            default:
                // The database is busy or failing: keep the file durable and marked, so that no
                // close that returned 0 loses it; the last release or the next mount commits it.
                do {
                    try writer.markReady(tempPath: f.tempPath, fd: f.fd, app: appID, name: f.name, album: f.album)
                    f.ready = true
                    f.dirty = false
                    log("\(f.name) is kept to be committed later: \(error)")
                    return
                } catch {
                    log("could not add \(f.name): \(error)")
                    discardLocked(f)
                    throw .io
                }
            }
        }
        let asset = result.asset
        if result.reused {
            log("\(f.name) from \(appID) has the same content as its asset \(asset.id): kept that one")
        } else {
            log("added \(f.name) as \(asset.id) (\(asset.displayName)) owned by \(appID)")
        }
        Glibc.close(f.fd)
        f.fd = -1
        f.dirty = false
        f.ready = false
        // The view learns of the asset before the session lets go of the name, so the name never
        // disappears in between (rsync renames right after close).
        refresh()
        f.state = .committed(rowID: asset.rowID)
    }

    /// Drops a file being written and its temp data.
    func discardLocked(_ f: SessionFile) {
        guard f.state != .discarded else { return }
        let wasWriting = f.isWriting
        if f.fd >= 0 { Glibc.close(f.fd) }
        f.fd = -1
        if wasWriting {
            Glibc.unlink(f.tempPath)
            writer.clearReady(tempPath: f.tempPath)
        }
        f.state = .discarded
        f.dirty = false
        f.ready = false
        sessionNames.withLock { n in if n[f.name] == f.ino { n[f.name] = nil } }
        if wasWriting {
            // The name leaves the listing without a directory operation: drop cached listings.
            invalidateListings([FixedInode.root] + (f.album.flatMap { a in model.withLock { $0.albums[a]?.ino } }.map { [$0] } ?? []))
        }
    }

    /// Remembers a committed add-only file by name, forgetting the oldest beyond the limit.
    func keepCommitted(_ ino: Inode) {
        let evicted: [Inode] = committedOrder.withLock { order in
            order.removeAll { $0 == ino }
            order.append(ino)
            guard order.count > PhotoFS.keptCommittedNames else { return [] }
            let out = Array(order.prefix(order.count - PhotoFS.keptCommittedNames))
            order.removeFirst(out.count)
            return out
        }
        for e in evicted {
            guard let f = session(e) else { continue }
            let gone: Bool = f.run { f.handles.isEmpty && f.committedRowID != nil }
            if gone {
                files.withLock { $0[e] = nil }
                sessionNames.withLock { n in if n[f.name] == e { n[f.name] = nil } }
            }
        }
    }

    func forgetCommitted(_ ino: Inode) {
        committedOrder.withLock { $0.removeAll { $0 == ino } }
    }
}
