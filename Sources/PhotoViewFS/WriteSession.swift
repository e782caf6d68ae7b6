import FUSE
import Foundation
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
    /// The upload folder it is written in (see UploadFolders.swift), if any.
    let folder: Inode?
    /// An edit: the asset (row id) whose new version this file becomes (EditSession.swift).
    let editing: Int64?
    private let lock = NSLock()

    var id: String
    var tempPath: String
    var name: String
    var fd: Int32
    var state: State = .writing
    /// The handles open on this file: true once the app closed (flushed) it after its last write.
    var handles: [UInt64: Bool] = [:]
    /// The process (thread group) that opened each handle.
    var openers: [UInt64: Int32] = [:]
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
    /// Bytes of this file counted against the mount's limit on bytes being written.
    var counted: UInt64 = 0
    /// Refused at a close (not complete media yet): its name is gone at once, but the file stays
    /// writable through descriptors still open elsewhere (a child that inherited one and exited
    /// sends that close too), until its last release discards it or a later close commits it.
    var hidden = false

    init(id: String, ino: Inode, tempPath: String, fd: Int32, name: String, album: String?, folder: Inode?, editing: Int64? = nil) {
        self.id = id
        self.folder = folder
        self.editing = editing
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
    /// Reachable by name: being written and not refused, or (add-only) committed.
    func isNamed(addOnly: Bool) -> Bool {
        switch state {
        case .writing: return !hidden
        case .committed: return addOnly
        case .discarded: return false
        }
    }
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
    func newSession(name: String, album: String?, folder: Inode? = nil) throws(Errno) -> SessionFile {
        let temp: (id: String, path: String, fd: Int32)
        do { temp = try writer.makeTempFile() } catch {
            if case .noSpace = error as? PortError { throw .noSpace }
            log("cannot make a temp file: \(error)")
            throw .io
        }
        let key = model.withLock { $0.app.inodeKey }
        let ino = ViewModel.assetInode(key: key, id: temp.id, strip: false)
        let f = SessionFile(id: temp.id, ino: ino, tempPath: temp.path, fd: temp.fd, name: name, album: album, folder: folder)
        files.withLock { $0[ino] = f }
        if let folder {
            setFolderChild(folder, name, .session(ino))
        } else if let album {
            albumSessions.withLock { $0[album, default: [:]][name] = ino }
        } else {
            sessionNames.withLock { $0[name] = ino }
        }
        return f
    }

    func session(_ ino: Inode) -> SessionFile? { files.withLock { $0[ino] } }

    /// A file being written under `name` in `Albums/<album>/`.
    func albumSessionIno(_ album: String, _ name: String) -> Inode? {
        guard let ino = albumSessions.withLock({ $0[album]?[name] }), let f = session(ino), f.run({ f.isWriting && !f.hidden }) else { return nil }
        return ino
    }

    func forgetAlbumSession(_ f: SessionFile) {
        guard let album = f.album else { return }
        albumSessions.withLock { a in
            if a[album]?[f.name] == f.ino { a[album]?[f.name] = nil }
            if a[album]?.isEmpty == true { a[album] = nil }
        }
    }

    /// Opens a file this mount created. Throws ENOENT for what the app may not open.
    func openSession(_ ino: Inode, flags: Int32, context: RequestContext) throws(Errno) -> OpenReply {
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
                // Add-only too: a file the app is still writing is its own bytes, not the
                // library's (ffmpeg's faststart re-opens its output to move the index forward);
                // once committed it is unreadable like every asset.
                if f.hidden { throw .noEntry }
            }
            f.handles[h] = false
            f.openers[h] = PhotoFS.process(of: context.pid)
        }
        handles.withLock { $0[h] = .session(ino: ino) }
        return OpenReply(handle: h, directIO: true)
    }

    /// An add-only app writes again a name whose file is already an asset: the same inode gets a
    /// fresh temp file (and asset id). Without O_TRUNC it starts from the committed bytes.
    private func restartLocked(_ f: SessionFile, copyFrom rowID: Int64?) throws(Errno) {
        let temp: (id: String, path: String, fd: Int32)
        do { temp = try writer.makeTempFile() } catch {
            if case .noSpace = error as? PortError { throw .noSpace }
            throw .io
        }
        var size: UInt64 = 0
        if let rowID {
            do {
                size = try library.copyOriginal(rowID: rowID, to: temp.fd)
            } catch {
                Glibc.close(temp.fd)
                Glibc.unlink(temp.path)
                if case .noSpace = error as? PortError { throw .noSpace }
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
        if f.folder == nil { sessionNames.withLock { $0[f.name] = f.ino } }
    }

    func writeSession(_ ino: Inode, edit: Bool = false, handle: UInt64, offset: Int64, data: UnsafeRawBufferPointer) throws(Errno) -> Int {
        guard let f = edit ? editSession(ino) : session(ino) else { throw .badFile }
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
            let end = UInt64(offset) + UInt64(data.count)
            if end > f.counted {
                do throws(Errno) { try admitGrowth(f, to: end) } catch {
                    f.failedWrite = error.rawValue
                    f.dirty = true
                    throw error
                }
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
        // truncate through an edit's handle (open(O_TRUNC) arrives as open, then this) or by path
        // while an edit of the asset is open.
        let viaEdit: Bool = {
            if let handle, case .edit? = handles.withLock({ $0[handle] }) { return true }
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

    func readSession(_ ino: Inode, edit: Bool = false, offset: Int64, size: Int) throws(Errno) -> ReadReply {
        // The app's own bytes while it writes them (add-only included); never a committed file.
        guard let f = edit ? editSession(ino) : session(ino) else { throw .accessDenied }
        return try f.run { () throws(Errno) -> ReadReply in
            guard f.isWriting, f.fd >= 0 else { throw .accessDenied }
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

    /// At each close(2) of a descriptor: when no other handle of the file has unflushed writes,
    /// the file is validated and committed now, so that a close returning 0 means an asset. A
    /// file not written yet is left alone (`cmd > file` closes the shell's descriptor first).
    ///
    /// Only a close by the process that opened the handle commits: the kernel sends FLUSH for the
    /// close of every copy of a descriptor, and a child that inherited one and exits (a shell
    /// running a command, any fork) must not commit a file its parent is still writing. Such a
    /// file is committed at its last release, when the last copy is gone.
    func flushSession(_ ino: Inode, edit: Bool = false, handle: UInt64, context: RequestContext) throws(Errno) {
        guard let f = edit ? editSession(ino) : session(ino) else { return }
        let closer = PhotoFS.process(of: context.pid)
        try f.run { () throws(Errno) in
            guard f.isWriting else { return }
            f.handles[handle] = true
            guard !f.handles.values.contains(false) else { return }   // another writer has it open
            guard f.dirty || f.ready else { return }
            guard f.openers[handle] == closer else { return }        // a copy elsewhere: at the release
            try commitLocked(f, last: false)
        }
    }

    /// The thread group (process) of a task id, as FUSE requests name the calling thread.
    static func process(of tid: Int32) -> Int32 {
        guard tid > 0, let text = try? String(contentsOfFile: "/proc/\(tid)/status", encoding: .utf8) else { return tid }
        for line in text.split(separator: "\n") where line.hasPrefix("Tgid:") {
            return Int32(line.dropFirst(5).trimmingCharacters(in: .whitespaces)) ?? tid
        }
        return tid
    }

    /// The last release of a handle. An empty or uncommitted file is discarded at the last one; a
    /// committed one is forgotten (read-write: the view shows it) or kept by name for a while
    /// (add-only: see `keptCommittedNames`).
    func releaseSession(_ ino: Inode, edit: Bool = false, handle: UInt64) {
        guard let f = edit ? editSession(ino) : session(ino) else { return }
        let drop: Bool = f.run {
            f.handles[handle] = nil
            f.openers[handle] = nil
            guard f.handles.isEmpty else { return false }
            if f.isWriting && (f.dirty || f.ready) {
                // Its last close did not commit it (the database was unavailable then): try again.
                do throws(Errno) { try commitLocked(f, last: true) } catch { log("\(f.name) was not added: \(error)") }
            }
            switch f.state {
            case .writing:
                if f.ready { return false }   // durable and marked: the next mount's recovery commits it
                discardLocked(f)              // empty, or refused at its close: nothing stays
                return true
            case .discarded:
                return true
            case .committed:
                return access == .readWrite || f.editing != nil
            }
        }
        if drop, edit {
            edits.withLock { e in if e[ino] === f { e[ino] = nil } }
        } else if drop {
            files.withLock { $0[ino] = nil }
            sessionNames.withLock { n in if n[f.name] == ino { n[f.name] = nil } }
        } else if f.committedRowID != nil, !edit {
            keepCommitted(ino)
        }
    }

    /// Validates, makes durable and catalogs the file; refuses (and discards) what is not complete
    /// media. On success the view shows the asset before the caller's close returns.
    func commitLocked(_ f: SessionFile, last: Bool) throws(Errno) {
        if let rowID = f.editing, f.failedWrite == 0 { return try commitEditLocked(f, rowID: rowID, last: last) }
        if f.failedWrite != 0 {
            let e = f.failedWrite
            log("\(f.name) from \(appID) is incomplete (a write failed: \(String(cString: strerror(e)))): not added")
            noteRefusal(f.name, "a write failed: \(String(cString: strerror(e)))")
            discardLocked(f)
            throw Errno(e)
        }
        let result: AppFileCommit
        do {
            result = try writer.commitAppFile(tempPath: f.tempPath, fd: f.fd, id: f.id, app: appID, name: f.name,
                                             album: f.album, reuse: access == .addOnly ? .anyName : .sameName)
        } catch {
            switch error as? PortError {
            case .refused(let why)?:
                log("refused \(f.name) from \(appID): \(why)")
                if !f.hidden { noteRefusal(f.name, why) }
                if last {
                    discardLocked(f)
                } else {
                    hideLocked(f)
                }
                throw .invalid
            case .noSpace?:
                log("no space to add \(f.name)")
                noteRefusal(f.name, "no space left on the library's disk")
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
        uncount(f)
        refresh()
        f.state = .committed(rowID: asset.rowID)
        forgetAlbumSession(f)
        if let folder = f.folder, access == .readWrite {
            setFolderChild(folder, f.name, .asset(rowID: asset.rowID), ifCurrently: .session(f.ino))
        }
    }

    /// A file refused at a close: its name goes now; the file waits for its last release.
    func hideLocked(_ f: SessionFile) {
        f.hidden = true
        f.dirty = false
        sessionNames.withLock { n in if n[f.name] == f.ino { n[f.name] = nil } }
        if let folder = f.folder { setFolderChild(folder, f.name, nil, ifCurrently: .session(f.ino)) }
        forgetAlbumSession(f)
        invalidateListings([FixedInode.root] + (f.album.flatMap { a in model.withLock { $0.albums[a]?.ino } }.map { [$0] } ?? []))
    }

    /// What one mount may have being written at once (one app must not fill the disk for the
    /// others), and the room it leaves on the library's disk for the database and the CLI (so
    /// that `photogate authorize APP --status denied` works on a full disk): a write past either
    /// fails (EDQUOT, ENOSPC), and the file is then refused at its close. Settings of the daemon:
    /// PHOTOGATE_WRITE_LIMIT_MB (default 4096) and PHOTOGATE_DISK_RESERVE_MB (default the smaller
    /// of 64 MiB and 2% of the disk).
    func admitGrowth(_ f: SessionFile, to end: UInt64) throws(Errno) {
        let growth = end - f.counted
        let admitted = writingBytes.withLock { total -> Bool in
            if total + growth > writeLimit { return false }
            total += growth
            return true
        }
        guard admitted else {
            log("\(appID) has \(writingBytes.withLock { $0 } >> 20) MiB being written, the limit is \(writeLimit >> 20) MiB: \(f.name) refused")
            throw Errno(EDQUOT)
        }
        var st = statvfs()
        if statvfs(library.storeRoot, &st) == 0 {
            let avail = UInt64(st.f_bavail) * UInt64(st.f_frsize)
            let reserve = diskReserve ?? min(64 << 20, UInt64(st.f_blocks) * UInt64(st.f_frsize) / 50)
            if avail < growth + reserve {
                writingBytes.withLock { $0 -= growth }
                throw .noSpace
            }
        }
        f.counted = end
    }

    /// A file leaves the bytes being written (committed or dropped).
    func uncount(_ f: SessionFile) {
        let c = f.counted
        f.counted = 0
        if c > 0 { writingBytes.withLock { $0 -= min($0, c) } }
    }

    /// Drops a file being written and its temp data.
    func discardLocked(_ f: SessionFile) {
        guard f.state != .discarded else { return }
        uncount(f)
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
        if f.editing != nil { return }   // an edit: the asset keeps its name and current version
        sessionNames.withLock { n in if n[f.name] == f.ino { n[f.name] = nil } }
        if let folder = f.folder { setFolderChild(folder, f.name, nil, ifCurrently: .session(f.ino)) }
        forgetAlbumSession(f)
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
                if let folder = f.folder { setFolderChild(folder, f.name, nil, ifCurrently: .session(e)) }
            }
        }
    }

    func forgetCommitted(_ ino: Inode) {
        committedOrder.withLock { $0.removeAll { $0 == ino } }
    }

    /// An add-only app removes or replaces the name of a file it wrote: the photo stays in the
    /// library (an add-only app deletes nothing) and this mount forgets the name. Returns false
    /// when `ino` is not such a file.
    func forgetCommittedName(_ ino: Inode) -> Bool {
        guard access == .addOnly, let f = session(ino) else { return false }
        let forgotten: Bool = f.run {
            guard f.committedRowID != nil, f.handles.isEmpty else { return false }
            f.state = .discarded
            sessionNames.withLock { n in if n[f.name] == ino { n[f.name] = nil } }
            if let folder = f.folder { setFolderChild(folder, f.name, nil, ifCurrently: .session(ino)) }
            return true
        }
        guard forgotten else { return false }
        forgetCommitted(ino)
        files.withLock { fs in if fs[ino] === f { fs[ino] = nil } }
        return true
    }
}
