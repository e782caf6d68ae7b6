import FUSE
import Foundation
import PhotoLibrary

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
    private(set) var bits: [Bits]
    /// id, name, path of each node (path relative to `storeRoot` when `inStore`).
    private(set) var text: [UInt8]
    private(set) var ends: [UInt32]
    let storeRoot: String
    /// `storeRoot` and a slash, as bytes: a stored path is joined to it in one allocation.
    let rootPrefix: [UInt8]
    private(set) var byRow: IndexTable
    private(set) var byName: IndexTable
    private(set) var byIno: IndexTable
    /// Tombstoned slots.
    private(set) var deadCount = 0

    /// A node's flags (16 bits: the eight of a byte were taken before `compatible`).
    typealias Bits = UInt16
    static let strip: Bits = 1, owned: Bits = 2, shared: Bits = 4, selected: Bits = 8, picked: Bits = 16, inStore: Bits = 32
    static let editable: Bits = 64
    /// Served as a JPEG made from it (the app's `compatible` option; Compatible/).
    static let compatible: Bits = 256
    static let dead: Bits = 128
    /// `rm` and `mv` of it are allowed (the view build's `ViewPolicy.canDelete`, `canRename`).
    static let deletable: Bits = 512, renamable: Bits = 1024

    /// A node's bits from its row's flags.
    static func bits(_ f: ViewRows.Flags) -> Bits {
        var b: Bits = 0
        if f.contains(.referencePathNull) { b |= inStore }
        if f.contains(.strip) { b |= strip }
        if f.contains(.owned) { b |= owned }
        if f.contains(.shared) { b |= shared }
        if f.contains(.selected) { b |= selected }
        if f.contains(.picked) { b |= picked }
        if f.contains(.editable) { b |= editable }
        if f.contains(.compatible) { b |= compatible }
        if f.contains(.deletable) { b |= deletable }
        if f.contains(.renamable) { b |= renamable }
        return b
    }

    init(rowIDs: [Int64], inos: [UInt64], sizes: [UInt64], mtimes: [Int], ctimes: [Int], bits: [Bits], text: [UInt8],
         ends: [UInt32], storeRoot: String, byRow: IndexTable, byName: IndexTable, byIno: IndexTable) {
        self.rowIDs = rowIDs; self.inos = inos; self.sizes = sizes; self.mtimes = mtimes; self.ctimes = ctimes
        self.bits = bits; self.text = text; self.ends = ends; self.storeRoot = storeRoot
        self.rootPrefix = Array(storeRoot.utf8) + [UInt8(ascii: "/")]
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
    func append(rowID: Int64, ino: UInt64, size: UInt64, mtime: Int, ctime: Int, bits b: Bits,
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
                return NodeStore.sameBytes(t, o, q)
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

    /// The absolute path of a node kept in the store: `storeRoot/` and its stored path, built in
    /// one allocation (every open and lookup resolves a node; concatenating cost three).
    func storePath(_ i: Int) -> String {
        let r = NodeStore.bounds(ends, i, 2)
        return text.withUnsafeBufferPointer { t in
            rootPrefix.withUnsafeBufferPointer { root in
                String(unsafeUninitializedCapacity: root.count + r.count) { out in
                    _ = out.initialize(fromContentsOf: root)
                    _ = out[root.count...].initialize(fromContentsOf: t[r])
                    return root.count + r.count
                }
            }
        }
    }

    /// What an open of a visible asset needs, without building its strings (an open of an
    /// original allocates nothing: OpenFiles.swift `openForReading`).
    struct OpenBrief {
        let rowID: Int64
        let ino: Inode
        let size: UInt64
        let ctime: Int
        let bits: Bits
    }

    /// The node with inode `ino`, with its original's absolute path written into `buf` and ended
    /// by a NUL; nil when no live node has that inode, or its path does not fit.
    func brief(ino: Inode, pathInto buf: UnsafeMutableBufferPointer<UInt8>) -> OpenBrief? {
        guard let i = index(ofIno: ino) else { return nil }
        let b = bits[i]
        let r = NodeStore.bounds(ends, i, 2)
        let prefix = b & NodeStore.inStore != 0 ? rootPrefix.count : 0
        let n = prefix + r.count
        guard n < buf.count else { return nil }
        rootPrefix.withUnsafeBufferPointer { root in
            _ = UnsafeMutableBufferPointer(rebasing: buf[0..<prefix]).initialize(fromContentsOf: UnsafeBufferPointer(rebasing: root[0..<prefix]))
        }
        text.withUnsafeBufferPointer { t in
            _ = UnsafeMutableBufferPointer(rebasing: buf[prefix..<n]).initialize(fromContentsOf: UnsafeBufferPointer(rebasing: t[r]))
        }
        buf[n] = 0
        return OpenBrief(rowID: rowIDs[i], ino: inos[i], size: sizes[i], ctime: ctimes[i], bits: b)
    }

    func bytesEqual(_ i: Int, _ field: Int, _ other: NodeStore, _ j: Int) -> Bool {
        let a = NodeStore.bounds(ends, i, field), b = NodeStore.bounds(other.ends, j, field)
        guard a.count == b.count else { return false }
        return text.withUnsafeBufferPointer { x in
            other.text.withUnsafeBufferPointer { y in NodeStore.sameBytes(x, a, UnsafeBufferPointer(rebasing: y[b])) }
        }
    }

    func node(_ i: Int) -> AssetNode {
        let b = bits[i]
        return AssetNode(rowID: rowIDs[i], assetID: string(i, 0), name: string(i, 1), ino: inos[i], size: sizes[i],
                         mtime: mtimes[i], ctime: ctimes[i], path: b & NodeStore.inStore != 0 ? storePath(i) : string(i, 2),
                         inStore: b & NodeStore.inStore != 0, strip: b & NodeStore.strip != 0, owned: b & NodeStore.owned != 0, shared: b & NodeStore.shared != 0,
                         selected: b & NodeStore.selected != 0, picked: b & NodeStore.picked != 0,
                         editable: b & NodeStore.editable != 0, compatible: b & NodeStore.compatible != 0,
                         deletable: b & NodeStore.deletable != 0, renamable: b & NodeStore.renamable != 0)
    }

    /// Whether the bytes at `range` of `text` are `q`: the one comparison of names and fields.
    @inline(__always) static func sameBytes(_ text: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ q: UnsafeBufferPointer<UInt8>) -> Bool {
        range.count == q.count && (q.isEmpty || memcmp(text.baseAddress! + range.lowerBound, q.baseAddress!, q.count) == 0)
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
                return r.count == q.count && text.withUnsafeBufferPointer { t in NodeStore.sameBytes(t, r, q) }
            }
        }
    }
}
