import FUSE
import Foundation
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
    static let refused: Inode = 8     // .photogate/refused
    static let all: Set<Inode> = [root, albums, shared, control, status, changes, request, refused]
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
    /// 1 + the albums of the view it is listed in: one inode, listed in several folders, counted
    /// once by `du`, `tar` and `rsync -H`.
    var nlink: UInt32 = 1
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
/// Mutated only in place under the mount's model lock (`ViewModel.apply`): removed rows become
/// tombstones (dropped from the tables) and new rows are appended; a full refresh builds a new
/// store, which also compacts.
final class NodeStore: @unchecked Sendable {
    private(set) var rowIDs: [Int64]
    private(set) var inos: [UInt64]
    private(set) var sizes: [UInt64]
    private(set) var mtimes: [Int]
    private(set) var ctimes: [Int]
    private(set) var bits: [UInt8]
    /// id, name, path of each node (path relative to `storeRoot` when `inStore`).
    private(set) var text: [UInt8]
    private(set) var ends: [UInt32]
    let storeRoot: String
    private(set) var byRow: IndexTable
    private(set) var byName: IndexTable
    private(set) var byIno: IndexTable
    /// Tombstoned slots.
    private(set) var deadCount = 0

    static let strip: UInt8 = 1, owned: UInt8 = 2, shared: UInt8 = 4, selected: UInt8 = 8, picked: UInt8 = 16, inStore: UInt8 = 32
    static let dead: UInt8 = 128

    /// A node's bits from its row's flags.
    static func bits(_ f: ViewRows.Flags) -> UInt8 {
        var b: UInt8 = 0
        if f.contains(.referencePathNull) { b |= inStore }
        if f.contains(.strip) { b |= strip }
        if f.contains(.owned) { b |= owned }
        if f.contains(.shared) { b |= shared }
        if f.contains(.selected) { b |= selected }
        if f.contains(.picked) { b |= picked }
        return b
    }

    init(rowIDs: [Int64], inos: [UInt64], sizes: [UInt64], mtimes: [Int], ctimes: [Int], bits: [UInt8], text: [UInt8],
         ends: [UInt32], storeRoot: String, byRow: IndexTable, byName: IndexTable, byIno: IndexTable) {
        self.rowIDs = rowIDs; self.inos = inos; self.sizes = sizes; self.mtimes = mtimes; self.ctimes = ctimes
        self.bits = bits; self.text = text; self.ends = ends; self.storeRoot = storeRoot
        self.byRow = byRow; self.byName = byName; self.byIno = byIno
    }

    static var empty: NodeStore {
        NodeStore(rowIDs: [], inos: [], sizes: [], mtimes: [], ctimes: [], bits: [], text: [], ends: [],
                  storeRoot: "", byRow: IndexTable(capacity: 0), byName: IndexTable(capacity: 0), byIno: IndexTable(capacity: 0))
    }

    /// Live nodes.
    var count: Int { rowIDs.count - deadCount }
    /// Slots, live or not: iterate `0..<slotCount` and skip `!isLive`.
    var slotCount: Int { rowIDs.count }
    @inline(__always) func isLive(_ i: Int) -> Bool { bits[i] & NodeStore.dead == 0 }
    var liveIndices: LazyFilterSequence<Range<Int>> { (0..<slotCount).lazy.filter { self.bits[$0] & NodeStore.dead == 0 } }

    /// Appends a node and indexes it. The caller has checked that its row id, name and inode
    /// are free.
    func append(rowID: Int64, ino: UInt64, size: UInt64, mtime: Int, ctime: Int, bits b: UInt8,
                id: UnsafeBufferPointer<UInt8>, name: UnsafeBufferPointer<UInt8>, path: UnsafeBufferPointer<UInt8>) {
        if (slotCount + 1) * 2 > byRow.capacity { rebuildTables(capacity: max(16, slotCount * 2)) }
        let index = Int32(slotCount)
        for field in [id, name, path] {
            text.append(contentsOf: field)
            ends.append(UInt32(text.count))
        }
        rowIDs.append(rowID); inos.append(ino); sizes.append(size); mtimes.append(mtime); ctimes.append(ctime); bits.append(b)
        addToTables(slot: index)
    }

    /// Tombstones a live slot and drops it from the tables.
    func remove(_ i: Int) {
        guard isLive(i) else { return }
        let v = Int32(i)
        byRow.remove(NodeStore.mix(UInt64(bitPattern: rowIDs[i])), v) { NodeStore.mix(UInt64(bitPattern: self.rowIDs[Int($0)])) }
        byIno.remove(NodeStore.mix(inos[i]), v) { NodeStore.mix(self.inos[Int($0)]) }
        byName.remove(nameHash(slot: i), v) { self.nameHash(slot: Int($0)) }
        bits[i] |= NodeStore.dead
        deadCount += 1
    }

