import Foundation
import GRDB
import PhotoLibrary
import Synchronization

/// Records, in the same transaction as a change, what it did to every app's read-write view.
/// Visibility before and after is `AppContext.decide`'s, from the one facts reader, for the
/// assets the change touches; names are the view's (`Library.renamedInView`), as the mount shows
/// them: what a removed asset was called before the change, what an added or changed one is
/// called after it.
struct ViewDelta {
    /// app id -> row ids visible in its read-write view, among the tracked assets.
    typealias Visibility = [String: Set<Int64>]
    /// app id -> the names of its view that are not display names (apps whose view has some).
    typealias Names = [String: [Int64: String]]

    /// Every app's record, by id (one statement: a commit asks for all of them).
    static func apps(_ db: Database) throws -> [String: AppRecord] {
        var out: [String: AppRecord] = [:]
        for row in try Row.fetchAll(db.cachedStatement(sql: "SELECT * FROM apps")) {
            guard let raw: String = row["id"], AppID(raw) != nil else { continue }
            out[raw] = try AppRecord(row: row)
        }
        return out
    }

    /// What each app's read-write view sees of these assets: each app's facts (the one facts
    /// reader, every app in one statement) and its `AppContext`. A commit's cost does not grow by
    /// a statement per app of the library (13 apps were 0.6 ms of a 2 ms catalog commit).
    static func visibility(_ db: Database, _ rowIDs: [Int64], apps known: [String: AppRecord]? = nil) throws -> Visibility {
        guard !rowIDs.isEmpty else { return [:] }
        let records = try known ?? apps(db)
        var contexts: [String: AppContext] = [:]
        var out: Visibility = [:]
        for (id, record) in records {
            contexts[id] = Library.context(record, .readWrite)
            out[id] = []
        }
        // At most `visibilityRows` rows (an app and an asset each) at a time: a server's answer
        // is held whole (a grant of 10,000 assets in a library of 50 apps: 500,000 rows).
        let step = max(1, visibilityRows.load(ordering: .relaxed) / max(1, records.count))
        var start = 0
        while start < rowIDs.count {
            let chunk = Array(rowIDs[start..<min(rowIDs.count, start + step)])
            try Library.factsOfEveryApp(db, rowIDs: chunk) { app, rowID, facts in
                if let context = contexts[app], context.isVisible(facts) { out[app]?.insert(rowID) }
            }
            start += step
        }
        return out
    }

    /// How many rows `visibility` reads at a time (tests lower it to cross its steps).
    static let visibilityRows = Atomic<Int>(20_000)

    /// The view names of the apps that see some of `visible` (nil entries: display names).
    static func names(_ db: Database, _ visible: Visibility, apps known: [String: AppRecord]? = nil) throws -> Names {
        var out: Names = [:]
        var records = known
        for (app, seen) in visible where !seen.isEmpty {
            if records == nil { records = try apps(db) }
            guard let record = records?[app] else { continue }
            if let renamed = try Library.renamedInView(db, app: record, access: .readWrite) { out[app] = renamed }
        }
        return out
    }

    /// `updated`: assets whose content or facts changed, an update in every view that sees them
    /// before and after. `renamed`: assets whose names alone changed (display name, own name),
    /// an update only in the views where the name it is seen under changed: the app that created
    /// an asset sees its own name, so its library display name moving (`reclaimName`: the person
    /// imported a photo of that name, which the app may not see) changes nothing it sees and must
    /// tell it nothing. `beforeDisplay`: the display names of `renamed` before the change.
    static func record(_ db: Database, before: Visibility, after: Visibility, updated: Set<Int64> = [],
                       renamed: Set<Int64> = [], beforeNames: Names = [:], beforeDisplay: [Int64: String] = [:],
                       apps known: [String: AppRecord]? = nil) throws {
        let apps = Set(before.keys).union(after.keys)
        guard !apps.isEmpty else { return }
        var afterNames: Names?
        let afterDisplay = renamed.isEmpty ? [:] : try displayNames(db, renamed)
        let touched = updated.union(renamed)
        // app_seq numbered here, one lookup per app, rather than by the trigger (an UPDATE of each
        // new row: half the CPU of a 10,000-asset grant). The same numbers: max + 1, 2, 3...
        let insert = try db.cachedStatement(sql: """
            INSERT INTO app_changes (app_id, at, kind, asset_rowid, name, app_seq)
            VALUES (?, ?, ?, ?, coalesce(?, (SELECT display_name FROM assets WHERE rowid = ?)), ?)
            """)
        let last = try db.cachedStatement(sql: "SELECT COALESCE(max(app_seq), 0) FROM app_changes WHERE app_id = ?")
        let now = Library.now()
        var wrote: [String] = []
        for app in apps.sorted() {
            let b = before[app] ?? [], a = after[app] ?? []
            var seq: Int64? = nil
            for (kind, set) in [(AppChangeKind.removed, b.subtracting(a)), (.inserted, a.subtracting(b)), (.updated, a.intersection(b).intersection(touched))] {
                if set.isEmpty { continue }
                if kind != .removed && afterNames == nil { afterNames = try names(db, after, apps: known) }
                let names = kind == .removed ? beforeNames[app] : afterNames?[app]
                for r in set.sorted() {
                    // A rename only: an update where this view's name for it changed.
                    if kind == .updated && !updated.contains(r)
                        && (beforeNames[app]?[r] ?? beforeDisplay[r]) == (names?[r] ?? afterDisplay[r]) { continue }
                    let next = try (seq ?? Int64.fetchOne(last, arguments: [app]) ?? 0) + 1
                    seq = next
                    try insert.execute(arguments: [app, now, kind.rawValue, r, names?[r], r, next])
                    if wrote.last != app { wrote.append(app) }
                }
            }
        }
        try prune(db, wrote)
    }

