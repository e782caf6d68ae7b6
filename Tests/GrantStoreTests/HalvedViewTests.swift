import Foundation
import Testing
import TestSupport
@testable import GrantStore
@testable import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

/// Issue 18: a whole view is read as two halves of the row ids at once, on two connections.
/// It must be exactly the view read in one transaction, for every kind of view, and never a mix
/// of two states of the library.
@Suite(.serialized) struct HalvedView {
    /// What a view shows, in comparable form.
    struct Picture: Equatable {
        var rows: [String]
        var albums: [String]
        var seq: Int64
        var unsettled: Int
        init(_ s: ViewSnapshot) {
            rows = s.entries.map { e in
                let a = e.asset
                return "\(a.rowID) \(a.id) \(e.name) o\(e.isOwned) p\(e.isPicked) s\(e.isSelected) x\(e.stripLocation) "
                    + "\(a.storePath ?? "-") \(a.referencePath ?? "-") \(a.byteSize) \(a.captureDate) \(a.addedDate) "
                    + "\(a.mediaKind) \(a.contentHash) \(a.ownerName ?? "-") \(a.owner?.rawValue ?? "-") \(a.isShared) \(a.hasLocation)"
            }
            albums = s.albums.map { "\($0.name) \($0.isShared) \($0.members)" }
            seq = s.changeSeq
            unsettled = s.rows.unsettledNames
        }
    }

    /// A library with a bit of everything a view can show: grants with and without
    /// strip-location, picks, the app's own files (one named like a library photo, so names
    /// clash and must be settled), trashed photos, a user album and a shared one.
    func richLibrary() throws -> (TempLibrary, [Asset]) {
        let t = try TempLibrary()
        var assets = try t.importJPEGs((0..<24).map { "P\($0).jpg" }, album: "Trip")
        assets += try t.importJPEGs((0..<6).map { "G\($0).jpg" }, gps: true)
        assets += try t.importJPEGs((0..<4).map { "S\($0).jpg" }, shared: "Family")
        try t.library.authorize(editor, access: .readWrite, status: .limited)
        try t.library.grant(editor, [assets[1].id, assets[7].id, assets[20].id])
        try t.library.grant(editor, [assets[3].id, assets[26].id], stripLocation: true)
        try t.library.grant(editor, [assets[5].id, assets[27].id], picked: true)
        _ = try t.appFile(editor, "P2.jpg")
        _ = try t.appFile(editor, "mine.jpg")
        assets += try t.importJPEGs((0..<6).map { "Q\($0).jpg" })
        try t.library.moveToTrash(rowIDs: [assets[4].rowID, assets[22].rowID])
        return (t, assets)
    }

    @Test func aViewReadInHalvesIsTheViewReadWhole() throws {
        let (t, _) = try richLibrary()
        let before = Library.halvedViews.load(ordering: .relaxed)
        var compared = 0
        for status in AuthorizationStatus.allCases {
            for access in [AccessLevel.readWrite, .addOnly] where !(access == .addOnly && status == .limited) {
                try t.library.authorize(editor, access: access, status: status)
                for lean in [true, false] {
                    let whole = try t.library.view(for: editor, access: access, lean: lean, halvesFrom: nil)
                    let halves = try t.library.view(for: editor, access: access, lean: lean, halvesFrom: 1)
                    #expect(Picture(halves) == Picture(whole), "\(status) \(access) lean \(lean)")
                    compared += 1
                }
            }
        }
        // The comparison means nothing unless the halves were taken each time.
        #expect(Library.halvedViews.load(ordering: .relaxed) - before == compared)
        try t.library.authorize(editor, access: .readWrite, status: .authorized)
        #expect(try t.library.view(for: editor, access: .readWrite, lean: true, halvesFrom: 1).entries.count > 30)
    }

    /// A grant and a revoke committed between the two halves' transactions: the first half
    /// saw the library before them, the second after. The view must not be that mix (the first
    /// half's rows from before, the second's from after): it is read again in one transaction.
    @Test func aChangeBetweenTheHalvesIsNotMixedIn() throws {
        let (t, assets) = try richLibrary()
        try t.library.authorize(editor, access: .readWrite, status: .limited)
        // Row ids of the first half: the lowest ones.
        let low = assets.sorted { $0.rowID < $1.rowID }
        let granted = low[0], revoked = low[1]
        try t.library.grant(editor, [revoked.id])
        let library = t.library
        let before = Library.halvedViews.load(ordering: .relaxed)
        let seen = try t.library.view(for: editor, access: .readWrite, lean: true, halvesFrom: 1, beforeSecondHalf: {
            _ = try? library.grant(editor, [granted.id])
            _ = try? library.revoke(editor, [revoked.id])
        })
        let ids = Set(seen.entries.map(\.asset.id))
        #expect(ids.contains(granted.id), "granted before the view was done")
        #expect(!ids.contains(revoked.id), "revoked before the view was done")
        #expect(Picture(seen) == Picture(try t.library.view(for: editor, access: .readWrite, lean: true, halvesFrom: nil)))
        #expect(Library.halvedViews.load(ordering: .relaxed) == before, "the mixed halves were used")
    }

    /// Row ids at both ends of Int64 (a writer may choose any; SQLite's own are positive): the
    /// halves' bounds and the room reserved for rows must not overflow or reserve absurdly.
    @Test func rowIDsAtTheEndsOfInt64() throws {
        let (t, assets) = try richLibrary()
        let plain = assets.suffix(2)   // the last import: in no album, granted to nobody
        try t.library.write { db in
            try db.execute(sql: "UPDATE assets SET rowid = ? WHERE rowid = ?", arguments: [Int64.min, plain.first!.rowID])
            try db.execute(sql: "UPDATE assets SET rowid = ? WHERE rowid = ?", arguments: [Int64.max, plain.last!.rowID])
        }
        try t.library.authorize(editor, access: .readWrite, status: .authorized)
        let before = Library.halvedViews.load(ordering: .relaxed)
        let halves = try t.library.view(for: editor, access: .readWrite, lean: true, halvesFrom: 1)
        let whole = try t.library.view(for: editor, access: .readWrite, lean: true, halvesFrom: nil)
        #expect(Picture(halves) == Picture(whole))
        #expect(Set(halves.entries.map(\.asset.rowID)).isSuperset(of: [Int64.min, Int64.max]))
        #expect(Library.halvedViews.load(ordering: .relaxed) == before + 1)
        // One asset left: nothing to halve.
        try t.library.write { db in try db.execute(sql: "DELETE FROM assets WHERE rowid NOT IN (?)", arguments: [Int64.max]) }
        #expect(try t.library.view(for: editor, access: .readWrite, lean: true, halvesFrom: 1).entries.count == 1)
    }

}
