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

/// The visible assets of a mount, compactly: numbers in arrays, the id, name and path of each in
/// one byte arena, and open-addressing tables from row id, name and inode to an index. A million
/// assets take ~140 MB here (a dictionary of `AssetNode`s took ~450 MB and seconds to build).
/// Immutable once built, so copies of the model share it.
final class NodeStore: Sendable {
    let rowIDs: [Int64]
    let inos: [UInt64]
    let sizes: [UInt64]
    let mtimes: [Int]
    let ctimes: [Int]
    let bits: [UInt8]
    /// id, name, path of each node (path relative to `storeRoot` when `inStore`).
    let text: [UInt8]
    let ends: [UInt32]
    let storeRoot: String
    let byRow: IndexTable
    let byName: IndexTable
    let byIno: IndexTable

    static let strip: UInt8 = 1, owned: UInt8 = 2, shared: UInt8 = 4, selected: UInt8 = 8, picked: UInt8 = 16, inStore: UInt8 = 32

    init(rowIDs: [Int64], inos: [UInt64], sizes: [UInt64], mtimes: [Int], ctimes: [Int], bits: [UInt8], text: [UInt8],
         ends: [UInt32], storeRoot: String, byRow: IndexTable, byName: IndexTable, byIno: IndexTable) {
        self.rowIDs = rowIDs; self.inos = inos; self.sizes = sizes; self.mtimes = mtimes; self.ctimes = ctimes
        self.bits = bits; self.text = text; self.ends = ends; self.storeRoot = storeRoot
        self.byRow = byRow; self.byName = byName; self.byIno = byIno
    }

    static let empty = NodeStore(rowIDs: [], inos: [], sizes: [], mtimes: [], ctimes: [], bits: [], text: [], ends: [],
                                 storeRoot: "", byRow: IndexTable(capacity: 0), byName: IndexTable(capacity: 0),
                                 byIno: IndexTable(capacity: 0))

    var count: Int { rowIDs.count }

    @inline(__always) static func bounds(_ ends: [UInt32], _ i: Int, _ field: Int) -> Range<Int> {
        let k = i * 3 + field
        return (k == 0 ? 0 : Int(ends[k - 1]))..<Int(ends[k])
    }

    func string(_ i: Int, _ field: Int) -> String {
        let r = NodeStore.bounds(ends, i, field)
        return text.withUnsafeBufferPointer { String(decoding: UnsafeBufferPointer(rebasing: $0[r]), as: UTF8.self) }
    }

    func bytesEqual(_ i: Int, _ field: Int, _ other: NodeStore, _ j: Int) -> Bool {
        let a = NodeStore.bounds(ends, i, field), b = NodeStore.bounds(other.ends, j, field)
        guard a.count == b.count else { return false }
        return text.withUnsafeBufferPointer { x in
            other.text.withUnsafeBufferPointer { y in
                a.isEmpty || memcmp(x.baseAddress! + a.lowerBound, y.baseAddress! + b.lowerBound, a.count) == 0
            }
        }
    }

    func node(_ i: Int) -> AssetNode {
        let b = bits[i]
        let p = string(i, 2)
        return AssetNode(rowID: rowIDs[i], assetID: string(i, 0), name: string(i, 1), ino: inos[i], size: sizes[i],
                         mtime: mtimes[i], ctime: ctimes[i], path: b & NodeStore.inStore != 0 ? storeRoot + "/" + p : p,
                         strip: b & NodeStore.strip != 0, owned: b & NodeStore.owned != 0, shared: b & NodeStore.shared != 0,
                         selected: b & NodeStore.selected != 0, picked: b & NodeStore.picked != 0)
    }

    @inline(__always) static func mix(_ x: UInt64) -> Int {
        var z = x &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return Int(truncatingIfNeeded: z ^ (z >> 31))
    }

    static func nameHash(_ bytes: UnsafeBufferPointer<UInt8>) -> Int {
        var h = Hasher()
        h.combine(bytes: UnsafeRawBufferPointer(bytes))
        return h.finalize()
    }

    func index(ofRow r: Int64) -> Int? {
        byRow.find(NodeStore.mix(UInt64(bitPattern: r))) { rowIDs[Int($0)] == r }
    }

    func index(ofIno ino: Inode) -> Int? {
        byIno.find(NodeStore.mix(ino)) { inos[Int($0)] == ino }
    }

    func index(ofName name: String) -> Int? {
        var name = name
        return name.withUTF8 { q in
            byName.find(NodeStore.nameHash(q)) { v in
                let r = NodeStore.bounds(ends, Int(v), 1)
                return r.count == q.count && text.withUnsafeBufferPointer { t in
                    q.isEmpty || memcmp(t.baseAddress! + r.lowerBound, q.baseAddress!, q.count) == 0
                }
            }
        }
    }
}

