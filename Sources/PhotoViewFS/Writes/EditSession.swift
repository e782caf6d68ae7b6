import FUSE
import Foundation
import PhotoLibrary
import Redaction
import PGSystem
#if canImport(Glibc)
import Glibc
#endif

/// Edits (issue 15): an app that may edit a visible asset saves over it, and the save becomes a
/// new version of that asset (same id, name, albums and grants); the original is never modified.
///
/// The three ways tools save, each one new version at a single moment:
/// - write into an open of the asset (`O_TRUNC` and write, `O_RDWR` in-place tag writers): the
///   open gets a temp file holding a copy of the current version as the app reads it (empty for
///   an open with O_TRUNC, which nothing is copied for); at the last writer's close (the rules of
///   Commit.swift's `flushSession`) the temp becomes the new version;
/// - write a temp file, then rename it over the asset (exiftool, rsync, GIMP): the temp became an
///   asset of the app at its close; the rename makes its bytes the new version of the target and
///   dissolves the temp asset (its bytes live on as the version);
/// Who may edit what is the library's one decision (`LibraryPort.editDecision`): the app's own
/// assets always; others with the person's consent (`grant --edit`, `options --edit-any`). An
/// open for writing without consent fails with EACCES and records an `edit` request.
extension PhotoFS {
    func editSession(_ ino: Inode) -> SessionFile? { edits.withLock { $0[ino] } }

    /// May the app change this asset's content? Records an edit request when the person's
    /// consent is missing (the library honours prevent-prompt and its caps).
    func mayEdit(_ node: AssetNode) throws(Errno) {
        guard access == .readWrite else { throw .accessDenied }
        let decision: EditDecision
        do { decision = try library.editDecision(app: appID, rowID: node.rowID, access: access) } catch {
            log("edit decision for \(node.name) failed: \(error)")
            throw mountErrno(for: error)
        }
        try enforce(decision, rowID: node.rowID, what: node.name)
    }

    /// An edit decision at an open for writing (of a photo, or of one of its sidecars): allowed
    /// returns; a missing consent records the app's `edit` request (the library honours
    /// prevent-prompt and its caps) and refuses; never refuses. Each refusal is in the report.
    func enforce(_ decision: EditDecision, rowID: Int64, what: @autoclosure () -> String) throws(Errno) {
        switch decision {
        case .allowed:
            return
        case .needsConsent:
            do { try library.recordEditRequest(app: appID, rowID: rowID) } catch {
                log("could not record an edit request for \(what()): \(error)")
            }
            recorder.note(rowID, .refused)
            throw .accessDenied
        case .never:
            recorder.note(rowID, .refused)
            throw .accessDenied
        }
    }

