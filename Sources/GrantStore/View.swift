import Foundation
import GRDB
import PhotoLibrary

/// One visible asset in an app's view.
public struct ViewEntry: Sendable {
    public var asset: Asset
    /// The name this app sees (its own name for assets it created).
    public var name: String
    public var isOwned: Bool
    public var isPicked: Bool
    public var isSelected: Bool
    /// Location must be stripped from what this app reads (app option, or per grant).
    public var stripLocation: Bool
}

public struct ViewAlbum: Sendable {
    public var name: String
    public var isShared: Bool
    /// Row ids of the visible assets in it.
    public var members: [Int64]
}

/// Everything one app may see at one access level, computed by `ViewPolicy`.
public struct ViewSnapshot: Sendable {
    public var app: AppRecord
    public var access: AccessLevel
    public var policy: ViewPolicy
    public var entries: [ViewEntry]
    public var albums: [ViewAlbum]
    /// The change log position this snapshot reflects.
    public var changeSeq: Int64
}

extension Library {
    /// Computes an app's view. The SQL only narrows the candidates; `ViewPolicy` decides.
    public func view(for id: AppID, access: AccessLevel) throws -> ViewSnapshot {
        try read { db in
            let app = try Library.requireApp(db, id)
            return try Library.view(db, app: app, access: access)
        }
    }

    static func view(_ db: Database, app: AppRecord, access: AccessLevel) throws -> ViewSnapshot {
        let policy = ViewPolicy(access: access, status: app.status(for: access))
        let seq = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'changes'") ?? 0
        let cols = assetColumns.split(separator: ",").map { "a." + $0.trimmingCharacters(in: .whitespacesAndNewlines) }.joined(separator: ", ")
        let candidates: String
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
        let rows = try Row.fetchCursor(db, sql: """
            SELECT \(cols), s.strip_location, p.strip_location FROM assets a
            LEFT JOIN selections s ON s.app_id = :app AND s.asset_rowid = a.rowid
            LEFT JOIN picks p ON p.app_id = :app AND p.asset_rowid = a.rowid
            WHERE \(candidates) ORDER BY a.rowid
            """, arguments: ["app": app.id.rawValue])
        var visible: [(Asset, Bool, Bool, Bool, Bool)] = []
        while let r = try rows.next() {
            let a = asset(r)
            let sStrip: Bool? = r[16]
            let pStrip: Bool? = r[17]
            let owned = a.owner == app.id
            let facts = AssetFacts(isShared: a.isShared, isTrashed: a.isTrashed, isOwned: owned,
                                   isSelected: sStrip != nil, isPicked: pStrip != nil)
            guard policy.isVisible(facts) else { continue }
            let strip = app.options.stripLocation || (sStrip ?? false) || (pStrip ?? false)
            visible.append((a, owned, sStrip != nil, pStrip != nil, strip))
        }
        let names: [Int64: String]
        if visible.contains(where: { $0.1 && $0.0.ownerName != nil }) {
            names = ViewNaming.assign(visible.map {
                ViewNaming.Item(key: $0.0.rowID, displayName: $0.0.displayName, ownName: $0.1 ? $0.0.ownerName : nil)
            })
        } else {
            names = [:]   // display names are unique and never reserved: nothing to settle
        }
        let entries = visible.map { v in
            ViewEntry(asset: v.0, name: names[v.0.rowID] ?? v.0.displayName, isOwned: v.1, isPicked: v.3,
                      isSelected: v.2, stripLocation: v.4)
        }
        var albums: [ViewAlbum] = []
        if policy.showsAlbums {
            let visibleIDs = Set(entries.map(\.asset.rowID))
            let albumRows = try Row.fetchAll(db, sql: "SELECT id, name, kind FROM albums ORDER BY kind, name")
            var members: [Int64: [Int64]] = [:]
            let pairs = try Row.fetchCursor(db, sql: "SELECT album_id, asset_rowid FROM album_assets ORDER BY album_id, asset_rowid")
            while let p = try pairs.next() {
                let asset: Int64 = p[1]
                if visibleIDs.contains(asset) { members[p[0], default: []].append(asset) }
            }
            for r in albumRows {
                albums.append(ViewAlbum(name: r[1], isShared: (r[2] as String) == "shared", members: members[r[0]] ?? []))
            }
        }
        return ViewSnapshot(app: app, access: access, policy: policy, entries: entries, albums: albums, changeSeq: seq)
    }
}
