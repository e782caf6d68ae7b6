import FUSE
import Foundation
import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

extension PhotoFS {
    // MARK: attributes

    func dirAttributes(_ ino: Inode, writable: Bool) -> Attributes {
        let changed = listingsChanged.withLock { $0 }
        let m = changed == .zero ? started : changed
        return Attributes(ino: ino, mode: FileMode.directory | (writable ? 0o755 : 0o555), nlink: 2, size: 4096,
                          uid: uid, gid: gid, atime: m, mtime: m, ctime: m)
    }

    func attributes(_ n: AssetNode) -> Attributes {
        let m = Timespec(seconds: n.mtime), c = Timespec(seconds: n.ctime)
        return Attributes(ino: n.ino, mode: FileMode.regular | 0o444, nlink: n.nlink, size: n.size, uid: uid, gid: gid,
                          atime: m, mtime: m, ctime: c)
    }

    func specialAttributes(_ ino: Inode) -> Attributes {
        let size: UInt64 = ino == FixedInode.status ? UInt64(statusContent().count)
            : ino == FixedInode.refused ? UInt64(refusedContent().count) : 0
        // `.photogate/request` is the owner's alone to write (issue 14: with allow_other, the
        // kernel checks these bits for everyone else).
        let mode: UInt32 = ino == FixedInode.request ? 0o200 : 0o444
        return Attributes(ino: ino, mode: FileMode.regular | mode, nlink: 1, size: size, uid: uid, gid: gid,
                          atime: started, mtime: started, ctime: started)
    }

    func entry(_ a: Attributes, timeout: Double = PhotoFS.longTimeout) -> Entry {
        Entry(attributes: a, entryTimeout: timeout, attrTimeout: timeout)
    }

    /// Resolves any inode to its attributes (and confirms it is still visible).
    func attributes(of ino: Inode) throws(Errno) -> (Attributes, Double) {
        switch ino {
        case FixedInode.root:
            let canCreate = model.withLock { $0.policy.canCreate }
            return (dirAttributes(ino, writable: canCreate), PhotoFS.longTimeout)
        case FixedInode.albums, FixedInode.shared:
            let (shows, canEdit) = model.withLock { ($0.policy.showsAlbums, $0.policy.canEditAlbums) }
            guard shows else { throw .noEntry }
            return (dirAttributes(ino, writable: canEdit && ino == FixedInode.albums), PhotoFS.longTimeout)
        case FixedInode.control:
            return (dirAttributes(ino, writable: false), PhotoFS.longTimeout)
        case FixedInode.status, FixedInode.changes, FixedInode.request, FixedInode.refused:
            return (specialAttributes(ino), 0)
        default:
            if let a = model.withLock({ m -> Attributes? in
                if let r = m.byIno[ino], let n = m.nodes[r] { return attributes(n) }
                if let al = m.album(ino: ino) {
                    return dirAttributes(al.ino, writable: !al.isShared && m.policy.canEditAlbums)
                }
                return nil
            }) {
                return (a, PhotoFS.longTimeout)
            }
            if let a = folderAttributes(ino) { return (a, PhotoFS.longTimeout) }
            if let n = aliasedNode(ino) {
                var a = attributes(n)
                a.ino = ino
                return (a, 0)
            }
            // A file being written: no caching, so that a refused or discarded one is gone at once.
            if let f = session(ino), let a = f.run({ () -> Attributes? in
                f.isNamed(addOnly: access == .addOnly) ? sessionAttributes(f) : nil
            }) { return (a, 0) }
            throw .noEntry
        }
    }

    public func statfs(_ inode: Inode) throws(Errno) -> StatFS {
        var st = statvfs()
        guard statvfs(library.storeRoot, &st) == 0 else { return StatFS() }
        // Report free space as it is, but "used" as only what this view shows: the disk's other
        // contents (hidden assets among them) are none of the app's business.
        let bsize = UInt64(st.f_frsize)
        let visibleBytes = viewBytes.load(ordering: .relaxed)
        let avail = UInt64(st.f_bavail)
        let used = (visibleBytes + bsize - 1) / bsize
        return StatFS(blockSize: bsize, blocks: avail + used, blocksFree: avail, blocksAvailable: avail,
                      files: UInt64(model.withLock { $0.nodes.count }) + 1_000_000, filesFree: 1_000_000, nameMax: 255)
    }

    public func access(_ inode: Inode, mask: Int32, context: RequestContext) throws(Errno) {
        let (a, _) = try attributes(of: inode)
        if mask & W_OK != 0 && a.mode & 0o200 == 0 { throw .accessDenied }
    }
}
