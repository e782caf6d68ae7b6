import Foundation
import GRDB
import PhotoLibrary

/// The person's albums: made, filled, emptied and deleted (the rows a view's Albums/ shows).
extension Library {

    public func albums() throws -> [AlbumInfo] {
        try read { db in
            try Row.fetchAll(db, sql: """
                SELECT al.id, al.name, al.kind, al.created_at,
                       (SELECT count(*) FROM album_assets aa JOIN assets a ON a.rowid = aa.asset_rowid
                        WHERE aa.album_id = al.id AND a.trashed_at IS NULL)
                FROM albums al ORDER BY al.kind, al.name
                """).map { r in
                AlbumInfo(id: r[0], name: r[1], isShared: (r[2] as String) == "shared", count: r[4],
                          createdAt: Date(timeIntervalSince1970: r[3]))
            }
        }
    }

    static func validateAlbumName(_ name: String) throws {
        switch DisplayName.validate(Array(name.utf8)) {
        case .success: return
        case .failure:
            throw LibraryError.invalid("invalid album name '\(name)': 1 to 255 bytes of UTF-8, no '/', not '.', '..' or a reserved name")
        }
    }

    @discardableResult
    public func createAlbum(_ name: String, shared: Bool = false) throws -> Int64 {
        try Library.validateAlbumName(name)
        return try write { db in try Library.createAlbum(db, name, shared: shared, mustBeNew: true) }
    }

    static func createAlbum(_ db: Database, _ name: String, shared: Bool, mustBeNew: Bool) throws -> Int64 {
        let kind = shared ? "shared" : "user"
        if let id = try Int64.fetchOne(db, sql: "SELECT id FROM albums WHERE kind = ? AND name = ?", arguments: [kind, name]) {
            if mustBeNew { throw LibraryError.albumExists(name) }
            return id
        }
        try db.execute(sql: "INSERT INTO albums (name, kind, created_at) VALUES (?, ?, ?)", arguments: [name, kind, now()])
        let id = db.lastInsertedRowID
        try record(db, .album, detail: name)
        return id
    }

    static func userAlbumID(_ db: Database, _ name: String) throws -> Int64 {
        guard let id = try Int64.fetchOne(db, sql: "SELECT id FROM albums WHERE kind = 'user' AND name = ?", arguments: [name]) else {
            throw LibraryError.unknownAlbum(name)
        }
        return id
    }

    @discardableResult
    public func addToAlbum(_ name: String, _ refs: [String]) throws -> Int {
        try write { db in
            let albumID = try Library.userAlbumID(db, name)
            let assets = try Library.resolve(db, refs)
            // Tracked: an app granted this album sees the new members (history and views).
            return try ViewDelta.tracking(db, assets.map(\.rowID)) { try Library.addToAlbum(db, albumID, assets.map(\.rowID)) }
        }
    }

    static func addToAlbum(_ db: Database, _ albumID: Int64, _ rowIDs: [Int64]) throws -> Int {
        let stmt = try db.cachedStatement(sql: "INSERT INTO album_assets (album_id, asset_rowid, added_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING")
        var n = 0
        var added: [Int64] = []
        for r in rowIDs {
            try stmt.execute(arguments: [albumID, r, now()])
            if db.changesCount > 0 { n += 1; added.append(r); try record(db, .albumAdd, asset: r, detail: String(albumID)) }
        }
        try refreshSetSelections(db, added, apps: try String.fetchAll(db, sql: "SELECT DISTINCT app_id FROM set_grants WHERE album_id = ?", arguments: [albumID]))
        return n
    }

    @discardableResult
    public func removeFromAlbum(_ name: String, _ refs: [String]) throws -> Int {
        try write { db in
            let albumID = try Library.userAlbumID(db, name)
            let assets = try Library.resolve(db, refs)
            var n = 0
            try ViewDelta.tracking(db, assets.map(\.rowID)) {
                for a in assets {
                    try db.execute(sql: "DELETE FROM album_assets WHERE album_id = ? AND asset_rowid = ?", arguments: [albumID, a.rowID])
                    if db.changesCount > 0 { n += 1; try Library.record(db, .albumRemove, asset: a.rowID, detail: String(albumID)) }
                }
                // An app granted the album loses what left it (unless granted otherwise).
                try Library.refreshSetSelections(db, assets.map(\.rowID),
                                                 apps: try String.fetchAll(db, sql: "SELECT DISTINCT app_id FROM set_grants WHERE album_id = ?", arguments: [albumID]))
            }
            return n
        }
    }

    /// Deletes a user album; with `onlyIfEmpty` (rmdir), refuses one that still holds visible assets.
    public func deleteAlbum(_ name: String, onlyIfEmpty: Bool) throws {
        try write { db in
            let albumID = try Library.userAlbumID(db, name)
            if onlyIfEmpty {
                let n = try Int.fetchOne(db, sql: """
                    SELECT count(*) FROM album_assets aa JOIN assets a ON a.rowid = aa.asset_rowid
                    WHERE aa.album_id = ? AND a.trashed_at IS NULL
                    """, arguments: [albumID]) ?? 0
                if n > 0 { throw LibraryError.conflict("album '\(name)' is not empty") }
            }
            // Its set grants go with it (ON DELETE CASCADE), and what they alone selected.
            let apps = try String.fetchAll(db, sql: "SELECT DISTINCT app_id FROM set_grants WHERE album_id = ?", arguments: [albumID])
            let members = apps.isEmpty ? [] : try Int64.fetchAll(db, sql: "SELECT asset_rowid FROM album_assets WHERE album_id = ?", arguments: [albumID])
            try ViewDelta.tracking(db, members) {
                try db.execute(sql: "DELETE FROM albums WHERE id = ?", arguments: [albumID])
                try Library.refreshSetSelections(db, members, apps: apps)
            }
            try Library.record(db, .album, detail: name)
        }
    }
}
