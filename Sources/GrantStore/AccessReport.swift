import Foundation
import GRDB
import PhotoLibrary

// The access report (issue 36): what each app did through its mounts, per asset and UTC day,
// like iOS's App Privacy Report and Android's privacy dashboard, but naming the photos. Only the
// mount daemons write it (the person's own commands never appear), in batches (AccessRecorder),
// and it lives in the catalog, which no view shows.

extension Schema {
    /// v8: the access report. One row per (app, day, asset, kind) with the first and last time
    /// and a count: a million reads of the same photo on one day are one row. Apps are numbered
    /// (`report_apps`) so a row is a handful of small integers (the report of 1,000,000 reads of
    /// 100,000 photos over 30 days is measured in scripts/bench). No foreign key on the asset: a
    /// row outlives the asset (a deleted photo stays in the report as deleted), and asset row
    /// numbers are never reused (v7), so a row never comes to name another photo.
    static func registerV8(_ m: inout DatabaseMigrator) {
        m.registerMigration("v8-access-report") { g in let db = Database(sqlite: g)
            try db.execute(sql: """
                CREATE TABLE report_apps (
                    id INTEGER PRIMARY KEY,
                    app_id TEXT NOT NULL UNIQUE
                );
                CREATE TABLE access_report (
                    app INTEGER NOT NULL,
                    day INTEGER NOT NULL,
                    asset_rowid INTEGER NOT NULL,
                    kind INTEGER NOT NULL CHECK (kind BETWEEN 0 AND 4),
                    first_at INTEGER NOT NULL,
                    last_at INTEGER NOT NULL CHECK (last_at >= first_at),
                    count INTEGER NOT NULL CHECK (count >= 1),
                    PRIMARY KEY (app, day, asset_rowid, kind)
                ) WITHOUT ROWID;
                CREATE TABLE report_settings (
                    one INTEGER PRIMARY KEY CHECK (one = 1),
                    retention_days INTEGER NOT NULL CHECK (retention_days BETWEEN 1 AND 3650),
                    recording INTEGER NOT NULL CHECK (recording IN (0, 1))
                );
                INSERT INTO report_settings (one, retention_days, recording) VALUES (1, 30, 1);
                """)
        }
    }
}

/// One line of the report: what an app did of one kind to one asset, over the days asked.
public struct AccessEntry: Sendable, Equatable {
    public var app: AppID
    public var rowID: Int64
    /// The asset's id and name; nil once it was deleted for good.
    public var assetID: String?
    public var name: String?
    public var kind: AccessKind
    public var first: Date
    public var last: Date
    /// How many times (opens, or in a --no-open mount the reads of a file's start the daemon
    /// served), and on how many days.
    public var count: Int64
    public var days: Int64
}

public struct ReportSettings: Sendable, Equatable {
    public var retentionDays: Int
    public var recording: Bool
}

extension Library {
    public static let secondsPerDay: Int64 = 86_400

    /// The UTC day of a time (days since 1970-01-01).
    public static func reportDay(_ seconds: Int64) -> Int64 {
        seconds >= 0 ? seconds / secondsPerDay : (seconds - secondsPerDay + 1) / secondsPerDay
    }

    public func reportSettings() throws -> ReportSettings {
        try read { db in try Library.reportSettings(db) }
    }

    static func reportSettings(_ db: Database) throws -> ReportSettings {
        let row = try Row.fetchOne(db, sql: "SELECT retention_days, recording FROM report_settings WHERE one = 1")
        return ReportSettings(retentionDays: row?[0] ?? 30, recording: (row?[1] as Int64? ?? 1) != 0)
    }

    /// Sets how many days the report keeps (1 to 3650) and whether mounts record; prunes at once.
    public func setReportSettings(retentionDays: Int?, recording: Bool?) throws {
        if let d = retentionDays, !(1...3650).contains(d) {
            throw LibraryError.invalid("the report's retention is 1 to 3650 days, not \(d)")
        }
        try quietWrite { db in
            if let d = retentionDays {
                try db.execute(sql: "UPDATE report_settings SET retention_days = ? WHERE one = 1", arguments: [d])
            }
            if let r = recording {
                try db.execute(sql: "UPDATE report_settings SET recording = ? WHERE one = 1", arguments: [r ? 1 : 0])
            }
            try Library.pruneReport(db, now: Int64(Library.now()))
        }
    }

