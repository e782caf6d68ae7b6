import Foundation
import GRDB
import PhotoLibrary
import Redaction
import PGSystem
#if canImport(Glibc)
import Glibc
#endif

extension Schema {
    /// v11: sidecars (issue 37), the files photo tools keep beside a photo (`photo.jpg.xmp`,
    /// `IMG_1.XMP`, `.pp3`, `.dop`, `.THM`, `.AAE`). A sidecar belongs to one asset, named after it
    /// (`form`: the photo's whole name and `ext`, or its name with the extension replaced by
    /// `ext`), so every view names it after the name it shows the photo under, and shows it only
    /// where it shows the photo. Each write that changes its content is a version of it (1, 2,
    /// 3...), a file of its own in the store (`file_id`, as an edit's); the newest is current. A
    /// version without a file (`store_path` NULL) is a removal (`rm`): the earlier ones stay.
    /// `photo_version` is the photo's current version when it was written.
    static func registerV11(_ m: inout DatabaseMigrator) {
        m.registerMigration("v11-sidecars") { g in let db = Database(sqlite: g)
            try db.execute(sql: """
                CREATE TABLE sidecars (
                    asset_rowid INTEGER NOT NULL REFERENCES assets(rowid) ON DELETE CASCADE,
                    form TEXT NOT NULL CHECK (form IN ('appended','replaced')),
                    ext TEXT NOT NULL CHECK (length(ext) BETWEEN 2 AND 17 AND substr(ext, 1, 1) = '.' AND instr(ext, '/') = 0),
                    version INTEGER NOT NULL CHECK (version >= 1),
                    app_id TEXT REFERENCES apps(id),
                    created_at REAL NOT NULL,
                    photo_version INTEGER NOT NULL DEFAULT 0,
                    file_id TEXT CHECK (file_id IS NULL OR length(file_id) = 16),
                    byte_size INTEGER NOT NULL DEFAULT 0 CHECK (byte_size BETWEEN 0 AND 16777216),
                    content_hash TEXT,
                    store_path TEXT,
                    has_location INTEGER NOT NULL DEFAULT 0 CHECK (has_location IN (0,1)),
                    redaction BLOB,
                    redaction_refusal TEXT,
                    CHECK ((store_path IS NULL) = (file_id IS NULL) AND (store_path IS NULL) = (content_hash IS NULL)),
                    PRIMARY KEY (asset_rowid, form, ext, version)
                ) WITHOUT ROWID;
                CREATE UNIQUE INDEX sidecars_by_file ON sidecars(file_id) WHERE file_id IS NOT NULL;
                """)
        }
    }
}

/// One version of a sidecar, as `photogate versions` lists it.
public struct SidecarVersion: Equatable, Sendable {
    public var key: SidecarKey
    /// The sidecar's name beside the photo's display name.
    public var name: String
    public var version: Int
    public var app: AppID?
    public var date: Date
    /// The photo's version current when it was written.
    public var photoVersion: Int
    /// nil: this version removed the sidecar (`rm`).
    public var contentHash: String?
    public var byteSize: UInt64
    public var storePath: String?
    public var hasLocation: Bool
    public var isCurrent: Bool
}

extension Library {
    /// The current sidecars of `rowIDs` (nil: of every asset), by row id then key, for views.
    static func currentSidecars(_ db: Database, rowIDs: [Int64]?) throws -> [ViewSidecar] {
        var filter = ""
        var arguments: StatementArguments = [:]
        if let rowIDs {
            if rowIDs.isEmpty { return [] }
            // Bound, so that the text, and the statement cached for it, stay the same (mounts
            // ask at every change).
            filter = " AND s.asset_rowid IN (\(Library.boundList(db, "only")))"
            arguments = ["only": Library.rowIDsJSON(rowIDs)]
        }
        let rows = try Row.fetchAll(db.cachedStatement(sql: """
            SELECT s.asset_rowid, s.form, s.ext, s.version, s.file_id, s.byte_size, s.store_path, s.created_at, s.has_location,
                   s.redaction, s.redaction_refusal
            FROM sidecars s
            WHERE s.store_path IS NOT NULL\(filter)
              AND s.version = (SELECT max(version) FROM sidecars t WHERE t.asset_rowid = s.asset_rowid AND t.form = s.form AND t.ext = s.ext)
            ORDER BY s.asset_rowid, s.form, s.ext
            """), arguments: arguments)
        return rows.compactMap { r -> ViewSidecar? in
            guard let form = SidecarForm(rawValue: r[1]), let path: String = r[6], StorePath.isValid(path) else { return nil }
            let redaction: ViewSidecar.Redaction
            if let why: String = r[10] { redaction = .refuse(why) } else { redaction = .plan([UInt8]((r[9] as Data?) ?? Data())) }
            return ViewSidecar(key: SidecarKey(rowID: r[0], form: form, ext: r[2]), version: r[3], fileID: r[4], size: UInt64(r[5] as Int64),
                               storePath: path, date: Date(timeIntervalSince1970: r[7]), hasLocation: r[8], redaction: redaction)
        }
    }

