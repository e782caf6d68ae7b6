// Kept in one file (over ~400 lines): an asset's versions, committed, listed and reverted in the same transactions over the versions table.
import Foundation
import GRDB
import PhotoLibrary
import Redaction
import PGSystem
#if canImport(Glibc)
import Glibc
#endif

/// One version of an asset's content: the original (version 0) or an edit (1, 2, 3...).
public struct AssetVersion: Equatable, Sendable {
    public var version: Int
    /// Who made it: the editing app; for the original, the app that created the asset (nil when
    /// it was imported).
    public var app: AppID?
    public var date: Date
    public var mediaKind: String
    public var byteSize: UInt64
    /// "sha256:<hex>"
    public var contentHash: String
    public var captureDate: Date
    public var hasLocation: Bool
    /// Whether the asset shows this version now.
    public var isCurrent: Bool
    /// Relative to the store, or (an original indexed in place) an absolute reference path.
    public var storePath: String?
    public var referencePath: String?

    public var isOriginal: Bool { version == 0 }
}

/// Edits (issue 15): who may edit what, edit consents and requests, and versions.
///
/// An edit never touches a stored file: each version is a file of its own in the store, and the
/// asset row (same rowid, id, display name, albums, grants) describes the current one. The original
/// is version 0 (its `versions` row is written by the first edit). A revert makes an older version
/// current again; the edits stay listed and their files stay in the store.
extension Library {
    /// How many `edit` requests an app may have pending; more are not recorded (the person answers
    /// the ones there first). Identical requests are one.
    public static let maxEditRequestsPerApp = 256

    // MARK: who may edit

    /// May `app` change the content of asset `rowID`? Decided by `ViewPolicy.editDecision` from the
    /// asset's facts for this app, its edit consent and the app's `edit-any` option. The mount asks
    /// for the visible assets of a read-write mount; `access: .addOnly` always answers `never`.
    /// An app the library does not know yet sees nothing (`never`); an unknown asset throws.
    public func editDecision(app: AppID, rowID: Int64, access: AccessLevel = .readWrite) throws -> EditDecision {
        try read { db in try Library.editDecision(db, app: app, rowID: rowID, access: access) }
    }

    static func editDecision(_ db: Database, app id: AppID, rowID: Int64, access: AccessLevel) throws -> EditDecision {
        guard let facts = try facts(db, app: id, rowID: rowID) else { throw LibraryError.unknownAssets([String(rowID)]) }
        return try context(db, id, access).editDecision(facts)
    }

