import FUSE
import PhotoLibrary

/// What an inode of a mount stands for: every kind of node, resolved in one place (`resolve`).
/// Handlers switch on this instead of each telling fixed inodes, assets, albums, upload folders,
/// aliases and files being written apart by hand.
enum Node {
    case root
    /// `Albums/` or `Shared/`, where the view shows them.
    case albumsFolder(shared: Bool)
    /// `.photogate/`.
    case control
    /// `.photogate/status`, `changes`, `request` or `refused`.
    case controlFile(Inode)
    /// A visible asset.
    case asset(AssetNode)
    /// A visible album (in `Albums/` or `Shared/`), and whether the app may change it.
    case album(AlbumNode, writable: Bool)
    /// A folder the app made (Mutations/UploadFolders.swift).
    case uploadFolder(Inode)
    /// An inode that stands for another asset after a rename over it (Writes/EditSession.swift).
    case aliased(AssetNode)
    /// A file this mount created (being written, or committed and still known by name).
    case session(SessionFile)
    /// A visible sidecar of a visible asset (Model/SidecarNodes.swift).
    case sidecar(SidecarNode)
}

extension PhotoFS {
    /// The node an inode stands for in this mount now, or nil (ENOENT). Visibility of the fixed
    /// folders is decided here; files being written are returned whatever their state, for the
    /// caller to judge.
    func resolve(_ ino: Inode) -> Node? {
        switch ino {
        case FixedInode.root: return .root
        case FixedInode.albums, FixedInode.shared:
            return model.withLock { $0.policy.showsAlbums } ? .albumsFolder(shared: ino == FixedInode.shared) : nil
        case FixedInode.control: return .control
        case FixedInode.status, FixedInode.changes, FixedInode.request, FixedInode.refused: return .controlFile(ino)
        default:
            if let n = model.withLock({ m -> Node? in
                if let r = m.byIno[ino], let n = m.nodes[r] { return .asset(n) }
                if let k = m.sidecarByIno[ino], let n = m.sidecars[k] { return .sidecar(n) }
                if let al = m.album(ino: ino) { return .album(al, writable: !al.isShared && m.policy.canEditAlbums) }
                return nil
            }) { return n }
            if isFolder(ino) { return .uploadFolder(ino) }
            if let n = aliasedNode(ino) { return .aliased(n) }
            if let f = session(ino) { return .session(f) }
            return nil
        }
    }
}
