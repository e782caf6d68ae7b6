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

    /// A table of the keys of `0..<n` built at once, as inserting them in index order would
    /// build it (with `keepFirst`, `insertIfAbsent`; else `insert`, where a later equal key
    /// replaces an earlier one). `hash(i)` is key i's hash; `sameKey(a, b)` is asked only of
    /// indices whose hashes agree in their low 32 bits. Returns the indices left out: with
    /// `keepFirst` those whose key an earlier index had; else those a later index replaced.
    ///
    /// Inserting a million keys one by one lands each on a random slot of a table too big for
    /// the cache, and compares keys at random places in the store: a miss or two per key, ~130 ns
    /// each here, most of a million-asset mount's table build. Here the keys are radix-sorted by
    /// their home slot (a stable sort, so equal keys stay in index order), and the table is
    /// written front to back; only the few runs that wrap past the end are inserted as usual.
    ///
    /// `scratch` is the sort's memory (8 bytes a key, twice) and `table` an empty table for `n`
    /// keys (`init(capacity:)`), both made by the caller: at a mount's start this runs on a worker
    /// thread, and memory that thread allocated would go back to its own heap, whose top
    /// `malloc_trim` does not give back (see `FreedMemory`).
    static func build(n: Int, keepFirst: Bool, into table: inout IndexTable, scratch: inout Scratch,
                      hash: (Int) -> Int, sameKey: (Int32, Int32) -> Bool) -> [Int] {
        let mask = table.mask
        precondition(scratch.entries.count >= n && scratch.other.count >= n && table.capacity >= 2 * n && mask <= Int(UInt32.max))
        scratch.entries.withUnsafeMutableBufferPointer { b in
            for i in 0..<n { b[i] = Entry(hash: UInt32(truncatingIfNeeded: hash(i)), index: Int32(i)) }
        }
        sortByHome(&scratch.entries, &scratch.other, n: n, bits: mask.nonzeroBitCount)
        let entries = scratch.entries
        var leftOut: [Int] = [], overflow: [Int32] = []
        table.slots.withUnsafeMutableBufferPointer { slots in
            entries.withUnsafeBufferPointer { all in
                let s = UnsafeBufferPointer(rebasing: all[0..<n])
                var next = 0, groupHome = -1, groupStart = 0
                entry: for k in 0..<s.count {
                    let e = s[k], home = Int(e.hash) & mask
                    if home != groupHome { groupHome = home; groupStart = k }
                    let pos = max(home, next)
                    // Past the end: the run wraps. So do all later ones (`next` stays past the
                    // end); they are inserted one by one below, which finds equal keys anywhere.
                    if pos > mask { overflow.append(e.index); continue }
                    // Equal keys have equal hashes, so they are earlier in this group, placed in
                    // [home, next). The latest of them is the one in the table (it replaced the
                    // others, or they were left out): look from the latest back.
                    var j = k - 1
                    while j >= groupStart {
                        if s[j].hash == e.hash && sameKey(s[j].index, e.index) {
                            if keepFirst { leftOut.append(Int(e.index)); continue entry }
                            let at = (home..<next).first { slots[$0] == s[j].index }!
                            slots[at] = e.index
                            leftOut.append(Int(s[j].index))
                            continue entry
                        }
                        j -= 1
                    }
                    slots[pos] = e.index
                    next = pos + 1
                }
            }
        }
        for index in overflow {
            let h = hash(Int(index))
            let isMatch = { (v: Int32) in sameKey(v, index) }
            if keepFirst {
                if !table.insertIfAbsent(h, index, isMatch) { leftOut.append(Int(index)) }
            } else if let old = table.find(h, isMatch) {
                table.insert(h, index, isMatch)
                leftOut.append(old)
            } else {
                table.insert(h, index, isMatch)
            }
        }
        return leftOut
    }

    /// A key in `build`: the low 32 bits of its hash (the home slot is in them) and its index.
    struct Entry { var hash: UInt32; var index: Int32 }

    /// `build`'s sort buffers for up to `n` keys.
    struct Scratch {
        var entries: [Entry], other: [Entry]
        init(n: Int) {
            // Only allocated here: `build` writes every entry it reads (Entry is plain data).
            entries = [Entry](unsafeUninitializedCapacity: n) { _, count in count = n }
            other = [Entry](unsafeUninitializedCapacity: n) { _, count in count = n }
        }
    }

    /// LSD radix sort of the first `n` of `entries` by the low `bits` bits of their hash, 11 bits a
    /// pass, through `other`; stable. The result is in `entries`.
    static func sortByHome(_ entries: inout [Entry], _ other: inout [Entry], n: Int, bits: Int) {
        guard n > 1 else { return }
        var counts = [Int](repeating: 0, count: 1 << 11)
        var shift = 0
        while shift < bits {
            let width = min(11, bits - shift), m = UInt(1 << width) - 1, sh = UInt(shift)
            entries.withUnsafeBufferPointer { all in
                let src = UnsafeBufferPointer(rebasing: all[0..<n])
                other.withUnsafeMutableBufferPointer { dst in
                    counts.withUnsafeMutableBufferPointer { c in
                        for k in 0...Int(m) { c[k] = 0 }
                        for e in src { c[Int((UInt(e.hash) >> sh) & m)] += 1 }
                        var sum = 0
                        for k in 0...Int(m) { let x = c[k]; c[k] = sum; sum += x }
                        for e in src {
                            let k = Int((UInt(e.hash) >> sh) & m)
                            dst[c[k]] = e
                            c[k] += 1
                        }
                    }
                }
            }
            swap(&entries, &other)
            shift += width
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
