import FUSE

/// Inodes that stand for an asset under another inode (`resolve` answers them `.aliased`): the
/// source's inode after a rename over an asset (Writes/EditSession.swift), and an asset's old
/// inode after it got a new one for a new version (Refresh/Refresh.swift). The kernel forgets
/// such an inode once it has looked the name up again, so only the newest `capacity` are kept,
/// oldest out first, each insert O(1) amortized.
struct AliasTable {
    let capacity: Int
    private var rows: [Inode: Int64] = [:]
    private var order: [Inode] = []
    private var head = 0

    init(capacity: Int) { self.capacity = capacity }

    subscript(ino: Inode) -> Int64? { rows[ino] }

    var count: Int { rows.count }

    mutating func insert(_ ino: Inode, row: Int64) {
        if rows.updateValue(row, forKey: ino) == nil { order.append(ino) }
        while rows.count > capacity, head < order.count {
            rows[order[head]] = nil
            head += 1
        }
        // Drop what was evicted from the front once it is half the array.
        if head > 64 && head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}
