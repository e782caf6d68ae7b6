import FUSE
import Foundation
import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

/// A folder an app makes in its mount (outside `Albums/`): `cp -r DCIM/ M/`, `mv 100CANON M/`,
/// `rsync -a`, `tar x`. The library has no folders: every file written into one is flattened into
/// the library as an asset of the app under its own file name (the library makes display names
/// unique), exactly as if written at the top. The folder itself lives in this mount's memory for
/// the life of the mount, so the tool can go on writing into it, set its times and list what it
/// wrote there; it is gone after a remount (the files stay, at the top level).
///
/// What a folder lists: the files being written in it and, in a read-write mount, the files it
/// became that the app can still see; in an add-only mount nothing but its subfolders.
struct UploadFolder: Sendable {
    enum Child: Sendable, Equatable {
        case folder(Inode)
        /// A file being written (or, add-only, committed and still known by name).
        case session(Inode)
        /// A committed file of a read-write mount: the view's asset.
        case asset(rowID: Int64)
        /// A sidecar written here (issue 37): the view's sidecar of that photo.
        case sidecar(SidecarKey)
    }

    let ino: Inode
    var parent: Inode
    var name: String
    var children: [String: Child] = [:] { didSet { sortedNames = nil } }
    var mtime: Timespec
    /// `children`'s names, sorted: made on the first listing after a change, then read by every
    /// READDIR of that listing (each sorted them all: one `ls -f` of 50,000 took 47.7 s).
    var sortedNames: [String]?
}

extension PhotoFS {
    func folder(_ ino: Inode) -> UploadFolder? { folders.withLock { $0[ino] } }
    func isFolder(_ ino: Inode) -> Bool { folders.withLock { $0[ino] != nil } }

    /// May the app make folders (and write files into them)? Where it may create files.
    var canMakeFolders: Bool { model.withLock { $0.policy.canCreate } }

    /// The name a file written in an upload folder takes at the top of the view (its own name in
    /// the library, what every view of this app lists it as): the name it has in its folder when
    /// nothing at the top has it, else the first free alternative (`NAME-1.jpg`, ...). A name at
    /// one level of a view names one thing, and what an app writes never takes the name of what
    /// it already sees there: before, a file written in a folder took a granted photo's name at
    /// the top (the person's photo was relisted as `NAME-1`), though creating that name at the top
    /// is EEXIST, and took the name of a folder at the top (`ls` listed `DUP` twice).
    ///
    /// Taken at the top: an upload folder's name, a file being written there (or, add-only, one
    /// still known by name), and a visible asset: for a new file (`renaming` nil), one that is not
    /// the app's own (its own of that name keeps it anyway, being older: `ViewNaming.assign`, and
    /// copying the same file again must give the same name, so that it is found the same and
    /// makes no duplicate); for a rename of the app's asset `renaming`, any other one (it would
    /// take the name of the older one). A hidden asset's name is free, as everywhere.
    ///
    /// Called under a file's lock (commit, rename): takes `model` and leaves only.
    func flattenedName(_ name: String, renaming row: Int64? = nil) -> String {
        DisplayName.unique(name) { c in
            if DisplayName.reserved.contains(c) || rootFolders.withLock({ $0[c] != nil }) || sessionNames.withLock({ $0[c] != nil }) {
                return true
            }
            return model.withLock { m in
                guard let r = m.byName[c], r != row else { return false }
                return row != nil || !(m.nodes[r]?.owned ?? false)
            }
        }
    }

    /// What `name` at the top of the view is, for a rename that would replace it: nil when it is
    /// free (nothing the app sees has it), else whether it is a folder.
    func topEntryIsFolder(_ name: String) -> Bool? {
        if rootFolders.withLock({ $0[name] != nil }) { return true }
        if model.withLock({ $0.byName[name] != nil }) || sessionIno(name) != nil { return false }
        return nil
    }

