// The catalog rows of assets (reading, resolving references) and the grants over them, written in the same transactions.
import Foundation
import GRDB
import PhotoLibrary

public enum GrantKind: String, Sendable, Codable { case selected, picked }

public struct GrantRecord: Equatable, Sendable {
    public var asset: Asset
    public var kind: GrantKind
    public var stripLocation: Bool
    public var grantedAt: Date
    /// For a selection made by set grants alone: the sets that cover it (ids), else empty.
    public var throughSets: [Int64] = []
}

public struct AlbumInfo: Equatable, Sendable {
    public var id: Int64
    public var name: String
    public var isShared: Bool
    public var count: Int
    public var createdAt: Date
}

public struct GrantOutcome: Equatable, Sendable {
    public var changed: Int
    public var unchanged: Int
    /// For a revoke: assets no longer granted directly that a set grant still covers (they stay
    /// selected through it).
    public var stillInSets: Int = 0
}

extension Library {
    /// The asset columns every asset query selects, in this order (`AssetColumn` names them).
    static let assetColumns = AssetColumn.allCases.map(\.name).joined(separator: ", ")

    /// Positions in `assetColumns`: what the readers of asset rows (`asset(_:)`, the view build,
    /// the facts reader) index by, instead of bare integers.
    enum AssetColumn: Int32, CaseIterable {
        case rowid, id, displayName, ownerName, ownerApp, mediaKind, mediaClass, byteSize, captureDate, addedAt,
             hasLocation, contentHash, isShared, trashedAt, storePath, referencePath
        /// The column's name in the `assets` table.
        var name: String {
            switch self {
            case .rowid: return "rowid"
            case .id: return "id"
            case .displayName: return "display_name"
            case .ownerName: return "owner_name"
            case .ownerApp: return "owner_app"
            case .mediaKind: return "media_kind"
            case .mediaClass: return "media_class"
            case .byteSize: return "byte_size"
            case .captureDate: return "capture_date"
            case .addedAt: return "added_at"
            case .hasLocation: return "has_location"
            case .contentHash: return "content_hash"
            case .isShared: return "is_shared"
            case .trashedAt: return "trashed_at"
            case .storePath: return "store_path"
            case .referencePath: return "reference_path"
            }
        }
        var index: Int { Int(rawValue) }
    }

    static func asset(_ row: Row) -> Asset {
        typealias C = AssetColumn
        return Asset(rowID: row[C.rowid.index], id: row[C.id.index], displayName: row[C.displayName.index],
                     ownerName: row[C.ownerName.index], owner: (row[C.ownerApp.index] as String?).flatMap(AppID.init),
                     mediaKind: row[C.mediaKind.index], mediaClass: MediaClass(rawValue: row[C.mediaClass.index]) ?? .photo,
                     byteSize: UInt64(row[C.byteSize.index] as Int64),
                     captureDate: Date(timeIntervalSince1970: row[C.captureDate.index]),
                     addedDate: Date(timeIntervalSince1970: row[C.addedAt.index]),
                     hasLocation: row[C.hasLocation.index], contentHash: row[C.contentHash.index], isShared: row[C.isShared.index],
                     trashedDate: (row[C.trashedAt.index] as Double?).map(Date.init(timeIntervalSince1970:)),
                     storePath: row[C.storePath.index], referencePath: row[C.referencePath.index])
    }

    /// Absolute path of an asset's original: its referenced file, or its file in the store.
    /// Throws `badStorePath` for a store path photogate never writes (`StorePath`), rather than
    /// name a file outside the store.
    public func originalPath(_ a: Asset) throws -> String {
        if let r = a.referencePath { return r }
        return try storeFile(a.storePath ?? "", of: a.id)
    }

    /// The absolute path of the store file a catalog row names (`store_path`), never one outside
    /// the store: a value of another shape than photogate writes (`StorePath`) is
    /// `badStorePath`. `asset`: the asset's id (or what else names the row), for the message.
    func storeFile(_ rel: String, of asset: String) throws -> String {
        guard StorePath.isValid(rel) else { throw Library.badStorePath(rel, of: asset) }
        return paths.store + "/" + rel
    }

