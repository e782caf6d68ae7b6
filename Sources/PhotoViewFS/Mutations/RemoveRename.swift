import FUSE
import Foundation
import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

extension PhotoFS {
    public func rmdir(parent: Inode, name: FileName, context: RequestContext) throws(Errno) {
        if noOpen { throw .readOnly }   // a no-open mount is read-only (its kernel mount too)
        guard let s = name.string else { throw .noEntry }
        if isFolder(parent) || (parent == FixedInode.root && rootFolders.withLock({ $0[s] != nil })) {
            return try removeFolder(parent: parent, name: s)
        }
        let (canEdit, exists) = model.withLock { ($0.policy.canEditAlbums, $0.albums[s] != nil) }
        guard parent == FixedInode.albums, canEdit else {
            if try childInode(parent: parent, name: s) == nil { throw .noEntry }
            throw .accessDenied
        }
        guard exists else { throw .noEntry }
        // A file being written into the album would lose its membership: not empty yet.
        let writing = albumSessions.withLock { $0[s]?.values.map { $0 } ?? [] }
        if writing.contains(where: { ino in session(ino).map { f in f.run { f.isWriting } } ?? false }) { throw .notEmpty }
        do { try library.deleteAlbum(s, onlyIfEmpty: true) } catch { throw mountErrno(for: error) }
        refresh(handledAlbums: [s])
    }

    public func unlink(parent: Inode, name: FileName, context: RequestContext) throws(Errno) {
        if noOpen { throw .readOnly }   // a no-open mount is read-only (its kernel mount too)
        guard let s = name.string else { throw .noEntry }
        if isFolder(parent) { return try unlinkInFolder(parent, s) }
        if let album = model.withLock({ $0.album(ino: parent).map(\.name) }), let ino = albumSessionIno(album, s),
           model.withLock({ $0.albums[album]?.byName[s] == nil }), let f = session(ino) {
            discard(f)
            return
        }
        if parent == FixedInode.root, let ino = sessionIno(s), let f = session(ino) {
            // Under the file's lock, so that no commit starts or is half done in between: either
            // the file being written is dropped, or the asset it became goes to the trash.
            enum Outcome { case dropped(unused: Bool), committed(Int64), view }
            let outcome: Outcome = f.run {
                switch f.state {
                case .writing:
                    if model.withLock({ $0.byName[s] != nil }) { return .view }
                    discardLocked(f)
                    return .dropped(unused: f.handles.isEmpty)
                case .committed(let r): return .committed(r)
                case .discarded: return .view
                }
            }
            switch outcome {
            case .dropped(let unused):
                if unused { files.withLock { fs in if fs[ino] === f { fs[ino] = nil } } }
                return
            case .committed(let rowID):
                if forgetCommittedName(ino) { return }
                // The asset it became, as the view (refreshed by the commit) shows it: the
                // decision's answer on the library's facts. An add-only view shows none of them.
                guard model.withLock({ $0.nodes[rowID]?.deletable }) == true else { throw .accessDenied }
                do { try library.moveToTrash(rowIDs: [rowID], by: appID) } catch { throw mountErrno(for: error) }
                recorder.note(rowID, .deleted)
                forgetCommitted(ino)
                files.withLock { fs in if fs[ino] === f { fs[ino] = nil } }
                sessionNames.withLock { n in if n[s] == ino { n[s] = nil } }
                refresh(handled: [rowID])
                return
            case .view: break
            }
        }
        // A sidecar (issue 37): removed where the app may edit its photo. In an album, its entry
        // follows the photo's membership: not removed there.
        if let key = model.withLock({ $0.sidecarByName[s] }), parent == FixedInode.root || model.withLock({ $0.album(ino: parent) != nil }) {
            guard parent == FixedInode.root else { throw .accessDenied }
            return try unlinkSidecar(key, name: s)
        }
        let target: Result<(Int64, String?), Errno> = model.withLock { m in
            switch parent {
            case FixedInode.root:
                guard let r = m.byName[s], let n = m.nodes[r] else { return .failure(.noEntry) }
                guard n.deletable else {
                    recorder.note(r, .refused)   // a leaf lock
                    return .failure(.accessDenied)
                }
                return .success((r, nil))
            default:
                guard let al = m.album(ino: parent) else {
                    return .failure(parent == FixedInode.control || FixedInode.all.contains(parent) ? (s.isEmpty ? .noEntry : .accessDenied) : .noEntry)
                }
                guard let r = al.byName[s] else { return .failure(.noEntry) }
                return (!al.isShared && m.policy.canEditAlbums) ? .success((r, al.name)) : .failure(.accessDenied)
            }
        }
        if parent == FixedInode.control || parent == FixedInode.albums || parent == FixedInode.shared {
            if try childInode(parent: parent, name: s) == nil { throw .noEntry }
            throw .accessDenied
        }
        let (rowID, album) = try target.get()
        // The backup of a save by backup (mogrify, jhead): the save, not a delete.
        if album == nil, try saveByBackup(rowID: rowID, backup: s, folder: nil) { return }
        do {
            if let album {
                let id = model.withLock { $0.nodes[rowID]?.assetID } ?? ""
                try library.removeFromAlbum(album, assetIDs: [id])
            } else {
                let own = model.withLock { $0.nodes[rowID]?.owned ?? false }
                try library.moveToTrash(rowIDs: [rowID], by: appID)
                recorder.note(rowID, .deleted)
                if own { backupTrail.withLock { $0.noteTrashed(rowID, name: s, folder: nil) } }
            }
        } catch {
            log("unlink \(s) failed: \(error)")
            throw mountErrno(for: error)
        }
        refresh(handled: album == nil ? [rowID] : [])
    }

