import Foundation
import GRDB
import PhotoLibrary

extension Library {
    /// Catches a view up from change log position `since`, the view having been computed for
    /// `app` (the record as it was then). Reads one consistent snapshot of the database. Costs
    /// O(changes) when the changes touch a few assets, instead of O(assets in the view).
    public func viewUpdate(for id: AppID, access: AccessLevel, since: Int64, app: AppRecord,
                           maxChanges: Int = 4096, forceFull: Bool = false) throws -> ViewUpdate {
        try read { db in
            let now = try Library.requireApp(db, id)
            // Cached statements: every mount runs this on every change (issue 18: preparing these
            // statements, through GRDB's authorizer, was ~40% of a daemon's CPU per change).
            let seq = try Library.lastChange(db)
            func full() throws -> ViewUpdate { .full(try Library.view(db, app: now, access: access, lean: true)) }
            if forceFull || now != app || seq < since || seq - since > Int64(maxChanges) { return try full() }
            let rows = try Row.fetchAll(db.cachedStatement(sql: "SELECT seq, kind, app_id, asset_rowid FROM changes WHERE seq > ? ORDER BY seq"),
                                        arguments: [since])
            // Sequence numbers are contiguous unless something removed entries: then catch up whole.
            if Int64(rows.count) != seq - since { return try full() }
            var affected = Set<Int64>()
            var albumsTouched = false
            for r in rows {
                let raw: String = r[1]
                // An unknown kind (a newer photogate wrote it): recompute everything.
                guard let kind = ChangeKind(rawValue: raw) else { return try full() }
                let appID: String? = r[2]
                let asset: Int64? = r[3]
                let mine = appID == id.rawValue
                switch kind {
                case .grant, .revoke, .pick, .unpick:
                    // Another app's selection never changes this view.
                    guard mine else { continue }
                    guard let asset else { return try full() }
                    affected.insert(asset)
                case .editGrant, .editRevoke:
                    // Edit consent changes no visibility; a patch of the row lets a mount
                    // recompute what it shows about editing.
                    guard mine else { continue }
                    guard let asset else { return try full() }
                    affected.insert(asset)
                case .insert, .rename, .trash, .restore, .version, .shared, .date, .sidecar:
                    guard let asset else { return try full() }
                    affected.insert(asset)
                case .albumAdd, .albumRemove, .album:
                    albumsTouched = true
                case .request, .purge:
                    continue
                case .status, .options, .app:
                    // This app's record is compared above; other apps' never change this view.
                    if mine { return try full() }
                }
            }
            // Nothing of this view changed (another app's grant, a request): no view query at all.
            if affected.isEmpty && !albumsTouched {
                return .patch(ViewPatch(affected: [], rows: ViewRows(), albums: nil, changeSeq: seq))
            }
            let policy = ViewPolicy(access: access, status: now.status(for: access))
            let only = affected.sorted()
            // Album listings change when albums did, or when a member appeared, went or changed;
            // reading every membership is O(album members), so only then.
            var albumsChanged = albumsTouched
            if policy.showsAlbums && !albumsChanged && !only.isEmpty {
                albumsChanged = try Bool.fetchOne(db.cachedStatement(sql: """
                    SELECT CASE WHEN EXISTS (SELECT 1 FROM album_assets WHERE asset_rowid IN (\(Library.boundList(db, "only")))) THEN 1 ELSE 0 END
                    """), arguments: ["only": Library.rowIDsJSON(only)]) ?? true
            }
            let withAlbums = policy.showsAlbums && albumsChanged
            let snapshot = try Library.view(db, app: now, access: access, only: only, withAlbums: withAlbums, lean: true)
            let albums = withAlbums ? snapshot.albums : nil
            return .patch(ViewPatch(affected: only, rows: snapshot.rows, albums: albums, sidecars: snapshot.sidecars, changeSeq: seq))
        }
    }
}
