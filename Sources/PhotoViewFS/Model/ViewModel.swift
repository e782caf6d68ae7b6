import FUSE
import Foundation
import PhotoLibrary

/// The in-memory picture of one app's view. Handlers read it under a lock. A refresh either
/// builds a new one from the database and swaps it in, or, for a change to a few assets, patches
/// it in place under the lock (`apply`); then it invalidates what changed.
struct ViewModel: Sendable {
    var app: AppRecord
    var access: AccessLevel
    var policy: ViewPolicy
    var store: NodeStore = .empty
    var nodes: NodeTable { NodeTable(store: store, links: policy.showsAlbums ? links : [:]) }
    /// How many albums of the view list each asset (set with the albums).
    var links: [Int64: UInt32] = [:]
    var byName: NameIndex { NameIndex(store: store) }
    var byIno: InodeIndex { InodeIndex(store: store) }
    /// Root listing in a stable order (capture time, then row id).
    var listing: [Int64] = []
    var albums: [String: AlbumNode] = [:]
    var shared: [String: AlbumNode] = [:]
    var albumByIno: [Inode: (shared: Bool, name: String)] = [:]
    var seq: Int64 = 0
    /// Rows named other than naturally (see `ViewRows.unsettledNames`): patches need 0.
    var unsettledNames = 0
    /// Bytes of the visible assets (statfs).
    var totalBytes: UInt64 = 0
    /// Sidecars of the visible assets (issue 37), as the library sent them, and as this view
    /// names them (Model/SidecarNodes.swift): by key, name and inode.
    var sidecarRows: [SidecarKey: ViewSidecar] = [:]
    var sidecars: [SidecarKey: SidecarNode] = [:]
    var sidecarByName: [String: SidecarKey] = [:]
    var sidecarByIno: [Inode: SidecarKey] = [:]

    /// Inode numbers: keyed by the app's secret so they are stable across remounts of one app,
    /// differ between apps, and say nothing about the library. A redacted view of an asset is a
    /// different inode from the plain one, so page caches are never shared between them.
    static func inode(key: (UInt64, UInt64), _ label: String) -> Inode {
        let h = SipHash24.hash(key: key, Array(label.utf8))
        return (h >> 2) | (1 << 62)
    }

    /// Each version of an asset has its own inode: after an edit, handles opened before keep the
    /// old version's inode (its cached pages and passthrough backing file), and new opens get the
    /// new one (as an editor's save by rename does on any filesystem). The original keeps the
    /// inode it always had. `storePath` is the stored file ("ab/<file id>.<ext>"), when in the store.
    static func versionTag(id: some Collection<UInt8>, storePath: some Collection<UInt8>) -> [UInt8]? {
        let base = storePath.split(separator: UInt8(ascii: "/")).last ?? storePath[...]
        let fileID = base.prefix { $0 != UInt8(ascii: ".") }
        guard fileID.count == 16, !fileID.elementsEqual(id) else { return nil }
        return Array("/v/".utf8) + fileID
    }

    /// `compatible`: the JPEG made from it (Compatible/) is another file, so another inode too.
    static func assetInode(key: (UInt64, UInt64), id: String, strip: Bool, storePath: String? = nil, compatible: Bool = false) -> Inode {
        let jpeg = compatible ? ViewModel.compatibleLabel : ""
        if let storePath, let tag = versionTag(id: Array(id.utf8), storePath: Array(storePath.utf8)) {
            return inode(key: key, "asset/" + id + (strip ? "/redacted" : "") + String(decoding: tag, as: UTF8.self) + jpeg)
        }
        return inode(key: key, "asset/" + id + (strip ? "/redacted" : "") + jpeg)
    }

    /// The end of a compatible node's inode label.
    static let compatibleLabel = "/jpeg"

    /// Albums with only their visible members.
    mutating func setAlbums(_ list: [ViewAlbum]) {
        albums = [:]; shared = [:]; albumByIno = [:]; links = [:]
        let key = app.inodeKey
        let st = store
        for album in list {
            let ino = ViewModel.inode(key: key, (album.isShared ? "shared/" : "album/") + album.name)
            var byName: [String: Int64] = [:]
            var members: [Int64] = []
            for m in album.members {
                guard let i = st.index(ofRow: m) else { continue }
                byName[st.string(i, 1)] = m
                members.append(m)
                links[m, default: 0] += 1
            }
            let node = AlbumNode(name: album.name, ino: ino, isShared: album.isShared, byName: byName, listing: members)
            if album.isShared { shared[album.name] = node } else { albums[album.name] = node }
            albumByIno[ino] = (album.isShared, album.name)
        }
    }

    func album(ino: Inode) -> AlbumNode? {
        guard let a = albumByIno[ino] else { return nil }
        return a.shared ? shared[a.name] : albums[a.name]
    }
}
