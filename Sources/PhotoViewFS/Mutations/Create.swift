import FUSE
import Foundation
import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

extension PhotoFS {
    // MARK: creating

    func validName(_ name: FileName) throws(Errno) -> String {
        switch DisplayName.validate(name.bytes) {
        case .success(let s): return s
        case .failure(.tooLong): throw .nameTooLong
        // A reserved name reaches here only where the view does not show it (where it does, the
        // kernel answers from its own lookup): not a name a file may take (README: EINVAL).
        case .failure(.reserved): throw .invalid
        case .failure: throw .invalid
        }
    }

    public func create(parent: Inode, name: FileName, mode: UInt32, flags: Int32, context: RequestContext) throws(Errno) -> (Entry, OpenReply) {
        if noOpen { throw .readOnly }   // a no-open mount is read-only (its kernel mount too)
        noteAccess()
        let s = try validName(name)
        // A name that says the file is not media (`notes.txt`) is refused here, before its bytes
        // are sent, rather than at its close (issue 37): EPERM, a kind of file a library does not
        // keep, as for symlinks and device nodes.
        if let why = Sidecars.refusal(forNewName: s), model.withLock({ $0.policy.canCreate }) || isFolder(parent) {
            log("refused to create \(s) for \(appID): \(why)")
            noteRefusal(s, why)
            throw .permission
        }
        let sidecar = PhotoFS.isSidecarFile(s)
        if isFolder(parent) {
            guard canMakeFolders else { throw .accessDenied }
            if folderChild(parent, s) != nil { throw .exists }
            if sidecar { return try createSidecar(name: s, folder: parent, context: context) }
            return try openNewSession(try newSession(name: s, album: nil, folder: parent), context: context)
        }
        let album: String? = try model.withLock { m throws(Errno) -> String? in
            guard m.policy.canCreate else { throw .accessDenied }
            switch parent {
            case FixedInode.root:
                if m.byName[s] != nil || m.sidecarByName[s] != nil { throw .exists }
                return nil
            default:
                // Sidecars are written beside their photo at the top (or in an upload folder).
                guard m.policy.canEditAlbums, let al = m.album(ino: parent), !al.isShared, !sidecar else { throw .accessDenied }
                if al.byName[s] != nil { throw .exists }
                return al.name
            }
        }
        if parent == FixedInode.root, sessionIno(s) != nil || rootFolders.withLock({ $0[s] != nil }) { throw .exists }
        if parent == FixedInode.root, sidecar { return try createSidecar(name: s, folder: nil, context: context) }
        if let album, albumSessionIno(album, s) != nil { throw .exists }
        return try openNewSession(try newSession(name: s, album: album), context: context)
    }

    /// The reply to create: the new file open for writing, never cached by the kernel (a file
    /// being written may be refused or discarded at its close).
    func openNewSession(_ f: SessionFile, context: RequestContext) throws(Errno) -> (Entry, OpenReply) {
        let h = nextHandle.add(1, ordering: .relaxed).oldValue
        let opener = PhotoFS.process(of: context.pid)
        let generation = f.run { f.handles[h] = false; f.openers[h] = opener; f.creator = context.uid; return f.generation }
        handles.withLock { $0[h] = .other(SessionHandle(file: f, generation: generation, edit: false)) }
        return (entry(f.run { sessionAttributes(f) }, timeout: 0), OpenReply(handle: h, directIO: true))
    }

    public func setattr(_ inode: Inode, _ changes: SetAttributes, handle: UInt64?, context: RequestContext) throws(Errno) -> (Attributes, timeout: Double) {
        if noOpen { throw .readOnly }   // a no-open mount is read-only (its kernel mount too)
        if let a = try setSessionAttributes(inode, changes, handle: handle) { return (a, 0) }
        let (a, t) = try attributesOrStale(of: inode)
        if changes.isEmpty { return (a, t) }
        // `echo read-write > .photogate/request` truncates first: accept that, and nothing else.
        if inode == FixedInode.request, changes.size == 0, changes.mode == nil, changes.uid == nil, changes.gid == nil {
            return (a, t)
        }
        // Times and modes on folders, and on the photos the app may save over, are accepted:
        // `cp -a`, `rsync -a` and `tar x` set them on every folder they write into and on every
        // file after writing it; refusing would only make them fail. Contents never change here.
        // A modification time set on the app's own file takes effect as one set while writing it
        // (`rclone` sets it after closing the file): the capture date of a file whose content has
        // none (`setOwnFileDate`). Modes, and times on the person's photos it may edit (their dates
        // are the person's), are accepted without effect.
        let sameOwner = (changes.uid == nil || changes.uid == uid) && (changes.gid == nil || changes.gid == gid)
        if changes.size == nil, sameOwner, inode != FixedInode.control {
            if a.isDirectory { return (a, t) }
            let node: AssetNode? = switch resolve(inode) {
            case .asset(let n)?, .aliased(let n)?: n
            case .session(let f)?: f.run { f.committedRowID }.flatMap { r in model.withLock { $0.nodes[r] } }
            default: nil
            }
            if let n = node, n.owned {
                guard let m = changes.mtimeNow ? Timespec.now : changes.mtime else { return (a, t) }
                let date = Date(timeIntervalSince1970: Double(m.seconds) + Double(m.nanoseconds) / 1e9)
                do {
                    if try library.setOwnFileDate(rowID: n.rowID, app: appID, access: access, to: date) { refresh() }
                } catch {
                    log("the file time of \(n.name) from \(appID) was refused: \(error)")
                    throw mountErrno(for: error)
                }
                return try attributesOrStale(of: inode)
            }
            if let n = node, n.editable { return (a, t) }
            // A sidecar's times and modes (`rclone` sets them after the close): accepted without
            // effect where the app may edit its photo.
            if case .sidecar(let n)? = resolve(inode), n.editable {
                if let m = changes.mtimeNow ? Timespec.now : changes.mtime { noteSidecarTime(n.ino, m) }
                return (sidecarAttributes(n), t)
            }
            if case .session(let f)? = resolve(inode), f.isSidecar { return (a, t) }
        }
        throw .accessDenied   // read-only photos and control files do not change
    }

    public func mkdir(parent: Inode, name: FileName, mode: UInt32, context: RequestContext) throws(Errno) -> Entry {
        if noOpen { throw .readOnly }   // a no-open mount is read-only (its kernel mount too)
        noteAccess()
        // The top's reserved names: `Albums`/`Shared` where the view shows them, and `.photogate`,
        // exist; elsewhere no folder may take them (no Albums/ for limited apps: EACCES).
        if parent == FixedInode.root, let raw = name.string, DisplayName.reserved.contains(raw) {
            if raw == ".photogate" || model.withLock({ $0.policy.showsAlbums }) { throw .exists }
            throw .accessDenied
        }
        let s = try validName(name)
        // Outside Albums/: an upload folder (UploadFolders.swift).
        if parent == FixedInode.root || isFolder(parent) { return try makeFolder(parent: parent, name: s) }
        let allowed = model.withLock { $0.policy.canEditAlbums }
        guard parent == FixedInode.albums, allowed else { throw .accessDenied }
        if model.withLock({ $0.albums[s] }) != nil { throw .exists }
        do { try library.createAlbum(s) } catch { throw mountErrno(for: error) }
        refresh()
        guard let al = model.withLock({ $0.albums[s] }) else { throw .io }
        return entry(dirAttributes(al.ino, writable: true))
    }
}
