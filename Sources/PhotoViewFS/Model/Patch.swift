import FUSE
import Foundation
import PhotoLibrary

extension ViewModel {
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
        let o = old.store, n = new.store
        // Compare the compact columns; build nodes only for what differs.
        for i in o.liveIndices {
            let r = o.rowIDs[i]
            guard let j = n.index(ofRow: r) else { d.removed.append(o.node(i)); continue }
            let same = o.inos[i] == n.inos[j] && o.sizes[i] == n.sizes[j] && o.mtimes[i] == n.mtimes[j]
                && o.ctimes[i] == n.ctimes[j] && o.bits[i] == n.bits[j] && o.storeRoot == n.storeRoot
                && o.bytesEqual(i, 0, n, j) && o.bytesEqual(i, 1, n, j) && o.bytesEqual(i, 2, n, j)
            if same { continue }
            let a = o.node(i), m = n.node(j)
            if m != a {
                if m.ino != a.ino || m.name != a.name { d.removed.append(a); d.inserted.append(m) } else { d.updated.append(m) }
            }
        }
        for j in n.liveIndices where o.index(ofRow: n.rowIDs[j]) == nil { d.inserted.append(n.node(j)) }
        let oldAlbums = old.albums.mapValues(\.listing), newAlbums = new.albums.mapValues(\.listing)
        let oldShared = old.shared.mapValues(\.listing), newShared = new.shared.mapValues(\.listing)
        d.albumsChanged = oldAlbums != newAlbums || oldShared != newShared || old.policy != new.policy
        return d
    }
}

extension ViewModel {
    /// Applies a patch in place and returns what changed. Returns nil, and leaves the model
    /// untouched, when applying it row by row could differ from a full recomputation: names
    /// settled by a collision, a new name or inode that collides, or a reserved name. The caller
    /// then recomputes everything.
    mutating func apply(_ p: ViewPatch) -> Diff? {
        guard unsettledNames == 0 else { return nil }
        let r = p.rows
        let st = store
        let key = app.inodeKey
        let affected = Set(p.affected)
        // The new nodes, checked before anything changes.
        struct New { var node: AssetNode; var bits: NodeStore.Bits; var stored: String }
        var news: [Int64: New] = [:]
        var names = Set<String>(), inodes = Set<UInt64>()
        for i in 0..<r.count {
            let rowID = r.rowIDs[i]
            guard affected.contains(rowID) else { return nil }
            let f = r.flags[i]
            let owned = f.contains(.owned)
            // Its own name, else its display name, with `.jpg` where it is served as a JPEG.
            let name = r.naturalName(i)
            guard !DisplayName.reserved.contains(name), names.insert(name).inserted else { return nil }
            if let j = st.index(ofName: name), !affected.contains(st.rowIDs[j]) { return nil }
            let id = r.text(.id, i)!
            let strip = f.contains(.strip), compatible = f.contains(.compatible)
            let ino = ViewModel.assetInode(key: key, id: id, strip: strip,
                                           storePath: f.contains(.referencePathNull) ? r.text(.storePath, i) : nil, compatible: compatible)
            guard !FixedInode.all.contains(ino), inodes.insert(ino).inserted else { return nil }
            if let j = st.index(ofIno: ino), !affected.contains(st.rowIDs[j]) { return nil }
            let inStore = f.contains(.referencePathNull)
            let stored = inStore ? r.text(.storePath, i)! : r.text(.referencePath, i)!
            let node = AssetNode(rowID: rowID, assetID: id, name: name, ino: ino, size: r.byteSizes[i],
                                 mtime: Int(r.captureDates[i]), ctime: Int(r.addedDates[i]),
                                 path: inStore ? st.storeRoot + "/" + stored : stored, inStore: inStore, strip: strip, owned: owned,
                                 shared: f.contains(.shared), selected: f.contains(.selected), picked: f.contains(.picked),
                                 editable: f.contains(.editable), compatible: compatible,
                                 deletable: f.contains(.deletable), renamable: f.contains(.renamable))
            news[rowID] = New(node: node, bits: NodeStore.bits(f), stored: stored)
        }
        // What changed.
        var d = Diff()
        var drop: [Int] = []            // old slots to remove
        var add: [New] = []             // nodes to append
        for rowID in p.affected {
            let old = st.index(ofRow: rowID), new = news[rowID]
            switch (old, new?.node) {
            case (nil, nil): continue
            case (let o?, nil):
                d.removed.append(st.node(o)); drop.append(o)
            case (nil, let n?):
                d.inserted.append(n); add.append(new!)
            case (let o?, let n?):
                let a = st.node(o)
                if a == n { continue }
                if a.ino != n.ino || a.name != n.name { d.removed.append(a); d.inserted.append(n) } else { d.updated.append(n) }
                drop.append(o); add.append(new!)
            }
        }
        let oldAlbums = albums.mapValues(\.listing), oldShared = shared.mapValues(\.listing)
        // The listing (capture time, then row id): out with the dropped rows, while they are
        // still in the store to look up; in with the added ones after they are.
        func sortKey(_ rowID: Int64) -> (Int, Int64) { (store.mtimes[store.index(ofRow: rowID)!], rowID) }
        func position(_ k: (Int, Int64)) -> Int {
            var lo = 0, hi = listing.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if sortKey(listing[mid]) < k { lo = mid + 1 } else { hi = mid }
            }
            return lo
        }
        if drop.count <= 64 {
            for o in drop {
                let k = (st.mtimes[o], st.rowIDs[o])
                let at = position(k)
                if at < listing.count && listing[at] == k.1 { listing.remove(at: at) }
            }
        } else {
            let gone = Set(drop.map { st.rowIDs[$0] })
            listing.removeAll { gone.contains($0) }
        }
        for o in drop {
            totalBytes &-= st.sizes[o]
            st.remove(o)
        }
        for a in add {
            let n = a.node
            var id = n.assetID, name = n.name, path = a.stored
            id.withUTF8 { i in name.withUTF8 { nm in path.withUTF8 { pa in
                st.append(rowID: n.rowID, ino: n.ino, size: n.size, mtime: n.mtime, ctime: n.ctime, bits: a.bits,
                          id: i, name: nm, path: pa)
            } } }
            totalBytes &+= n.size
        }
        let keys = add.map { ($0.node.mtime, $0.node.rowID) }.sorted { $0 < $1 }
        if keys.count <= 16 {
            for k in keys { listing.insert(k.1, at: position(k)) }
        } else {
            var merged: [Int64] = []
            merged.reserveCapacity(listing.count + keys.count)
            var from = 0
            for k in keys {
                let at = position(k)
                merged.append(contentsOf: listing[from..<at])
                merged.append(k.1)
                from = at
            }
            merged.append(contentsOf: listing[from...])
            listing = merged
        }
        if let list = p.albums { setAlbums(list) }
        d.albumsChanged = oldAlbums != albums.mapValues(\.listing) || oldShared != shared.mapValues(\.listing)
        seq = p.changeSeq
        patchSidecars(affected: affected, p.sidecars)
        return d
    }
}
