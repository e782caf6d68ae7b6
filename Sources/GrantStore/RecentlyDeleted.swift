import Foundation
import GRDB
import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

// Recently Deleted (issue 38): the person's own delete, who deleted each photo and when, emptying
// it, and iOS's automatic purge after N days, as a setting that is off unless the person turns it
// on, and never silent: every delete for good is in the change log (`purge`), and whatever runs
// the automatic purge prints it.

extension Schema {
    /// v10: who moved each asset to Recently Deleted (`trashed_by`: the app's id, or '' for the
    /// person; NULL when it is not there, or for an asset deleted before this version whose log
    /// entry is gone), and the setting of the automatic purge (`purge_after_days`, NULL: off) with
    /// the time it last ran. Assets already in Recently Deleted get who from the change log, which
    /// has said it all along (the latest `trash` entry of each, read in one pass).
    static func registerV10(_ m: inout DatabaseMigrator) {
        m.registerMigration("v10-recently-deleted") { g in let db = Database(sqlite: g)
            try db.execute(sql: """
                ALTER TABLE assets ADD COLUMN trashed_by TEXT;
                CREATE TABLE trash_settings (
                    one INTEGER PRIMARY KEY CHECK (one = 1),
                    purge_after_days INTEGER CHECK (purge_after_days IS NULL OR purge_after_days BETWEEN 1 AND 3650),
                    last_purge_at REAL NOT NULL DEFAULT 0
                );
                INSERT INTO trash_settings (one, purge_after_days, last_purge_at) VALUES (1, NULL, 0);
                """)
            let who = try Row.fetchAll(db, sql: """
                SELECT asset_rowid, app_id FROM changes WHERE seq IN (
                    SELECT max(seq) FROM changes WHERE kind = 'trash'
                    AND asset_rowid IN (SELECT rowid FROM assets WHERE trashed_at IS NOT NULL) GROUP BY asset_rowid)
                """)
            let update = try db.makeStatement(sql: "UPDATE assets SET trashed_by = ? WHERE rowid = ? AND trashed_at IS NOT NULL")
            for r in who {
                try update.execute(arguments: [(r[1] as String?) ?? Library.trashedByPerson, r[0] as Int64])
            }
        }
    }
}

/// Who moved an asset to Recently Deleted.
public enum DeletedBy: Equatable, Sendable {
    /// The person (`photogate delete`).
    case person
    /// An app, through its mount (`rm`).
    case app(AppID)
    /// Not recorded (deleted by a photogate older than the record).
    case unknown
}

/// An asset in Recently Deleted, who put it there, and when the automatic purge deletes it.
public struct TrashEntry: Sendable {
    public var asset: Asset
    public var deletedBy: DeletedBy
    /// When the automatic purge deletes it for good (nil: the purge is off).
    public var purgeDate: Date?
}

/// The automatic purge of Recently Deleted: off (nil) or after this many days (1 to 3650).
public struct TrashSettings: Sendable, Equatable {
    public var purgeAfterDays: Int?
    /// When the automatic purge last ran (nil: never).
    public var lastPurge: Date?
}

/// What an automatic purge deleted for good.
public struct PurgeOutcome: Sendable {
    public var days: Int
    public var assets: [Asset]
}

extension Library {
    /// `trashed_by` of an asset the person deleted.
    static let trashedByPerson = ""
    /// How often the automatic purge runs at most (unless forced: `photogate trash`).
    public static let purgeInterval: Double = 3600

    /// Recently Deleted, oldest first, with who deleted each asset and when the purge will.
    public func trashEntries() throws -> [TrashEntry] {
        try read { db in
            let days = try Library.trashSettings(db).purgeAfterDays
            return try Row.fetchAll(db, sql: """
                SELECT \(Library.assetColumns), trashed_by FROM assets WHERE trashed_at IS NOT NULL ORDER BY trashed_at, rowid
                """).map { row in
                let asset = Library.asset(row)
                let by: DeletedBy = switch row[AssetColumn.allCases.count] as String? {
                case nil: .unknown
                case Library.trashedByPerson?: .person
                case let id?: AppID(id).map(DeletedBy.app) ?? .unknown
                }
                let purge = days.flatMap { d in asset.trashedDate.map { $0.addingTimeInterval(Double(d) * 86_400) } }
                return TrashEntry(asset: asset, deletedBy: by, purgeDate: purge)
            }
        }
    }

    /// The person deletes assets (`photogate delete`): to Recently Deleted, as an authorized app's
    /// `rm` does, recorded as the person's. Returns those it moved, and those already there
    /// (left as they were: deleting twice is no error). An unknown reference changes nothing.
    @discardableResult
    public func delete(_ refs: [String]) throws -> (deleted: [Asset], already: [Asset]) {
        try write { db in
            let assets = try Library.resolve(db, refs)
            let already = assets.filter(\.isTrashed)
            let moving = assets.filter { !$0.isTrashed }
            try ViewDelta.tracking(db, moving.map(\.rowID)) {
                for a in moving {
                    try db.execute(sql: "UPDATE assets SET trashed_at = ?, trashed_by = ? WHERE rowid = ? AND trashed_at IS NULL",
                                   arguments: [Library.now(), Library.trashedByPerson, a.rowID])
                    try Library.record(db, .trash, asset: a.rowID)
                }
            }
            return (moving, already)
        }
    }

