import Foundation
import GRDB
import PhotoLibrary

extension AppRecord {
    init(row: Row) throws {
        let raw: String = row["id"]
        guard let id = AppID(raw) else { throw LibraryError.libraryDamaged("bad app id \(raw)") }
        self.init(id: id, readWrite: AuthorizationStatus(rawValue: row["rw_status"]) ?? .notDetermined,
                  addOnly: AuthorizationStatus(rawValue: row["ao_status"]) ?? .notDetermined,
                  options: AppOptions(stripLocation: row["strip_location"], preventPrompt: row["prevent_prompt"],
                                      editAny: (row["edit_any"] as Bool?) ?? false, compatible: (row["compatible"] as Bool?) ?? false),
                  secret: [UInt8]((row["secret"] as Data?) ?? Data(count: 16)),
                  createdAt: Date(timeIntervalSince1970: row["created_at"]))
    }
}

public struct RequestRecord: Equatable, Sendable {
    public var id: Int64
    public var app: AppID
    public var kind: RequestKind
    public var reason: String
    public var createdAt: Date
    /// The asset an `edit` request names (nil for the other kinds).
    public var asset: Asset? = nil
}

extension Library {
    /// Parses an app id, with the rule in the error.
    public static func appID(_ raw: String) throws -> AppID {
        guard let id = AppID(raw) else { throw LibraryError.invalidAppID(raw) }
        return id
    }

    static func fetchApp(_ db: Database, _ id: AppID) throws -> AppRecord? {
        // Cached: mounts read their app on every change.
        try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM apps WHERE id = ?"), arguments: [id.rawValue]).map(AppRecord.init(row:))
    }

    /// Apps are known from their first mention.
    @discardableResult
    static func ensureApp(_ db: Database, _ id: AppID) throws -> AppRecord {
        if let a = try fetchApp(db, id) { return a }
        var secret = [UInt8](repeating: 0, count: 16)
        var rng = SystemRandomNumberGenerator()
        for i in 0..<16 { secret[i] = UInt8.random(in: 0...255, using: &rng) }
        try db.execute(sql: "INSERT INTO apps (id, secret, created_at) VALUES (?, ?, ?)",
                       arguments: [id.rawValue, Data(secret), now()])
        try record(db, .app, app: id.rawValue)
        return try fetchApp(db, id)!
    }

    static func requireApp(_ db: Database, _ id: AppID) throws -> AppRecord {
        guard let a = try fetchApp(db, id) else { throw LibraryError.unknownApp(id.rawValue) }
        return a
    }

    public func app(_ id: AppID) throws -> AppRecord? { try read { db in try Library.fetchApp(db, id) } }
    public func requireApp(_ id: AppID) throws -> AppRecord { try read { db in try Library.requireApp(db, id) } }

    /// Registers the app if it is new (a mount, a grant or an authorization mentions it).
    @discardableResult
    public func registerApp(_ id: AppID) throws -> AppRecord {
        if let a = try app(id) { return a }
        return try write { db in try Library.ensureApp(db, id) }
    }

    public func apps() throws -> [AppRecord] {
        try read { db in try Row.fetchAll(db, sql: "SELECT * FROM apps ORDER BY id").map(AppRecord.init(row:)) }
    }

    /// Sets the app's status for one access level. Answers (and clears) its pending requests for
    /// that access level; a read-write answer also clears a picker request.
    @discardableResult
    public func authorize(_ id: AppID, access: AccessLevel, status: AuthorizationStatus) throws -> AppRecord {
        guard status.isValid(for: access) else {
            throw LibraryError.invalid("'limited' is a read-write status only (PhotoKit has no limited add-only access)")
        }
        return try write { db in
            let before = try Library.ensureApp(db, id)
            let column = access == .readWrite ? "rw_status" : "ao_status"
            try db.execute(sql: "UPDATE apps SET \(column) = ? WHERE id = ?", arguments: [status.rawValue, id.rawValue])
            var kinds = [access.rawValue]
            if access == .readWrite { kinds.append(RequestKind.picker.rawValue) }
            if status != .notDetermined {
                try db.execute(sql: "DELETE FROM requests WHERE app_id = ? AND kind IN (\(kinds.map { _ in "?" }.joined(separator: ",")))",
                               arguments: StatementArguments([id.rawValue] + kinds))
            }
            if before.status(for: access) != status {
                try Library.record(db, .status, app: id.rawValue, detail: "\(access.rawValue)=\(status.rawValue)")
                try ViewDelta.recordStatus(db, app: id.rawValue, detail: "\(access.rawValue)=\(status.rawValue)")
            }
            return try Library.fetchApp(db, id)!
        }
    }

