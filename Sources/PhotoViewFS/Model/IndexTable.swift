import FUSE

/// Open addressing from a key's hash to an index (linear probing; -1 is empty).
struct IndexTable: Sendable {
    private(set) var slots: [Int32]
    private let mask: Int

    var capacity: Int { slots.count }

    init(capacity n: Int) {
        var size = 16
        while size < n * 2 { size <<= 1 }
        slots = [Int32](repeating: -1, count: size)
        mask = size - 1
    }

    func find(_ hash: Int, _ isMatch: (Int32) -> Bool) -> Int? {
        var i = hash & mask
        while true {
            let v = slots[i]
            if v < 0 { return nil }
            if isMatch(v) { return Int(v) }
            i = (i + 1) & mask
        }
    }

    /// Stores `value` in an empty slot unless `isMatch` finds the key; returns whether it did.
    mutating func insertIfAbsent(_ hash: Int, _ value: Int32, _ isMatch: (Int32) -> Bool) -> Bool {
        var i = hash & mask
        while true {
            let v = slots[i]
            if v < 0 { slots[i] = value; return true }
            if isMatch(v) { return false }
            i = (i + 1) & mask
        }
    }

    /// Removes `value` (found from its key's hash), shifting later entries of its probe run back
    /// so lookups never stop early. `home` is the hash of the entry in a slot.
    mutating func remove(_ hash: Int, _ value: Int32, home: (Int32) -> Int) {
        var i = hash & mask
        while slots[i] != value {
            if slots[i] < 0 { return }
            i = (i + 1) & mask
        }
        var j = i
        while true {
            j = (j + 1) & mask
            let v = slots[j]
            if v < 0 { break }
            let k = home(v) & mask
            // Leave v where it is if its home lies cyclically in (i, j]; else move it into the hole.
            let stays = i <= j ? (i < k && k <= j) : (i < k || k <= j)
            if !stays { slots[i] = v; i = j }
        }
        slots[i] = -1
    }

    /// Stores `value` for the key: replaces the entry `isMatch` finds, else takes an empty slot.
    mutating func insert(_ hash: Int, _ value: Int32, _ isMatch: (Int32) -> Bool) {
        var i = hash & mask
        while true {
            let v = slots[i]
            if v < 0 || isMatch(v) { slots[i] = value; return }
            i = (i + 1) & mask
        }
    }
}

/// `nodes[rowID]`, `nodes.count`, `nodes.values` over the compact store.
struct NodeTable: Sendable, Sequence {
    let store: NodeStore
    /// Album memberships per row id (see `AssetNode.nlink`).
    let links: [Int64: UInt32]
    func node(_ i: Int) -> AssetNode {
        var n = store.node(i)
        if let l = links[n.rowID] { n.nlink = 1 + l }
        return n
    }
    subscript(rowID: Int64) -> AssetNode? { store.index(ofRow: rowID).map(node) }
    var count: Int { store.count }
    var isEmpty: Bool { store.count == 0 }
    var values: LazyMapSequence<LazyFilterSequence<Range<Int>>, AssetNode> { store.liveIndices.map(node) }
    func makeIterator() -> AnyIterator<(key: Int64, value: AssetNode)> {
        var i = 0
        let s = store
        return AnyIterator {
            while i < s.slotCount && !s.isLive(i) { i += 1 }
            guard i < s.slotCount else { return nil }
            defer { i += 1 }
            return (s.rowIDs[i], node(i))
        }
    }
}

/// `byName[name]` -> row id.
struct NameIndex: Sendable {
    let store: NodeStore
    subscript(name: String) -> Int64? { store.index(ofName: name).map { store.rowIDs[$0] } }
}

/// `byIno[inode]` -> row id.
struct InodeIndex: Sendable {
    let store: NodeStore
    subscript(ino: Inode) -> Int64? { store.index(ofIno: ino).map { store.rowIDs[$0] } }
}
