import Foundation
import Testing
import TestSupport
@testable import GrantStore
@testable import PhotoLibrary
@testable import PhotoViewFS

/// The in-place patches a running mount applies (`ViewModel.apply`) must leave exactly the model
/// a full recomputation builds: same names, inodes, sizes, dates, paths, flags, listing order,
/// albums and lookups. Random changes of every kind, checked after each.
@Suite(.serialized) struct IncrementalView {
    /// The compared content of a model, lookups included.
    struct Picture: Equatable {
        var nodes: [Int64: AssetNode]
        var listing: [Int64]
        var albums: [String: [Int64]]
        var albumNames: [String: [String: Int64]]
        var shared: [String: [Int64]]
        var totalBytes: UInt64
        var policy: ViewPolicy
    }

    static func picture(_ m: ViewModel) -> Picture {
        var nodes: [Int64: AssetNode] = [:]
        for (r, n) in m.nodes {
            nodes[r] = n
            // Every node is found by row, name and inode: the tables survived the removals.
            #expect(m.byName[n.name] == r, "name lookup of \(n.name)")
            #expect(m.byIno[n.ino] == r, "inode lookup of \(n.name)")
        }
        #expect(m.nodes.count == nodes.count)
        return Picture(nodes: nodes, listing: m.listing, albums: m.albums.mapValues(\.listing),
                       albumNames: m.albums.mapValues(\.byName), shared: m.shared.mapValues(\.listing),
                       totalBytes: m.totalBytes, policy: m.policy)
    }