    /// An asset whose catalog row names a store file photogate never made: it is damaged, and
    /// treated as missing.
    static func badStorePath(_ rel: String, of asset: String) -> LibraryError {
        .libraryDamaged("""
            asset \(asset) names the store file '\(rel)', which is not a path photogate makes \
            (xx/<16 hex digits>.<extension>, inside store/): the asset is treated as missing; `photogate verify` reports it
            """)
    }

    /// Every asset not in Recently Deleted, optionally only one album's, in capture order.
    public func assets(album: String? = nil) throws -> [Asset] {
        try read { db in
            if let album {
                guard let albumID = try Int64.fetchOne(db, sql: "SELECT id FROM albums WHERE name = ? ORDER BY kind = 'shared' LIMIT 1",
                                                       arguments: [album]) else {
                    throw LibraryError.unknownAlbum(album)
                }
                return try Row.fetchAll(db, sql: """
                    SELECT \(Library.assetColumns) FROM assets
                    WHERE trashed_at IS NULL AND rowid IN (SELECT asset_rowid FROM album_assets WHERE album_id = ?)
                    ORDER BY capture_date, rowid
                    """, arguments: [albumID]).map(Library.asset)
            }
            return try Row.fetchAll(db, sql: "SELECT \(Library.assetColumns) FROM assets WHERE trashed_at IS NULL ORDER BY capture_date, rowid")
                .map(Library.asset)
        }
    }

    public func asset(rowID: Int64) throws -> Asset? {
        try read { db in
            try Row.fetchOne(db, sql: "SELECT \(Library.assetColumns) FROM assets WHERE rowid = ?", arguments: [rowID]).map(Library.asset)
        }
    }

    /// Resolves references to assets (see `resolve(_:_:includeTrashed:as:appFirst:)`). Any
    /// unknown reference fails the whole call, naming every unknown one.
    public func resolve(_ refs: [String], includeTrashed: Bool = true, as app: AppID? = nil) throws -> [Asset] {
        try read { db in
            let record = try app.map { try Library.requireApp(db, $0) }
            return try Library.resolve(db, refs, includeTrashed: includeTrashed, as: record)
        }
    }

