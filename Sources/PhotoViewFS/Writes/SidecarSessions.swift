// Kept in one file (over ~400 lines): a sidecar's write, from its create to the commit or the wait for its photo, one state machine.
import FUSE
import Foundation
import PhotoLibrary
import Redaction
import PGSystem
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Sidecars (issue 37): the files photo tools keep beside a photo (`photo.jpg.xmp`, `IMG_1.XMP`,
/// RawTherapee's `.pp3`, DxO's `.dop`, a camera's `.THM`, Apple's `.AAE`), kept with the photo
/// whose name they share.
///
/// - A file created under a sidecar's name (`Sidecars.parse`) is written like any file, and at its
///   last close becomes the current content of that photo's sidecar, a version of it, before the
///   close returns (`LibraryPort.commitSidecar`), never an asset of its own. Its photo is found by
///   name where it is written (the top, or the upload folder it is written in): a photo named
///   `photo.jpg` for `photo.jpg.xmp`, else one named `IMG_1.<ext>` for `IMG_1.XMP`.
/// - Writing one is an edit of its photo: the same consent (`ViewPolicy.sidecarDecision`). Without
///   it the create fails with EACCES (and records an `edit` request), as an edit's open does.
/// - A sidecar whose photo is not there yet (`cp`, `rsync` and `rclone` copy a card's `IMG_1.XMP`
///   before `IMG_1.JPG` as often as after) waits: its close returns 0, it stays listed under its
///   name with its bytes, and it is committed to the photo once a photo of its name is written in
///   this mount (`attachWaitingSidecars`). One whose photo never comes is dropped at the unmount
///   (or after `waitLimit`), listed in `.photogate/refused`. A name whose photo the app cannot see
///   waits the same way: nothing tells a hidden photo from a missing one.
/// - Reads serve the stored file (its location removed for a strip-location app:
///   `SidecarScanner`); `rm` removes it (a version without content: the earlier ones stay).
extension PhotoFS {
    /// How long a sidecar waits for its photo (PHOTOGATE_SIDECAR_WAIT seconds; default an hour).
    static let sidecarWait: Double = Double(ProcessInfo.processInfo.environment["PHOTOGATE_SIDECAR_WAIT"] ?? "") ?? 3600
    /// How many sidecars may wait at once in a mount (each holds its temp file open).
    static let maxWaitingSidecars = 1024

    /// Whether a new file named `name` is a sidecar: its name, or rsync's temp name for one.
    static func isSidecarFile(_ name: String) -> Bool {
        Sidecars.isSidecarName(name) || Sidecars.tempTarget(name).map(Sidecars.isSidecarName) == true
    }

    /// The photo a sidecar named `name` belongs with, where it is written: the view's photos at the
    /// top (and, add-only, the files this mount wrote, still known by name), the files written in
    /// `folder`. `ownedOnly`: only photos the app created (a waiting sidecar attaches to the photo
    /// its writer copies, never to a photo of the person's that a grant shows meanwhile).
    /// Takes session locks: never call it holding one.
    func sidecarPhoto(for name: String, folder: Inode?, ownedOnly: Bool) -> SidecarKey? {
        let lookup: (String) -> Int64? = { n in
            if let folder {
                switch self.folders.withLock({ $0[folder]?.children[n] }) {
                case .asset(let r)?:
                    return self.model.withLock { m in m.nodes[r].flatMap { !ownedOnly || $0.owned ? r : nil } }
                case .session(let s)?:
                    return self.session(s).flatMap { sf in sf.run { sf.committedRowID } }
                default:
                    return nil
                }
            }
            if let r = self.model.withLock({ m in m.byName[n].flatMap { r in m.nodes[r].flatMap { !ownedOnly || $0.owned ? r : nil } } }) {
                return r
            }
            if let ino = self.sessionNames.withLock({ $0[n] }), let sf = self.session(ino) { return sf.run { sf.committedRowID } }
            return nil
        }
        return Sidecars.photo(for: name, lookup: lookup).map { SidecarKey(rowID: $0.rowID, form: $0.form, ext: $0.ext) }
    }

    /// May the app write this sidecar? Its photo's edit decision; an `edit` request is recorded
    /// where the person's consent is missing (as for an edit's open).
    func maySidecar(_ key: SidecarKey) throws(Errno) {
        let decision: EditDecision
        do { decision = try library.sidecarDecision(app: appID, rowID: key.rowID, access: access) } catch {
            log("sidecar decision for row \(key.rowID) failed: \(error)")
            throw mountErrno(for: error)
        }
        try enforce(decision, rowID: key.rowID, what: "row \(key.rowID)")
    }

    /// create(2) of a sidecar's name (at the top, or in an upload folder).
    func createSidecar(name: String, folder: Inode?, context: RequestContext) throws(Errno) -> (Entry, OpenReply) {
        var key: SidecarKey? = nil
        if Sidecars.isSidecarName(name), let k = sidecarPhoto(for: name, folder: folder, ownedOnly: false) {
            try maySidecar(k)
            key = k
        }
        return try openNewSession(try newSession(name: name, album: nil, folder: folder, sidecar: true, key: key), context: context)
    }

    /// The close of a sidecar (Commit.swift's `commitLocked`): its content becomes the sidecar's
    /// current version; without its photo yet, it waits (the close returns 0). Under `f`'s lock.
    func commitSidecarLocked(_ f: SessionFile, last: Bool) throws(Errno) {
        if f.failedWrite != 0 {
            let e = f.failedWrite
            log("\(f.name) from \(appID) is incomplete (a write failed: \(String(cString: strerror(e)))): not kept")
            noteRefusal(f.name, "a write failed: \(String(cString: strerror(e)))")
            discardLocked(f)
            throw .system(e)
        }
        if f.size > Sidecars.maxSize {
            let why = "a sidecar of \(f.size) bytes is over the \(Sidecars.maxSize >> 20) MiB a library keeps"
            log("refused \(f.name) from \(appID): \(why)")
            noteRefusal(f.name, why)
            discardLocked(f)
            throw Errno(EFBIG)
        }
        guard let key = f.sidecarKey else {
            guard model.withLock({ $0.policy.canCreate }) else {
                noteRefusal(f.name, "the app's access was withdrawn while it wrote this file")
                discardLocked(f)
                throw .accessDenied
            }
            if !f.waitingForPhoto {
                guard waitingSidecars.withLock({ $0.count }) < PhotoFS.maxWaitingSidecars else {
                    let why = "\(PhotoFS.maxWaitingSidecars) sidecars already wait for their photos in this mount"
                    log("refused \(f.name) from \(appID): \(why)")
                    noteRefusal(f.name, why)
                    discardLocked(f)
                    throw Errno(EDQUOT)
                }
                f.waitingSince = Double(DispatchTime.now().uptimeNanoseconds) / 1e9
            }
            f.waitingForPhoto = true
            f.dirty = false
            waitingSidecars.withLock { _ = $0.insert(f.ino) }
            log("\(f.name) from \(appID) waits for its photo")
            return
        }
        // What this app reads of the sidecar, when its location is removed, for a file that did
        // not start as a copy of it (a temp renamed over it): a file of those bytes is no save,
        // and any other a new version even when it equals the stored bytes (`alwaysNew` below),
        // as for an open for writing: the answer must not tell the app a location it guessed.
        // (A sidecar it may not read, its location not removable with confidence: not written either.)
        if f.shownHash == nil {
            do throws(Errno) { f.shownHash = try shownSidecarHash(key) } catch {
                noteRefusal(f.name, "this app may not read the sidecar it would replace")
                discardLocked(f)
                throw error
            }
        }
        // The redacted bytes it was shown, written back: no edit (the sidecar keeps its location).
        if try saveIsWhatWasShownLocked(f, refused: { why in
            log("refused \(f.name) from \(appID): \(why)")
            noteRefusal(f.name, why)
        }) {
            endSidecar(f, key: key)
            return
        }
        let changed: Bool
        do {
            changed = try library.commitSidecar(key, app: appID, access: access, tempPath: f.tempPath, fd: f.fd,
                                                contentHash: f.contentHash, dailyLimit: addLimit(), alwaysNew: f.shownHash != nil)
        } catch {
            switch error as? PortError {
            case .overDailyLimit(let added, let size)?:
                let (errno, why) = dailyRefusal(added: added, size: size)
                throw refuseLocked(f, errno, why)
            case .refused(let why)?:
                log("refused \(f.name) from \(appID): \(why)")
                noteRefusal(f.name, why)
                if last { discardLocked(f) } else { hideLocked(f) }
                throw .invalid
            case .denied(let why)?:
                log("refused \(f.name) from \(appID): \(why)")
                noteRefusal(f.name, "sidecar refused: \(why)")
                recorder.note(key.rowID, .refused)
                discardLocked(f)
                throw .accessDenied
            case .noSpace?:
                noteRefusal(f.name, "no space left on the library's disk")
                discardLocked(f)
                throw .noSpace
            case .notDurable(let why)?:
                throw failUndurable(f, "could not save \(f.name)", why)
            default:
                log("could not save \(f.name): \(error)")
                noteRefusal(f.name, "not saved: \(error)")
                discardLocked(f)
                throw .io
            }
        }
        log(changed ? "saved \(f.name) from \(appID): a new version of a sidecar of row \(key.rowID)" : "\(f.name) saved by \(appID) unchanged")
        if changed { recorder.note(key.rowID, .edited) }
        endSidecar(f, key: key)
    }

    /// A sidecar whose close committed (or found nothing to commit): the view shows it now.
    private func endSidecar(_ f: SessionFile, key: SidecarKey) {
        f.closeTemp()
        f.dirty = false
        f.ready = false
        f.waitingForPhoto = false
        uncount(f)
        waitingSidecars.withLock { _ = $0.remove(f.ino) }
        refresh()
        f.state = .committed(rowID: key.rowID)
        // The time it was written with (or set while it waited) stays its time in this mount.
        noteSidecarTime(f.ino, f.mtime)
        // Read-write: the view's sidecar from now on. Add-only (whose view shows nothing): the
        // file keeps its name in this mount for a while, as its other files do.
        if let folder = f.folder, access == .readWrite { setFolderChild(folder, f.name, .sidecar(key), ifCurrently: .session(f.ino)) }
    }

    /// Commits the waiting sidecars whose photo this mount has written since (after every commit
    /// and rename), and drops those that waited past `sidecarWait`. Takes each one's lock in turn,
    /// with none held.
    func attachWaitingSidecars() {
        let waiting = waitingSidecars.withLock { Array($0) }
        guard !waiting.isEmpty else { return }
        let now = Double(DispatchTime.now().uptimeNanoseconds) / 1e9
        for ino in waiting {
            guard let f = session(ino) else {
                waitingSidecars.withLock { _ = $0.remove(ino) }
                continue
            }
            let (name, folder) = f.run { (f.name, f.folder) }
            let target = Sidecars.isSidecarName(name) ? sidecarPhoto(for: name, folder: folder, ownedOnly: true) : nil
            let done: Bool = f.run {
                guard f.isWriting, f.waitingForPhoto, !f.hidden, f.name == name else {
                    if !f.isWriting { waitingSidecars.withLock { _ = $0.remove(ino) } }
                    return false
                }
                if let target {
                    f.sidecarKey = target
                    do throws(Errno) { try commitSidecarLocked(f, last: f.handles.isEmpty) } catch {
                        log("\(f.name) could not be kept with its photo: \(error)")
                    }
                } else if now - f.waitingSince > PhotoFS.sidecarWait {
                    log("\(f.name) from \(appID) waited \(Int(PhotoFS.sidecarWait)) s for its photo: dropped")
                    noteRefusal(f.name, "a sidecar whose photo was not written in this mount within \(Int(PhotoFS.sidecarWait)) s: not kept")
                    discardLocked(f)
                    waitingSidecars.withLock { _ = $0.remove(ino) }
                }
                return !f.isWriting && f.handles.isEmpty
            }
            if done { forgetSidecarSession(f) }
        }
    }

    /// A sidecar session no handle holds any more, committed or dropped: its name is the view's
    /// (read-write) or kept for a while (add-only), as for other files.
    func forgetSidecarSession(_ f: SessionFile) {
        let ino = f.ino
        if access == .addOnly, f.run({ f.isCommitted }) {
            keepCommitted(ino)
            return
        }
        files.withLock { fs in if fs[ino] === f { fs[ino] = nil } }
        sessionNames.withLock { n in if n[f.name] == ino { n[f.name] = nil } }
    }

    /// Keeps a time set on a sidecar (`sidecarTimes`; past 65,536 of them, all are forgotten).
    func noteSidecarTime(_ ino: Inode, _ m: Timespec) {
        sidecarTimes.withLock { t in
            if t.count >= 65_536 { t.removeAll() }
            t[ino] = m
        }
    }

    /// At the unmount: sidecars still waiting for their photo are not kept (and say so).
    public func dropWaitingSidecars() {
        for ino in waitingSidecars.withLock({ Array($0) }) {
            guard let f = session(ino) else { continue }
            f.run {
                guard f.isWriting, f.waitingForPhoto else { return }
                log("\(f.name) from \(appID): its photo was not written in this mount: not kept")
                noteRefusal(f.name, "a sidecar whose photo was not written in this mount (before its unmount): not kept")
                discardLocked(f)
            }
        }
        waitingSidecars.withLock { $0.removeAll() }
    }

    // MARK: reading and editing a visible sidecar

    /// How a strip-location app reads a sidecar (nil: as it is); EACCES where its location cannot
    /// be removed with confidence.
    func sidecarPlan(_ n: SidecarNode, user: UInt32?) throws(Errno) -> RedactionPlan? {
        guard n.strip else { return nil }
        switch n.redaction {
        case .plan(let bytes):
            guard !bytes.isEmpty, let plan = try? RedactionPlan(serialized: bytes) else { return nil }
            return plan.isEmpty ? nil : plan
        case .refuse(let why):
            log("refused \(n.name) to \(appID): strip-location is on and its location cannot be removed with confidence (\(why))")
            if user == nil { recorder.note(n.key.rowID, .refused) }
            throw .accessDenied
        }
    }

    /// The stored file of a sidecar, opened for reading (EIO when it is not the size cataloged).
    func openSidecarFile(_ n: SidecarNode) throws(Errno) -> Int32 {
        let fd = try FDBudget.mount.opening { pg_open_original(n.path, 0) }
        guard fd >= 0 else {
            let e = errno
            log("cannot open the sidecar \(n.name): \(String(cString: strerror(e)))")
            throw .system(e)
        }
        var st = stat()
        guard fstat(fd, &st) == 0, UInt64(st.st_size) == n.size else {
            FDBudget.mount.close(fd)
            log("cannot serve the sidecar \(n.name): its store file is not the size cataloged (damaged; photogate verify reports it)")
            throw .io
        }
        return fd
    }

    func openSidecar(_ n: SidecarNode, user: UInt32?) throws(Errno) -> OpenReply {
        let plan = try sidecarPlan(n, user: user)
        let fd = try openSidecarFile(n)
        if user == nil { recorder.note(n.key.rowID, .read) }
        return OpenReply(handle: newHandle(SidecarHandle(key: n.key, ino: n.ino, fd: fd, plan: plan, user: user)), noFlush: true)
    }

    /// The content hash of what this app reads of the sidecar `key` when that is not its stored
    /// bytes (its location removed); nil when it reads them as stored, or has no such sidecar.
    func shownSidecarHash(_ key: SidecarKey) throws(Errno) -> String? {
        guard let n = model.withLock({ $0.sidecars[key] }), let plan = try sidecarPlan(n, user: nil) else { return nil }
        let src = try openSidecarFile(n)
        defer { FDBudget.mount.close(src) }
        return try readShown(src, plan: plan).hash
    }

    /// open(2) for writing of a visible sidecar: a copy-on-write temp file of what the app reads
    /// of it, which its last close makes the sidecar's next version (as an edit of a photo).
    func openSidecarEdit(_ n: SidecarNode, flags: Int32, context: RequestContext) throws(Errno) -> OpenReply {
        guard access == .readWrite else { throw .accessDenied }
        try maySidecar(n.key)
        let plan = try sidecarPlan(n, user: nil)
        let h = nextHandle.add(1, ordering: .relaxed).oldValue
        let opener = PhotoFS.process(of: context.pid)
        if let f = editSession(n.ino), let generation = f.run({ () -> Int? in
            guard f.isWriting else { return nil }
            f.handles[h] = false
            f.openers[h] = opener
            return f.generation
        }) {
            handles.withLock { $0[h] = .other(SessionHandle(file: f, generation: generation, edit: true)) }
            return OpenReply(handle: h, directIO: true)
        }
        let temp = try makeSessionTemp()
        let f = SessionFile(id: temp.id, ino: n.ino, tempPath: temp.path, name: n.name, album: nil, folder: nil,
                            isSidecar: true, sidecarKey: n.key)
        do throws(Errno) { try admitGrowth(f, to: n.size) } catch {
            dropSessionTemp(temp)
            throw error
        }
        let size: UInt64
        var shown: String? = nil
        do throws(Errno) {
            let src = try openSidecarFile(n)
            defer { FDBudget.mount.close(src) }
            let copied = try readShown(src, plan: plan, into: temp.fd)
            size = copied.size
            if plan != nil { shown = copied.hash }
        } catch {
            uncount(f)
            dropSessionTemp(temp)
            throw error
        }
        f.useTemp(fd: temp.fd, size: size, hasher: writer.newContentHasher())
        f.shownHash = shown
        f.handles[h] = false
        f.openers[h] = opener
        let other: SessionFile? = edits.withLock { e in
            if let o = e[n.ino], o.run({ o.isWriting }) { return o }
            e[n.ino] = f
            return nil
        }
        var joined = SessionHandle(file: f, generation: f.generation, edit: true)
        if let other {
            uncount(f)
            f.closeTemp()
            Glibc.unlink(temp.path)
            let generation = other.run { other.handles[h] = false; other.openers[h] = opener; return other.generation }
            joined = SessionHandle(file: other, generation: generation, edit: true)
        }
        handles.withLock { $0[h] = .other(joined) }
        return OpenReply(handle: h, directIO: true)
    }

    /// rm of a visible sidecar: removed where the app may edit its photo (its versions stay).
    func unlinkSidecar(_ key: SidecarKey, name: String) throws(Errno) {
        do { try library.removeSidecar(key, app: appID, access: access) } catch {
            log("rm of the sidecar \(name) from \(appID) refused: \(error)")
            if case .denied? = error as? PortError { recorder.note(key.rowID, .refused) }
            throw mountErrno(for: error)
        }
        recorder.note(key.rowID, .edited)
        refresh(handledNames: [name])
    }

    /// rename(2) involving a sidecar (at the top, or in an upload folder): a sidecar's name follows
    /// its photo's, so a visible sidecar is not renamed (EACCES); a file written under another name
    /// renamed over one (rsync's temp name, an editor's save) becomes its next version. Returns
    /// false when neither name is a visible sidecar.
    func renameSidecar(from: String, to: String, folder: Inode?, flags: RenameFlags) throws(Errno) -> Bool {
        func visible(_ name: String) -> SidecarKey? {
            if let folder {
                if case .sidecar(let k)? = folders.withLock({ $0[folder]?.children[name] }), model.withLock({ $0.sidecars[k] != nil }) { return k }
                return nil
            }
            return model.withLock { $0.sidecarByName[name] }
        }
        if visible(from) != nil { throw .accessDenied }
        guard let target = visible(to) else { return false }
        if flags.contains(.noReplace) { throw .exists }
        let sourceIno: Inode? = if let folder {
            if case .session(let s)? = folders.withLock({ $0[folder]?.children[from] }) { s } else { nil }
        } else {
            sessionIno(from)
        }
        guard let sourceIno, let f = session(sourceIno), f.isSidecar else { throw .accessDenied }
        try maySidecar(target)
        let done: Bool = try f.run { () throws(Errno) -> Bool in
            guard f.isWriting, !f.hidden else { throw .noEntry }
            f.sidecarKey = target
            if folder == nil {
                sessionNames.withLock { n in if n[f.name] == f.ino { n[f.name] = nil } }
            } else if let folder {
                setFolderChild(folder, from, nil, ifCurrently: .session(f.ino))
                setFolderChild(folder, to, .session(f.ino))
            }
            f.name = to
            try commitSidecarLocked(f, last: f.handles.isEmpty)
            return f.handles.isEmpty
        }
        if done { forgetSidecarSession(f) }
        return true
    }
}

/// A visible sidecar open for reading: its stored file, with the location removed for a
/// strip-location app. Reads fail once it is no longer the view's (revoked, a new version).
final class SidecarHandle: OpenHandle {
    let key: SidecarKey
    let ino: Inode
    let fd: Int32
    let plan: RedactionPlan?
    let user: UInt32?

    init(key: SidecarKey, ino: Inode, fd: Int32, plan: RedactionPlan?, user: UInt32?) {
        self.key = key
        self.ino = ino
        self.fd = fd
        self.plan = plan
        self.user = user
    }

    func read(_ fs: PhotoFS, offset: Int64, size: Int) throws(Errno) -> ReadReply {
        guard fs.model.withLock({ $0.sidecars[key]?.ino == ino }) else { throw .accessDenied }
        return .bytes(try AssetHandle.readBytes(fd, offset: offset, size: size, zeroing: plan))
    }

    func release(_ fs: PhotoFS, handle: UInt64) { FDBudget.mount.close(fd) }
}
