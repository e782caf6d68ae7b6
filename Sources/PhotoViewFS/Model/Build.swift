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
        // Row ids and sizes are the snapshot's columns as they are (shared, not copied).
        let rowIDs = r.rowIDs, sizes = r.byteSizes
        // Two tasks at once: the inodes (a SipHash of each row's label) and then the row id and
        // inode tables on a worker; the text, the other columns and then the name table here.
        // Everything large is allocated on this thread, before: see `FreedMemory`.
        let inoBox = Box([UInt64](unsafeUninitializedCapacity: n) { _, count in count = n })   // each written before read
        let text = Box([UInt8]()), ends = Box([UInt32]()), mtimes = Box([Int]()), ctimes = Box([Int]()), bits = Box([NodeStore.Bits]())
        let tables = TableBuild(n: n)
        NativeThread.concurrentPerform(iterations: 2) { task in
            if task == 1 {
                inoBox.value.withUnsafeMutableBufferPointer { ViewModel.assetInodes(r, key: key, into: $0) }
                tables.buildRowAndInode(rowIDs: rowIDs, inos: inoBox.value)
                return
            }
            // Task 0 runs on this thread (so these are allocated here).
            var tx = [UInt8](), en = [UInt32](), mt = [Int](), ct = [Int](), bi = [NodeStore.Bits]()
            en.reserveCapacity(n * 3); mt.reserveCapacity(n); ct.reserveCapacity(n); bi.reserveCapacity(n)
            // At most the snapshot's text (its id, name and path are three of its fields) and renamed names.
            tx.reserveCapacity(r.arena.count + r.renamed.values.reduce(0) { $0 + $1.utf8.count })
            for i in 0..<n {
                let f = r.flags[i]
                r.withBytes(.id, i) { tx.append(contentsOf: $0) }
                en.append(UInt32(tx.count))
                if let own = r.ownViewName(i) { tx.append(contentsOf: own.utf8) } else { r.withBytes(.displayName, i) { tx.append(contentsOf: $0) } }
                en.append(UInt32(tx.count))
                r.withBytes(f.contains(.referencePathNull) ? .storePath : .referencePath, i) { tx.append(contentsOf: $0) }
                en.append(UInt32(tx.count))
                mt.append(Int(r.captureDates[i]))
                ct.append(Int(r.addedDates[i]))
                bi.append(NodeStore.bits(f))
            }
            tables.buildName(text: tx, ends: en)
            text.value = tx; ends.value = en; mtimes.value = mt; ctimes.value = ct; bits.value = bi
        }
        var inos = inoBox.value
        inoBox.value = []   // `inos` is then its only owner: the salting below writes in place
        let textOf = text.value, endsOf = ends.value, bitsOf = bits.value
        var byIno = tables.byIno.value
        // Two assets with one inode (2^-62 odds; still handled): the later one is salted.
        for i in tables.inodeCollisions.value {
            let id = String(decoding: textOf[NodeStore.bounds(endsOf, i, 0)], as: UTF8.self)
            let strip = bitsOf[i] & NodeStore.strip != 0
            var salt = 1
            var ino: UInt64
            repeat {
                ino = ViewModel.inode(key: key, "asset/\(id)/\(strip)/\(salt)")
                salt += 1
            } while !byIno.insertIfAbsent(NodeStore.mix(ino), Int32(i), { inos[Int($0)] == ino })
            inos[i] = ino
        }
        let mtimesOf = mtimes.value
        store = NodeStore(rowIDs: rowIDs, inos: inos, sizes: sizes, mtimes: mtimesOf, ctimes: ctimes.value, bits: bitsOf, text: textOf,
                          ends: endsOf, storeRoot: storeRoot, byRow: tables.byRow.value, byName: tables.byName.value, byIno: byIno)
        // Capture time, then row id: sort packed keys, not indices through the arrays.
        var order = (0..<n).map { (mtimesOf[$0], rowIDs[$0]) }
        var sorted = true
        for i in order.indices.dropFirst() where order[i] < order[i - 1] { sorted = false; break }
        if !sorted { order.sort { $0 < $1 } }
        listing = order.map(\.1)
        totalBytes = sizes.reduce(0, &+)
        setAlbums(s.albums)
        setSidecars(s.sidecars)
    }

    final class Box<T>: @unchecked Sendable {
        var value: T
        init(_ v: T) { value = v }
    }

    /// The inode of each row of `r`: the same label as `assetInode`, hashed without building
    /// Strings. Asset inodes have bit 62 set, so they never meet the fixed inodes (1...7).
    static func assetInodes(_ r: ViewRows, key: (UInt64, UInt64), into out: UnsafeMutableBufferPointer<UInt64>) {
        var label: [UInt8] = []
        let assetPrefix = Array("asset/".utf8), redacted = Array("/redacted".utf8), jpeg = Array(ViewModel.compatibleLabel.utf8)
        for i in 0..<r.count {
            let f = r.flags[i]
            label.removeAll(keepingCapacity: true)
            label.append(contentsOf: assetPrefix)
            r.withBytes(.id, i) { label.append(contentsOf: $0) }
            if f.contains(.strip) { label.append(contentsOf: redacted) }
            if f.contains(.referencePathNull) {
                var tag: [UInt8]? = nil
                r.withBytes(.id, i) { id in r.withBytes(.storePath, i) { sp in tag = ViewModel.versionTag(id: id, storePath: sp) } }
                if let tag { label.append(contentsOf: tag) }
            }
            if f.contains(.compatible) { label.append(contentsOf: jpeg) }
            out[i] = (SipHash24.hash(key: key, label) >> 2) | (1 << 62)
        }
    }

    /// The row id, name and inode tables of `n` nodes (each built front to back,
    /// `IndexTable.build`), from two threads: one builds the row id and inode tables, the other
    /// the name table. The tables and the sort buffers are allocated by the thread that makes
    /// this (see `IndexTable.build`).
    final class TableBuild: @unchecked Sendable {
        let n: Int
        let byRow: Box<IndexTable>, byName: Box<IndexTable>, byIno: Box<IndexTable>
        /// Indices whose inode an earlier index already has.
        let inodeCollisions = Box([Int]())
        private let scratch: [Box<IndexTable.Scratch>]

        init(n: Int) {
            self.n = n
            byRow = Box(IndexTable(capacity: n)); byName = Box(IndexTable(capacity: n)); byIno = Box(IndexTable(capacity: n))
            scratch = [Box(IndexTable.Scratch(n: n)), Box(IndexTable.Scratch(n: n))]
        }

        func buildRowAndInode(rowIDs: [Int64], inos: [UInt64]) {
            let s = scratch[0]
            _ = IndexTable.build(n: n, keepFirst: false, into: &byRow.value, scratch: &s.value,
                                 hash: { NodeStore.mix(UInt64(bitPattern: rowIDs[$0])) }, sameKey: { rowIDs[Int($0)] == rowIDs[Int($1)] })
            inodeCollisions.value = IndexTable.build(n: n, keepFirst: true, into: &byIno.value, scratch: &s.value,
                                                     hash: { NodeStore.mix(inos[$0]) }, sameKey: { inos[Int($0)] == inos[Int($1)] }).sorted()
        }

        func buildName(text: [UInt8], ends: [UInt32]) {
            let s = scratch[1]
            text.withUnsafeBufferPointer { tx in
                func name(_ i: Int) -> UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(rebasing: tx[NodeStore.bounds(ends, i, 1)]) }
                _ = IndexTable.build(n: n, keepFirst: false, into: &byName.value, scratch: &s.value, hash: { NodeStore.nameHash(name($0)) },
                                     sameKey: { NodeStore.sameBytes(tx, NodeStore.bounds(ends, Int($1), 1), name(Int($0))) })
            }
        }
    }

}