    func makeFolder(parent: Inode, name: String) throws(Errno) -> Entry {
        guard canMakeFolders else { throw .accessDenied }
        guard folders.withLock({ $0.count }) < folderLimit else {
            log("refused a folder from \(appID): the mount keeps \(folderLimit) folders already (PHOTOGATE_MAX_FOLDERS)")
            throw Errno(EDQUOT)
        }
        let key = model.withLock { $0.app.inodeKey }
        let ino = ViewModel.inode(key: key, "folder/" + UUID().uuidString)
        if parent == FixedInode.root {
            // A visible name, a file being written or another folder answers EEXIST; a hidden
            // asset's name is free (the folder leaks nothing).
            let taken = model.withLock { m in m.byName[name] != nil || ((name == "Albums" || name == "Shared") && m.policy.showsAlbums) }
            if taken || sessionIno(name) != nil || rootFolders.withLock({ $0[name] != nil }) { throw .exists }
            let f = UploadFolder(ino: ino, parent: parent, name: name, mtime: .now)
            let clash: Bool = rootFolders.withLock { r in
                if r[name] != nil { return true }
                r[name] = ino
                return false
            }
            rootFolderNames.withLock { $0 = nil }
            if clash { throw .exists }
            folders.withLock { $0[ino] = f }
        } else {
            let result: Result<Void, Errno> = folders.withLock { fs in
                guard var p = fs[parent] else { return .failure(.noEntry) }
                if p.children[name] != nil { return .failure(.exists) }
                p.children[name] = .folder(ino)
                p.mtime = .now
                fs[parent] = p
                fs[ino] = UploadFolder(ino: ino, parent: parent, name: name, mtime: .now)
                return .success(())
            }
            try result.get()
        }
        return entry(folderAttributes(ino)!)
    }

    func folderAttributes(_ ino: Inode) -> Attributes? {
        guard let f = folder(ino) else { return nil }
        return Attributes(ino: ino, mode: FileMode.directory | 0o755, nlink: 2, size: 4096, uid: uid, gid: gid,
                          atime: f.mtime, mtime: f.mtime, ctime: f.mtime)
    }

    /// The inode of `name` in an upload folder, or nil.
    func folderChild(_ parent: Inode, _ name: String) -> Inode? {
        guard let child = folders.withLock({ $0[parent]?.children[name] }) else { return nil }
        switch child {
        case .folder(let ino): return ino
        case .session(let ino):
            guard let f = session(ino) else { return nil }
            return f.run { f.isNamed(addOnly: access == .addOnly) } ? ino : nil
        case .asset(let rowID):
            return model.withLock { $0.nodes[rowID]?.ino }
        case .sidecar(let key):
            return model.withLock { $0.sidecars[key]?.ino }
        }
    }

    /// The entries of an upload folder from its `from`-th child (sorted by name), at most `limit`:
    /// each READDIR reads one batch of a listing sorted once, not all of it sorted again.
    /// Each entry comes with its position in the sorted names (its listing offset: entries that
    /// are not listed, a file no longer being written, leave their position unused).
    func folderListing(_ ino: Inode, from: Int = 0, limit: Int = .max) -> (entries: [(position: Int, name: String, attributes: Attributes)], total: Int)? {
        guard let (names, children) = folders.withLock({ fs -> ([String], [String: UploadFolder.Child])? in
            guard var f = fs[ino] else { return nil }
            if f.sortedNames == nil {
                f.sortedNames = f.children.keys.sorted()
                fs[ino] = f
            }
            let names = f.sortedNames!
            let slice = from < names.count ? Array(names[from..<min(names.count, from &+ min(limit, names.count))]) : []
            return (names, Dictionary(uniqueKeysWithValues: slice.compactMap { n in f.children[n].map { (n, $0) } }))
        }) else { return nil }
        var out: [(position: Int, name: String, attributes: Attributes)] = []
        let slice = from < names.count ? names[from..<min(names.count, from &+ min(limit, names.count))] : []
        for (k, name) in slice.enumerated() {
            guard let child = children[name] else { continue }
            let position = from + k
            switch child {
            case .folder(let c):
                if let a = folderAttributes(c) { out.append((position, name, a)) }
            case .session(let s):
                guard access == .readWrite, let sf = session(s) else { continue }
                if let a = sf.run({ sf.isWriting && !sf.hidden ? sessionAttributes(sf) : nil }) { out.append((position, name, a)) }
            case .asset(let rowID):
                guard access == .readWrite, let n = model.withLock({ $0.nodes[rowID] }) else { continue }
                out.append((position, name, attributes(n)))
            case .sidecar(let key):
                guard access == .readWrite, let n = model.withLock({ $0.sidecars[key] }) else { continue }
                out.append((position, name, sidecarAttributes(n)))
            }
        }
        return (out, names.count)
    }

    func setFolderChild(_ parent: Inode, _ name: String, _ child: UploadFolder.Child?, ifCurrently current: UploadFolder.Child? = nil) {
        folders.withLock { fs in
            guard var p = fs[parent] else { return }
            if let current, p.children[name] != current { return }
            p.children[name] = child
            p.mtime = .now
            fs[parent] = p
        }
    }

    /// Whether an upload folder may go (rmdir, or a folder renamed over it): not while it holds
    /// subfolders or files being written (ENOTEMPTY).
    func checkRemovable(_ ino: Inode) throws(Errno) {
        guard let f = folder(ino) else { throw .noEntry }
        for (_, child) in f.children {
            switch child {
            case .folder: throw .notEmpty
            case .session(let s):
                if let sf = session(s), sf.run({ sf.isWriting }) { throw .notEmpty }
            case .asset, .sidecar: continue
            }
        }
    }

