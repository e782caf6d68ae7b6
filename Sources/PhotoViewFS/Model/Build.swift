import FUSE
import Foundation
import PhotoLibrary
import Threads

extension ViewModel {

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
        ctimes.reserveCapacity(n); bits.reserveCapacity(n); ends.reserveCapacity(n * 3)
        // At most the snapshot's text (its id, name and path are three of its fields) and renamed names.
        text.reserveCapacity(r.arena.count + r.renamed.values.reduce(0) { $0 + $1.utf8.count })
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

    /// The row id, name and inode tables of `n` nodes, built on two threads (each task writes
    /// only its own tables; each table is built front to back, `IndexTable.build`). Returns the
    /// indices whose inode another node already has. The tables and the sort buffers are
    /// allocated here, on the calling thread (see `IndexTable.build`).
    static func buildTables(n: Int, rowIDs: [Int64], inos: [UInt64], text: [UInt8], ends: [UInt32])
        -> (byRow: IndexTable, byName: IndexTable, byIno: IndexTable, inodeCollisions: [Int]) {
        let byRow = Box(IndexTable(capacity: n)), byName = Box(IndexTable(capacity: n)), byIno = Box(IndexTable(capacity: n))
        let scratch = [Box(IndexTable.Scratch(n: n)), Box(IndexTable.Scratch(n: n))]
        let collisions = Box([Int]())
        NativeThread.concurrentPerform(iterations: 2) { task in
            let s = scratch[task]
            switch task {
            case 0:
                _ = IndexTable.build(n: n, keepFirst: false, into: &byRow.value, scratch: &s.value,
                                     hash: { NodeStore.mix(UInt64(bitPattern: rowIDs[$0])) }, sameKey: { rowIDs[Int($0)] == rowIDs[Int($1)] })
                collisions.value = IndexTable.build(n: n, keepFirst: true, into: &byIno.value, scratch: &s.value,
                                                    hash: { NodeStore.mix(inos[$0]) }, sameKey: { inos[Int($0)] == inos[Int($1)] }).sorted()
            default:
                text.withUnsafeBufferPointer { tx in
                    func name(_ i: Int) -> UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(rebasing: tx[NodeStore.bounds(ends, i, 1)]) }
                    _ = IndexTable.build(n: n, keepFirst: false, into: &byName.value, scratch: &s.value, hash: { NodeStore.nameHash(name($0)) },
                                         sameKey: { NodeStore.sameBytes(tx, NodeStore.bounds(ends, Int($1), 1), name(Int($0))) })
                }
            }
        }
        return (byRow.value, byName.value, byIno.value, collisions.value)
    }

}
