import FUSE
import Foundation
import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

extension PhotoFS {
    /// At each close(2) of a descriptor: when no other handle of the file has unflushed writes,
    /// the file is validated and committed now, so that a close returning 0 means an asset. A
    /// file not written yet is left alone (`cmd > file` closes the shell's descriptor first).
    ///
    /// Only a close by the process that opened the handle commits: the kernel sends FLUSH for the
    /// close of every copy of a descriptor, and a child that inherited one and exits (a shell
    /// running a command, any fork) must not commit a file its parent is still writing. Such a
    /// file is committed at its last release, when the last copy is gone.
    ///
    /// The close of a handle opened on an earlier session of the file (kept past the close that
    /// committed it, see `SessionHandle`) does nothing: the current session is not its own.
    func flushSession(_ h: SessionHandle, handle: UInt64, context: RequestContext) throws(Errno) {
        let f = h.file
        let closer = PhotoFS.process(of: context.pid)
        try f.run { () throws(Errno) in
            guard h.isCurrentLocked else { return }
            // Refused and dropped at an earlier close (not complete media, mostly holes, past the
            // daily limit, its access withdrawn): every later close of a copy of the descriptor
            // (a forked child's) says so too, not 0 over a file that is gone.
            if f.refusedAtClose { throw .invalid }
            guard f.isWriting else { return }
            // Refused at an earlier close (its opener's): final for every other process. A forked
            // child, or a process the descriptor was passed to, that writes the rest gets EINVAL
            // at its close too, and the file is never committed (it was, at the last release,
            // after that close). The process refused may mend it through a descriptor it kept.
            if f.hidden, f.refusedOpener != closer { throw .invalid }
            f.handles[handle] = true
            guard !f.handles.values.contains(false) else { return }   // another writer has it open
            guard f.dirty || f.ready else { return }
            guard f.openers[handle] == closer else { return }        // a copy elsewhere: at the release
            do throws(Errno) { try commitLocked(f, last: false) } catch {
                if f.hidden { f.refusedOpener = closer }
                if f.state == .discarded { f.refusedAtClose = true }
                throw error
            }
        }
        // A photo just written may be the one a sidecar waits for, and a sidecar just closed may
        // find its photo (with no file's lock held).
        attachWaitingSidecars()
    }

    /// The thread group (process) of a task id, as FUSE requests name the calling thread.
    /// Asked at every open and close: the number is read from the bytes of `status` as they are
    /// (its "Tgid:" line, the fourth, within its first ~100 bytes: Name holds at most 15 bytes of
    /// comm, escaped), from its first 512 bytes only, not through a String split into lines.
    static func process(of tid: Int32) -> Int32 {
        guard tid > 0, let bytes = WholeFile.prefix("/proc/\(tid)/status", limit: 512) else { return tid }
        return tgid(inStatus: bytes) ?? tid
    }

    /// The number on the "Tgid:" line of a `/proc/<tid>/status` (nil without one).
    static func tgid(inStatus bytes: [UInt8]) -> Int32? {
        let key: [UInt8] = Array("Tgid:".utf8)
        var i = 0
        while i < bytes.count {
            // At the start of a line.
            if bytes.count - i >= key.count, bytes[i..<i + key.count].elementsEqual(key) {
                var j = i + key.count
                while j < bytes.count, bytes[j] == 0x20 || bytes[j] == 0x09 { j += 1 }
                var value: Int64 = 0, digits = 0
                while j < bytes.count, bytes[j] >= 0x30, bytes[j] <= 0x39, digits < 10 {
                    value = value * 10 + Int64(bytes[j] - 0x30)
                    j += 1
                    digits += 1
                }
                guard digits > 0, value <= Int64(Int32.max), j == bytes.count || bytes[j] == 0x0a else { return nil }
                return Int32(value)
            }
            while i < bytes.count, bytes[i] != 0x0a { i += 1 }
            i += 1
        }
        return nil
    }

    /// The last release of a handle. An empty or uncommitted file is discarded at the last one; a
    /// committed one is forgotten (read-write: the view shows it) or kept by name for a while
    /// (add-only: see `keptCommittedNames`). The release of a handle of an earlier session does
    /// nothing to the current one.
    func releaseSession(_ h: SessionHandle, handle: UInt64) {
        let f = h.file, ino = f.ino, edit = h.edit
        let drop: Bool? = f.run { () -> Bool? in
            guard h.isCurrentLocked else { return nil }
            f.handles[handle] = nil
            f.openers[handle] = nil
            guard f.handles.isEmpty else { return false }
            if f.isWriting && (f.dirty || f.ready) && !f.hidden {
                // Its last close did not commit it (the database was unavailable then): try again.
                do throws(Errno) { try commitLocked(f, last: true) } catch { log("\(f.name) was not added: \(error)") }
            }
            switch f.state {
            case .writing:
                if f.ready { return false }   // durable and marked: the next mount's recovery commits it
                if f.waitingForPhoto { return false }   // a sidecar waiting for its photo (SidecarSessions.swift)
                discardLocked(f)              // empty, or refused at its close: nothing stays
                return true
            case .discarded:
                return true
            case .committed:
                return access == .readWrite || f.editing != nil
            }
        }
        guard let drop else { return }
        if drop, edit {
            edits.withLock { e in if e[ino] === f { e[ino] = nil } }
        } else if drop {
            files.withLock { fs in if fs[ino] === f { fs[ino] = nil } }
            sessionNames.withLock { n in if n[f.name] == ino { n[f.name] = nil } }
        } else if f.isCommitted, !edit {
            keepCommitted(ino)
        }
        attachWaitingSidecars()
    }

