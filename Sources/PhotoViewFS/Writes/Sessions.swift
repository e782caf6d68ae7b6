import FUSE
import Foundation
import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

extension PhotoFS {
    /// Committed add-only files this mount keeps by name, so that tools can still set their times
    /// or rename them right after close (`cp -a`, `rsync -a`, `tar x`): the oldest are forgotten.
    static let keptCommittedNames = 1024

    /// A new, empty file being written under `name`; `sidecar`: one that becomes a sidecar (of the
    /// photo `key`, or of one still to come: Writes/SidecarSessions.swift), with the inode its
    /// first version will have.
    func newSession(name: String, album: String?, folder: Inode? = nil, sidecar: Bool = false, key sidecarKey: SidecarKey? = nil) throws(Errno) -> SessionFile {
        let temp = try makeSessionTemp()
        let key = model.withLock { $0.app.inodeKey }
        let ino = sidecar ? ViewModel.sidecarInode(key: key, fileID: temp.id, strip: false) : ViewModel.assetInode(key: key, id: temp.id, strip: false)
        let f = SessionFile(id: temp.id, ino: ino, tempPath: temp.path, name: name, album: album, folder: folder,
                            isSidecar: sidecar, sidecarKey: sidecarKey)
        f.useTemp(fd: temp.fd, size: 0, hasher: writer.newContentHasher())
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

    /// A temp file for a session to write, its descriptors taken from the mount's budget (EMFILE
    /// when it is spent, as for opens of originals): `SessionFile.useTemp` takes it, and its
    /// `closeTemp` gives them back; `dropSessionTemp` if it is not used.
    func makeSessionTemp() throws(Errno) -> (id: String, path: String, fd: Int32) {
        try FDBudget.mount.acquire(SessionFile.descriptors)
        do { return try writer.makeTempFile() } catch {
            FDBudget.mount.release(SessionFile.descriptors)
            log("cannot make a temp file: \(error)")
            throw mountErrno(for: error)
        }
    }

    /// Deletes a temp file from `makeSessionTemp` that no session took.
    func dropSessionTemp(_ temp: (id: String, path: String, fd: Int32)) {
        Glibc.close(temp.fd)
        Glibc.unlink(temp.path)
        FDBudget.mount.release(SessionFile.descriptors)
    }

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
        let h = nextHandle.add(1, ordering: .relaxed).oldValue
        let generation = try f.run { () throws(Errno) -> Int in
            // Another user (allow_other) opens none of the files this mount writes for its creator.
            if let c = f.creator, c != context.uid, context.uid != 0 { throw .accessDenied }
            switch f.state {
            case .discarded:
                throw .noEntry
            case .committed:
                // A committed file is an asset: in a read-write mount only the view opens it (asked
                // first). An add-only app writing a name it wrote before makes a new, empty file,
                // which becomes another asset at its close, with or without O_TRUNC: nothing of
                // the asset is copied in, since the app could then read it back (a file being
                // written is its writer's), and the asset's bytes now are the library's (another
                // app's edit, its location, or the trash), not what the app wrote.
                guard access == .addOnly, accmode == O_WRONLY else { throw .noEntry }
                try restartLocked(f)
            case .writing:
                // Add-only too: a file the app is still writing is its own bytes, not the
                // library's (ffmpeg's faststart re-opens its output to move the index forward);
                // once committed it is unreadable like every asset.
                if f.hidden { throw .noEntry }
            }
            f.handles[h] = false
            f.openers[h] = PhotoFS.process(of: context.pid)
            return f.generation
        }
        handles.withLock { $0[h] = .other(SessionHandle(file: f, generation: generation, edit: false)) }
        return OpenReply(handle: h, directIO: true)
    }

    /// An add-only app writes again a name whose file is already an asset: the same inode gets a
    /// fresh, empty temp file (and asset id), as a new session: the handles still open on the
    /// committed one are of an earlier session from now on, and count for nothing here.
    private func restartLocked(_ f: SessionFile) throws(Errno) {
        let temp = try makeSessionTemp()
        forgetCommitted(f.ino)
        f.generation += 1
        f.handles = [:]
        f.openers = [:]
        f.id = temp.id
        f.tempPath = temp.path
        f.useTemp(fd: temp.fd, size: 0, hasher: writer.newContentHasher())
        f.state = .writing
        f.dirty = false
        f.ready = false
        f.failedWrite = 0
        f.mtime = .now
        if f.folder == nil { sessionNames.withLock { $0[f.name] = f.ino } }
    }

    /// A write through handle `handle` (`h`), into the session it was opened on, and only while
    /// that session is being written.
    func writeSession(_ h: SessionHandle, handle: UInt64, offset: Int64, data: UnsafeRawBufferPointer) throws(Errno) -> Int {
        let f = h.file
        return try f.run { () throws(Errno) -> Int in
            guard h.isCurrentLocked, f.isWriting, f.fd >= 0 else {
                // A descriptor kept (dup, fork) past the close that committed the file: the
                // original is never modified, nor is a later session of the same file (the next
                // edit of the photo, a name written again).
                log("write to \(f.name) after it became an asset: refused")
                throw .accessDenied
            }
            // An edit the app may no longer make (revoked, denied, replaced): refused at once.
            if let row = f.editing, !stillVisible(rowID: row, ino: f.ino) { throw .accessDenied }
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
                    f.hash?.invalidate()
                    throw .system(e)   // ENOSPC reaches the writer
                }
                done += n
            }
            f.dirty = true
            f.hash?.noteWrite(offset: UInt64(offset), count: done)
            f.size = max(f.size, UInt64(offset) + UInt64(done))
            f.mtime = .now
            return done
        }
    }
}
