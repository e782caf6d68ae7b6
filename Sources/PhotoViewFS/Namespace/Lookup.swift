import FUSE
import Foundation
import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

extension PhotoFS {
    // MARK: lookup

    public func lookup(parent: Inode, name: FileName, context: RequestContext) throws(Errno) -> Entry {
        noteAccess()
        if name.bytes.count > DisplayName.maxBytes { throw .nameTooLong }
        guard let s = name.string else { throw .noEntry }
        if let ino = try childInode(parent: parent, name: s) {
            let (a, t) = try attributes(of: ino)
            return entry(a, timeout: t)
        }
        throw .noEntry
    }

    /// The inode of a name in a directory, or nil. Throws ENOENT for a directory this mount does
    /// not show and ENOTDIR for files used as folders. The parent's kind comes from `resolve`.
    func childInode(parent: Inode, name: String) throws(Errno) -> Inode? {
        guard let node = resolve(parent) else { throw .noEntry }
        switch node {
        case .root:
            if name == ".photogate" { return FixedInode.control }
            let found: Inode? = model.withLock { m -> Inode? in
                if (name == "Albums" || name == "Shared") && m.policy.showsAlbums {
                    return name == "Albums" ? FixedInode.albums : FixedInode.shared
                }
                if let r = m.byName[name] { return m.nodes[r]?.ino }
                if let k = m.sidecarByName[name] { return m.sidecars[k]?.ino }
                return nil
            }
            if let found { return found }
            return sessionIno(name) ?? rootFolders.withLock { $0[name] }
        case .albumsFolder(let shared):
            return model.withLock { m in (shared ? m.shared[name] : m.albums[name])?.ino }
        case .control:
            switch name {
            case "status": return FixedInode.status
            // The feed reads from where its open got to: a no-open mount has no opens to keep that.
            case "changes": return noOpen ? nil : FixedInode.changes
            case "request": return FixedInode.request
            case "refused": return FixedInode.refused
            default: return nil
            }
        case .album(let al, _):
            if let ino = model.withLock({ m in al.byName[name].flatMap { m.nodes[$0]?.ino } }) { return ino }
            // A sidecar is where its photo is: beside it in the album too (issue 37).
            if let ino = model.withLock({ m in m.sidecarByName[name].flatMap { k in al.byName.values.contains(k.rowID) ? m.sidecars[k]?.ino : nil } }) {
                return ino
            }
            return al.isShared ? nil : albumSessionIno(al.name, name)
        case .uploadFolder:
            return folderChild(parent, name)
        case .controlFile, .asset, .aliased, .session, .sidecar:
            throw .notDirectory
        }
    }

    /// A file this mount created, by name: while it is being written, and, in an add-only mount
    /// (whose view shows nothing), also after it became an asset, so that tools can still set its
    /// times or rename it. In a read-write mount a committed file is the view's business alone:
    /// if the app may no longer see its own asset, the name must answer ENOENT like any other.
    func sessionIno(_ name: String) -> Inode? {
        guard let ino = sessionNames.withLock({ $0[name] }), let f = session(ino) else { return nil }
        return f.run { f.isNamed(addOnly: access == .addOnly) } ? ino : nil
    }

    public func getattr(_ inode: Inode, handle: UInt64?, context: RequestContext) throws(Errno) -> (Attributes, timeout: Double) {
        noteAccess()
        let handle = noOpen && handle == 0 ? nil : handle   // no-open: fstat's handle is 0, none
        do {
            return try attributes(of: inode)
        } catch {
            // Through a handle opened before a revoke the asset is refused, not described: the
            // kernel refreshes attributes through the handle before serving a read from its page
            // cache, and it marks them stale at the revoke *before* it drops the pages. Answering
            // that refresh with the file's size let a read in between get bytes read ahead before
            // the revoke (Live.pagesReadAheadAreDroppedAtARevoke, flaky); an error fails the read.
            waitForPageDrop(inode)
            if let handle, case .asset(let open)? = entry(handle), open.ino == inode { throw .accessDenied }
            // Visible again after the wait (a grant back, strip-location turned back: the same
            // inode): describe it.
            if handle == nil, let again = try? attributes(of: inode) { return again }
            // By a path (no handle), an inode the view no longer has is stale: the kernel looks
            // the name up again (see `open`). (fstat sends no handle either: it gets ESTALE.)
            if handle == nil && error == .noEntry && resolve(inode) == nil { throw .stale }
            throw error
        }
    }

    /// `attributes(of:)` for a handler called on an inode rather than a name (setattr, access,
    /// opendir): an inode the view no longer has is stale, so that the kernel looks the name up
    /// again (see `open`). Lookups keep ENOENT.
    func attributesOrStale(of inode: Inode) throws(Errno) -> (Attributes, timeout: Double) {
        do {
            return try attributes(of: inode)
        } catch {
            if error == .noEntry && resolve(inode) == nil { throw .stale }
            throw error
        }
    }

    /// An inode that just left the view is answered missing only once its cached pages are gone
    /// (see `pendingDrops`). The wait is a few notifications long; the bound only keeps a stuck
    /// notifier from holding a request for ever.
    func waitForPageDrop(_ inode: Inode) {
        var waited = 0
        while pendingDrops.withLock({ $0.contains(inode) }) && waited < 20_000 {
            usleep(50)
            waited += 1
        }
    }
}