    /// open(2) for writing of a visible asset the app may edit.
    /// `truncating`: the open empties the file at once (O_TRUNC): nothing of the version is copied.
    func openEdit(_ node: AssetNode, flags: Int32, context: RequestContext, truncating: Bool = false) throws(Errno) -> OpenReply {
        try mayEdit(node)
        // Open for reading and writing: the app can read the photo through it (an edit handle
        // serves its bytes), so it is a read too, whether or not it saves anything.
        if flags & O_ACCMODE == O_RDWR && context.uid == uid { recorder.note(node.rowID, .read) }
        // Location stripped: the edit starts from the redacted bytes this app reads, never from the
        // original's. (An edit of a copy holding the location, with reads redacted, let the app save
        // a version whose location the scanner no longer found, a GPS block cut off from its
        // pointer by a two-byte write, and then read it.) A file whose metadata cannot be parsed
        // with confidence is refused for editing as for reading.
        let plan = try readPlan(for: node)
        let h = nextHandle.add(1, ordering: .relaxed).oldValue
        let opener = PhotoFS.process(of: context.pid)
        // One edit per asset at a time: a second writer joins it (one file, several writers).
        if let f = editSession(node.ino), let generation = f.run({ () -> Int? in
            guard f.isWriting else { return nil }
            f.handles[h] = false
            f.openers[h] = opener
            return f.generation
        }) {
            handles.withLock { $0[h] = .other(SessionHandle(file: f, generation: generation, edit: true)) }
            return OpenReply(handle: h, directIO: true)
        }
        let temp = try makeSessionTemp()
        let f = SessionFile(id: temp.id, ino: node.ino, tempPath: temp.path, name: node.name, album: nil,
                            folder: nil, editing: node.rowID, basedOn: node.path)
        // The copy is the app's bytes being written, as if it had written them: admitted against
        // the mount's limit and the disk reserve before a byte is copied (EDQUOT, ENOSPC: the
        // open fails and leaves nothing), counted until the edit ends (`uncount`, at its commit
        // or discard). Else an app holding edit opens filled the disk past the reserve.
        do throws(Errno) { try admitEditCopy(f, to: truncating ? 0 : node.size) } catch {
            dropSessionTemp(temp)
            throw error
        }
        // The bytes of the version the view shows (`node.path`, whose plan the view has: the
        // current version may be a moment newer), as this app reads them, in one pass: in-place
        // writers change part of them. (O_TRUNC reaches us as a truncate after this open.) Opened
        // as a read opens it: a referenced original that changed since its import (or is no
        // longer a regular file) is refused here too, as its bytes are not the ones cataloged.
        let size: UInt64
        var shown: String? = nil
        do throws(Errno) {
            let src = try openOriginal(node)
            defer { FDBudget.mount.close(src) }
            if let plan {
                // Truncated at once: only the hash of what the app was shown (a save of exactly
                // those bytes is then no version, as after a copy).
                let copied = try readShown(src, plan: plan, into: truncating ? nil : temp.fd)
                size = truncating ? 0 : copied.size
                shown = copied.hash
            } else if truncating {
                size = 0
            } else {
                let copied = pg_copy_fd(src, temp.fd)
                guard copied >= 0 else {
                    let e = errno
                    log("cannot open \(node.name) for editing: \(String(cString: strerror(e)))")
                    throw .system(e)
                }
                size = UInt64(copied)
            }
        } catch {
            uncount(f)
            dropSessionTemp(temp)
            throw error
        }
        // A redacted copy may differ in size from the view's: count what was copied.
        if size > f.counted {
            do throws(Errno) { try admitGrowth(f, to: size) } catch {
                uncount(f)
                dropSessionTemp(temp)
                throw error
            }
        } else {
            uncount(f, downTo: size)
        }
        f.useTemp(fd: temp.fd, size: size, hasher: writer.newContentHasher())
        f.shownHash = shown
        f.handles[h] = false
        f.openers[h] = opener
        // `edits` is a leaf: the other edit's file lock (which nests above it) is taken with
        // `edits` released, and the slot is claimed only if it still holds what was looked at.
        var raced: SessionFile? = nil
        while true {
            let current = edits.withLock { $0[node.ino] }
            if let other = current, other !== f, other.run({ other.isWriting }) { raced = other; break }
            let claimed = edits.withLock { e -> Bool in
                guard e[node.ino] === current else { return false }   // changed meanwhile: look again
                e[node.ino] = f
                return true
            }
            if claimed { break }
        }
        var joined = SessionHandle(file: f, generation: f.generation, edit: true)
        if let other = raced {
            // Another open started an edit meanwhile: join it, drop this copy.
            uncount(f)
            f.closeTemp()
            Glibc.unlink(temp.path)
            let generation = other.run { other.handles[h] = false; other.openers[h] = opener; return other.generation }
            joined = SessionHandle(file: other, generation: generation, edit: true)
        }
        handles.withLock { $0[h] = .other(joined) }
        return OpenReply(handle: h, directIO: true)
    }

