import GRDB

/// The database schema. Shipped migrations are never edited: a change is a new migration.
/// Invariants live in the schema (foreign keys, uniqueness, checks), not only in code.
enum Schema {
    static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1") { g in let db = Database(sqlite: g)
            try db.execute(sql: """
                CREATE TABLE apps (
                    id TEXT PRIMARY KEY NOT NULL CHECK (length(id) BETWEEN 3 AND 128),
                    rw_status TEXT NOT NULL DEFAULT 'not-determined'
                        CHECK (rw_status IN ('not-determined','restricted','denied','authorized','limited')),
                    ao_status TEXT NOT NULL DEFAULT 'not-determined'
                        CHECK (ao_status IN ('not-determined','restricted','denied','authorized')),
                    strip_location INTEGER NOT NULL DEFAULT 0 CHECK (strip_location IN (0,1)),
                    prevent_prompt INTEGER NOT NULL DEFAULT 0 CHECK (prevent_prompt IN (0,1)),
                    secret BLOB NOT NULL CHECK (length(secret) = 16),
                    created_at REAL NOT NULL
                );
                CREATE TABLE assets (
                    rowid INTEGER PRIMARY KEY,
                    id TEXT NOT NULL UNIQUE CHECK (length(id) = 16),
                    display_name TEXT NOT NULL UNIQUE CHECK (length(display_name) > 0 AND instr(display_name, '/') = 0),
                    owner_app TEXT REFERENCES apps(id),
                    owner_name TEXT CHECK (owner_name IS NULL OR owner_app IS NOT NULL),
                    media_kind TEXT NOT NULL,
                    media_class TEXT NOT NULL CHECK (media_class IN ('photo','video')),
                    byte_size INTEGER NOT NULL CHECK (byte_size >= 0),
                    capture_date REAL NOT NULL,
                    added_at REAL NOT NULL,
                    has_location INTEGER NOT NULL CHECK (has_location IN (0,1)),
                    content_hash TEXT NOT NULL,
                    is_shared INTEGER NOT NULL DEFAULT 0 CHECK (is_shared IN (0,1)),
                    trashed_at REAL,
                    store_path TEXT,
                    reference_path TEXT,
                    redaction BLOB,
                    redaction_refusal TEXT,
                    CHECK ((store_path IS NULL) <> (reference_path IS NULL))
                );
                CREATE INDEX assets_by_hash ON assets(content_hash);
                CREATE INDEX assets_by_owner ON assets(owner_app) WHERE owner_app IS NOT NULL;
                CREATE INDEX assets_trashed ON assets(trashed_at) WHERE trashed_at IS NOT NULL;
                CREATE TABLE albums (
                    id INTEGER PRIMARY KEY,
                    name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 255 AND instr(name, '/') = 0),
                    kind TEXT NOT NULL CHECK (kind IN ('user','shared')),
                    created_at REAL NOT NULL,
                    UNIQUE (kind, name)
                );
                CREATE TABLE album_assets (
                    album_id INTEGER NOT NULL REFERENCES albums(id) ON DELETE CASCADE,
                    asset_rowid INTEGER NOT NULL REFERENCES assets(rowid) ON DELETE CASCADE,
                    added_at REAL NOT NULL,
                    PRIMARY KEY (album_id, asset_rowid)
                ) WITHOUT ROWID;
                CREATE INDEX album_assets_by_asset ON album_assets(asset_rowid);
                CREATE TABLE selections (
                    app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
                    asset_rowid INTEGER NOT NULL REFERENCES assets(rowid) ON DELETE CASCADE,
                    strip_location INTEGER NOT NULL DEFAULT 0 CHECK (strip_location IN (0,1)),
                    granted_at REAL NOT NULL,
                    PRIMARY KEY (app_id, asset_rowid)
                ) WITHOUT ROWID;
                CREATE TABLE picks (
                    app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
                    asset_rowid INTEGER NOT NULL REFERENCES assets(rowid) ON DELETE CASCADE,
                    strip_location INTEGER NOT NULL DEFAULT 0 CHECK (strip_location IN (0,1)),
                    picked_at REAL NOT NULL,
                    PRIMARY KEY (app_id, asset_rowid)
                ) WITHOUT ROWID;
                CREATE TABLE requests (
                    id INTEGER PRIMARY KEY,
                    app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
                    kind TEXT NOT NULL CHECK (kind IN ('read-write','add-only','picker')),
                    reason TEXT NOT NULL DEFAULT '' CHECK (length(reason) <= 1024),
                    created_at REAL NOT NULL,
                    UNIQUE (app_id, kind, reason)
                );
                -- The change log: every committed change appends rows here in the same transaction.
                -- Mount daemons follow it (from their last seq) to refresh their in-memory views.
                CREATE TABLE changes (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    at REAL NOT NULL,
                    kind TEXT NOT NULL,
                    app_id TEXT,
                    asset_rowid INTEGER,
                    detail TEXT
                );
                """)
        }
        registerV2(&m)
        registerV3(&m)
        registerV4(&m)
        registerV5(&m)
        registerV6(&m)
        registerV7(&m)
        registerV8(&m)
        registerV9(&m)
        registerV10(&m)
        registerV11(&m)
        registerV12Compatible(&m)
        registerV13(&m)
        return m
    }
}