    public func rename(parent: Inode, name: FileName, newParent: Inode, newName: FileName, flags: RenameFlags, context: RequestContext) throws(Errno) {
        if noOpen { throw .readOnly }   // a no-open mount is read-only (its kernel mount too)
        guard let s = name.string else { throw .noEntry }
        guard try childInode(parent: parent, name: s) != nil else { throw .noEntry }
        let t = try validName(newName)
        // mv of a visible asset into Albums/X/ (authorized): it joins the album.
        if parent == FixedInode.root, newParent != parent, s == t,
           let row = model.withLock({ $0.byName[s] }), model.withLock({ $0.album(ino: newParent) != nil }) {
            return try addToAlbum(rowID: row, albumIno: newParent, name: s)
        }
        guard parent == newParent else { throw .crossDevice }
        if isFolder(parent) { return try renameInFolder(parent, s, t, flags: flags) }
        guard parent == FixedInode.root, !flags.contains(.exchange) else { throw .accessDenied }
        // A folder the app made at the top (the name leads to it, not to an asset of the view).
        if let folder = rootFolders.withLock({ $0[s] }), try childInode(parent: parent, name: s) == folder {
            return try renameRootFolder(s, t, flags: flags)
        }
        // A sidecar's name follows its photo's; a file renamed over one is its next version.
        if try renameSidecar(from: s, to: t, folder: nil, flags: flags) { return }
        // Over a visible asset: the saved file becomes its new version where the app may edit it
        // (an editor's temp-then-rename save); originals are never replaced.
        if let (targetRow, target) = model.withLock({ m in m.byName[t].flatMap { r in m.nodes[r].map { (r, $0) } } }) {
            if flags.contains(.noReplace) { throw .exists }
            guard let sourceRow = model.withLock({ $0.byName[s] }), sourceRow != targetRow,
                  let sourceIno = try childInode(parent: parent, name: s) else { throw .accessDenied }
            if try renameOver(sourceRow: sourceRow, sourceIno: sourceIno, target: target) { return }
            throw .accessDenied
        }
        // A file never replaces a folder (rename(2): EISDIR); one name at the top names one thing.
        if rootFolders.withLock({ $0[t] != nil }) { throw flags.contains(.noReplace) ? .exists : .isDirectory }
        if let other = sessionIno(t), other != sessionIno(s) {
            if flags.contains(.noReplace) { throw .exists }
            if !forgetCommittedName(other) { throw .accessDenied }
        }
        // A file created through this mount (pending or just committed).
        if let ino = sessionIno(s), let f = session(ino) {
            // Under the file's lock, so that a commit in flight finishes first.
            let renamed: Result<Int64?, Errno>? = f.run {
                let viewRow = model.withLock { $0.byName[s] }
                if viewRow != nil && viewRow != f.committedRowID { return nil }   // the name is the view's
                if let r = f.committedRowID {
                    // The library asks the one decision (canRename), as for every rename.
                    do { try library.renameOwnAsset(rowID: r, app: appID, access: access, to: t) } catch { return .failure(mountErrno(for: error)) }
                } else if !f.isWriting {
                    return .failure(.noEntry)
                }
                f.name = t
                sessionNames.withLock { n in if n[s] == ino { n[s] = nil }; n[t] = ino }
                return .success(f.committedRowID)
            }
            if let renamed {
                let r = try renamed.get()
                refresh(handled: r.map { [$0] } ?? [])
                // A sidecar waiting under rsync's temp name now has its own; a photo renamed into
                // place is the one a waiting sidecar waits for.
                attachWaitingSidecars()
                return
            }
        }
        let row: Int64 = try model.withLock { m throws(Errno) -> Int64 in
            guard let r = m.byName[s], let n = m.nodes[r] else { throw .noEntry }
            guard n.renamable else { throw .accessDenied }
            return r
        }
        // A file it wrote, renamed to the name of its own photo it deleted just before (jhead): a save.
        if try saveOverJustDeleted(sourceRow: row, name: t, folder: nil) { return }
        do { try library.renameOwnAsset(rowID: row, app: appID, access: access, to: t) } catch { throw mountErrno(for: error) }
        backupTrail.withLock { $0.noteRenamed(row, from: s, folder: nil) }
        refresh(handled: [row])
        attachWaitingSidecars()
    }
}