    private func nameHash(slot i: Int) -> Int {
        let r = NodeStore.bounds(ends, i, 1)
        return text.withUnsafeBufferPointer { NodeStore.nameHash(UnsafeBufferPointer(rebasing: $0[r])) }
    }

    private func addToTables(slot index: Int32) {
        let i = Int(index)
        let rowID = rowIDs[i], ino = inos[i]
        byRow.insert(NodeStore.mix(UInt64(bitPattern: rowID)), index) { self.rowIDs[Int($0)] == rowID }
        byIno.insert(NodeStore.mix(ino), index) { self.inos[Int($0)] == ino }
        let nameRange = NodeStore.bounds(ends, i, 1)
        let ends = self.ends
        text.withUnsafeBufferPointer { t in
            let q = UnsafeBufferPointer(rebasing: t[nameRange])
            byName.insert(NodeStore.nameHash(q), index) { v in
                let o = NodeStore.bounds(ends, Int(v), 1)
                return o.count == q.count && (q.isEmpty || memcmp(t.baseAddress! + o.lowerBound, q.baseAddress!, q.count) == 0)
            }
        }
    }

    private func rebuildTables(capacity: Int) {
        byRow = IndexTable(capacity: capacity); byName = IndexTable(capacity: capacity); byIno = IndexTable(capacity: capacity)
        for i in 0..<slotCount where isLive(i) { addToTables(slot: Int32(i)) }
    }

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

    static func assetInode(key: (UInt64, UInt64), id: String, strip: Bool, storePath: String? = nil) -> Inode {
        if let storePath, let tag = versionTag(id: Array(id.utf8), storePath: Array(storePath.utf8)) {
            return inode(key: key, "asset/" + id + (strip ? "/redacted" : "") + String(decoding: tag, as: UTF8.self))
        }
        return inode(key: key, "asset/" + id + (strip ? "/redacted" : ""))
    }

    init(snapshot s: ViewSnapshot, storeRoot: String) {
        app = s.app
        access = s.access
        policy = s.policy
        seq = s.changeSeq
        unsettledNames = s.rows.unsettledNames
        let key = s.app.inodeKey
        let r = s.rows
        let n = r.count
        var rowIDs = [Int64](), inos = [UInt64](), sizes = [UInt64](), mtimes = [Int](), ctimes = [Int](), bits = [UInt8]()
        var text = [UInt8](), ends = [UInt32]()
        rowIDs.reserveCapacity(n); inos.reserveCapacity(n); sizes.reserveCapacity(n); mtimes.reserveCapacity(n)
        ctimes.reserveCapacity(n); bits.reserveCapacity(n); ends.reserveCapacity(n * 3); text.reserveCapacity(n * 64)
        var label: [UInt8] = []
        let assetPrefix = Array("asset/".utf8), redacted = Array("/redacted".utf8)
        // First the columns, in one linear pass; then the three lookup tables, which are random
        // access and independent of each other, on as many cores as there are.
        for i in 0..<n {
            let f = r.flags[i]
            let strip = f.contains(.strip)
            // The same label as `assetInode`, without building Strings. Asset inodes have bit 62
            // set, so they never meet the fixed inodes (1...7).
            label.removeAll(keepingCapacity: true)
            label.append(contentsOf: assetPrefix)
            r.withBytes(.id, i) { label.append(contentsOf: $0) }
            if strip { label.append(contentsOf: redacted) }
            if f.contains(.referencePathNull) {
                var tag: [UInt8]? = nil
                r.withBytes(.id, i) { id in r.withBytes(.storePath, i) { sp in tag = ViewModel.versionTag(id: id, storePath: sp) } }
                if let tag { label.append(contentsOf: tag) }
            }
            inos.append((SipHash24.hash(key: key, label) >> 2) | (1 << 62))
            r.withBytes(.id, i) { text.append(contentsOf: $0) }
            ends.append(UInt32(text.count))
            if let own = r.ownViewName(i) { text.append(contentsOf: own.utf8) } else { r.withBytes(.displayName, i) { text.append(contentsOf: $0) } }
            ends.append(UInt32(text.count))
            let b = NodeStore.bits(f)
            r.withBytes(f.contains(.referencePathNull) ? .storePath : .referencePath, i) { text.append(contentsOf: $0) }
            ends.append(UInt32(text.count))
            rowIDs.append(r.rowIDs[i])
            sizes.append(r.byteSizes[i])
            mtimes.append(Int(r.captureDates[i]))
            ctimes.append(Int(r.addedDates[i]))
            bits.append(b)
        }
        let tables = ViewModel.buildTables(n: n, rowIDs: rowIDs, inos: inos, text: text, ends: ends)
        var byIno = tables.byIno
        // Two assets with one inode (2^-62 odds; still handled): the later one is salted.
        for i in tables.inodeCollisions {
            let id = String(decoding: text[NodeStore.bounds(ends, i, 0)], as: UTF8.self)
            let strip = bits[i] & NodeStore.strip != 0
            var salt = 1
            var ino: UInt64
            repeat {
                ino = ViewModel.inode(key: key, "asset/\(id)/\(strip)/\(salt)")
                salt += 1
            } while !byIno.insertIfAbsent(NodeStore.mix(ino), Int32(i), { inos[Int($0)] == ino })
            inos[i] = ino
        }
        store = NodeStore(rowIDs: rowIDs, inos: inos, sizes: sizes, mtimes: mtimes, ctimes: ctimes, bits: bits, text: text,
                          ends: ends, storeRoot: storeRoot, byRow: tables.byRow, byName: tables.byName, byIno: byIno)
        // Capture time, then row id: sort packed keys, not indices through the arrays.
        var order = (0..<n).map { (mtimes[$0], rowIDs[$0]) }
        var sorted = true
        for i in order.indices.dropFirst() where order[i] < order[i - 1] { sorted = false; break }
        if !sorted { order.sort { $0 < $1 } }
        listing = order.map(\.1)
        totalBytes = sizes.reduce(0, &+)
        setAlbums(s.albums)
    }