    /// Adds a mount's batch of tallies for `app` (one transaction, which wakes no mount). Returns
    /// whether recording is on: a mount whose library turned it off stops recording. `prune`:
    /// drop the days past retention too (a mount asks now and then, not at every batch).
    @discardableResult
    public func recordAccess(_ app: AppID, _ batch: [AccessTally], prune: Bool) throws -> Bool {
        if batch.isEmpty && !prune { return try reportSettings().recording }
        return try quietWrite { db in
            let settings = try Library.reportSettings(db)
            if prune { try Library.pruneReport(db, now: Int64(Library.now())) }
            guard settings.recording, !batch.isEmpty else { return settings.recording }
            try db.execute(sql: "INSERT INTO report_apps (app_id) VALUES (?) ON CONFLICT DO NOTHING", arguments: [app.rawValue])
            let appNumber = try Int64.fetchOne(db, sql: "SELECT id FROM report_apps WHERE app_id = ?", arguments: [app.rawValue])!
            let statement = try db.cachedStatement(sql: """
                INSERT INTO access_report (app, day, asset_rowid, kind, first_at, last_at, count)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (app, day, asset_rowid, kind) DO UPDATE SET
                    first_at = CASE WHEN excluded.first_at < access_report.first_at THEN excluded.first_at ELSE access_report.first_at END,
                    last_at = CASE WHEN excluded.last_at > access_report.last_at THEN excluded.last_at ELSE access_report.last_at END,
                    count = access_report.count + ?
                """)
            // A tally may count 0 (a --no-open mount's later reads of a file: the last time only);
            // a new row counts at least 1, an existing one adds what the tally counted.
            for t in batch {
                try statement.execute(arguments: [appNumber, t.day, t.rowID, t.kind.rawValue, t.first, max(t.last, t.first),
                                                  max(t.count, 1), max(t.count, 0)])
            }
            return true
        }
    }

    /// Drops the days the report no longer keeps (those before today - retention + 1).
    static func pruneReport(_ db: Database, now: Int64) throws {
        let keep = try reportSettings(db).retentionDays
        let oldest = reportDay(now) - Int64(keep) + 1
        try db.execute(sql: "DELETE FROM access_report WHERE app IN (SELECT id FROM report_apps) AND day < ?", arguments: [oldest])
    }

    /// The report, newest first: every app's, or one app's (nil `app`), of every asset or one,
    /// of what was last done at or after `since`. Only what the retention keeps.
    public func accessReport(app: AppID? = nil, asset: Int64? = nil, since: Date? = nil) throws -> [AccessEntry] {
        try read { db in
            if let app { _ = try Library.requireApp(db, app) }
            let settings = try Library.reportSettings(db)
            let now = Int64(Library.now())
            let oldestDay = Library.reportDay(now) - Int64(settings.retentionDays) + 1
            let sinceSeconds = since.map { Int64($0.timeIntervalSince1970.rounded(.down)) } ?? Int64.min
            let rows = try Row.fetchAll(db, sql: """
                SELECT p.app_id, r.asset_rowid, a.id, a.display_name, r.kind,
                       min(r.first_at), max(r.last_at), CAST(sum(r.count) AS BIGINT), count(*)
                FROM access_report r
                JOIN report_apps p ON p.id = r.app
                LEFT JOIN assets a ON a.rowid = r.asset_rowid
                WHERE r.day >= ? AND r.last_at >= ? AND (CAST(? AS TEXT) IS NULL OR p.app_id = ?) AND (CAST(? AS BIGINT) IS NULL OR r.asset_rowid = ?)
                GROUP BY r.app, p.app_id, r.asset_rowid, a.id, a.display_name, r.kind
                ORDER BY max(r.last_at) DESC, p.app_id, r.asset_rowid, r.kind
                """, arguments: [oldestDay, sinceSeconds, app?.rawValue, app?.rawValue, asset, asset])
            return rows.compactMap { r -> AccessEntry? in
                guard let appID = AppID(r[0] as String), let kind = AccessKind(rawValue: r[4]) else { return nil }
                return AccessEntry(app: appID, rowID: r[1], assetID: r[2], name: r[3], kind: kind,
                                   first: Date(timeIntervalSince1970: Double(r[5] as Int64)),
                                   last: Date(timeIntervalSince1970: Double(r[6] as Int64)), count: r[7], days: r[8])
            }
        }
    }

    /// Drops the days past the retention now (`photogate report` does, before listing).
    public func pruneReport() throws {
        try quietWrite { db in try Library.pruneReport(db, now: Int64(Library.now())) }
    }

    /// Forgets the report: one app's, or every app's. Returns how many rows went.
    @discardableResult
    public func clearReport(app: AppID? = nil) throws -> Int {
        try quietWrite { db in
            if let app {
                _ = try Library.requireApp(db, app)
                try db.execute(sql: "DELETE FROM access_report WHERE app = (SELECT id FROM report_apps WHERE app_id = ?)", arguments: [app.rawValue])
            } else {
                try db.execute(sql: "DELETE FROM access_report")
            }
            return db.changesCount
        }
    }
}
