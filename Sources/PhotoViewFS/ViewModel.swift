import FUSE
import Foundation
import GrantStore
import PhotoLibrary

/// Fixed inodes, the same in every mount (they reveal nothing).
enum FixedInode {
    static let root: Inode = 1
    static let albums: Inode = 2
    static let shared: Inode = 3
    static let control: Inode = 4      // .photogate/
    static let status: Inode = 5
    static let changes: Inode = 6
    static let request: Inode = 7
    static let all: Set<Inode> = [root, albums, shared, control, status, changes, request]
}

/// One visible asset in a mount.
struct AssetNode: Sendable, Equatable {
    let rowID: Int64
    let assetID: String
    let name: String
    let ino: Inode
    let size: UInt64
    let mtime: Int
    let ctime: Int
    let path: String
    let strip: Bool
    let owned: Bool
    let shared: Bool
    let selected: Bool
    let picked: Bool
}

struct AlbumNode: Sendable {
    let name: String
    let ino: Inode
    let isShared: Bool
    /// member name -> row id
    var byName: [String: Int64]
    var listing: [Int64]
}

/// The immutable in-memory picture of one app's view. Handlers read it under a lock; a refresh
/// builds a new one from the database and swaps it in, then invalidates what changed.
struct ViewModel: Sendable {
    var app: AppRecord
    var access: AccessLevel
    var policy: ViewPolicy
    var nodes: [Int64: AssetNode] = [:]
    var byName: [String: Int64] = [:]
    var byIno: [Inode: Int64] = [:]
    /// Root listing in a stable order (capture order as the catalog returns it).
    var listing: [Int64] = []
    var albums: [String: AlbumNode] = [:]
    var shared: [String: AlbumNode] = [:]
    var albumByIno: [Inode: (shared: Bool, name: String)] = [:]
    var seq: Int64 = 0

    /// Inode numbers: keyed by the app's secret so they are stable across remounts of one app,
    /// differ between apps, and say nothing about the library. A redacted view of an asset is a
    /// different inode from the plain one, so page caches are never shared between them.
    static func inode(key: (UInt64, UInt64), _ label: String) -> Inode {
        let h = SipHash24.hash(key: key, Array(label.utf8))
        return (h >> 2) | (1 << 62)
    }

    static func assetInode(key: (UInt64, UInt64), id: String, strip: Bool) -> Inode {
        inode(key: key, "asset/" + id + (strip ? "/redacted" : ""))
    }

    init(snapshot s: ViewSnapshot, library: Library) {
        app = s.app
        access = s.access
        policy = s.policy
        seq = s.changeSeq
        let key = s.app.inodeKey
        nodes.reserveCapacity(s.entries.count)
        byName.reserveCapacity(s.entries.count)
        byIno.reserveCapacity(s.entries.count)
        listing.reserveCapacity(s.entries.count)
        for e in s.entries {
            var ino = ViewModel.assetInode(key: key, id: e.asset.id, strip: e.stripLocation)
            var salt = 1
            while byIno[ino] != nil || FixedInode.all.contains(ino) {   // 2^-62 odds; still handled
                ino = ViewModel.inode(key: key, "asset/\(e.asset.id)/\(e.stripLocation)/\(salt)")
                salt += 1
            }
            let node = AssetNode(rowID: e.asset.rowID, assetID: e.asset.id, name: e.name, ino: ino, size: e.asset.byteSize,
                                 mtime: Int(e.asset.captureDate.timeIntervalSince1970),
                                 ctime: Int(e.asset.addedDate.timeIntervalSince1970),
                                 path: library.originalPath(e.asset), strip: e.stripLocation, owned: e.isOwned,
                                 shared: e.asset.isShared, selected: e.isSelected, picked: e.isPicked)
            nodes[node.rowID] = node
            byName[node.name] = node.rowID
            byIno[ino] = node.rowID
            listing.append(node.rowID)
        }
        listing.sort { a, b in
            let x = nodes[a]!, y = nodes[b]!
            return (x.mtime, x.rowID) < (y.mtime, y.rowID)
        }
        for album in s.albums {
            let ino = ViewModel.inode(key: key, (album.isShared ? "shared/" : "album/") + album.name)
            var byName: [String: Int64] = [:]
            var members: [Int64] = []
            for r in album.members {
                guard let n = nodes[r] else { continue }
                byName[n.name] = r
                members.append(r)
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

    func facts(_ n: AssetNode) -> AssetFacts {
        AssetFacts(isShared: n.shared, isTrashed: false, isOwned: n.owned, isSelected: n.selected, isPicked: n.picked)
    }

    /// What changed between two models, for invalidation and the change feed.
    struct Diff {
        var removed: [AssetNode] = []
        var inserted: [AssetNode] = []
        var updated: [AssetNode] = []
        var albumsChanged = false
        var isEmpty: Bool { removed.isEmpty && inserted.isEmpty && updated.isEmpty && !albumsChanged }
    }

    static func diff(_ old: ViewModel, _ new: ViewModel) -> Diff {
        var d = Diff()
        for (r, n) in old.nodes {
            if let m = new.nodes[r] {
                if m != n {
                    if m.ino != n.ino || m.name != n.name { d.removed.append(n); d.inserted.append(m) } else { d.updated.append(m) }
                }
            } else {
                d.removed.append(n)
            }
        }
        for (r, m) in new.nodes where old.nodes[r] == nil { d.inserted.append(m) }
        let oldAlbums = old.albums.mapValues(\.listing), newAlbums = new.albums.mapValues(\.listing)
        let oldShared = old.shared.mapValues(\.listing), newShared = new.shared.mapValues(\.listing)
        d.albumsChanged = oldAlbums != newAlbums || oldShared != newShared || old.policy != new.policy
        return d
    }
}