    final class Box<T>: @unchecked Sendable {
        var value: T
        init(_ v: T) { value = v }
    }

    /// The row id, name and inode tables of `n` nodes, built concurrently (each task writes only
    /// its own table). Returns the indices whose inode another node already has.
    static func buildTables(n: Int, rowIDs: [Int64], inos: [UInt64], text: [UInt8], ends: [UInt32])
        -> (byRow: IndexTable, byName: IndexTable, byIno: IndexTable, inodeCollisions: [Int]) {
        let byRow = Box(IndexTable(capacity: n)), byName = Box(IndexTable(capacity: n)), byIno = Box(IndexTable(capacity: n))
        let collisions = Box([Int]())
        DispatchQueue.concurrentPerform(iterations: 3) { task in
            switch task {
            case 0:
                var t = IndexTable(capacity: n)
                for i in 0..<n {
                    let r = rowIDs[i]
                    t.insert(NodeStore.mix(UInt64(bitPattern: r)), Int32(i)) { rowIDs[Int($0)] == r }
                }
                byRow.value = t
            case 1:
                var t = IndexTable(capacity: n)
                text.withUnsafeBufferPointer { tx in
                    for i in 0..<n {
                        let q = UnsafeBufferPointer(rebasing: tx[NodeStore.bounds(ends, i, 1)])
                        t.insert(NodeStore.nameHash(q), Int32(i)) { v in
                            let o = NodeStore.bounds(ends, Int(v), 1)
                            return o.count == q.count && (q.isEmpty || memcmp(tx.baseAddress! + o.lowerBound, q.baseAddress!, q.count) == 0)
                        }
                    }
                }
                byName.value = t
            default:
                var t = IndexTable(capacity: n)
                var clash: [Int] = []
                for i in 0..<n {
                    let ino = inos[i]
                    if !t.insertIfAbsent(NodeStore.mix(ino), Int32(i), { inos[Int($0)] == ino }) { clash.append(i) }
                }
                byIno.value = t
                collisions.value = clash
            }
        }
        return (byRow.value, byName.value, byIno.value, collisions.value)
    }

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
        struct New { var node: AssetNode; var bits: UInt8; var stored: String }
        var news: [Int64: New] = [:]
        var names = Set<String>(), inodes = Set<UInt64>()
        for i in 0..<r.count {
            let rowID = r.rowIDs[i]
            guard affected.contains(rowID) else { return nil }
            let f = r.flags[i]
            let owned = f.contains(.owned)
            let name = owned && !f.contains(.ownerNameNull) ? r.text(.ownerName, i)! : r.text(.displayName, i)!
            guard !DisplayName.reserved.contains(name), names.insert(name).inserted else { return nil }
            if let j = st.index(ofName: name), !affected.contains(st.rowIDs[j]) { return nil }
            let id = r.text(.id, i)!
            let strip = f.contains(.strip)
            let ino = ViewModel.assetInode(key: key, id: id, strip: strip,
                                           storePath: f.contains(.referencePathNull) ? r.text(.storePath, i) : nil)
            guard !FixedInode.all.contains(ino), inodes.insert(ino).inserted else { return nil }
            if let j = st.index(ofIno: ino), !affected.contains(st.rowIDs[j]) { return nil }
            let inStore = f.contains(.referencePathNull)
            let stored = inStore ? r.text(.storePath, i)! : r.text(.referencePath, i)!
            let node = AssetNode(rowID: rowID, assetID: id, name: name, ino: ino, size: r.byteSizes[i],
                                 mtime: Int(r.captureDates[i]), ctime: Int(r.addedDates[i]),
                                 path: inStore ? st.storeRoot + "/" + stored : stored, strip: strip, owned: owned,
                                 shared: f.contains(.shared), selected: f.contains(.selected), picked: f.contains(.picked))
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
        return d
    }
}
