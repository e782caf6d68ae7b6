import Foundation
import GRDB
import PhotoLibrary
import Redaction
import PGSystem
#if canImport(Glibc)
import Glibc
#endif

extension Library {
    /// The redaction facts of an asset: computed at import or commit and stored; a plan stored by
    /// an older scanner version is recomputed from the original first (and stored again), since
    /// it may miss location data a newer scanner finds. Fails closed: anything unreadable refuses.
    /// With `path`, the facts must be those of the original there (a mount's view may be a
    /// moment behind a new version): otherwise it throws, and nothing is stored.
    public func redaction(rowID: Int64, path expected: String? = nil) throws -> RedactionResult {
        let stored = try read { db -> (RedactionResult, Int, String, Bool)? in
            guard let row = try Row.fetchOne(db, sql: """
                SELECT redaction, redaction_refusal, redaction_version, store_path, reference_path, id FROM assets WHERE rowid = ?
                """, arguments: [rowID]) else {
                throw LibraryError.unknownAssets([String(rowID)])
            }
            let version: Int = row[2]
            let reference = (row[4] as String?) != nil
            let path = try (row[4] as String?) ?? storeFile((row[3] as String?) ?? "", of: row[5])
            if let why: String = row[1] { return (.refuse(reason: why), version, path, reference) }
            guard let blob: Data = row[0] else { return (.refuse(reason: "no redaction facts recorded"), version, path, reference) }
            do {
                return (.plan(try RedactionPlan(serialized: [UInt8](blob))), version, path, reference)
            } catch {
                return (.refuse(reason: "stored redaction facts are unreadable"), version, path, reference)
            }
        }
        guard let (result, version, path, reference) = stored else { throw LibraryError.unknownAssets([String(rowID)]) }
        if let expected, expected != path {
            throw LibraryError.conflict("asset \(rowID) has a newer version than the one at \(expected)")
        }
        if version >= MediaScanner.version { return result }
        return rescan(rowID: rowID, path: path, reference: reference)
    }

    /// Scans an original again with the current scanners and stores the result.
    func rescan(rowID: Int64, path: String, reference: Bool) -> RedactionResult {
        let result: RedactionResult
        var hasLocation: Bool? = nil
        let fd = pg_open_original(path, reference ? 1 : 0)
        if fd < 0 {
            // Not stored: the original may be readable again later (a referenced file's disk).
            return .refuse(reason: "the original cannot be read again: \(String(cString: strerror(errno)))")
        } else {
            defer { Glibc.close(fd) }
            do {
                let (scan, _, _) = try StoreWriter.scan(fd: fd)
                result = scan.redaction
                hasLocation = scan.hasLocation
            } catch {
                result = .refuse(reason: "the original no longer scans: \(error)")
            }
        }
        var blob: Data? = nil, refusal: String? = nil
        switch result {
        case .plan(let p): blob = Data(p.serialized())
        case .refuse(let why): refusal = why
        }
        // Best effort: if it cannot be stored, the next open scans again.
        try? write { db in
            try db.execute(sql: """
                UPDATE assets SET redaction = ?, redaction_refusal = ?, redaction_version = ?,
                       has_location = COALESCE(?, has_location) WHERE rowid = ?
                """, arguments: [blob, refusal, MediaScanner.version, hasLocation, rowID])
        }
        return result
    }

    /// An app renames an asset it created, through its mount at `access`: it keeps seeing the
    /// name it chose; the library's display name follows when free, else gets a suffix. Whether it
    /// may is the one decision's (`AssetDecision.canRename`, what `explain` prints), asked here in
    /// the transaction that renames, whatever path of the mount asked for it (a file at the top,
    /// in an upload folder, just written or long committed): an app denied since, or an asset gone
    /// to Recently Deleted, is refused (a conflict: EACCES). A view records an update only if the
    /// name it sees changed (the app's: its own name; others': the display name), so the app
    /// never learns from its history that a display name it cannot see came or went.
    public func renameOwnAsset(rowID: Int64, app: AppID, access: AccessLevel, to name: String) throws {
        try write { db in
            guard let owner = try String.fetchOne(db, sql: "SELECT owner_app FROM assets WHERE rowid = ?", arguments: [rowID]),
                  owner == app.rawValue else {
                throw LibraryError.conflict("only the app that created an asset may rename it")
            }
            guard let record = try Library.fetchApp(db, app), let facts = try Library.facts(db, app: app, rowID: rowID),
                  Library.context(record, access).decide(facts).canRename else {
                throw LibraryError.conflict("\(app) may not rename this asset now (photogate explain says why)")
            }
            let taken = try db.cachedStatement(sql: "SELECT 1 FROM assets WHERE display_name = ? AND rowid <> ?")
            let display = DisplayName.unique(DisplayName.sanitize(Array(name.utf8))) { c in
                (try? Bool.fetchOne(taken, arguments: [c, rowID])) != nil
            }
            try ViewDelta.tracking(db, [rowID], renamed: [rowID]) {
                try db.execute(sql: "UPDATE assets SET owner_name = ?, display_name = ? WHERE rowid = ?", arguments: [name, display, rowID])
            }
            try Library.record(db, .rename, app: app.rawValue, asset: rowID)
        }
    }

