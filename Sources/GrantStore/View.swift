import Foundation
import GRDB
import GRDBSQLite
import PhotoLibrary

extension Library {
    /// Computes an app's view. The SQL only narrows the candidates; `ViewPolicy` decides.
    /// `lean`: leave out the text a mount never reads (content hash, media kind and class), which
    /// are a third of the bytes copied for a million assets.
    public func view(for id: AppID, access: AccessLevel, lean: Bool = false) throws -> ViewSnapshot {
        try read { db in
            let app = try Library.requireApp(db, id)
            return try Library.view(db, app: app, access: access, lean: lean)
        }
    }

    /// `only`: compute just these rows (sorted row ids) and leave names unsettled and albums
    /// unfiltered (every member), for `viewUpdate`.
    static func view(_ db: Database, app: AppRecord, access: AccessLevel, only: [Int64]? = nil,
                     withAlbums: Bool = true, lean: Bool = false) throws -> ViewSnapshot {
        let policy = ViewPolicy(access: access, status: app.status(for: access))
        let seq = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'changes'") ?? 0
        let leftOut: Set<String> = lean ? ["media_kind", "media_class", "content_hash"] : []
        let cols = assetColumns.split(separator: ",").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
            .map { leftOut.contains($0) ? "NULL" : "a." + $0 }.joined(separator: ", ")
        var candidates: String
        switch policy.scope {
        case .everything: candidates = "a.trashed_at IS NULL"
        case .limited:
            candidates = """
                a.trashed_at IS NULL AND a.rowid IN (SELECT asset_rowid FROM selections WHERE app_id = :app
                UNION SELECT asset_rowid FROM picks WHERE app_id = :app UNION SELECT rowid FROM assets WHERE owner_app = :app)
                """
        case .pickedOnly: candidates = "a.trashed_at IS NULL AND a.rowid IN (SELECT asset_rowid FROM picks WHERE app_id = :app)"
        case .nothing: candidates = "0"
        }
        if let only {
            candidates += only.isEmpty ? " AND 0" : " AND a.rowid IN (\(only.map(String.init).joined(separator: ",")))"
        }
        // Read with the SQLite C API straight into columns: no Row, no String per value (a mount
        // of a million assets reads them all).
        let statement = try db.makeStatement(sql: """
            SELECT \(cols), s.strip_location, p.strip_location FROM assets a
            LEFT JOIN selections s ON s.app_id = :app AND s.asset_rowid = a.rowid
            LEFT JOIN picks p ON p.app_id = :app AND p.asset_rowid = a.rowid
            WHERE \(candidates) ORDER BY a.rowid
            """)
        try statement.setArguments(["app": app.id.rawValue])
        let h = statement.sqliteStatement
        defer { sqlite3_reset(h) }
        var rows = ViewRows()
        let appBytes = Array(app.id.rawValue.utf8)
        var needsNaming = false
        func isNull(_ c: Int32) -> Bool { sqlite3_column_type(h, c) == SQLITE_NULL }
        while true {
            let rc = sqlite3_step(h)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else {
                throw DatabaseError(resultCode: ResultCode(rawValue: rc), message: String(cString: sqlite3_errmsg(db.sqliteConnection)))
            }
            // Columns: see assetColumns (0...15), then the selection's (16) and the pick's (17) strip flag.
            var owned = false
            if !isNull(4), let owner = sqlite3_column_text(h, 4), Int(sqlite3_column_bytes(h, 4)) == appBytes.count {
                owned = appBytes.withUnsafeBufferPointer { a in memcmp(owner, a.baseAddress!, a.count) == 0 }
            }
            let selected = !isNull(16), picked = !isNull(17)
            let shared = sqlite3_column_int64(h, 12) != 0, trashed = !isNull(13)
            let facts = AssetFacts(isShared: shared, isTrashed: trashed, isOwned: owned, isSelected: selected, isPicked: picked)
            guard policy.isVisible(facts) else { continue }
            let strip = app.options.stripLocation || (selected && sqlite3_column_int64(h, 16) != 0)
                || (picked && sqlite3_column_int64(h, 17) != 0)
            var f: ViewRows.Flags = []
            if owned { f.insert(.owned) }
            if picked { f.insert(.picked) }
            if selected { f.insert(.selected) }
            if strip { f.insert(.strip) }
            if shared { f.insert(.shared) }
            if sqlite3_column_int64(h, 10) != 0 { f.insert(.hasLocation) }
            if trashed { f.insert(.trashed) }
            // The text columns in Field order.
            for (field, column) in ViewRows.textColumns {
                if isNull(column) {
                    switch field {
                    case .ownerName: f.insert(.ownerNameNull)
                    case .ownerApp: f.insert(.ownerAppNull)
                    case .storePath: f.insert(.storePathNull)
                    case .referencePath: f.insert(.referencePathNull)
                    default: break
                    }
                    rows.appendText(nil, 0)
                } else {
                    let p = sqlite3_column_text(h, column)   // before _bytes, as SQLite asks
                    rows.appendText(p, Int(sqlite3_column_bytes(h, column)))
                }
            }
            if owned && !isNull(3) { needsNaming = true }
            rows.appendNumbers(rowID: sqlite3_column_int64(h, 0), size: UInt64(bitPattern: sqlite3_column_int64(h, 7)),
                               capture: sqlite3_column_double(h, 8), added: sqlite3_column_double(h, 9),
                               trashed: trashed ? sqlite3_column_double(h, 13) : 0, flags: f)
        }
        if needsNaming && only == nil {
            let items = (0..<rows.count).map { i in
                ViewNaming.Item(key: Int64(i), displayName: rows.text(.displayName, i)!,
                                ownName: rows.flags[i].contains(.owned) ? rows.text(.ownerName, i) : nil)
            }
            let names = ViewNaming.assign(items)
            for item in items where names[item.key] != nil && names[item.key] != item.displayName {
                rows.renamed[Int(item.key)] = names[item.key]
            }
            rows.unsettledNames = items.count { names[$0.key] != ($0.ownName ?? $0.displayName) }
        }
        // display names are unique and never reserved: without own names there is nothing to settle
        var albums: [ViewAlbum] = []
        if policy.showsAlbums && withAlbums {
            let albumRows = try Row.fetchAll(db, sql: "SELECT id, name, kind FROM albums ORDER BY kind, name")
            var members: [Int64: [Int64]] = [:]
            let pairs = try Row.fetchCursor(db, sql: "SELECT album_id, asset_rowid FROM album_assets ORDER BY album_id, asset_rowid")
            while let p = try pairs.next() {
                let asset: Int64 = p[1]
                if only != nil || rows.index(ofRowID: asset) != nil { members[p[0], default: []].append(asset) }
            }
            for r in albumRows {
                albums.append(ViewAlbum(name: r[1], isShared: (r[2] as String) == "shared", members: members[r[0]] ?? []))
            }
        }
        return ViewSnapshot(app: app, access: access, policy: policy, rows: rows, albums: albums, changeSeq: seq)
    }
}