    /// Validates, makes durable and catalogs the file; refuses (and discards) what is not complete
    /// media. On success the view shows the asset before the caller's close returns.
    func commitLocked(_ f: SessionFile, last: Bool) throws(Errno) {
        if f.isSidecar { return try commitSidecarLocked(f, last: last) }
        if let rowID = f.editing, f.failedWrite == 0 { return try commitEditLocked(f, rowID: rowID, last: last) }
        CloseTrace.begin("new")
        var traced = false
        defer { CloseTrace.end(committed: traced) }
        if f.failedWrite != 0 {
            let e = f.failedWrite
            log("\(f.name) from \(appID) is incomplete (a write failed: \(String(cString: strerror(e)))): not added")
            noteRefusal(f.name, "a write failed: \(String(cString: strerror(e)))")
            discardLocked(f)
            throw .system(e)
        }
        // The person may have withdrawn the app's access while it wrote (denied, or add-only no
        // longer authorized): what it wrote after is not added.
        guard model.withLock({ $0.policy.canCreate }) else {
            log("refused \(f.name) from \(appID): its access was withdrawn while it wrote it")
            noteRefusal(f.name, "the app's access was withdrawn while it wrote this file")
            discardLocked(f)
            throw .accessDenied
        }
        // A file kept at an earlier close to be committed later (the database was unavailable)
        // was told saved: not refused now by a limit that close could not ask. The daily limit
        // is asked in the commit's transaction (`dailyLimit` below).
        if !f.ready, let (errno, why) = addRefusal(f) { throw refuseLocked(f, errno, why) }
        CloseTrace.mark("checks")
        // A file written in an upload folder keeps its name there, and takes one at the top that
        // nothing there has (a photo the app sees, a folder: `flattenedName`).
        let name = f.folder != nil ? flattenedName(f.name) : f.name
        let result: AppFileCommit
        do {
            result = try writer.commitAppFile(tempPath: f.tempPath, fd: f.fd, id: f.id, app: appID, name: name,
                                             album: f.album, reuse: access == .addOnly ? .anyName : .sameName,
                                             contentHash: f.contentHash, dailyLimit: f.ready ? nil : addLimit())
        } catch {
            switch error as? PortError {
            case .overDailyLimit(let added, let size)?:
                let (errno, why) = dailyRefusal(added: added, size: size)
                throw refuseLocked(f, errno, why)
            case .refused(let why)?:
                log("refused \(f.name) from \(appID): \(why)")
                if !f.hidden { noteRefusal(f.name, why) }
                if last {
                    discardLocked(f)
                } else {
                    hideLocked(f)
                }
                throw mountErrno(for: error)
            case .notDurable(let why)?:
                throw failUndurable(f, "could not add \(f.name)", why)
            case .noSpace?:
                log("no space to add \(f.name)")
                noteRefusal(f.name, "no space left on the library's disk")
                discardLocked(f)
                throw mountErrno(for: error)
            default:
                // The database is busy or failing: keep the file durable and marked, so that no
                // close that returned 0 loses it; the last release or the next mount commits it.
                // That commit asks no limit: it is asked now (`dailyRefusalBeforeKeeping`).
                if let (errno, why) = dailyRefusalBeforeKeeping(f) { throw refuseLocked(f, errno, why) }
                do {
                    try writer.markReady(tempPath: f.tempPath, fd: f.fd, app: appID, name: name, album: f.album)
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
            recorder.note(asset.rowID, .created)
            if access == .readWrite { backupTrail.withLock { $0.noteCreated(asset.rowID) } }
        }
        f.closeTemp()
        f.dirty = false
        f.ready = false
        // The view learns of the asset before the session lets go of the name, so the name never
        // disappears in between (rsync renames right after close).
        uncount(f)
        refresh()
        CloseTrace.mark("view")
        traced = true
        f.state = .committed(rowID: asset.rowID)
        forgetAlbumSession(f)
        if let folder = f.folder, access == .readWrite {
            setFolderChild(folder, f.name, .asset(rowID: asset.rowID), ifCurrently: .session(f.ino))
        }
    }

    /// A new file or a sidecar refused at its close by a limit: logged, told in
    /// `.photogate/refused`, dropped; the errno for the close.
    func refuseLocked(_ f: SessionFile, _ errno: Errno, _ why: String) -> Errno {
        log("refused \(f.name) from \(appID): \(why)")
        noteRefusal(f.name, why)
        discardLocked(f)
        return errno
    }

    /// An edit refused at its close by a limit: the same, the current version staying.
    func refuseEditLocked(_ f: SessionFile, _ errno: Errno, _ why: String) -> Errno {
        log("refused an edit of \(f.name) from \(appID): \(why)")
        noteRefusal(f.name, "edit refused: \(why); the current version stays")
        discardLocked(f)
        return errno
    }

    /// A close whose catalog row cannot be made durable (`PortError.notDurable`), for a new file
    /// or an edit: not "kept for later", since the row went into a log that is gone, and the
    /// close must not say saved. Nothing of it is kept (the app has its bytes, and is told: EIO).
    func failUndurable(_ f: SessionFile, _ what: String, _ why: String) -> Errno {
        log("\(what): \(why)")
        noteRefusal(f.name, "not saved: the library's catalog cannot make it durable: \(why)")
        discardLocked(f)
        return .io
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
}
