import GRDB

/// The database schema. Shipped migrations are never edited: a change is a new migration.
/// Invariants live in the schema (foreign keys, uniqueness, checks), not only in code.
enum Schema {
    static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1") { db in
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
        return m
    }
}

extension Schema {
    /// v2: the persistent per-app history of what each app's read-write view gained, lost or saw
    /// change (PhotoKit's persistent change tokens). Tokens only grow; history is pruned from the
    /// oldest end, and `pruned_through` remembers how far, so an older token is known to be expired.
    static func registerV2(_ m: inout DatabaseMigrator) {
        m.registerMigration("v2-app-history") { db in
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
        m.registerMigration("v3-per-app-tokens") { db in
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
        m.registerMigration("v4-redaction-version") { db in
            try db.execute(sql: "ALTER TABLE assets ADD COLUMN redaction_version INTEGER NOT NULL DEFAULT 1")
        }
    }
}