    /// Records an `edit` request naming the asset: the app opened it for writing without consent.
    /// Nothing is recorded when the app's prevent-prompt option is on, when the app may already
    /// edit it or never may (only a `needsConsent` answer asks the person), or when the app has
    /// `maxEditRequestsPerApp` pending. Identical requests are one.
    /// Returns whether a new request was recorded.
    @discardableResult
    public func recordEditRequest(app: AppID, rowID: Int64) throws -> Bool {
        // Requests change no view: no bell, no change-log row (see `recordRequest`).
        try quietWrite { db in
            guard let record = try Library.fetchApp(db, app), !record.options.preventPrompt else { return false }
            guard case .needsConsent = try Library.editDecision(db, app: app, rowID: rowID, access: .readWrite) else { return false }
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM requests WHERE app_id = ? AND kind = 'edit' AND asset_rowid = ?",
                                 arguments: [app.rawValue, rowID]) != nil { return false }
            let pending = try Int.fetchOne(db, sql: "SELECT count(*) FROM requests WHERE app_id = ? AND kind = 'edit'",
                                           arguments: [app.rawValue]) ?? 0
            if pending >= Library.maxEditRequestsPerApp { return false }
            try db.execute(sql: "INSERT INTO requests (app_id, kind, reason, created_at, asset_rowid) VALUES (?, 'edit', '', ?, ?)",
                           arguments: [app.rawValue, Library.now(), rowID])
            return true
        }
    }

    /// The person's consent to edits of these assets by this app (`grant APP --edit`), ahead of
    /// time or answering the app's `edit` requests (which it clears). Cloud-shared assets are
    /// refused (nobody edits them: `AppContext.grantRefusal`). Idempotent; all or nothing.
    @discardableResult
    public func grantEdit(_ app: AppID, _ refs: [String]) throws -> GrantOutcome {
        try write { db in
            let record = try Library.ensureApp(db, app)
            let assets = try Library.resolve(db, refs)
            try Library.refuseGrants(db, record, assets, .edit)
            let insert = try db.cachedStatement(sql: "INSERT INTO edit_consents (app_id, asset_rowid, granted_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING")
            let answer = try db.cachedStatement(sql: "DELETE FROM requests WHERE app_id = ? AND kind = 'edit' AND asset_rowid = ?")
            var changed = 0
            let now = Library.now()
            for a in assets {
                try insert.execute(arguments: [app.rawValue, a.rowID, now])
                if db.changesCount > 0 {
                    changed += 1
                    try Library.record(db, .editGrant, app: app.rawValue, asset: a.rowID)
                }
                try answer.execute(arguments: [app.rawValue, a.rowID])
            }
            return GrantOutcome(changed: changed, unchanged: assets.count - changed)
        }
    }

    /// Takes edit consents back (`revoke APP --edit`). Versions already made stay.
    @discardableResult
    public func revokeEdit(_ app: AppID, _ refs: [String]) throws -> GrantOutcome {
        try write { db in
            _ = try Library.requireApp(db, app)
            let assets = try Library.resolve(db, refs)
            let delete = try db.cachedStatement(sql: "DELETE FROM edit_consents WHERE app_id = ? AND asset_rowid = ?")
            var changed = 0
            for a in assets {
                try delete.execute(arguments: [app.rawValue, a.rowID])
                if db.changesCount > 0 {
                    changed += 1
                    try Library.record(db, .editRevoke, app: app.rawValue, asset: a.rowID)
                }
            }
            return GrantOutcome(changed: changed, unchanged: assets.count - changed)
        }
    }

    /// The assets an app has per-asset edit consent for, in capture order.
    public func editConsents(_ app: AppID) throws -> [Asset] {
        try read { db in
            _ = try Library.requireApp(db, app)
            return try Row.fetchAll(db, sql: """
                SELECT \(Library.assetColumns) FROM assets
                WHERE rowid IN (SELECT asset_rowid FROM edit_consents WHERE app_id = ?) ORDER BY capture_date, rowid
                """, arguments: [app.rawValue]).map(Library.asset)
        }
    }

    // MARK: versions

    /// The stored path of the asset's current version (store or reference), for copy-on-write
    /// opens, and whether it is a referenced original (outside the store: to be opened with no
    /// symbolic link on its path).
    public func currentOriginal(rowID: Int64) throws -> (path: String, reference: Bool) {
        try read { db in
            guard let r = try Row.fetchOne(db, sql: "SELECT store_path, reference_path, id FROM assets WHERE rowid = ?", arguments: [rowID]) else {
                throw LibraryError.unknownAssets([String(rowID)])
            }
            if let ref: String = r[1] { return (ref, true) }
            return (try storeFile((r[0] as String?) ?? "", of: r[2]), false)
        }
    }

    /// A complete temp file (already fsynced by the caller) becomes the new current version of
    /// `rowID`, atomically:
    /// - it is validated as media (`LibraryError.badInput` if not: nothing changes, the temp stays
    ///   the caller's); another media kind than the original's is fine;
    /// - hashed and scanned: kind, capture date (the file's own, else the original's), has-location
    ///   and the redaction plan are this version's;
    /// - a `versions` row (and, at the first edit, the original's, version 0) and the asset row's
    ///   new facts commit in one transaction, with a `version` change in the change log (mounts
    ///   patch the row) and `updated` in the history of every app that sees the asset;
    /// - the log is synced, then the temp is renamed into the store under a name of its own
    ///   (`<file id>.<ext>`, the file id being the temp's 16-hex-digit name, so that
    ///   `StoreWriter.recover` finds a committed version's temp after a crash and rolls it forward).
    /// Same id, name, albums and grants. If the content's hash is the current one, nothing changes,
    /// `changed` is false and the temp is removed (unless it is the current version's own file,
    /// committed by an earlier call whose rename failed: then it moves into the store). No stored
    /// file is ever modified or deleted. On a throw the temp stays the caller's.
    /// Permission is the caller's to check (`editDecision`) when the file is opened. `knownHash`:
    /// asked after the scan, the file's content hash computed while it was written, or nil
    /// (hashed here). `alwaysNew`: a new version even when the content is the current one's.
    /// `requireConsent`: the app must still be allowed to edit the photo (`editDecision`), asked in
    /// the transaction that commits the version (a mount's save; not recovery, which commits what a
    /// close already saved). `basedOn`: the original's path of the version the edit was made
    /// from; another version current by the commit's transaction is a conflict (nothing saved).
    /// `dailyLimit`: what the app may have added in the last day, asked in the same transaction
    /// once the file is known to make a version (`PortError.overDailyLimit`, nothing saved): saves
    /// at once can no longer each find room that the others take.
    public func commitVersion(rowID: Int64, app: AppID, tempPath: String, fd: Int32,
                              knownHash: (() -> String?)? = nil, alwaysNew: Bool = false,
                              requireConsent: Bool = false, basedOn: String? = nil,
                              dailyLimit: DailyLimit? = nil) throws -> (asset: Asset, changed: Bool) {
        let (scan, size, _) = try StoreWriter.scan(fd: fd)
        CloseTrace.mark("scan")
        let hash = try knownHash.flatMap { $0() } ?? StoreWriter.hash(fd: fd, size: size)
        CloseTrace.mark("hash")
        var temp = tempPath
        let base = (tempPath as NSString).lastPathComponent
        var fileID = String(base.prefix { $0 != "." })
        if !Library.isFileID(fileID) {
            // Recovery knows a temp by its name: give it one (durably: the row will name it).
            fileID = StoreWriter.randomID()
            let renamed = (tempPath as NSString).deletingLastPathComponent + "/\(fileID).version"
            guard rename(tempPath, renamed) == 0 else { throw StoreWriter.ioError(errno, "rename \(tempPath)") }
            fsyncDirectory(of: renamed)
            temp = renamed
        }
        let rel = StoreWriter.storeRelativePath(id: fileID, kind: scan.kind)
        var blob: Data? = nil, refusal: String? = nil
        switch scan.redaction {
        case .plan(let p): blob = Data(p.serialized())
        case .refuse(let why): refusal = why
        }
        let committed: (Asset, Bool, saved: Bool)
        do {
            committed = try commitVersionRow(rowID: rowID, app: app, fileID: fileID, rel: rel, scan: scan, size: size, hash: hash,
                                             redaction: blob, refusal: refusal, alwaysNew: alwaysNew, requireConsent: requireConsent,
                                             basedOn: basedOn, dailyLimit: dailyLimit)
        } catch {
            // Saved or not, not known (see CommitOutcomeUnknown): a temp renamed to its file id
            // stays so named, for recovery to move in if the row is there, else delete. Given back
            // under its old name, a retry named it anew, and the row of the first try named a
            // store file that never came.
            if temp != tempPath && !(error is CommitOutcomeUnknown) { rename(temp, tempPath) }   // the temp stays the caller's, where it was
            throw error
        }
        let (asset, changed, saved) = committed
        CloseTrace.mark("catalog")
        // Durable before the file is told saved (and before its marker goes: should the log be
        // gone, the temp file stays as it was, for the next mount's recovery).
        try syncLog()
        CloseTrace.mark("logsync")
        _ = pg_fremovexattr(fd, ReadyMarker.xattr)
        unlink(temp + ".ready")
        guard changed else {
            // Same content as the current version, or saved already. If a version is this very
            // file (a retry after its row committed but its rename failed, or after its commit's
            // answer was lost), it still has to move into the store, current or not by now.
            let dest = paths.store + "/" + rel
            if (saved || asset.storePath == rel) && Glibc.access(dest, F_OK) != 0 {
                try? StoreWriter.install(self, tempPath: temp, storePath: rel, durable: false)   // else recovery moves it
            } else {
                unlink(temp)
            }
            return (asset, false)
        }
        // As for new files: the row is durable before the file moves; a lost rename is redone by
        // recovery, which finds the version by its file id (synced above).
        try? StoreWriter.install(self, tempPath: temp, storePath: rel, durable: false)   // else recovery moves it
        CloseTrace.mark("store")
        return (asset, true)
    }

    /// The transaction of `commitVersion`: the version row (and the original's, at the first edit)
    /// and the asset's new facts, or nothing when the content is the current version's.
    private func commitVersionRow(rowID: Int64, app: AppID, fileID: String, rel: String, scan: MediaScan, size: UInt64,
                                  hash: String, redaction blob: Data?, refusal: String?, alwaysNew: Bool,
                                  requireConsent: Bool, basedOn: String?, dailyLimit: DailyLimit?) throws -> (Asset, Bool, saved: Bool) {
        try write { db -> (Asset, Bool, saved: Bool) in
            CloseTrace.mark("queue")
            // This very file's version, committed by an earlier try whose answer never came (the
            // connection to a catalog's server cut while it committed: issue 41): saved already,
            // nothing new now, the file still to be moved into the store. Asked first: the checks
            // below would now refuse it (the current version is no longer the one it was made
            // from), and the caller would delete the only copy of the version the catalog names.
            if let asset = try Int64.fetchOne(db, sql: "SELECT asset_rowid FROM versions WHERE file_id = ?", arguments: [fileID]) {
                return (try Library.assetRow(db, asset), false, true)
            }
            // Asked again here, in the commit's own transaction: consent withdrawn (or the photo
            // revoked, the app denied) after the mount's check still saved the version.
            if requireConsent, !(try Library.editDecision(db, app: app, rowID: rowID, access: .readWrite)).isAllowed {
                throw LibraryError.conflict("the app may no longer edit this photo (its consent was withdrawn, or the photo revoked, meanwhile)")
            }
            guard let current = try Row.fetchOne(db, sql: "SELECT content_hash, byte_size, store_path, reference_path, id FROM assets WHERE rowid = ?",
                                                 arguments: [rowID]) else {
                throw LibraryError.unknownAssets([String(rowID)])
            }
            // Made from the version that is still current, asked in this transaction: the view
            // may not have seen another app's save yet, and these bytes would undo it.
            if let basedOn {
                let path = try (current[3] as String?) ?? storeFile((current[2] as String?) ?? "", of: current[4])
                if path != basedOn {
                    throw LibraryError.conflict("another version of this photo was saved meanwhile (by another app or the person); this edit was made from the one before")
                }
            }
            if !alwaysNew && (current[0] as String) == hash && (current[1] as Int64) == Int64(size) {
                return (try Library.assetRow(db, rowID), false, false)
            }
            try Library.askDailyLimit(db, dailyLimit, app: app, size: size)
            try Library.ensureApp(db, app)
            try Library.ensureOriginalVersion(db, rowID)
            let next = (try Int.fetchOne(db, sql: "SELECT max(version) FROM versions WHERE asset_rowid = ?", arguments: [rowID]) ?? 0) + 1
            let originalCapture = try Double.fetchOne(db, sql: "SELECT capture_date FROM versions WHERE asset_rowid = ? AND version = 0",
                                                      arguments: [rowID]) ?? 0
            let capture = scan.captureDate?.timeIntervalSince1970 ?? originalCapture
            try db.execute(sql: """
                INSERT INTO versions (asset_rowid, version, app_id, created_at, file_id, media_kind, media_class, byte_size,
                    content_hash, capture_date, has_location, store_path, reference_path, redaction, redaction_refusal, redaction_version)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?)
                """, arguments: [rowID, next, app.rawValue, Library.now(), fileID, scan.kind.rawValue,
                                 scan.kind.isVideo ? "video" : "photo", Int64(size), hash, capture, scan.hasLocation, rel,
                                 blob, refusal, MediaScanner.version])
            try Library.makeCurrent(db, rowID, version: next, by: app.rawValue)
            return (try Library.assetRow(db, rowID), true, false)
        }
    }

    /// The versions of an asset, original first, and the asset.
    public func versions(_ ref: String) throws -> (asset: Asset, versions: [AssetVersion]) {
        try read { db in
            guard let a = try Library.resolve(db, [ref]).first else { throw LibraryError.unknownAssets([ref]) }
            return (a, try Library.versions(db, a.rowID))
        }
    }

    static func versions(_ db: Database, _ rowID: Int64) throws -> [AssetVersion] {
        let current = try Int.fetchOne(db, sql: "SELECT current_version FROM assets WHERE rowid = ?", arguments: [rowID]) ?? 0
        var rows = try Row.fetchAll(db, sql: """
            SELECT version, app_id, created_at, media_kind, byte_size, content_hash, capture_date, has_location, store_path, reference_path
            FROM versions WHERE asset_rowid = ? ORDER BY version
            """, arguments: [rowID])
        if rows.isEmpty {
            // Never edited: the asset row is the original.
            rows = try Row.fetchAll(db, sql: """
                SELECT 0, owner_app, added_at, media_kind, byte_size, content_hash, capture_date, has_location, store_path, reference_path
                FROM assets WHERE rowid = ?
                """, arguments: [rowID])
        }
        return rows.map { r in
            AssetVersion(version: r[0], app: (r[1] as String?).flatMap(AppID.init), date: Date(timeIntervalSince1970: r[2]),
                         mediaKind: r[3], byteSize: UInt64(r[4] as Int64), contentHash: r[5],
                         captureDate: Date(timeIntervalSince1970: r[6]), hasLocation: r[7], isCurrent: (r[0] as Int) == current,
                         storePath: r[8], referencePath: r[9])
        }
    }

    /// Makes an older version current again: by default the original ("Revert to Original").
    /// The edits stay listed (and their files stay in the store): `revert --to N` can bring one
    /// back. Every mount sees the change (`version` in the change log) and the history of every
    /// app that sees the asset records `updated`. Capture date, has-location and the redaction plan
    /// are the version's. Reverting to the current version changes nothing (`changed` false).
    @discardableResult
    public func revert(_ ref: String, to version: Int = 0) throws -> (asset: Asset, changed: Bool) {
        try write { db in
            guard let a = try Library.resolve(db, [ref]).first else { throw LibraryError.unknownAssets([ref]) }
            let current = try Int.fetchOne(db, sql: "SELECT current_version FROM assets WHERE rowid = ?", arguments: [a.rowID]) ?? 0
            if current == version { return (a, false) }
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM versions WHERE asset_rowid = ? AND version = ?",
                                    arguments: [a.rowID, version]) != nil else {
                let last = try Int.fetchOne(db, sql: "SELECT max(version) FROM versions WHERE asset_rowid = ?", arguments: [a.rowID]) ?? 0
                throw LibraryError.invalid("'\(a.displayName)' has no version \(version) (its versions are 0 to \(last))")
            }
            try Library.makeCurrent(db, a.rowID, version: version, by: nil)
            return (try Library.assetRow(db, a.rowID), true)
        }
    }

    // MARK: helpers

    static func isFileID(_ s: String) -> Bool {
        s.utf8.count == 16 && s.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    static func assetRow(_ db: Database, _ rowID: Int64) throws -> Asset {
        guard let r = try Row.fetchOne(db, sql: "SELECT \(assetColumns) FROM assets WHERE rowid = ?", arguments: [rowID]) else {
            throw LibraryError.unknownAssets([String(rowID)])
        }
        return asset(r)
    }

    /// Writes version 0 (the original, as the asset row describes it) before the first edit.
    static func ensureOriginalVersion(_ db: Database, _ rowID: Int64) throws {
        try db.execute(sql: """
            INSERT INTO versions (asset_rowid, version, app_id, created_at, file_id, media_kind, media_class, byte_size,
                content_hash, capture_date, has_location, store_path, reference_path, redaction, redaction_refusal, redaction_version)
            SELECT rowid, 0, owner_app, added_at, NULL, media_kind, media_class, byte_size, content_hash, capture_date, has_location,
                   store_path, reference_path, redaction, redaction_refusal, redaction_version
            FROM assets WHERE rowid = ? AND current_version = 0
            ON CONFLICT DO NOTHING
            """, arguments: [rowID])
    }

    /// Points the asset row at one of its versions: its facts become the asset's, in the same
    /// transaction as the change log entry and every app's `updated`.
    static func makeCurrent(_ db: Database, _ rowID: Int64, version: Int, by app: String?) throws {
        try ViewDelta.tracking(db, [rowID], updated: [rowID]) {
            try db.execute(sql: """
                UPDATE assets SET (media_kind, media_class, byte_size, content_hash, capture_date, has_location, store_path,
                                   reference_path, redaction, redaction_refusal, redaction_version, current_version) =
                    (SELECT media_kind, media_class, byte_size, content_hash, capture_date, has_location, store_path,
                            reference_path, redaction, redaction_refusal, redaction_version, version
                     FROM versions WHERE asset_rowid = ? AND version = ?)
                WHERE rowid = ?
                """, arguments: [rowID, version, rowID])
            // A version with another capture date or kind may join or leave a set grant.
            try refreshSetSelections(db, [rowID])
        }
        try record(db, .version, app: app, asset: rowID, detail: String(version))
    }
}