    /// Reads a file from its start as the app reads it (`plan`'s ranges zeroed or replaced; nil:
    /// as it is), hashing it, and writing it to `out` when given. Its size and content hash.
    func readShown(_ fd: Int32, plan: RedactionPlan?, into out: Int32? = nil) throws(Errno) -> (size: UInt64, hash: String) {
        let hasher = writer.newContentHasher()
        let chunk = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 64)
        defer { buffer.deallocate() }
        var offset: UInt64 = 0
        while true {
            let n = pread(fd, buffer.baseAddress, chunk, off_t(offset))
            if n < 0 { if errno == EINTR { continue }; throw .system(errno) }
            if n == 0 { break }
            let part = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n])
            plan?.apply(to: part, fileOffset: offset)
            hasher.update(UnsafeRawBufferPointer(part))
            var done = 0
            while let out, done < n {
                let w = pwrite(out, part.baseAddress! + done, n - done, off_t(offset) + off_t(done))
                if w < 0 { if errno == EINTR { continue }; throw .system(errno) }
                done += w
            }
            offset += UInt64(n)
        }
        return (offset, hasher.hashSoFar())
    }

    /// True when `fd` holds exactly the bytes `node` shows this app through `plan` (its location
    /// stripped): writing them over it is no edit.
    func isShownBytes(_ fd: Int32, of node: AssetNode, plan: RedactionPlan) throws(Errno) -> Bool {
        let original = try openOriginal(node)
        defer { FDBudget.mount.close(original) }
        var a = stat(), b = stat()
        guard fstat(fd, &a) == 0, fstat(original, &b) == 0 else { throw .system(errno) }
        guard a.st_size == b.st_size else { return false }
        return try readShown(fd, plan: nil).hash == readShown(original, plan: plan).hash
    }

    /// May this edit still be saved? The app must still see the asset under the inode it opened,
    /// and still be allowed to edit it (consent withdrawn, the asset revoked, the app denied, or a
    /// newer version or strip-location in between: the edit is refused, nothing is saved).
    func editStillAllowed(_ f: SessionFile, rowID: Int64) -> Bool {
        guard stillVisible(rowID: rowID, ino: f.ino) else { return false }
        guard let decision = try? library.editDecision(app: appID, rowID: rowID, access: access) else { return false }
        return decision.isAllowed
    }

    /// The last close of an edit: the temp becomes the asset's new version (or nothing changes
    /// when the bytes are the current version's); what is not complete media is refused and the
    /// current version stays.
    func commitEditLocked(_ f: SessionFile, rowID: Int64, last: Bool) throws(Errno) {
        // Told saved at an earlier close whose commit's answer never came (a catalog's server cut
        // while it committed: issue 41), it may be in the catalog already: then it is saved, the
        // view may show it by now (under another inode), and its file has yet to move into the
        // store. Refused now, its temp, the only copy of the version the catalog names, would go.
        if f.ready, (try? library.isCommitted(tempPath: f.tempPath)) == true {
            do {
                _ = try library.commitVersion(rowID: rowID, app: appID, tempPath: f.tempPath, fd: f.fd, contentHash: f.contentHash,
                                              alwaysNew: f.shownHash != nil, basedOn: f.basedOn, dailyLimit: nil)
            } catch {
                log("the edit of \(f.name) is kept to be committed later: \(error)")
                return
            }
            log("saved a new version of \(f.name) from \(appID) (its commit had gone through)")
            recorder.note(rowID, .edited)
            endCommittedEdit(f, rowID: rowID)
            return
        }
        CloseTrace.begin("edit")
        var traced = false
        defer { CloseTrace.end(committed: traced) }
        guard editStillAllowed(f, rowID: rowID) else {
            log("refused an edit of \(f.name) from \(appID): it may no longer edit it (revoked, denied or replaced meanwhile)")
            noteRefusal(f.name, "edit refused: the app may no longer edit this photo; the current version stays")
            discardLocked(f)
            throw .accessDenied
        }
        CloseTrace.mark("access")
        if try saveIsWhatWasShownLocked(f, refused: { why in
            log("refused an edit of \(f.name) from \(appID): \(why)")
            noteRefusal(f.name, "edit refused: \(why); the current version stays")
        }) {
            writer.clearReady(tempPath: f.tempPath)
            endCommittedEdit(f, rowID: rowID)
            return
        }
        let result: (asset: Asset, changed: Bool)
        do {
            // Bytes other than those it was shown make a version even when they are the stored
            // ones: else the outcome would tell the app that a location it guessed is right.
            // The daily limit is asked in the commit's transaction: saves at once each found room
            // in a transaction of its own, and all took it.
            result = try library.commitVersion(rowID: rowID, app: appID, tempPath: f.tempPath, fd: f.fd, contentHash: f.contentHash,
                                               alwaysNew: f.shownHash != nil, basedOn: f.basedOn, dailyLimit: f.ready ? nil : addLimit())
        } catch {
            switch error as? PortError {
            case .overDailyLimit(let added, let size)?:
                let (errno, why) = dailyRefusal(added: added, size: size)
                throw refuseEditLocked(f, errno, why)
            case .refused(let why)?:
                log("refused an edit of \(f.name) from \(appID): \(why); the current version stays")
                if f.dirty { noteRefusal(f.name, "edit refused: \(why); the current version stays") }
                if last { discardLocked(f) } else { f.dirty = false }
                throw mountErrno(for: error)
            case .noSpace?:
                discardLocked(f)
                throw mountErrno(for: error)
            case .denied(let why)?:
                log("refused an edit of \(f.name) from \(appID): \(why); the current version stays")
                noteRefusal(f.name, "edit refused: \(why); the current version stays")
                discardLocked(f)
                throw mountErrno(for: error)
            case .notDurable(let why)?:
                throw failUndurable(f, "could not save the edit of \(f.name)", why)
            default:
                // The database is unavailable: keep the edit durable and marked; recovery makes it
                // the new version after a crash, the last release retries. That commit asks no
                // limit: it is asked now (`dailyRefusalBeforeKeeping`).
                if let (errno, why) = dailyRefusalBeforeKeeping(f) { throw refuseEditLocked(f, errno, why) }
                do {
                    try writer.markVersionReady(tempPath: f.tempPath, fd: f.fd, app: appID, rowID: rowID)
                    f.ready = true
                    f.dirty = false
                    log("the edit of \(f.name) is kept to be committed later: \(error)")
                    return
                } catch {
                    log("could not save the edit of \(f.name): \(error)")
                    discardLocked(f)
                    throw .io
                }
            }
        }
        log(result.changed ? "saved a new version of \(result.asset.displayName) from \(appID)"
                           : "\(f.name) saved by \(appID) unchanged")
        if result.changed { recorder.note(rowID, .edited) }
        endCommittedEdit(f, rowID: rowID)
        CloseTrace.mark("view")
        traced = result.changed
    }

    /// An edit whose close committed (or found nothing to commit): its temp closed, its bytes no
    /// longer counted, the view refreshed.
    private func endCommittedEdit(_ f: SessionFile, rowID: Int64) {
        f.closeTemp()
        f.dirty = false
        f.ready = false
        uncount(f)
        f.state = .committed(rowID: rowID)
        refresh()
    }

    /// rename(2) of a file the app wrote over a visible asset it may edit: the file's bytes become
    /// the asset's new version, and the file (an asset since its close) is dissolved into it.
    /// Returns false when this is not such a rename.
    func renameOver(sourceRow: Int64, sourceIno: Inode, target: AssetNode) throws(Errno) -> Bool {
        // The source is renamed away (dissolved into the target): a rename of it, which the one
        // decision must allow, as the target's save must be an edit it allows.
        guard let source = model.withLock({ m in m.nodes[sourceRow].flatMap { n in n.renamable ? n : nil } }) else { return false }
        CloseTrace.begin("rename")
        var traced = false
        defer { CloseTrace.end(committed: traced) }
        try mayEdit(target)
        // A link of the source's stored file, so that no byte is copied and the file the version
        // moves into the store from is never the source's own name.
        let link = writer.newTempPath()
        guard Glibc.link(source.path, link) == 0 else {
            log("cannot link \(source.name) for a rename over \(target.name): \(String(cString: strerror(errno)))")
            throw .io
        }
        let fd = Glibc.open(link, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { Glibc.unlink(link); throw .io }
        defer { Glibc.close(fd) }
        let changed: Bool
        do {
            // The bytes this app reads of the target, its location stripped: no new version.
            // Other bytes make a version even when they are the stored ones (see commitEditLocked).
            let plan = try readPlan(for: target)
            if let plan, try isShownBytes(fd, of: target, plan: plan) {
                Glibc.unlink(link)
                changed = false
            } else {
                CloseTrace.mark("checks")
                // No daily limit: the bytes were the app's own asset, counted when it was added.
                changed = try library.commitVersion(rowID: target.rowID, app: appID, tempPath: link, fd: fd, contentHash: nil,
                                                    alwaysNew: plan != nil, basedOn: target.path, dailyLimit: nil).changed
                if changed { recorder.note(target.rowID, .edited) }
            }
        } catch {
            Glibc.unlink(link)
            log("rename of \(source.name) over \(target.name) failed: \(error)")
            throw (error as? Errno) ?? mountErrno(for: error)
        }
        // The version is committed: its file (the link) is the library's now, moved into the store
        // or left for recovery to move; whatever happens next must not delete it.
        do {
            try recorder.dissolving(sourceRow) { try library.dissolveOwnAsset(rowID: sourceRow, app: appID) }
            CloseTrace.mark("dissolve")
        } catch {
            log("\(source.name) renamed over \(target.name): saved as its new version, but \(source.name) stays: \(error)")
            throw mountErrno(for: error)
        }
        log("\(source.name) renamed over \(target.name): \(changed ? "a new version" : "unchanged")")
        // The kernel now has the target's name on the source's inode: serve the target there.
        aliases.withLock { $0.insert(sourceIno, row: target.rowID) }
        refresh(handled: [sourceRow])
        invalidator?.invalidateEntry(parent: FixedInode.root, name: Array(target.name.utf8))
        CloseTrace.mark("view")
        traced = changed
        return true
    }

    /// The asset an inode stands for after a rename over it (see `renameOver`).
    func aliasedNode(_ ino: Inode) -> AssetNode? {
        guard let row = aliases.withLock({ $0[ino] }) else { return nil }
        return model.withLock { $0.nodes[row] }
    }

    /// `mv` (or `ln`) of a visible asset into `Albums/X/` in an authorized mount: the asset joins
    /// the album; nothing is copied or trashed.
    func addToAlbum(rowID: Int64, albumIno: Inode, name: String) throws(Errno) {
        let target: (String, String)? = model.withLock { m in
            guard m.policy.canEditAlbums, let al = m.album(ino: albumIno), !al.isShared,
                  let n = m.nodes[rowID], n.name == name else { return nil }
            return (al.name, n.assetID)
        }
        guard let (album, id) = target else { throw .crossDevice }
        do { try library.addToAlbum(album, assetIDs: [id]) } catch {
            log("adding \(name) to \(album) failed: \(error)")
            throw mountErrno(for: error)
        }
        refresh()
    }

    /// ln of a visible asset into `Albums/X/` (authorized): it joins the album, one inode.
    public func link(_ inode: Inode, newParent: Inode, newName: FileName, context: RequestContext) throws(Errno) -> Entry {
        if noOpen { throw .readOnly }   // a no-open mount is read-only (its kernel mount too)
        guard let name = newName.string, let row = model.withLock({ $0.byIno[inode] }),
              model.withLock({ $0.album(ino: newParent) != nil }) else {
            if resolve(inode) == nil { throw .stale }   // an inode the view lost: see `open`
            throw .permission
        }
        do throws(Errno) { try addToAlbum(rowID: row, albumIno: newParent, name: name) } catch {
            throw error == .crossDevice ? .permission : error
        }
        let (a, t) = try attributes(of: inode)
        return entry(a, timeout: t)
    }
}
