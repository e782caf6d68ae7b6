import Foundation
import GRDB
import PhotoLibrary

// Grants that follow a set (issue 38): "every photo of the album Summer", "every photo taken in
// June 2024", "every video": the app sees the set's members as they are now and as they change
// (a photo added to the album later, or imported later with a date in the range), in running
// mounts too. PhotoKit and Android offer only fixed selections; the document portal's folder
// grant is the nearest.
//
// How: a set grant is a row of `set_grants`; its members are kept in the app's selection, as rows
// marked `direct = 0`, by every change that can make an asset join or leave a set (an album's
// members, a new asset, a new version's date or kind, the grant itself). Everything that reads a
// selection (the mount's view build and patches, `explain`, the history, the picker, the web app)
// then needs nothing new, and the one decision stays the one decision: a set-granted photo is a
// selected photo. A photo granted directly (`direct = 1`) stays so whatever its sets do; a direct
// revoke of a photo a set still covers leaves it selected through the set (and says so).

extension Schema {
    /// v9: set grants, and which selections are direct.
    static func registerV9(_ m: inout DatabaseMigrator) {
        m.registerMigration("v9-set-grants") { g in let db = Database(sqlite: g)
            try db.execute(sql: """
                CREATE TABLE set_grants (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
                    album_id INTEGER REFERENCES albums(id) ON DELETE CASCADE,
                    taken_after REAL,
                    taken_before REAL,
                    media_class TEXT CHECK (media_class IN ('photo','video')),
                    strip_location INTEGER NOT NULL DEFAULT 0 CHECK (strip_location IN (0,1)),
                    granted_at REAL NOT NULL,
                    CHECK (album_id IS NOT NULL OR taken_after IS NOT NULL OR taken_before IS NOT NULL OR media_class IS NOT NULL)
                );
                CREATE INDEX set_grants_by_app ON set_grants(app_id);
                CREATE INDEX set_grants_by_album ON set_grants(album_id);
                ALTER TABLE selections ADD COLUMN direct INTEGER NOT NULL DEFAULT 1 CHECK (direct IN (0,1));
                """)
        }
    }
}

/// One set an app was granted: the members of an album, or photos by capture date and kind, or
/// both (every condition given must hold).
public struct SetGrant: Sendable, Equatable {
    public var id: Int64 = 0
    public var album: String?
    public var takenAfter: Date?
    public var takenBefore: Date?
    public var mediaClass: MediaClass?
    public var stripLocation = false
    public var grantedAt = Date(timeIntervalSince1970: 0)
    /// Members now (not trashed).
    public var members = 0

    public init(album: String? = nil, takenAfter: Date? = nil, takenBefore: Date? = nil, mediaClass: MediaClass? = nil,
                stripLocation: Bool = false) {
        self.album = album
        self.takenAfter = takenAfter
        self.takenBefore = takenBefore
        self.mediaClass = mediaClass
        self.stripLocation = stripLocation
    }

    public var isEmpty: Bool { album == nil && takenAfter == nil && takenBefore == nil && mediaClass == nil }

    /// "album 'Summer', taken from 2024-06-01 before 2024-09-01, photos" (UTC dates).
    public var summary: String {
        var parts: [String] = []
        if let album { parts.append("album '\(album)'") }
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime]
        switch (takenAfter, takenBefore) {
        case let (a?, b?): parts.append("taken from \(f.string(from: a)) before \(f.string(from: b))")
        case let (a?, nil): parts.append("taken from \(f.string(from: a))")
        case let (nil, b?): parts.append("taken before \(f.string(from: b))")
        case (nil, nil): break
        }
        if let mediaClass { parts.append(mediaClass == .video ? "videos" : "photos") }
        return parts.joined(separator: ", ")
    }
}

extension Library {
    /// Whether an asset is in one of the app's sets, and whether every set it is in strips its
    /// location (nil: in none). Shared assets are in none (a limited app never sees them, and a
    /// selection of one is refused: `grantRefusal`).
    static let setCoverSQL = "SELECT min(g.strip_location) FROM set_grants g, assets a WHERE g.app_id = ? AND a.rowid = ? AND \(setCovers)"

    /// The one statement of what a set covers: set grant `g` covers asset `a` (never a shared
    /// one). Every query about sets uses it (`setCoverSQL`, `setsCovering`, `setMembers`, `grants`).
    static let setCovers = """
        a.is_shared = 0
          AND (g.album_id IS NULL OR EXISTS (SELECT 1 FROM album_assets m WHERE m.album_id = g.album_id AND m.asset_rowid = a.rowid))
          AND (g.taken_after IS NULL OR a.capture_date >= g.taken_after)
          AND (g.taken_before IS NULL OR a.capture_date < g.taken_before)
          AND (g.media_class IS NULL OR a.media_class = g.media_class)
        """