extension Schema {
    /// v2: the persistent per-app history of what each app's read-write view gained, lost or saw
    /// change (PhotoKit's persistent change tokens). Tokens only grow; history is pruned from the
    /// oldest end, and `pruned_through` remembers how far, so an older token is known to be expired.
    static func registerV2(_ m: inout DatabaseMigrator) {
        m.registerMigration("v2-app-history") { g in let db = Database(sqlite: g)
            try db.execute(sql: """
                CREATE TABLE app_changes (
                    token INTEGER PRIMARY KEY AUTOINCREMENT,
                    app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
                    at REAL NOT NULL,
                    kind TEXT NOT NULL CHECK (kind IN ('inserted','removed','updated','status')),
                    asset_rowid INTEGER,
                    name TEXT,
                    detail TEXT
                );
                CREATE INDEX app_changes_by_app ON app_changes(app_id, token);
                CREATE TABLE app_history (
                    app_id TEXT PRIMARY KEY NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
                    pruned_through INTEGER NOT NULL DEFAULT 0
                );
                """)
        }
    }
}

extension Schema {
    /// v3: history tokens count per app. A global sequence told an app how much happened in other
    /// apps' views between two of its own changes; `app_seq` numbers each app's entries 1, 2, 3...
    /// and is what every public token is. A trigger assigns it, so no writer can forget.
    static func registerV3(_ m: inout DatabaseMigrator) {
        m.registerMigration("v3-per-app-tokens") { g in let db = Database(sqlite: g)
            try db.execute(sql: """
                ALTER TABLE app_changes ADD COLUMN app_seq INTEGER;
                UPDATE app_changes SET app_seq = (SELECT count(*) FROM app_changes c
                                                  WHERE c.app_id = app_changes.app_id AND c.token <= app_changes.token);
                UPDATE app_history SET pruned_through = COALESCE(
                    (SELECT min(app_seq) - 1 FROM app_changes c WHERE c.app_id = app_history.app_id), 0);
                CREATE UNIQUE INDEX app_changes_by_app_seq ON app_changes(app_id, app_seq);
                CREATE TRIGGER app_changes_number AFTER INSERT ON app_changes WHEN NEW.app_seq IS NULL
                BEGIN
                    UPDATE app_changes SET app_seq = (SELECT COALESCE(max(app_seq), 0) + 1 FROM app_changes WHERE app_id = NEW.app_id)
                    WHERE token = NEW.token;
                END;
                """)
        }
    }
}

extension Schema {
    /// v4: which scanner version computed an asset's redaction plan, so plans from older scanners
    /// (which missed some location data) are recomputed before an app reads through them.
    static func registerV4(_ m: inout DatabaseMigrator) {
        m.registerMigration("v4-redaction-version") { g in let db = Database(sqlite: g)
            try db.execute(sql: "ALTER TABLE assets ADD COLUMN redaction_version INTEGER NOT NULL DEFAULT 1")
        }
    }
}