/// Open addressing from a key's hash to an index (linear probing; -1 is empty).
struct IndexTable: Sendable {
    private(set) var slots: [Int32]
    private let mask: Int

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
    subscript(rowID: Int64) -> AssetNode? { store.index(ofRow: rowID).map(store.node) }
    var count: Int { store.count }
    var isEmpty: Bool { store.count == 0 }
    var values: LazyMapSequence<Range<Int>, AssetNode> { (0..<store.count).lazy.map(store.node) }
    func makeIterator() -> AnyIterator<(key: Int64, value: AssetNode)> {
        var i = 0
        let s = store
        return AnyIterator {
            guard i < s.count else { return nil }
            defer { i += 1 }
            return (s.rowIDs[i], s.node(i))
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

/// The immutable in-memory picture of one app's view. Handlers read it under a lock; a refresh
/// builds a new one from the database and swaps it in, then invalidates what changed.
struct ViewModel: Sendable {
    var app: AppRecord
    var access: AccessLevel
    var policy: ViewPolicy
    var store: NodeStore = .empty
    var nodes: NodeTable { NodeTable(store: store) }
    var byName: NameIndex { NameIndex(store: store) }
    var byIno: InodeIndex { InodeIndex(store: store) }
    /// Root listing in a stable order (capture time, then row id).
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
        let r = s.rows
        let n = r.count
        var rowIDs = [Int64](), inos = [UInt64](), sizes = [UInt64](), mtimes = [Int](), ctimes = [Int](), bits = [UInt8]()
        var text = [UInt8](), ends = [UInt32]()
        rowIDs.reserveCapacity(n); inos.reserveCapacity(n); sizes.reserveCapacity(n); mtimes.reserveCapacity(n)
        ctimes.reserveCapacity(n); bits.reserveCapacity(n); ends.reserveCapacity(n * 3); text.reserveCapacity(n * 64)
        var byRow = IndexTable(capacity: n), byName = IndexTable(capacity: n), byIno = IndexTable(capacity: n)
        var label: [UInt8] = []
        let assetPrefix = Array("asset/".utf8), redacted = Array("/redacted".utf8)
        for i in 0..<n {
            let f = r.flags[i]
            let strip = f.contains(.strip)
            // The same label as `assetInode`, without building Strings.
            label.removeAll(keepingCapacity: true)
            label.append(contentsOf: assetPrefix)
            r.withBytes(.id, i) { label.append(contentsOf: $0) }
            if strip { label.append(contentsOf: redacted) }
            var ino = (SipHash24.hash(key: key, label) >> 2) | (1 << 62)
            var salt = 1
            let index = Int32(rowIDs.count)
            while FixedInode.all.contains(ino) || !byIno.insertIfAbsent(NodeStore.mix(ino), index, { inos[Int($0)] == ino }) {   // 2^-62 odds; still handled
                ino = ViewModel.inode(key: key, "asset/\(r.text(.id, i)!)/\(strip)/\(salt)")
                salt += 1
            }
            r.withBytes(.id, i) { text.append(contentsOf: $0) }
            ends.append(UInt32(text.count))
            if let own = r.ownViewName(i) { text.append(contentsOf: own.utf8) } else { r.withBytes(.displayName, i) { text.append(contentsOf: $0) } }
            ends.append(UInt32(text.count))
            var b: UInt8 = 0
            if f.contains(.referencePathNull) {
                b |= NodeStore.inStore
                r.withBytes(.storePath, i) { text.append(contentsOf: $0) }
            } else {
                r.withBytes(.referencePath, i) { text.append(contentsOf: $0) }
            }
            ends.append(UInt32(text.count))
            if strip { b |= NodeStore.strip }
            if f.contains(.owned) { b |= NodeStore.owned }
            if f.contains(.shared) { b |= NodeStore.shared }
            if f.contains(.selected) { b |= NodeStore.selected }
            if f.contains(.picked) { b |= NodeStore.picked }
            let rowID = r.rowIDs[i]
            rowIDs.append(rowID)
            inos.append(ino)
            sizes.append(r.byteSizes[i])
            mtimes.append(Int(Date(timeIntervalSince1970: r.captureDates[i]).timeIntervalSince1970))
            ctimes.append(Int(Date(timeIntervalSince1970: r.addedDates[i]).timeIntervalSince1970))
            bits.append(b)
            byRow.insert(NodeStore.mix(UInt64(bitPattern: rowID)), index) { rowIDs[Int($0)] == rowID }
            let nameRange = NodeStore.bounds(ends, Int(index), 1)
            text.withUnsafeBufferPointer { t in
                let q = UnsafeBufferPointer(rebasing: t[nameRange])
                byName.insert(NodeStore.nameHash(q), index) { v in
                    let o = NodeStore.bounds(ends, Int(v), 1)
                    return o.count == q.count && (q.isEmpty || memcmp(t.baseAddress! + o.lowerBound, q.baseAddress!, q.count) == 0)
                }
            }
        }
        store = NodeStore(rowIDs: rowIDs, inos: inos, sizes: sizes, mtimes: mtimes, ctimes: ctimes, bits: bits, text: text,
                          ends: ends, storeRoot: library.paths.store, byRow: byRow, byName: byName, byIno: byIno)
        // Capture time, then row id: sort packed keys, not indices through the arrays.
        var order = (0..<n).map { (mtimes[$0], rowIDs[$0]) }
        var sorted = true
        for i in order.indices.dropFirst() where order[i] < order[i - 1] { sorted = false; break }
        if !sorted { order.sort { $0 < $1 } }
        listing = order.map(\.1)
        let st = store
        for album in s.albums {
            let ino = ViewModel.inode(key: key, (album.isShared ? "shared/" : "album/") + album.name)
            var byName: [String: Int64] = [:]
            var members: [Int64] = []
            for m in album.members {
                guard let i = st.index(ofRow: m) else { continue }
                byName[st.string(i, 1)] = m
                members.append(m)
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
        let o = old.store, n = new.store
        // Compare the compact columns; build nodes only for what differs.
        for i in 0..<o.count {
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
        for j in 0..<n.count where o.index(ofRow: n.rowIDs[j]) == nil { d.inserted.append(n.node(j)) }
        let oldAlbums = old.albums.mapValues(\.listing), newAlbums = new.albums.mapValues(\.listing)
        let oldShared = old.shared.mapValues(\.listing), newShared = new.shared.mapValues(\.listing)
        d.albumsChanged = oldAlbums != newAlbums || oldShared != newShared || old.policy != new.policy
        return d
    }
}