    /// Brings the selections these sets make up to date for these assets, for every app with a
    /// set (or only `apps`): an asset a set now covers is selected (`direct = 0`), one no set
    /// covers any more leaves the selection unless it was granted directly. Each change is a
    /// `grant` or `revoke` in the change log (mounts patch the row). The caller tracks the views'
    /// history (`ViewDelta`) when it is not tracked around it already. Cheap without sets: one
    /// query.
    static func refreshSetSelections(_ db: Database, _ rowIDs: [Int64], apps only: [String]? = nil) throws {
        guard !rowIDs.isEmpty else { return }
        let apps = try only ?? String.fetchAll(db.cachedStatement(sql: "SELECT DISTINCT app_id FROM set_grants"))
        guard !apps.isEmpty else { return }
        let cover = try db.cachedStatement(sql: setCoverSQL)
        let current = try db.cachedStatement(sql: "SELECT direct, strip_location FROM selections WHERE app_id = ? AND asset_rowid = ?")
        let insert = try db.cachedStatement(sql: """
            INSERT INTO selections (app_id, asset_rowid, strip_location, granted_at, direct) VALUES (?, ?, ?, ?, 0)
            """)
        let update = try db.cachedStatement(sql: "UPDATE selections SET strip_location = ? WHERE app_id = ? AND asset_rowid = ?")
        let delete = try db.cachedStatement(sql: "DELETE FROM selections WHERE app_id = ? AND asset_rowid = ? AND direct = 0")
        let now = Library.now()
        for app in apps {
            for r in rowIDs {
                let strip = try Int64.fetchOne(cover, arguments: [app, r])   // nil: in no set
                let row = try Row.fetchOne(current, arguments: [app, r])
                if let row, (row[0] as Int64) == 1 { continue }               // granted directly
                switch (strip, row) {
                case let (s?, nil):
                    try insert.execute(arguments: [app, r, s, now])
                    try record(db, .grant, app: app, asset: r)
                case let (s?, row?) where (row[1] as Int64) != s:
                    try update.execute(arguments: [s, app, r])
                    try record(db, .grant, app: app, asset: r)
                case (nil, _?):
                    try delete.execute(arguments: [app, r])
                    try record(db, .revoke, app: app, asset: r)
                default:
                    break
                }
            }
        }
    }

    /// The assets the set grant numbered `id` covers now.
    static func setMembers(_ db: Database, setID id: Int64) throws -> [Int64] {
        try Int64.fetchAll(db, sql: "SELECT a.rowid FROM assets a, set_grants g WHERE g.id = ? AND \(setCovers) ORDER BY a.rowid",
                           arguments: [id])
    }

    /// Grants the app a set that stays live. Returns the set's id and how many assets it covers
    /// now. Granting the same set again changes nothing (with `--strip-location`, makes it strip).
    /// The app must be known, as for `grant`.
    @discardableResult
    public func grantSet(_ app: AppID, _ set: SetGrant, registering: Bool = false) throws -> (id: Int64, members: Int, added: Int) {
        guard !set.isEmpty else { throw LibraryError.invalid("a set grant needs an album, a capture date range or a kind") }
        if let a = set.takenAfter, let b = set.takenBefore, a >= b {
            throw LibraryError.invalid("--taken-after must be before --taken-before")
        }
        return try write { db in
            _ = registering ? try Library.ensureApp(db, app) : try Library.requireApp(db, app)
            let albumID = try set.album.map { try Library.userAlbumID(db, $0) }
            let same = try Int64.fetchOne(db, sql: """
                SELECT id FROM set_grants WHERE app_id = ? AND album_id IS NOT DISTINCT FROM ? AND taken_after IS NOT DISTINCT FROM ?
                  AND taken_before IS NOT DISTINCT FROM ? AND media_class IS NOT DISTINCT FROM ?
                """, arguments: [app.rawValue, albumID, set.takenAfter?.timeIntervalSince1970, set.takenBefore?.timeIntervalSince1970,
                                 set.mediaClass?.rawValue])
            let id: Int64
            if let same {
                id = same
                if set.stripLocation { try db.execute(sql: "UPDATE set_grants SET strip_location = 1 WHERE id = ?", arguments: [id]) }
            } else {
                try db.execute(sql: """
                    INSERT INTO set_grants (app_id, album_id, taken_after, taken_before, media_class, strip_location, granted_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """, arguments: [app.rawValue, albumID, set.takenAfter?.timeIntervalSince1970, set.takenBefore?.timeIntervalSince1970,
                                     set.mediaClass?.rawValue, set.stripLocation, Library.now()])
                id = db.lastInsertedRowID
            }
            let members = try Library.setMembers(db, setID: id)
            let before = try Int.fetchOne(db, sql: "SELECT count(*) FROM selections WHERE app_id = ?", arguments: [app.rawValue]) ?? 0
            try ViewDelta.tracking(db, members) {
                try Library.refreshSetSelections(db, members, apps: [app.rawValue])
            }
            let after = try Int.fetchOne(db, sql: "SELECT count(*) FROM selections WHERE app_id = ?", arguments: [app.rawValue]) ?? 0
            return (id, members.count, after - before)
        }
    }