    /// Runs a change to these assets and records what it did to every app's view. Errors
    /// propagate, so a change and its history commit or roll back together.
    /// `updated` and `renamed`: as for `record`.
    static func tracking<T>(_ db: Database, _ rowIDs: [Int64], updated: Set<Int64> = [], renamed: Set<Int64> = [],
                            _ body: () throws -> T) throws -> T {
        let beforeApps = try apps(db)
        let before = try visibility(db, rowIDs, apps: beforeApps)
        let beforeNames = try names(db, before, apps: beforeApps)
        let beforeDisplay = renamed.isEmpty ? [:] : try displayNames(db, renamed)
        let result = try body()
        // The apps read again after the change: it may be one of an app's status or options.
        let records = try apps(db)
        try record(db, before: before, after: visibility(db, rowIDs, apps: records), updated: updated, renamed: renamed,
                   beforeNames: beforeNames, beforeDisplay: beforeDisplay, apps: records)
        return result
    }

    /// The display names of these assets, by row id.
    static func displayNames(_ db: Database, _ rowIDs: Set<Int64>) throws -> [Int64: String] {
        let statement = try db.cachedStatement(sql: "SELECT display_name FROM assets WHERE rowid = ?")
        var out: [Int64: String] = [:]
        for r in rowIDs { out[r] = try String.fetchOne(statement, arguments: [r]) }
        return out
    }

    static func recordStatus(_ db: Database, app: String, detail: String) throws {
        try db.execute(sql: "INSERT INTO app_changes (app_id, at, kind, detail) VALUES (?, ?, 'status', ?)",
                       arguments: [app, Library.now(), detail])
        try prune(db, [app])
    }

    /// How many entries each app keeps (PHOTOGATE_HISTORY_LIMIT overrides, for tests).
    static let limit: Int = {
        if let s = ProcessInfo.processInfo.environment["PHOTOGATE_HISTORY_LIMIT"], let n = Int(s), n > 0 { return n }
        return 10_000
    }()

    /// Keeps at most `limit` entries for each of these apps (those a change just wrote entries
    /// for: no other app's history grew); remembers where pruning stopped.
    static func prune(_ db: Database, _ apps: [String]) throws {
        // The app's span of tokens through the (app_id, app_seq) index, two lookups: a count(*)
        // read the whole history on every change (~1 ms per 10,000 entries). Entries only ever go
        // from the old end, so the span is the count. Only the apps written: every app of the
        // library asked on every commit of a new photo cost a lookup pair per app.
        let span = try db.cachedStatement(sql: """
            SELECT (SELECT max(app_seq) FROM app_changes WHERE app_id = ?) - (SELECT min(app_seq) FROM app_changes WHERE app_id = ?) + 1
            """)
        for app in apps where try (Int64.fetchOne(span, arguments: [app, app]) ?? 0) > Int64(limit + limit / 10) {
            guard let cut = try Int64.fetchOne(db, sql: "SELECT app_seq FROM app_changes WHERE app_id = ? ORDER BY app_seq DESC LIMIT 1 OFFSET ?",
                                               arguments: [app, limit]) else { continue }
            try db.execute(sql: "DELETE FROM app_changes WHERE app_id = ? AND app_seq <= ?", arguments: [app, cut])
            try db.execute(sql: """
                INSERT INTO app_history (app_id, pruned_through) VALUES (?, ?)
                ON CONFLICT (app_id) DO UPDATE SET pruned_through = CASE WHEN excluded.pruned_through > app_history.pruned_through THEN excluded.pruned_through ELSE app_history.pruned_through END
                """, arguments: [app, cut])
        }
    }
}

extension Library {
    /// The newest history token of an app (0 if none).
    public func latestChangeToken(_ app: AppID) throws -> Int64 {
        try read { db in try Int64.fetchOne(db, sql: "SELECT max(app_seq) FROM app_changes WHERE app_id = ?", arguments: [app.rawValue]) ?? 0 }
    }

    /// The app's change history after `since` (0: everything retained).
    public func changes(_ app: AppID, since: Int64 = 0, limit: Int = 100_000) throws -> HistoryAnswer {
        try read { db in
            _ = try Library.requireApp(db, app)
            // Cached statements: every mount reads its feed after every change.
            let pruned = try Int64.fetchOne(db.cachedStatement(sql: "SELECT pruned_through FROM app_history WHERE app_id = ?"),
                                            arguments: [app.rawValue]) ?? 0
            if since < pruned { return .expired(oldestValid: pruned) }
            let rows = try Row.fetchAll(db.cachedStatement(sql: """
                SELECT c.app_seq, c.kind, c.name, a.id, c.detail, c.at FROM app_changes c
                LEFT JOIN assets a ON a.rowid = c.asset_rowid
                WHERE c.app_id = ? AND c.app_seq > ? ORDER BY c.app_seq LIMIT ?
                """), arguments: [app.rawValue, since, limit])
            let changes = rows.map { r in
                AppChange(token: r[0], kind: AppChangeKind(rawValue: r[1]) ?? .updated, name: r[2], assetID: r[3], detail: r[4],
                          date: Date(timeIntervalSince1970: r[5]))
            }
            let latest = try Int64.fetchOne(db.cachedStatement(sql: "SELECT max(app_seq) FROM app_changes WHERE app_id = ?"),
                                            arguments: [app.rawValue]) ?? since
            return .changes(changes, latest: max(latest, since))
        }
    }
}