    /// Deletes for good what is in Recently Deleted (`photogate trash --empty`): everything, or
    /// what was deleted more than `olderThan` days ago. One transaction: an asset restored
    /// meanwhile stays.
    @discardableResult
    public func emptyTrash(olderThanDays days: Double? = nil, now: Double = Date().timeIntervalSince1970) throws -> [Asset] {
        if let days, !(days >= 0) { throw LibraryError.invalid("--older-than takes a number of days, 0 or more") }
        return try deleteForGood(detail: days.map { "emptied: deleted more than \(String(format: "%g", $0)) days ago" } ?? "emptied") { db in
            try Row.fetchAll(db, sql: """
                SELECT \(Library.assetColumns) FROM assets WHERE trashed_at IS NOT NULL AND trashed_at <= ? ORDER BY trashed_at, rowid
                """, arguments: [days.map { now - $0 * 86_400 } ?? Double.greatestFiniteMagnitude]).map(Library.asset)
        }
    }

    public func trashSettings() throws -> TrashSettings {
        try read { db in try Library.trashSettings(db) }
    }

    static func trashSettings(_ db: Database) throws -> TrashSettings {
        let row = try Row.fetchOne(db, sql: "SELECT purge_after_days, last_purge_at FROM trash_settings WHERE one = 1")
        let last: Double = row?[1] ?? 0
        return TrashSettings(purgeAfterDays: row?[0], lastPurge: last > 0 ? Date(timeIntervalSince1970: last) : nil)
    }

    /// Turns the automatic purge on (after `days`, 1 to 3650) or off (nil).
    public func setTrashPurge(afterDays days: Int?) throws {
        if let d = days, !(1...3650).contains(d) {
            throw LibraryError.invalid("the automatic purge of Recently Deleted takes 1 to 3650 days, not \(d)")
        }
        try quietWrite { db in
            try db.execute(sql: "UPDATE trash_settings SET purge_after_days = ? WHERE one = 1", arguments: [days])
        }
    }

    /// The automatic purge: when it is on, deletes for good what has been in Recently Deleted for
    /// longer than its days, recorded in the change log as automatic. Runs when an hour has passed
    /// since it last ran (or the clock went back), or always with `force`. nil when it did not
    /// run (off, or not due); else what it deleted, maybe nothing. The caller says what it did.
    public func purgeRecentlyDeleted(force: Bool = false, now: Double = Date().timeIntervalSince1970) throws -> PurgeOutcome? {
        let s = try trashSettings()
        guard let days = s.purgeAfterDays else { return nil }
        let last = s.lastPurge?.timeIntervalSince1970 ?? 0
        if !force, now >= last, now - last < Library.purgeInterval { return nil }
        // Due: noted first (without waking mounts), so that many commands at once purge once.
        let expired: Int? = try quietWrite { db in
            guard let d = try Library.trashSettings(db).purgeAfterDays else { return nil }
            let last = try Library.trashSettings(db).lastPurge?.timeIntervalSince1970 ?? 0
            if !force, now >= last, now - last < Library.purgeInterval { return nil }
            try db.execute(sql: "UPDATE trash_settings SET last_purge_at = ? WHERE one = 1", arguments: [now])
            return try Int.fetchOne(db, sql: "SELECT count(*) FROM assets WHERE trashed_at IS NOT NULL AND trashed_at <= ?",
                                    arguments: [now - Double(d) * 86_400]) ?? 0
        }
        guard let expired else { return nil }
        guard expired > 0 else { return PurgeOutcome(days: days, assets: []) }
        var used = days
        let gone = try deleteForGood(detail: "automatic: in Recently Deleted for more than \(days) days") { db in
            // The setting as it is in this transaction (turned off meanwhile: nothing goes).
            guard let d = try Library.trashSettings(db).purgeAfterDays else { return [] }
            used = d
            return try Row.fetchAll(db, sql: """
                SELECT \(Library.assetColumns) FROM assets WHERE trashed_at IS NOT NULL AND trashed_at <= ? ORDER BY trashed_at, rowid
                """, arguments: [now - Double(d) * 86_400]).map(Library.asset)
        }
        return PurgeOutcome(days: used, assets: gone)
    }
}

/// Moving assets to Recently Deleted and back (the rows; `RecentlyDeleted`'s retention above).
extension Library {

    public func trash() throws -> [Asset] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT \(Library.assetColumns) FROM assets WHERE trashed_at IS NOT NULL ORDER BY trashed_at, rowid")
                .map(Library.asset)
        }
    }

    /// Moves assets to Recently Deleted: by an app (an `rm` through its mount), or by the person
    /// (nil: `photogate delete`), which the change log and `trashed_by` record.
    public func moveToTrash(rowIDs: [Int64], by app: AppID? = nil) throws {
        try write { db in
            try ViewDelta.tracking(db, rowIDs) {
                for r in rowIDs {
                    try db.execute(sql: "UPDATE assets SET trashed_at = ?, trashed_by = ? WHERE rowid = ? AND trashed_at IS NULL",
                                   arguments: [Library.now(), app?.rawValue ?? Library.trashedByPerson, r])
                    if db.changesCount > 0 { try Library.record(db, .trash, app: app?.rawValue, asset: r) }
                }
            }
        }
    }

    @discardableResult
    public func restore(_ refs: [String]) throws -> [Asset] {
        try write { db in
            let assets = try Library.resolve(db, refs)
            let notTrashed = assets.filter { !$0.isTrashed }
            if !notTrashed.isEmpty {
                throw LibraryError.conflict("not in Recently Deleted: \(notTrashed.map { "'\($0.displayName)'" }.joined(separator: ", ")); nothing was changed")
            }
            try ViewDelta.tracking(db, assets.map(\.rowID)) {
                for a in assets {
                    try db.execute(sql: "UPDATE assets SET trashed_at = NULL, trashed_by = NULL WHERE rowid = ?", arguments: [a.rowID])
                    try Library.record(db, .restore, asset: a.rowID)
                }
            }
            return assets
        }
    }
}