    /// Revokes the app's sets: the one numbered `id`, or every set of the album `album`. What a
    /// set selected goes unless another set covers it or it was granted directly. Returns how
    /// many sets went and how many assets left the selection.
    @discardableResult
    public func revokeSet(_ app: AppID, id: Int64? = nil, album: String? = nil) throws -> (sets: Int, removed: Int) {
        try write { db in
            _ = try Library.requireApp(db, app)
            let ids: [Int64]
            if let id {
                ids = try Int64.fetchAll(db, sql: "SELECT id FROM set_grants WHERE app_id = ? AND id = ?", arguments: [app.rawValue, id])
                if ids.isEmpty { throw LibraryError.invalid("\(app) has no set grant \(id) (photogate grants \(app) lists them)") }
            } else if let album {
                let albumID = try Library.userAlbumID(db, album)
                ids = try Int64.fetchAll(db, sql: "SELECT id FROM set_grants WHERE app_id = ? AND album_id = ?", arguments: [app.rawValue, albumID])
                if ids.isEmpty { throw LibraryError.invalid("\(app) has no grant of the album '\(album)' (photogate grants \(app) lists them)") }
            } else {
                ids = []
            }
            let derived = try Int64.fetchAll(db, sql: "SELECT asset_rowid FROM selections WHERE app_id = ? AND direct = 0", arguments: [app.rawValue])
            var removed = 0
            try ViewDelta.tracking(db, derived) {
                for i in ids { try db.execute(sql: "DELETE FROM set_grants WHERE id = ?", arguments: [i]) }
                let before = try Int.fetchOne(db, sql: "SELECT count(*) FROM selections WHERE app_id = ?", arguments: [app.rawValue]) ?? 0
                try Library.refreshSetSelections(db, derived, apps: [app.rawValue])
                removed = before - (try Int.fetchOne(db, sql: "SELECT count(*) FROM selections WHERE app_id = ?", arguments: [app.rawValue]) ?? 0)
            }
            return (ids.count, removed)
        }
    }

    /// The app's set grants, oldest first, with their members now.
    public func setGrants(_ app: AppID) throws -> [SetGrant] {
        try read { db in
            _ = try Library.requireApp(db, app)
            return try Row.fetchAll(db, sql: """
                SELECT g.id, al.name, g.taken_after, g.taken_before, g.media_class, g.strip_location, g.granted_at, g.album_id
                FROM set_grants g LEFT JOIN albums al ON al.id = g.album_id WHERE g.app_id = ? ORDER BY g.id
                """, arguments: [app.rawValue]).map { r in
                var s = SetGrant(album: r[1], takenAfter: (r[2] as Double?).map { Date(timeIntervalSince1970: $0) },
                                 takenBefore: (r[3] as Double?).map { Date(timeIntervalSince1970: $0) },
                                 mediaClass: (r[4] as String?).flatMap(MediaClass.init(rawValue:)), stripLocation: (r[5] as Int64) != 0)
                s.id = r[0]
                s.grantedAt = Date(timeIntervalSince1970: r[6])
                s.members = try Library.setMembers(db, setID: s.id).count
                return s
            }
        }
    }

    /// The sets of the app that cover the asset (for `explain` and `grants`).
    static func setsCovering(_ db: Database, app: String, rowID: Int64) throws -> [String] {
        try Row.fetchAll(db, sql: """
            SELECT g.id, al.name, g.taken_after, g.taken_before, g.media_class FROM set_grants g LEFT JOIN albums al ON al.id = g.album_id, assets a
            WHERE g.app_id = ? AND a.rowid = ? AND \(setCovers)
            ORDER BY g.id
            """, arguments: [app, rowID]).map { r in
            let s = SetGrant(album: r[1], takenAfter: (r[2] as Double?).map { Date(timeIntervalSince1970: $0) },
                             takenBefore: (r[3] as Double?).map { Date(timeIntervalSince1970: $0) },
                             mediaClass: (r[4] as String?).flatMap(MediaClass.init(rawValue:)))
            return "set \(r[0] as Int64) (\(s.summary))"
        }
    }
}