extension Schema {
    /// v5: edits (issue 15).
    /// - `versions`: every version of an asset's content. The original is version 0; its row is
    ///   written by the first edit (until then the asset row alone describes it, so the migration
    ///   and a million never-edited assets cost nothing). Edits are 1, 2, 3..., each a file of its
    ///   own in the store (`file_id` names it, so crash recovery can find a committed version's
    ///   temp file); no file of an older version is ever modified or deleted by an edit or a
    ///   revert. `assets.current_version` says which version the asset row describes (its hash,
    ///   size, kind, dates, location, redaction plan and path are that version's).
    /// - `edit_consents`: the person's consent, per app and asset, to edits (`grant --edit`);
    ///   `apps.edit_any`: consent for every asset the app can see.
    /// - `requests`: `edit` requests name their asset. SQLite cannot change a CHECK constraint in
    ///   place, so the table is rebuilt (new table, copy, drop, rename; foreign keys are checked
    ///   at the end of the migration); ids and dates are kept.
    static func registerV5(_ m: inout DatabaseMigrator) {
        m.registerMigration("v5-versions") { g in let db = Database(sqlite: g)
            try db.execute(sql: """
                CREATE TABLE versions (
                    asset_rowid INTEGER NOT NULL REFERENCES assets(rowid) ON DELETE CASCADE,
                    version INTEGER NOT NULL CHECK (version >= 0),
                    app_id TEXT REFERENCES apps(id),
                    created_at REAL NOT NULL,
                    file_id TEXT CHECK (file_id IS NULL OR length(file_id) = 16),
                    media_kind TEXT NOT NULL,
                    media_class TEXT NOT NULL CHECK (media_class IN ('photo','video')),
                    byte_size INTEGER NOT NULL CHECK (byte_size >= 0),
                    content_hash TEXT NOT NULL,
                    capture_date REAL NOT NULL,
                    has_location INTEGER NOT NULL CHECK (has_location IN (0,1)),
                    store_path TEXT,
                    reference_path TEXT,
                    redaction BLOB,
                    redaction_refusal TEXT,
                    redaction_version INTEGER NOT NULL DEFAULT 1,
                    CHECK ((store_path IS NULL) <> (reference_path IS NULL)),
                    CHECK ((version = 0) = (file_id IS NULL)),
                    PRIMARY KEY (asset_rowid, version)
                ) WITHOUT ROWID;
                CREATE UNIQUE INDEX versions_by_file ON versions(file_id) WHERE file_id IS NOT NULL;
                ALTER TABLE assets ADD COLUMN current_version INTEGER NOT NULL DEFAULT 0 CHECK (current_version >= 0);
                CREATE TRIGGER assets_current_version_exists BEFORE UPDATE OF current_version ON assets
                WHEN NEW.current_version <> 0
                     AND NOT EXISTS (SELECT 1 FROM versions WHERE asset_rowid = NEW.rowid AND version = NEW.current_version)
                BEGIN
                    SELECT RAISE(ABORT, 'current_version names no version of the asset');
                END;

                CREATE TABLE edit_consents (
                    app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
                    asset_rowid INTEGER NOT NULL REFERENCES assets(rowid) ON DELETE CASCADE,
                    granted_at REAL NOT NULL,
                    PRIMARY KEY (app_id, asset_rowid)
                ) WITHOUT ROWID;
                CREATE INDEX edit_consents_by_asset ON edit_consents(asset_rowid);
                ALTER TABLE apps ADD COLUMN edit_any INTEGER NOT NULL DEFAULT 0 CHECK (edit_any IN (0,1));

                CREATE TABLE requests_v5 (
                    id INTEGER PRIMARY KEY,
                    app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
                    kind TEXT NOT NULL CHECK (kind IN ('read-write','add-only','picker','edit')),
                    reason TEXT NOT NULL DEFAULT '' CHECK (length(reason) <= 1024),
                    created_at REAL NOT NULL,
                    asset_rowid INTEGER REFERENCES assets(rowid) ON DELETE CASCADE,
                    CHECK ((kind = 'edit') = (asset_rowid IS NOT NULL))
                );
                INSERT INTO requests_v5 (id, app_id, kind, reason, created_at)
                    SELECT id, app_id, kind, reason, created_at FROM requests;
                DROP TABLE requests;
                ALTER TABLE requests_v5 RENAME TO requests;
                CREATE UNIQUE INDEX requests_unique ON requests(app_id, kind, reason, IFNULL(asset_rowid, 0));
                CREATE INDEX requests_by_asset ON requests(asset_rowid) WHERE asset_rowid IS NOT NULL;
                """)
        }
    }
}