    /// Sets an app's options. An unknown app is refused (`unknownApp`) unless `registering`.
    @discardableResult
    public func setOptions(_ id: AppID, stripLocation: Bool? = nil, preventPrompt: Bool? = nil, editAny: Bool? = nil,
                           compatible: Bool? = nil, registering: Bool = false) throws -> AppRecord {
        try write { db in
            let before = registering ? try Library.ensureApp(db, id) : try Library.requireApp(db, id)
            if let s = stripLocation {
                try db.execute(sql: "UPDATE apps SET strip_location = ? WHERE id = ?", arguments: [s, id.rawValue])
            }
            if let p = preventPrompt {
                try db.execute(sql: "UPDATE apps SET prevent_prompt = ? WHERE id = ?", arguments: [p, id.rawValue])
            }
            if let e = editAny {
                try db.execute(sql: "UPDATE apps SET edit_any = ? WHERE id = ?", arguments: [e, id.rawValue])
                // Consent to every asset answers the app's pending edit requests.
                if e { try db.execute(sql: "DELETE FROM requests WHERE app_id = ? AND kind = 'edit'", arguments: [id.rawValue]) }
            }
            if let c = compatible {
                try db.execute(sql: "UPDATE apps SET compatible = ? WHERE id = ?", arguments: [c, id.rawValue])
            }
            let after = try Library.fetchApp(db, id)!
            if after.options != before.options {
                try Library.record(db, .options, app: id.rawValue)
                try ViewDelta.recordStatus(db, app: id.rawValue,
                                           detail: "strip-location=\(after.options.stripLocation ? "on" : "off") prevent-prompt=\(after.options.preventPrompt ? "on" : "off") edit-any=\(after.options.editAny ? "on" : "off") compatible=\(after.options.compatible ? "on" : "off")")
            }
            return after
        }
    }

    // MARK: requests

    /// Pending requests one app may have of one kind (read-write, add-only, picker); edit
    /// requests have their own cap (`maxEditRequestsPerApp`).
    public static let maxPendingRequestsPerKind = 16

    /// Records a prompt. Identical pending requests are one request. Returns the request and
    /// whether it is new. An app with `maxPendingRequestsPerKind` pending requests of this kind
    /// gets `tooManyRequests` for a new one (issue 14: 3,000 distinct reasons made 3,000): the
    /// person still sees the first ones, unchanged, and answering them (`authorize`) clears
    /// them all. Requests change no view: recording one neither rings the bell nor appends to
    /// the change log, so no mount wakes for it (`photogate requests` reads the table).
    @discardableResult
    public func recordRequest(_ id: AppID, kind: RequestKind, reason: String = "") throws -> (RequestRecord, Bool) {
        // An edit request names an asset: only the library records one (`recordEditRequest`).
        if kind == .edit { throw LibraryError.invalid("an edit request names an asset: the mount records it when the app opens one for writing") }
        // A reason reaches the person's terminal (`photogate requests`, the picker's header): it
        // may not carry anything that steers a terminal or splits a line (issue 14).
        if DisplayName.containsUnsafe(reason) {
            throw LibraryError.invalid("a request reason may not hold control characters (newline, tab, ESC, C1) or bidirectional formatting characters")
        }
        let reason = String(reason.prefix(1024))
        var newApp = false
        let result = try quietWrite { db -> (RequestRecord, Bool) in
            // A new app is a change mounts follow (it is logged by ensureApp): ring for that.
            newApp = try Library.fetchApp(db, id) == nil
            try Library.ensureApp(db, id)
            let existing = try Row.fetchOne(db, sql: "SELECT * FROM requests WHERE app_id = ? AND kind = ? AND reason = ?",
                                            arguments: [id.rawValue, kind.rawValue, reason])
            if let row = existing { return (Library.request(row), false) }
            let pending = try Int.fetchOne(db, sql: "SELECT count(*) FROM requests WHERE app_id = ? AND kind = ?",
                                           arguments: [id.rawValue, kind.rawValue]) ?? 0
            if pending >= Library.maxPendingRequestsPerKind {
                throw LibraryError.tooManyRequests(app: id.rawValue, kind: kind.rawValue, limit: Library.maxPendingRequestsPerKind)
            }
            try db.execute(sql: "INSERT INTO requests (app_id, kind, reason, created_at) VALUES (?, ?, ?, ?)",
                           arguments: [id.rawValue, kind.rawValue, reason, Library.now()])
            let requestID = db.lastInsertedRowID
            let row = try Row.fetchOne(db, sql: "SELECT * FROM requests WHERE id = ?", arguments: [requestID])!
            return (Library.request(row), true)
        }
        if newApp { ringBell() }
        return result
    }

    static func request(_ row: Row) -> RequestRecord {
        RequestRecord(id: row["id"], app: AppID(row["app_id"])!, kind: RequestKind(rawValue: row["kind"]) ?? .readWrite,
                      reason: row["reason"], createdAt: Date(timeIntervalSince1970: row["created_at"]))
    }

    /// A request with the asset an `edit` request names.
    static func request(_ db: Database, _ row: Row) throws -> RequestRecord {
        var r = request(row)
        if let rowID: Int64 = row["asset_rowid"] {
            r.asset = try Row.fetchOne(db, sql: "SELECT \(assetColumns) FROM assets WHERE rowid = ?", arguments: [rowID]).map(asset)
        }
        return r
    }

    public func requests() throws -> [RequestRecord] {
        try read { db in try Row.fetchAll(db, sql: "SELECT * FROM requests ORDER BY id").map { try Library.request(db, $0) } }
    }

    public func request(id: Int64) throws -> RequestRecord {
        try read { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM requests WHERE id = ?", arguments: [id]) else {
                throw LibraryError.unknownRequest(String(id))
            }
            return try Library.request(db, row)
        }
    }

    public func removeRequest(id: Int64) throws {
        try write { db in
            try db.execute(sql: "DELETE FROM requests WHERE id = ?", arguments: [id])
            if db.changesCount == 0 { throw LibraryError.unknownRequest(String(id)) }
        }
    }
}