    /// A file time an app sets on a file it created, after its close (`rclone` sets a file's
    /// time once it has closed it; `touch -d`, `jhead -ft`), takes effect as one set while writing
    /// it: the modification time is the asset's capture date when its content carries none of its
    /// own (an EXIF date, a video's creation time), as at its commit. The asset must be the app's
    /// own and one it may still name (the one decision's `canRename`, asked in the transaction
    /// that changes it: `LibraryError.conflict` otherwise), and still its original: an edit's
    /// times never set a capture date either (a dateless version keeps the original's). Returns
    /// whether the capture date changed; every view that shows the asset sees it updated.
    @discardableResult
    public func setOwnFileDate(rowID: Int64, app: AppID, access: AccessLevel, to date: Date) throws -> Bool {
        func allowed(_ db: Database) throws -> (rel: String, id: String, capture: Double, version: Int)? {
            guard let row = try Row.fetchOne(db, sql: """
                SELECT owner_app, store_path, id, capture_date, current_version FROM assets WHERE rowid = ?
                """, arguments: [rowID]) else { throw LibraryError.unknownAssets([String(rowID)]) }
            guard (row[0] as String?) == app.rawValue else { throw LibraryError.conflict("only the app that created an asset sets its file time") }
            guard let record = try Library.fetchApp(db, app), let facts = try Library.facts(db, app: app, rowID: rowID),
                  Library.context(record, access).decide(facts).canRename else {
                throw LibraryError.conflict("\(app) may not change this asset now (photogate explain says why)")
            }
            guard let rel: String = row[1], StorePath.isValid(rel) else { return nil }
            return (rel, row[2], row[3], row[4])
        }
        guard let before = try read(allowed), before.version == 0 else { return false }
        // The content's own date wins, as at a commit: read from the stored file (outside any
        // transaction; the write below checks that it is still the asset's).
        let fd = Glibc.open(try storeFile(before.rel, of: before.id), O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw StoreWriter.ioError(errno, "open \(before.rel)") }
        defer { Glibc.close(fd) }
        guard try StoreWriter.scan(fd: fd).0.captureDate == nil else { return false }
        let capture = date.timeIntervalSince1970
        return try write { db in
            guard let now = try allowed(db), now.rel == before.rel, now.version == 0, now.capture != capture else { return false }
            try ViewDelta.tracking(db, [rowID], updated: [rowID]) {
                try db.execute(sql: "UPDATE assets SET capture_date = ? WHERE rowid = ?", arguments: [capture, rowID])
                // Its original's row, where it has one (an asset reverted to it): what a revert restores.
                try db.execute(sql: "UPDATE versions SET capture_date = ? WHERE asset_rowid = ? AND version = 0", arguments: [capture, rowID])
                // Another date may put it in or out of an app's date-range set grant.
                try Library.refreshSetSelections(db, [rowID])
            }
            try Library.record(db, .date, app: app.rawValue, asset: rowID)
            return true
        }
    }

    /// An app takes back from Recently Deleted an asset it created and sent there itself, the
    /// moment before (a save that deletes the file, then renames the new one to its name: jhead).
    /// Only that app, only its own asset, only one it sent there; views and histories see it come
    /// back like a restore.
    public func restoreOwnAsset(rowID: Int64, app: AppID) throws {
        try write { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT owner_app, trashed_at FROM assets WHERE rowid = ?", arguments: [rowID]),
                  (row[0] as String?) == app.rawValue, (row[1] as Double?) != nil else {
                throw LibraryError.conflict("only an app's own asset it sent to Recently Deleted comes back this way")
            }
            let by = try String.fetchOne(db, sql: "SELECT app_id FROM changes WHERE asset_rowid = ? AND kind = 'trash' ORDER BY seq DESC LIMIT 1",
                                         arguments: [rowID])
            guard by == app.rawValue else { throw LibraryError.conflict("\(app) did not send this asset to Recently Deleted") }
            try ViewDelta.tracking(db, [rowID]) {
                try db.execute(sql: "UPDATE assets SET trashed_at = NULL WHERE rowid = ?", arguments: [rowID])
                try Library.record(db, .restore, app: app.rawValue, asset: rowID)
            }
        }
    }