extension Library {
    /// A `--reference` original edited in place by another program, accepted by the person
    /// (`import --reference` of its path again): its content now is a new version of the same
    /// asset (id, name, albums, grants kept), read from the same file. The earlier versions' bytes
    /// were that file's and are gone: a revert to one is refused as a changed original is. The
    /// asset's added date moves to now, the moment the reference is checked against from then on
    /// (`OriginalCheck`: a referenced original changed after it is refused).
    static func acceptChangedReference(_ db: Database, _ a: Asset, facts: NewAssetFacts, path: String) throws -> Asset {
        try ensureOriginalVersion(db, a.rowID)
        let next = (try Int.fetchOne(db, sql: "SELECT max(version) FROM versions WHERE asset_rowid = ?", arguments: [a.rowID]) ?? 0) + 1
        let originalCapture = try Double.fetchOne(db, sql: "SELECT capture_date FROM versions WHERE asset_rowid = ? AND version = 0",
                                                  arguments: [a.rowID]) ?? 0
        let scan = facts.scan
        var blob: Data? = nil, refusal: String? = nil
        switch scan.redaction {
        case .plan(let p): blob = Data(p.serialized())
        case .refuse(let why): refusal = why
        }
        try db.execute(sql: """
            INSERT INTO versions (asset_rowid, version, app_id, created_at, file_id, media_kind, media_class, byte_size,
                content_hash, capture_date, has_location, store_path, reference_path, redaction, redaction_refusal, redaction_version)
            VALUES (?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?)
            """, arguments: [a.rowID, next, now(), StoreWriter.randomID(), scan.kind.rawValue, scan.kind.isVideo ? "video" : "photo", Int64(facts.byteSize),
                             facts.contentHash, scan.captureDate?.timeIntervalSince1970 ?? originalCapture, scan.hasLocation, path,
                             blob, refusal, MediaScanner.version])
        try db.execute(sql: "UPDATE assets SET added_at = (SELECT max(v) FROM (SELECT added_at AS v UNION ALL SELECT ?) AS t) WHERE rowid = ?", arguments: [now(), a.rowID])
        try makeCurrent(db, a.rowID, version: next, by: nil)
        return try assetRow(db, a.rowID)
    }
}

extension Library {
    /// Whether the store file at `rel` is there with this size (a cheap look: no hash).
    func storeFileIsWhole(_ rel: String, size: UInt64) -> Bool {
        var st = stat()
        return lstat(paths.store + "/" + rel, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG && UInt64(st.st_size) == size
    }
}