    @Test(arguments: [1, 2, 3]) func patchesEqualFullRecomputation(seed: UInt64) throws {
        let dir = TestSupport.tempDir("incr")
        defer { TestSupport.remove(dir) }
        let library = try Library.create(at: LibraryPaths(root: dir + "/library"))
        let src = dir + "/src"
        try FileManager.default.createDirectory(atPath: src, withIntermediateDirectories: true)
        for i in 0..<30 {
            try TestMedia.write(TestMedia.jpeg(tag: "p\(i)-\(seed)", gps: i % 3 == 0), to: src + "/IMG_\(String(format: "%04d", i)).jpg")
        }
        _ = try Importer(library: library, options: ImportOptions()).run([src])
        // Capture dates out of row order, with ties: the listing sorts by date, then row id.
        try library.pool!.write { db in
            try db.execute(sql: "UPDATE assets SET capture_date = 1500000000 + ((rowid * 7919) % 13) * 86400")
        }
        let limited = AppID("org.example.Limited")!, full = AppID("org.example.Full")!, denied = AppID("org.example.Denied")!
        _ = try library.authorize(limited, access: .readWrite, status: .limited)
        _ = try library.authorize(full, access: .readWrite, status: .authorized)
        _ = try library.authorize(denied, access: .readWrite, status: .denied)
        _ = try library.createAlbum("Trip")
        let writer = try StoreWriter(library: library, purpose: "test")
        let jpegBytes = try TestMedia.jpeg(tag: "owned-base")
        var rng = SplitMix(seed: seed)
        var models: [AppID: ViewModel] = [:]
        for app in [limited, full, denied] {
            models[app] = ViewModel(snapshot: try library.view(for: app, access: .readWrite), storeRoot: library.paths.store)
        }
        var patched = 0, rebuilt = 0
        for step in 0..<120 {
            // Grants and revokes name assets by id: an app in this test names its files like other
            // assets, and then a name means different assets in different listings (issue 14);
            // what is tested here is the view, not how names are read.
            let all = try library.assets() + library.trash()
            let names = all.map(\.displayName), ids = all.map(\.id)
            let pick = { ids[Int(rng.next() % UInt64(ids.count))] }
            let pickName = { names[Int(rng.next() % UInt64(names.count))] }
            let apps = [limited, full, denied]
            let app = apps[Int(rng.next() % 3)]
            switch rng.next() % 12 {
            case 0, 1: _ = try library.grant(app, [pick()], stripLocation: rng.next() % 2 == 0)
            case 2: _ = try library.revoke(app, [pick()])
            case 3: _ = try library.grant(app, [pick(), pick()], picked: true)
            case 4: _ = try library.revoke(app, [pick()], picked: true)
            case 5:
                let a = try library.resolve([pick()])
                try library.moveToTrash(rowIDs: a.map(\.rowID), by: rng.next() % 2 == 0 ? app : nil)
            case 6: _ = try? library.restore([pick()])
            case 7:
                if rng.next() % 2 == 0 { _ = try? library.addToAlbum("Trip", [pick()]) } else { _ = try? library.removeFromAlbum("Trip", [pick()]) }
            case 8:
                // The app creates a file; sometimes with a name another asset already has.
                let name = rng.next() % 3 == 0 ? pickName() : "own-\(step).jpg"
                let (id, temp, fd) = try writer.makeTemp(extension: "jpg")
                var bytes = jpegBytes
                bytes.append(contentsOf: Array("step\(step)".utf8))
                _ = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
                _ = try writer.commitAppFile(tempPath: temp, fd: fd, id: id, app: app, name: name)
                close(fd)
            case 9:
                if let own = try library.assets().first(where: { $0.owner == app }) {
                    try? library.renameOwnAsset(rowID: own.rowID, app: app, access: .readWrite, to: rng.next() % 2 == 0 ? "renamed-\(step).jpg" : pickName())
                }
            case 10: _ = try library.setOptions(app, stripLocation: rng.next() % 4 == 0)
            default:
                if rng.next() % 4 == 0 {
                    _ = try library.authorize(app, access: .readWrite, status: [.limited, .authorized, .denied][Int(rng.next() % 3)])
                } else {
                    _ = try library.grant(app, [pick(), pick(), pick()])
                }
            }
            for a in apps {
                var m = models[a]!
                let update = try library.viewUpdate(for: a, access: .readWrite, since: m.seq, app: m.app)
                if case .patch(let p) = update, m.apply(p) != nil {
                    patched += 1
                } else {
                    m = ViewModel(snapshot: try library.view(for: a, access: .readWrite), storeRoot: library.paths.store)
                    rebuilt += 1
                }
                let fresh = ViewModel(snapshot: try library.view(for: a, access: .readWrite), storeRoot: library.paths.store)
                #expect(m.seq == fresh.seq)
                let got = IncrementalView.picture(m), want = IncrementalView.picture(fresh)
                #expect(got == want, "step \(step): \(a) differs from a full recomputation")
                if got != want { return }
                models[a] = m
            }
        }
        // Most changes are applied row by row; the test means nothing if none were.
        print("incremental: \(patched) patched, \(rebuilt) rebuilt")
        #expect(patched > rebuilt)
    }