    /// How a command reads an asset reference (issue 14: an app must not be able to steer the
    /// person's commands by naming its files like other photos). A name from any photogate
    /// listing reaches the asset that listing showed under it, or nothing:
    /// - an id (16 hex digits) is that asset, always;
    /// - with `app`, a name is read as that app sees it: the names of its read-write view (what
    ///   its mount, `assets --app`, `grants` and `changes` show), where its own files carry the
    ///   names it gave them and a clash is settled by a suffix. Should the library's display name
    ///   `name` be another asset (the app named its file like a photo, or its view renamed a
    ///   photo that clashed), the name means two assets and is refused, unless `appFirst` (for
    ///   read-only answers that print the id, like `explain`) takes the app's reading;
    /// - otherwise a name is a library display name (what `assets`, `grants`, `trash` show),
    ///   unless some app gave a different file of its own that name (that app's listings show
    ///   it): refused as well.
    /// A refusal is `conflict` (exit 68) naming the candidates' ids; nothing is changed.
    static func resolve(_ db: Database, _ refs: [String], includeTrashed: Bool = true, as app: AppRecord? = nil,
                        appFirst: Bool = false) throws -> [Asset] {
        var found: [Asset] = []
        var seen = Set<Int64>()
        var unknown: [String] = []
        var ambiguous: [(String, [Asset])] = []
        let byID = try db.cachedStatement(sql: "SELECT \(assetColumns) FROM assets WHERE id = ?")
        let byName = try db.cachedStatement(sql: "SELECT \(assetColumns) FROM assets WHERE display_name = ?")
        let byRowID = try db.cachedStatement(sql: "SELECT \(assetColumns) FROM assets WHERE rowid = ?")
        let names = try AppNames(db, app)
        // Names apps gave their own files where the library shows another name: read once, through
        // the index of app-owned assets (a handful of rows, not the library).
        var ownNames: [String: [Int64]] = [:]
        for r in try Row.fetchAll(db, sql: """
            SELECT rowid, owner_name FROM assets
            WHERE owner_app IS NOT NULL AND owner_name IS NOT NULL AND owner_name <> display_name AND trashed_at IS NULL
            """) {
            ownNames[r[1], default: []].append(r[0])
        }
        for ref in refs {
            var row = try Row.fetchOne(byID, arguments: [ref])
            if row == nil, let seenAs = try names.lookup(db, ref) {
                // What the app sees under this name; the library's display name must agree.
                let viewed = try Row.fetchOne(byRowID, arguments: [seenAs])
                if !appFirst, let display = try Row.fetchOne(byName, arguments: [ref]), (display[0] as Int64) != seenAs,
                   let viewed {
                    ambiguous.append((ref, [asset(viewed), asset(display)]))
                    continue
                }
                row = viewed
            }
            if row == nil {
                let display = try Row.fetchOne(byName, arguments: [ref])
                var candidates: [Row] = display.map { [$0] } ?? []
                for r in ownNames[ref] ?? [] where r != display?[0] as Int64? {
                    if let other = try Row.fetchOne(byRowID, arguments: [r]) { candidates.append(other) }
                }
                if candidates.count > 1 {
                    ambiguous.append((ref, candidates.map(asset)))
                    continue
                }
                row = candidates.first
            }
            guard let r = row else { unknown.append(ref); continue }
            let a = asset(r)
            if !includeTrashed && a.isTrashed { unknown.append(ref); continue }
            if seen.insert(a.rowID).inserted { found.append(a) }
        }
        if !unknown.isEmpty { throw LibraryError.unknownAssets(unknown) }
        if !ambiguous.isEmpty {
            let each = ambiguous.prefix(5).map { (ref: String, list: [Asset]) -> String in
                "'\(ref)' is " + list.map { (a: Asset) -> String in
                    if a.displayName == ref { return "\(a.id) (the library's '\(ref)')" }
                    if a.ownerName == ref { return "\(a.id) (the name \(a.owner?.rawValue ?? "an app") gave its own file, '\(a.displayName)' in the library)" }
                    return "\(a.id) (what \(app?.id.rawValue ?? "the app") sees as '\(ref)', '\(a.displayName)' in the library)"
                }.joined(separator: " or ")
            }
            throw LibraryError.conflict("""
                ambiguous name\(ambiguous.count == 1 ? "" : "s"): \(each.joined(separator: "; "))\(ambiguous.count > 5 ? " and \(ambiguous.count - 5) more" : ""); \
                name the asset by its id; nothing was changed
                """)
        }
        return found
    }

    /// The names an app sees in its read-write view where they differ from display names (its
    /// own files, and names its view settled by a suffix), by row id (`renamedInView`); nil when
    /// every name it sees is the display name. What app-scoped listings (`grants`) print, so that a name taken from
    /// them reads back (`resolve`) as the same asset.
    public func viewNames(_ id: AppID) throws -> [Int64: String]? {
        try read { db in
            try Library.renamedInView(db, app: Library.requireApp(db, id), access: .readWrite)
        }
    }

    /// The names one app sees in its read-write view, for `resolve`.
    struct AppNames {
        let app: AppRecord?
        /// The view's names that are not display names (`renamedInView`), by row id and by name.
        let renamed: [Int64: String]?
        let names: [String: Int64]?

        init(_ db: Database, _ app: AppRecord?) throws {
            self.app = app
            renamed = try app.flatMap { try Library.renamedInView(db, app: $0, access: .readWrite) }
            names = renamed.map { Dictionary($0.map { ($0.value, $0.key) }, uniquingKeysWith: { a, _ in a }) }
        }

        /// The asset the app sees under `name`, if any.
        func lookup(_ db: Database, _ name: String) throws -> Int64? {
            guard let app else { return nil }
            if let rowID = names?[name] { return rowID }
            // Otherwise a display name: the asset of that name, if the app sees it under it.
            guard let rowID = try Int64.fetchOne(db, sql: "SELECT rowid FROM assets WHERE display_name = ?", arguments: [name]),
                  renamed?[rowID] == nil,
                  let facts = try Library.facts(db, app: app.id, rowID: rowID) else { return nil }
            return Library.context(app, .readWrite).isVisible(facts) ? rowID : nil
        }
    }