extension Schema {
    /// v6: files an app wrote that were refused at their close (not media, incomplete, a failed
    /// write), so that the app (`.photogate/refused`) and the person (`photogate refused`) see
    /// why, not only the daemon's log. The last 100 per app are kept.
    static func registerV6(_ m: inout DatabaseMigrator) {
        m.registerMigration("v6-refusals") { g in let db = Database(sqlite: g)
            try db.execute(sql: """
                CREATE TABLE refusals (
                    id INTEGER PRIMARY KEY,
                    app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
                    at REAL NOT NULL,
                    name TEXT NOT NULL,
                    reason TEXT NOT NULL CHECK (length(reason) <= 1024)
                );
                CREATE INDEX refusals_by_app ON refusals(app_id, id);
                """)
        }
    }
}

extension Schema {
    /// v7: an asset's row number is never given again. SQLite gives a new row the largest row
    /// number + 1, so the number of an asset deleted while it was the newest (an editor's temp
    /// file dissolved into the photo it saved) went to the next asset made: the history that
    /// named the deleted one (`photogate changes`, `.photogate/changes`) then showed the new one's
    /// id, a photo that app never saw. The highest number ever deleted is kept, and every insert
    /// takes a number above it (`Library.nextAssetRowID`).
    static func registerV7(_ m: inout DatabaseMigrator) {
        m.registerMigration("v7-asset-rowids-never-reused") { g in let db = Database(sqlite: g)
            try db.execute(sql: """
                CREATE TABLE asset_rowid_high (
                    one INTEGER PRIMARY KEY CHECK (one = 1),
                    high INTEGER NOT NULL
                );
                INSERT INTO asset_rowid_high (one, high) VALUES (1, max(
                    coalesce((SELECT max(rowid) FROM assets), 0),
                    coalesce((SELECT max(asset_rowid) FROM app_changes), 0),
                    coalesce((SELECT max(asset_rowid) FROM changes), 0),
                    coalesce((SELECT max(asset_rowid) FROM versions), 0)));
                CREATE TRIGGER assets_rowid_high AFTER DELETE ON assets BEGIN
                    UPDATE asset_rowid_high SET high = max(high, OLD.rowid) WHERE one = 1;
                END;
                """)
        }
    }
}

extension Schema {
    /// v13: what a close asks of the catalog is found through indexes, whatever the library's
    /// size (issue 39). Every close of a new photo, an edit or a sidecar sums what the app added
    /// in the last day (`bytesAdded`: the daily limit) and looks for an asset of the app with
    /// the same content (`reusableAsset`). Over `assets_by_owner` alone, SQLite read every asset
    /// of the app for both, and every version and sidecar of the library for the sum: with an
    /// app that owns 100,000 photos, a close took ~30 ms more, and `cp` of 200 photos took 10.7 s
    /// against 1.2-2.4 s into a new library. The two indexes on (owner_app, ...) serve every
    /// query by owner alone too, so `assets_by_owner` goes.
    static func registerV13(_ m: inout DatabaseMigrator) {
        m.registerMigration(SchemaPostgres.v13.id) { g in let db = Database(sqlite: g)
            try db.execute(sql: SchemaPostgres.v13.sql)
        }
    }
}

extension Library {
    /// The row number of the next asset: above every asset's, and above every one ever deleted.
    static let nextAssetRowIDSQL = "(SELECT CASE WHEN a > b THEN a ELSE b END + 1 FROM (SELECT coalesce((SELECT max(rowid) FROM assets), 0) AS a, coalesce((SELECT high FROM asset_rowid_high), 0) AS b) AS m)"
}