    /// `mv M/P M/P2` of a folder at the top, as a nested folder renames (before, ENOENT: only
    /// files were looked for at the top). The new name follows the rules of mkdir there: a name
    /// the view shows (a visible asset, a file being written) is ENOTDIR (EEXIST with
    /// RENAME_NOREPLACE); another folder is replaced when rmdir could remove it (else ENOTEMPTY),
    /// as rename(2) does; a hidden asset's name is free. Its files keep their names.
    func renameRootFolder(_ from: String, _ to: String, flags: RenameFlags) throws(Errno) {
        guard let ino = rootFolders.withLock({ $0[from] }) else { throw .noEntry }
        if from == to { return }
        guard !flags.contains(.exchange) else { throw .accessDenied }
        var replaced: Inode? = nil
        switch topEntryIsFolder(to) {
        case nil: break
        case true?:
            if flags.contains(.noReplace) { throw .exists }
            replaced = rootFolders.withLock { $0[to] }
            if let replaced { try checkRemovable(replaced) }
        case false?:
            throw flags.contains(.noReplace) ? .exists : .notDirectory
        }
        let moved: Bool = rootFolders.withLock { r in
            guard r[from] == ino, r[to] == replaced else { return false }
            r[from] = nil
            r[to] = ino
            return true
        }
        guard moved else { throw .busy }   // a mkdir or rename of the same names meanwhile: try again
        rootFolderNames.withLock { $0 = nil }
        folders.withLock { fs in
            if let replaced { fs[replaced] = nil }
            fs[ino]?.name = to
            fs[ino]?.mtime = .now
        }
    }

    /// rmdir of an upload folder: refused while it holds subfolders or files being written.
    func removeFolder(parent: Inode, name: String) throws(Errno) {
        let ino: Inode
        if parent == FixedInode.root {
            guard let i = rootFolders.withLock({ $0[name] }) else { throw .noEntry }
            ino = i
        } else {
            guard case .folder(let i)? = folders.withLock({ $0[parent]?.children[name] }) else { throw .noEntry }
            ino = i
        }
        try checkRemovable(ino)
        folders.withLock { $0[ino] = nil }
        if parent == FixedInode.root {
            rootFolders.withLock { r in if r[name] == ino { r[name] = nil } }
            rootFolderNames.withLock { $0 = nil }
        } else {
            setFolderChild(parent, name, nil, ifCurrently: .folder(ino))
        }
    }
}

extension PhotoFS {
    /// rm in an upload folder: a file being written is dropped; a file it became (read-write) goes
    /// to Recently Deleted where the app may delete its own assets.
    func unlinkInFolder(_ parent: Inode, _ name: String) throws(Errno) {
        guard let child = folders.withLock({ $0[parent]?.children[name] }) else { throw .noEntry }
        switch child {
        case .folder:
            throw .isDirectory
        case .sidecar(let key):
            guard let n = model.withLock({ $0.sidecars[key] }) else {
                setFolderChild(parent, name, nil, ifCurrently: child)
                throw .noEntry
            }
            try unlinkSidecar(key, name: n.name)
            setFolderChild(parent, name, nil, ifCurrently: child)
        case .session(let ino):
            guard let f = session(ino) else { throw .noEntry }
            if forgetCommittedName(ino) { return }
            let dropped: Bool = f.run {
                guard f.isWriting else { return false }
                discardLocked(f)
                return true
            }
            guard dropped else { throw .accessDenied }
            if f.run({ f.handles.isEmpty }) { files.withLock { fs in if fs[ino] === f { fs[ino] = nil } } }
        case .asset(let rowID):
            guard let n = model.withLock({ $0.nodes[rowID] }) else {
                setFolderChild(parent, name, nil, ifCurrently: child)
                throw .noEntry
            }
            guard n.deletable else { throw .accessDenied }
            // The backup of a save by backup (mogrify, jhead): the save, not a delete.
            if try saveByBackup(rowID: rowID, backup: name, folder: parent) { return }
            do { try library.moveToTrash(rowIDs: [rowID], by: appID) } catch { throw mountErrno(for: error) }
            recorder.note(rowID, .deleted)
            if n.owned { backupTrail.withLock { $0.noteTrashed(rowID, name: name, folder: parent) } }
            setFolderChild(parent, name, nil, ifCurrently: child)
            refresh()
        }
    }