    // MARK: grants

    /// Adds assets to an app's limited selection (or, with `picked`, hands them over as picked).
    /// Idempotent; all or nothing. Names are read as `resolve(_:_:includeTrashed:as:)` says.
    /// An app that is not known yet (never authorized, mounted or granted before) is refused
    /// (`unknownApp`: a typo must not grant) unless `registering` says to create it.
    @discardableResult
    public func grant(_ app: AppID, _ refs: [String], picked: Bool = false, stripLocation: Bool = false,
                      registering: Bool = false) throws -> GrantOutcome {
        try write { db in
            let record = registering ? try Library.ensureApp(db, app) : try Library.requireApp(db, app)
            let assets = try Library.resolve(db, refs, as: record)
            // The decision refuses a grant that could never show (a shared asset in a limited
            // selection, or picked for a limited app), rather than keep it silently.
            try Library.refuseGrants(db, record, assets, picked ? .pick : .selection)
            let table = picked ? "picks" : "selections"
            let dateColumn = picked ? "picked_at" : "granted_at"
            let insert = try db.cachedStatement(sql: """
                INSERT INTO \(table) (app_id, asset_rowid, strip_location, \(dateColumn)) VALUES (?, ?, ?, ?)
                ON CONFLICT (app_id, asset_rowid) DO UPDATE SET strip_location = CASE WHEN excluded.strip_location > \(table).strip_location THEN excluded.strip_location ELSE \(table).strip_location END\(picked ? "" : ", direct = 1")
                """)
            let exists = try db.cachedStatement(sql: "SELECT strip_location FROM \(table) WHERE app_id = ? AND asset_rowid = ?")
            // A photo selected only through a set grant becomes a direct grant (it stays when the set goes).
            let makeDirect = picked ? nil : try db.cachedStatement(sql: "UPDATE selections SET direct = 1 WHERE app_id = ? AND asset_rowid = ? AND direct = 0")
            var changed = 0
            let now = Library.now()
            try ViewDelta.tracking(db, assets.map(\.rowID)) {
                for a in assets {
                    let before = try Bool.fetchOne(exists, arguments: [app.rawValue, a.rowID])
                    if before == nil || (stripLocation && before == false) {
                        try insert.execute(arguments: [app.rawValue, a.rowID, stripLocation, now])
                        try Library.record(db, picked ? .pick : .grant, app: app.rawValue, asset: a.rowID)
                        changed += 1
                    } else if let makeDirect {
                        try makeDirect.execute(arguments: [app.rawValue, a.rowID])
                    }
                }
            }
            return GrantOutcome(changed: changed, unchanged: assets.count - changed)
        }
    }

    /// Throws a conflict (nothing is changed) when the decision refuses to grant one of these
    /// assets to the app this way (`AppContext.grantRefusal`, asked with the facts the one facts
    /// reader reads): the one check of `grant`, `grant --picked` and `grant --edit`.
    static func refuseGrants(_ db: Database, _ app: AppRecord, _ assets: [Asset], _ way: GrantWay) throws {
        let context = Library.context(app, .readWrite)
        let facts = try Library.factsOnly(db, app: app.id, rowIDs: assets.map(\.rowID))
        var refused: [Asset] = []
        var why: String?
        for a in assets {
            if let f = facts[a.rowID], let r = context.grantRefusal(f, way) {
                refused.append(a); why = r
            }
        }
        if let why {
            throw LibraryError.conflict("refused: \(refused.prefix(5).map { "'\($0.displayName)' (\($0.id))" }.joined(separator: ", ")) \(refused.count == 1 ? "is" : "are") in a shared album, and \(why); nothing was changed")
        }
    }