    @Test func indexTableRemovalKeepsEveryOtherKeyFindable() {
        // A small table and clustered hashes: removals must shift probe runs back correctly.
        var rng = SplitMix(seed: 7)
        var table = IndexTable(capacity: 40)
        var keys: [Int32: Int] = [:]     // value -> hash
        var next: Int32 = 0
        for _ in 0..<4000 {
            if keys.count < 40 && (keys.isEmpty || rng.next() % 2 == 0) {
                let h = Int(rng.next() % 16)        // many collisions
                let v = next; next += 1
                table.insert(h, v) { $0 == v }
                keys[v] = h
            } else {
                let v = Array(keys.keys)[Int(rng.next() % UInt64(keys.count))]
                table.remove(keys[v]!, v) { keys[$0]! }
                keys[v] = nil
            }
            for (v, h) in keys { #expect(table.find(h) { $0 == v } == Int(v)) }
        }
    }

    /// The table built at once (`IndexTable.build`, sorted by home slot) finds what inserting the
    /// keys one by one finds: every key, the same winner among equal keys (later for `insert`,
    /// earlier for `insertIfAbsent`), the same keys left out; with clustered and wrapping runs,
    /// many copies of one key, equal hashes of different keys, sizes from empty to one radix pass
    /// and more, and one scratch larger than needed reused for both builds. Afterwards it takes
    /// removals and inserts like any table.
    @Test(arguments: [0, 1, 2, 7, 40, 1000, 5000, 70_000])
    func indexTableBuiltAtOnceMatchesOneByOne(n: Int) {
        var rng = SplitMix(seed: UInt64(n) + 11)
        // Keys with repeats (a fifth of them one key); hashes sometimes shared by different keys,
        // and many near the top of the table so that runs wrap past its end.
        let keys = (0..<n).map { _ in rng.next() % 5 == 0 ? 12_345 : Int(rng.next() % UInt64(max(1, n * 3 / 4))) }
        let hashOfKey: (Int) -> Int = { k in k % 5 == 0 ? -1 - (k % 3) : (k &* 0x9E37_79B9) ^ (k >> 3) }
        var scratch = IndexTable.Scratch(n: n + 3)
        for keepFirst in [false, true] {
            var oneByOne = IndexTable(capacity: n)
            var expectedOut: [Int] = []
            for i in 0..<n {
                let k = keys[i], h = hashOfKey(k)
                if keepFirst {
                    if !oneByOne.insertIfAbsent(h, Int32(i), { keys[Int($0)] == k }) { expectedOut.append(i) }
                } else {
                    if let old = oneByOne.find(h, { keys[Int($0)] == k }) { expectedOut.append(old) }
                    oneByOne.insert(h, Int32(i)) { keys[Int($0)] == k }
                }
            }
            var table = IndexTable(capacity: n)
            let out = IndexTable.build(n: n, keepFirst: keepFirst, into: &table, scratch: &scratch,
                                       hash: { hashOfKey(keys[$0]) }, sameKey: { keys[Int($0)] == keys[Int($1)] })
            #expect(out.sorted() == expectedOut.sorted(), "keepFirst \(keepFirst): left out")
            var stored = 0
            for v in table.slots where v >= 0 { stored += 1 }
            #expect(stored == n - out.count)
            var live: [Int: Int32] = [:]   // key -> index in the table
            for k in Set(keys) {
                let found = table.find(hashOfKey(k)) { keys[Int($0)] == k }
                #expect(found == oneByOne.find(hashOfKey(k)) { keys[Int($0)] == k }, "keepFirst \(keepFirst): key \(k)")
                if let found { live[k] = Int32(found) }
            }
            #expect(table.find(hashOfKey(-7)) { keys[Int($0)] == -7 } == nil)
            // Churn: removals (backward shifts through wrapped runs) and inserts of new keys;
            // every key still in the table stays findable after each step.
            var extra: [Int: Int] = [:]   // index beyond n -> key
            func keyOf(_ v: Int32) -> Int { Int(v) < n ? keys[Int(v)] : extra[Int(v)]! }
            var nextIndex = Int32(n)
            for step in 0..<min(200, 2 * n) {
                if step % 3 != 2, let (k, v) = live.randomElement(using: &rng) {
                    table.remove(hashOfKey(k), v) { hashOfKey(keyOf($0)) }
                    live[k] = nil
                } else if live.count < n {
                    let k = -1000 - step
                    extra[Int(nextIndex)] = k
                    table.insert(hashOfKey(k), nextIndex) { keyOf($0) == k }
                    live[k] = nextIndex
                    nextIndex += 1
                }
                guard n <= 5000 || step % 40 == 0 else { continue }
                for (k, v) in live {
                    #expect(table.find(hashOfKey(k)) { keyOf($0) == k } == Int(v), "keepFirst \(keepFirst), step \(step): key \(k)")
                }
            }
        }
    }

}