    /// May `app` write (or remove) a sidecar of asset `rowID` through a mount at `access`? The
    /// asset's one edit decision (`ViewPolicy.sidecarDecision`): a sidecar is an edit of its photo.
    static func sidecarDecision(_ db: Database, app id: AppID, rowID: Int64, access: AccessLevel) throws -> EditDecision {
        guard let facts = try facts(db, app: id, rowID: rowID) else { throw LibraryError.unknownAssets([String(rowID)]) }
        let context = try context(db, id, access)
        return context.policy.sidecarDecision(facts, consented: facts.editConsent, editAny: context.options.editAny)
    }

    /// A complete temp file (fsynced by the caller) becomes the current content of a sidecar of
    /// `key.rowID`, as a new version of it; nothing changes when it holds the current content
    /// (`changed` false, the temp removed). Over `Sidecars.maxSize` is `badInput`; an app that
    /// may not edit the photo (`sidecarDecision`, asked in the transaction) is a `conflict`. The
    /// row is durable before the file moves into the store (`<ab>/<file id>.<ext>`), as for a
    /// version: recovery finds a committed sidecar's temp by its file id and moves it. Every
    /// running view of the photo shows the new sidecar, and every app that sees the photo gets
    /// `updated` in its history. `dailyLimit`: asked in the transaction, as `commitVersion` asks
    /// it. `alwaysNew`: a version even when the content is the current one's (as `commitVersion`).
    /// On a throw the temp stays the caller's.
    public func commitSidecar(_ key: SidecarKey, app: AppID, access: AccessLevel, tempPath: String, fd: Int32,
                              knownHash: (() -> String?)? = nil, dailyLimit: DailyLimit? = nil, alwaysNew: Bool = false) throws -> Bool {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw StoreWriter.ioError(errno, "stat") }
        let size = UInt64(st.st_size)
        guard size <= Sidecars.maxSize else {
            throw LibraryError.badInput("a sidecar of \(size) bytes is over the \(Sidecars.maxSize >> 20) MiB a library keeps")
        }
        guard Sidecars.extensions.contains(String(key.ext.dropFirst()).lowercased()) else {
            throw LibraryError.invalid("'\(key.ext)' is not a sidecar extension")
        }
        var bytes = [UInt8](repeating: 0, count: Int(size))
        let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, Int(size), 0) }
        guard n == Int(size) else { throw StoreWriter.ioError(n < 0 ? errno : EIO, "read \(tempPath)") }
        let hash = knownHash.flatMap { $0() } ?? {
            let h = SHA256()
            bytes.withUnsafeBytes { h.update($0) }
            return "sha256:" + hexString(h.finalize())
        }()
        let (hasLocation, redaction) = SidecarScanner.scan(bytes)
        var blob: Data? = nil, refusal: String? = nil
        switch redaction {
        case .plan(let p): blob = Data(p.serialized())
        case .refuse(let why): refusal = why
        }
        // The temp's own id when it has one (a mount names the sidecar's first inode after it).
        let base = String((tempPath as NSString).lastPathComponent.prefix { $0 != "." })
        let fileID = Library.isFileID(base) ? base : StoreWriter.randomID()
        let rel = "\(fileID.prefix(2))/\(fileID).\(String(key.ext.dropFirst()).lowercased())"
        // Recovery knows a committed sidecar's temp by its file id: its name is that id.
        let temp = (tempPath as NSString).deletingLastPathComponent + "/\(fileID).sidecar"
        guard rename(tempPath, temp) == 0 else { throw StoreWriter.ioError(errno, "rename \(tempPath)") }
        fsyncDirectory(of: temp)
        let changed: Bool
        do {
            changed = try write { db -> Bool in
                guard try Library.sidecarDecision(db, app: app, rowID: key.rowID, access: access).isAllowed else {
                    throw LibraryError.conflict("the app may not edit this photo, so not its sidecars either")
                }
                let current = try Row.fetchOne(db, sql: """
                    SELECT content_hash, version FROM sidecars WHERE asset_rowid = ? AND form = ? AND ext = ? ORDER BY version DESC LIMIT 1
                    """, arguments: [key.rowID, key.form.rawValue, key.ext])
                if !alwaysNew, let current, (current[0] as String?) == hash { return false }
                try Library.askDailyLimit(db, dailyLimit, app: app, size: size)
                let next = ((current?[1] as Int?) ?? 0) + 1
                try Library.ensureApp(db, app)
                try ViewDelta.tracking(db, [key.rowID], updated: [key.rowID]) {
                    try db.execute(sql: """
                        INSERT INTO sidecars (asset_rowid, form, ext, version, app_id, created_at, photo_version, file_id, byte_size,
                            content_hash, store_path, has_location, redaction, redaction_refusal)
                        VALUES (?, ?, ?, ?, ?, ?, (SELECT current_version FROM assets WHERE rowid = ?), ?, ?, ?, ?, ?, ?, ?)
                        """, arguments: [key.rowID, key.form.rawValue, key.ext, next, app.rawValue, Library.now(), key.rowID, fileID,
                                         Int64(size), hash, rel, hasLocation, blob, refusal])
                }
                try Library.record(db, .sidecar, app: app.rawValue, asset: key.rowID, detail: key.form.rawValue + " " + key.ext)
                return true
            }
        } catch {
            // Saved or not, not known (a catalog on a server whose COMMIT's answer was lost and
            // that could not be asked since): the temp stays under its file id, for the recovery
            // of this writer's folder (at its end, or the next one's) to move into the store if
            // the row is there, or delete. Given back, the caller deleted it: a row without its file.
            if error is CommitOutcomeUnknown { throw error }
            rename(temp, tempPath)   // the temp stays the caller's, where it was
            throw error
        }
        try syncLog()
        _ = pg_fremovexattr(fd, ReadyMarker.xattr)
        unlink(tempPath + ".ready")
        guard changed else {
            unlink(temp)
            return false
        }
        try? StoreWriter.install(self, tempPath: temp, storePath: rel, durable: false)   // else recovery moves it
        return true
    }

    /// Removes a sidecar (`rm` through a mount): a version without content; the earlier versions
    /// and their files stay. Returns false when there is none now.
    @discardableResult
    public func removeSidecar(_ key: SidecarKey, app: AppID, access: AccessLevel) throws -> Bool {
        try write { db -> Bool in
            guard try Library.sidecarDecision(db, app: app, rowID: key.rowID, access: access).isAllowed else {
                throw LibraryError.conflict("the app may not edit this photo, so not its sidecars either")
            }
            guard let current = try Row.fetchOne(db, sql: """
                SELECT store_path, version FROM sidecars WHERE asset_rowid = ? AND form = ? AND ext = ? ORDER BY version DESC LIMIT 1
                """, arguments: [key.rowID, key.form.rawValue, key.ext]), (current[0] as String?) != nil else { return false }
            try Library.ensureApp(db, app)
            try ViewDelta.tracking(db, [key.rowID], updated: [key.rowID]) {
                try db.execute(sql: """
                    INSERT INTO sidecars (asset_rowid, form, ext, version, app_id, created_at, photo_version)
                    VALUES (?, ?, ?, ?, ?, ?, (SELECT current_version FROM assets WHERE rowid = ?))
                    """, arguments: [key.rowID, key.form.rawValue, key.ext, (current[1] as Int) + 1, app.rawValue, Library.now(), key.rowID])
            }
            try Library.record(db, .sidecar, app: app.rawValue, asset: key.rowID, detail: key.form.rawValue + " " + key.ext)
            return true
        }
    }

    /// Every version of every sidecar of an asset, by sidecar then version.
    static func sidecarVersions(_ db: Database, _ a: Asset) throws -> [SidecarVersion] {
        let rows = try Row.fetchAll(db, sql: """
            SELECT form, ext, version, app_id, created_at, photo_version, content_hash, byte_size, store_path, has_location
            FROM sidecars WHERE asset_rowid = ? ORDER BY form, ext, version
            """, arguments: [a.rowID])
        var out: [SidecarVersion] = []
        for r in rows {
            guard let form = SidecarForm(rawValue: r[0]) else { continue }
            let key = SidecarKey(rowID: a.rowID, form: form, ext: r[1])
            out.append(SidecarVersion(key: key, name: key.name(besidePhoto: a.displayName), version: r[2],
                                      app: (r[3] as String?).flatMap(AppID.init), date: Date(timeIntervalSince1970: r[4]),
                                      photoVersion: r[5], contentHash: r[6], byteSize: UInt64(r[7] as Int64), storePath: r[8],
                                      hasLocation: r[9], isCurrent: false))
        }
        // The newest of each is current (when it has content).
        for i in out.indices where i == out.count - 1 || out[i + 1].key != out[i].key {
            out[i].isCurrent = out[i].contentHash != nil
        }
        return out
    }

    /// The sidecars of an asset and their versions (`photogate versions`).
    public func sidecarVersions(_ ref: String) throws -> [SidecarVersion] {
        try read { db in
            guard let a = try Library.resolve(db, [ref]).first else { throw LibraryError.unknownAssets([ref]) }
            return try Library.sidecarVersions(db, a)
        }
    }

    /// The store paths every sidecar version names (backup, verify, rebuild).
    static let sidecarStorePathsSQL = "SELECT store_path FROM sidecars WHERE store_path IS NOT NULL"
}