    @discardableResult
    public func revoke(_ app: AppID, _ refs: [String], picked: Bool = false) throws -> GrantOutcome {
        try write { db in
            let record = try Library.requireApp(db, app)
            let assets = try Library.resolve(db, refs, as: record)
            let table = picked ? "picks" : "selections"
            let delete = try db.cachedStatement(sql: "DELETE FROM \(table) WHERE app_id = ? AND asset_rowid = ?")
            let selected = try db.cachedStatement(sql: "SELECT 1 FROM selections WHERE app_id = ? AND asset_rowid = ?")
            var changed = 0, stillInSets = 0
            try ViewDelta.tracking(db, assets.map(\.rowID)) {
                for a in assets {
                    try delete.execute(arguments: [app.rawValue, a.rowID])
                    if db.changesCount > 0 {
                        changed += 1
                        try Library.record(db, picked ? .unpick : .revoke, app: app.rawValue, asset: a.rowID)
                        // A set grant that covers it keeps it selected (through the set).
                        if !picked {
                            try Library.refreshSetSelections(db, [a.rowID], apps: [app.rawValue])
                            if try Bool.fetchOne(selected, arguments: [app.rawValue, a.rowID]) != nil { stillInSets += 1 }
                        }
                    }
                }
            }
            return GrantOutcome(changed: changed, unchanged: assets.count - changed, stillInSets: stillInSets)
        }
    }

    /// Empties the app's selection (and, with `includePicked`, its picked assets).
    @discardableResult
    public func revokeAll(_ app: AppID, includePicked: Bool = false) throws -> Int {
        try write { db in
            _ = try Library.requireApp(db, app)
            var n = 0
            var touched = try Int64.fetchAll(db, sql: "SELECT asset_rowid FROM selections WHERE app_id = ?", arguments: [app.rawValue])
            // The whole selection: its set grants too (else the next album change brought members back).
            try db.execute(sql: "DELETE FROM set_grants WHERE app_id = ?", arguments: [app.rawValue])
            if includePicked { touched += try Int64.fetchAll(db, sql: "SELECT asset_rowid FROM picks WHERE app_id = ?", arguments: [app.rawValue]) }
            try ViewDelta.tracking(db, touched) {
                for (table, kind) in [("selections", ChangeKind.revoke), ("picks", ChangeKind.unpick)] where table == "selections" || includePicked {
                    let rows = try Int64.fetchAll(db, sql: "SELECT asset_rowid FROM \(table) WHERE app_id = ?", arguments: [app.rawValue])
                    try db.execute(sql: "DELETE FROM \(table) WHERE app_id = ?", arguments: [app.rawValue])
                    for r in rows { try Library.record(db, kind, app: app.rawValue, asset: r) }
                    n += rows.count
                }
            }
            return n
        }
    }

    public func grants(_ app: AppID) throws -> [GrantRecord] {
        try read { db in
            _ = try Library.requireApp(db, app)
            var out: [GrantRecord] = []
            let covering = try db.cachedStatement(sql: """
                SELECT g.id FROM set_grants g, assets a
                WHERE g.app_id = ? AND a.rowid = ? AND \(Library.setCovers)
                ORDER BY g.id
                """)
            for (table, kind, col) in [("selections", GrantKind.selected, "granted_at"), ("picks", .picked, "picked_at")] {
                let rows = try Row.fetchAll(db, sql: """
                    SELECT \(Library.assetColumns.split(separator: ",").map { "a." + $0.trimmingCharacters(in: .whitespacesAndNewlines) }.joined(separator: ", ")),
                           g.strip_location, g.\(col), \(table == "selections" ? "g.direct" : "1")
                    FROM \(table) g JOIN assets a ON a.rowid = g.asset_rowid
                    WHERE g.app_id = ? ORDER BY a.capture_date, a.rowid
                    """, arguments: [app.rawValue])
                for r in rows {
                    var g = GrantRecord(asset: Library.asset(r), kind: kind, stripLocation: r[16],
                                        grantedAt: Date(timeIntervalSince1970: r[17]))
                    if (r[18] as Int64) == 0 { g.throughSets = try Int64.fetchAll(covering, arguments: [app.rawValue, g.asset.rowID]) }
                    out.append(g)
                }
            }
            return out
        }
    }
}