    /// An app's own file that it renamed over another asset (an editor's save through a temp
    /// file) became that asset's new version: the file's own asset row goes away, and its stored
    /// file with it (its bytes are the version's now, under the version's own file name); one that
    /// has versions of its own, or that the person put in an album, granted, picked or gave edit
    /// consent for, goes to Recently Deleted instead, all of it kept. Only the app
    /// that created it may dissolve it; views and histories see it leave like a delete.
    public func dissolveOwnAsset(rowID: Int64, app: AppID) throws {
        let rel: String? = try write { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT owner_app, store_path FROM assets WHERE rowid = ?", arguments: [rowID]),
                  (row[0] as String?) == app.rawValue else {
                throw LibraryError.conflict("only the app that created an asset may dissolve it")
            }
            let path: String? = row[1]
            if let path, try Bool.fetchOne(db, sql: "SELECT 1 FROM versions WHERE store_path = ? AND asset_rowid <> ?",
                                             arguments: [path, rowID]) == true {
                throw LibraryError.conflict("the stored file is a version of another asset")
            }
            // An asset with a history of its own (edited before), or that the person has
            // organized or shared (in an album, granted or picked for an app, edit consent
            // given), keeps it all: it goes to Recently Deleted, where the person can still
            // restore it, as an `rm` would send it, instead of being dissolved. Only a file the
            // app made and nobody touched since (an editor's temp file) is dissolved: a set grant
            // that took it in (a date range, a kind) is not the person's touch.
            if try Bool.fetchOne(db, sql: """
                WITH p(r) AS (SELECT CAST(? AS BIGINT))
                SELECT CASE WHEN EXISTS (SELECT 1 FROM versions WHERE asset_rowid = (SELECT r FROM p))
                    OR EXISTS (SELECT 1 FROM sidecars WHERE asset_rowid = (SELECT r FROM p))
                    OR EXISTS (SELECT 1 FROM album_assets WHERE asset_rowid = (SELECT r FROM p))
                    OR EXISTS (SELECT 1 FROM selections WHERE asset_rowid = (SELECT r FROM p) AND direct = 1)
                    OR EXISTS (SELECT 1 FROM picks WHERE asset_rowid = (SELECT r FROM p))
                    OR EXISTS (SELECT 1 FROM edit_consents WHERE asset_rowid = (SELECT r FROM p)) THEN 1 ELSE 0 END
                """, arguments: [rowID]) == true {
                try ViewDelta.tracking(db, [rowID]) {
                    try db.execute(sql: "UPDATE assets SET trashed_at = ?, trashed_by = ? WHERE rowid = ? AND trashed_at IS NULL",
                                   arguments: [Library.now(), app.rawValue, rowID])
                    try Library.record(db, .trash, app: app.rawValue, asset: rowID)
                }
                return nil
            }
            try ViewDelta.tracking(db, [rowID]) {
                try db.execute(sql: "DELETE FROM assets WHERE rowid = ?", arguments: [rowID])
                try Library.record(db, .trash, app: app.rawValue, asset: rowID)
            }
            // A temp file dissolved into the photo it saved was never a photo of the person's:
            // the access report forgets it (its `created`), as the mount forgets what it held.
            try db.execute(sql: "DELETE FROM access_report WHERE asset_rowid = ?", arguments: [rowID])
            return path
        }
        // (A store path of another shape than photogate writes names no file of the store.)
        if let rel, StorePath.isValid(rel) { unlink(paths.store + "/" + rel) }
    }
}

extension Library {
    /// Bytes the app added since `since` (seconds since 1970): the sizes of the assets it made
    /// (in Recently Deleted too: deleting does not give an app room to add again), of the
    /// versions it saved of any asset, and of the sidecar versions it wrote.
    public func bytesAdded(by app: AppID, since: Double) throws -> UInt64 {
        // On the writer's connection: a read here opened reader connections (two descriptors
        // each) in a daemon whose closes came many at once. (A new photo's commit asks it in its
        // own transaction: `StoreWriter.commit`'s `dailyLimit`.)
        try quietWrite { db in try Library.bytesAdded(db, by: app, since: since) }
    }

    /// Throws `PortError.overDailyLimit` when `size` more bytes would take the app past `limit`
    /// (nil: no limit asked), in the transaction of the commit that adds them.
    static func askDailyLimit(_ db: Database, _ limit: DailyLimit?, app: AppID, size: UInt64) throws {
        guard let limit else { return }
        let added = try bytesAdded(db, by: app, since: limit.since)
        if added + size > limit.bytes { throw PortError.overDailyLimit(added: added, size: size) }
    }

    static func bytesAdded(_ db: Database, by app: AppID, since: Double) throws -> UInt64 {
        var total: UInt64 = 0
        for sql in Library.bytesAddedSQL {
            total += UInt64(max(0, try Int64.fetchOne(db.cachedStatement(sql: sql), arguments: [app.rawValue, since]) ?? 0))
        }
        return total
    }

    /// What `bytesAdded` sums: the app's new photos, the versions it saved, and its sidecar
    /// versions (issue 37: a sidecar rewritten in a loop adds), each since a time. Every close
    /// asks: each is found through an index on (app, time), never by reading the table (v13).
    static let bytesAddedSQL = [
        "SELECT CAST(coalesce(sum(byte_size), 0) AS BIGINT) FROM assets WHERE owner_app = ? AND added_at >= ?",
        "SELECT CAST(coalesce(sum(byte_size), 0) AS BIGINT) FROM versions WHERE app_id = ? AND created_at >= ? AND version > 0",
        "SELECT CAST(coalesce(sum(byte_size), 0) AS BIGINT) FROM sidecars WHERE app_id = ? AND created_at >= ?",
    ]
}