    /// rename within one upload folder (rsync's temp name, then the real one). A folder and a
    /// file never replace each other (ENOTDIR, EISDIR, as rename(2)); a folder replaces another
    /// that rmdir could remove. A file's new name is its own name in the library as when it was
    /// written there (`flattenedName`), and the library asks the one decision whether the app
    /// may rename it (`LibraryPort.renameOwnAsset`).
    func renameInFolder(_ parent: Inode, _ from: String, _ to: String, flags: RenameFlags) throws(Errno) {
        guard !flags.contains(.exchange) else { throw .accessDenied }
        guard let child = folders.withLock({ $0[parent]?.children[from] }) else { throw .noEntry }
        if from == to { return }
        let target = folders.withLock { $0[parent]?.children[to] }
        let targetShown = target != nil && folderChild(parent, to) != nil
        if case .folder(let ino) = child {
            var replaced: Inode? = nil
            if targetShown, let target {
                if flags.contains(.noReplace) { throw .exists }
                guard case .folder(let other) = target else { throw .notDirectory }
                try checkRemovable(other)
                replaced = other
            }
            let moved: Bool = folders.withLock { fs in
                guard var p = fs[parent], p.children[from] == child, replaced == nil || p.children[to] == target else { return false }
                p.children[from] = nil
                p.children[to] = child
                p.mtime = .now
                fs[parent] = p
                if let replaced { fs[replaced] = nil }
                fs[ino]?.name = to
                return true
            }
            if !moved { throw .busy }
            return
        }
        if targetShown, case .folder? = target { throw flags.contains(.noReplace) ? .exists : .isDirectory }
        // A sidecar's name follows its photo's; a file renamed over one is its next version.
        if try renameSidecar(from: from, to: to, folder: parent, flags: flags) { return }
        // Over a file it became (read-write): the saved file becomes that asset's new version
        // (rsync's changed-file flow), as at the top.
        if case .asset(let targetRow)? = folders.withLock({ $0[parent]?.children[to] }),
           let target = model.withLock({ $0.nodes[targetRow] }) {
            if flags.contains(.noReplace) { throw .exists }
            let sourceRow: Int64?
            switch child {
            case .asset(let r): sourceRow = r
            case .session(let s): sourceRow = session(s).flatMap { sf in sf.run { sf.committedRowID } }
            case .folder, .sidecar: sourceRow = nil
            }
            guard let sourceRow, sourceRow != targetRow, let sourceIno = folderChild(parent, from),
                  try renameOver(sourceRow: sourceRow, sourceIno: sourceIno, target: target) else { throw .accessDenied }
            setFolderChild(parent, from, nil, ifCurrently: child)
            return
        }
        if let existing = folderChild(parent, to), existing != folderChild(parent, from) {
            if flags.contains(.noReplace) { throw .exists }
            // Replacing a file the app wrote here: a file being written is dropped; an add-only
            // app's committed one keeps its asset and loses the name.
            guard case .session(let old)? = folders.withLock({ $0[parent]?.children[to] }), let of = session(old),
                  of.run({ () -> Bool in
                      guard of.isWriting else { return false }
                      discardLocked(of)
                      return true
                  }) || forgetCommittedName(old) else { throw .accessDenied }
        }
        switch child {
        case .folder:
            return   // renamed above
        case .sidecar:
            throw .accessDenied   // (renameSidecar refused it above)
        case .session(let ino):
            guard let f = session(ino) else { throw .noEntry }
            let result: Result<Int64?, Errno> = f.run {
                if let r = f.committedRowID {
                    // The library asks the one decision (canRename), as for every rename.
                    do { try library.renameOwnAsset(rowID: r, app: appID, access: access, to: flattenedName(to, renaming: r)) } catch {
                        return .failure(mountErrno(for: error))
                    }
                } else if !f.isWriting {
                    return .failure(.noEntry)
                }
                f.name = to
                return .success(f.committedRowID)
            }
            let r = try result.get()
            setFolderChild(parent, from, nil, ifCurrently: child)
            setFolderChild(parent, to, child)
            if let r { backupTrail.withLock { $0.noteRenamed(r, from: from, folder: parent) } }
            if r != nil { refresh() }
            attachWaitingSidecars()
        case .asset(let rowID):
            // A file it wrote, renamed to the name of its own photo it deleted just before (jhead): a save.
            if try saveOverJustDeleted(sourceRow: rowID, name: to, folder: parent) {
                setFolderChild(parent, from, nil, ifCurrently: child)
                return
            }
            // The library asks the one decision (canRename): this path asked none, so an app
            // denied since renamed its file in a folder.
            do { try library.renameOwnAsset(rowID: rowID, app: appID, access: access, to: flattenedName(to, renaming: rowID)) } catch {
                throw mountErrno(for: error)
            }
            setFolderChild(parent, from, nil, ifCurrently: child)
            setFolderChild(parent, to, child)
            backupTrail.withLock { $0.noteRenamed(rowID, from: from, folder: parent) }
            refresh()
        }
    }
}
