import Foundation
import GRDB
import GRDBSQLite
import PhotoLibrary

/// The one reader of `AssetFacts` (issue 17): one query shape, for one asset, a few, or every
/// asset, that returns each asset's columns (`Library.assetColumns`) followed by its facts for one
/// app. The mount's view build steps it with the SQLite C API in a tight loop (no Row, no String
/// per value); `explain`, edit decisions, the history and name resolution read it through
/// `Library.facts`. What the facts mean is `AppContext.decide`'s business, never this reader's.
enum FactsReader {
    /// Where the facts are, after the asset columns (`Library.AssetColumn`).
    static let owned = Int32(Library.AssetColumn.allCases.count), selectionStrip = owned + 1, pickStrip = owned + 2, consent = owned + 3
    /// Whether the current version is a HEIF image (from the table's column: a lean view reads
    /// the media kind column as NULL, this fact all the same).
    static let heif = owned + 4
    static let shared = Library.AssetColumn.isShared.rawValue, trashed = Library.AssetColumn.trashedAt.rawValue
    static let hasLocation = Library.AssetColumn.hasLocation.rawValue

    /// The statement: `columns` are the asset columns as the caller wants them (prefixed `a.`,
    /// some possibly NULL), `filter` a condition on `a` (argument `:app` is the app's id).
    /// `withConsent`: read edit consents (visibility checks of many assets do not need them).
    /// `order`: the rows' order (by row id unless said).
    /// `everyApp`: the facts for every app of the library at once, one row per app and asset,
    /// the app's id after the facts (`everyAppID`): the app is `ap.id` where it is `:app` otherwise.
    static func sql(columns: String, filter: String, withConsent: Bool = true, order: String = "a.rowid", everyApp: Bool = false) -> String {
        let app = everyApp ? "ap.id" : ":app"
        return """
        SELECT \(columns), CASE WHEN a.owner_app = \(app) THEN 1 ELSE 0 END, s.strip_location, p.strip_location, \
        \(withConsent ? "CASE WHEN EXISTS (SELECT 1 FROM edit_consents e WHERE e.app_id = \(app) AND e.asset_rowid = a.rowid) THEN 1 ELSE 0 END" : "0"), \
        CASE WHEN a.media_kind = 'heif' THEN 1 ELSE 0 END\(everyApp ? ", ap.id" : "")
        FROM assets a\(everyApp ? " CROSS JOIN apps ap" : "")
        LEFT JOIN selections s ON s.app_id = \(app) AND s.asset_rowid = a.rowid
        LEFT JOIN picks p ON p.app_id = \(app) AND p.asset_rowid = a.rowid
        WHERE \(filter) ORDER BY \(order)
        """
    }

    /// Where an `everyApp` statement has the app's id.
    static let everyAppID = Int(heif) + 1

    /// The asset columns in their places (`Library.AssetColumn`), those not in `wanted` NULL: for
    /// a reader that needs a few of them besides the facts (which need the row id, location,
    /// shared and trashed columns: they are always read).
    static func columns(_ wanted: Set<Library.AssetColumn>) -> String {
        let needed = wanted.union([.rowid, .hasLocation, .isShared, .trashedAt])
        return Library.AssetColumn.allCases.map { needed.contains($0) ? "a." + $0.name : "NULL" }.joined(separator: ", ")
    }

    /// A condition on `a` (argument `:app`) that holds for exactly the assets `candidates` admits:
    /// the view build's pre-filter (`ViewPolicy.candidates`, where it is kept beside the rule).
    static func condition(_ candidates: ViewPolicy.Candidates) -> String {
        var parts: [String] = []
        if candidates.untrashed { parts.append("a.trashed_at IS NULL") }
        if let ties = candidates.ties {
            if ties.isEmpty { return "1 = 0" }
            let sources = ViewPolicy.Candidates.Tie.allCases.filter(ties.contains).map { tie in
                switch tie {
                case .selected: return "SELECT asset_rowid FROM selections WHERE app_id = :app"
                case .picked: return "SELECT asset_rowid FROM picks WHERE app_id = :app"
                case .owned: return "SELECT rowid FROM assets WHERE owner_app = :app"
                }
            }
            parts.append("a.rowid IN (\(sources.joined(separator: " UNION ")))")
        }
        return parts.isEmpty ? "1 = 1" : parts.joined(separator: " AND ")
    }

    /// One app's selections and picks (row id -> strip-location) and edit consents, read once.
    /// The view build of a whole library steps every asset: joining both tables per row cost two
    /// index probes an asset (62% of a million-asset mount's build); an app's grants are few, a
    /// lookup is cheap.
    struct Grants {
        var selections: [Int64: Bool] = [:]
        var picks: [Int64: Bool] = [:]
        var consents: Set<Int64> = []

        static func read(_ db: Database, app: AppID) throws -> Grants {
            var g = Grants()
            for row in try Row.fetchAll(db, sql: "SELECT asset_rowid, strip_location FROM selections WHERE app_id = ?", arguments: [app.rawValue]) {
                g.selections[row[0]] = (row[1] as Int64) != 0
            }
            for row in try Row.fetchAll(db, sql: "SELECT asset_rowid, strip_location FROM picks WHERE app_id = ?", arguments: [app.rawValue]) {
                g.picks[row[0]] = (row[1] as Int64) != 0
            }
            for rowID in try Int64.fetchAll(db, sql: "SELECT asset_rowid FROM edit_consents WHERE app_id = ?", arguments: [app.rawValue]) {
                g.consents.insert(rowID)
            }
            return g
        }
    }

    /// `sql` without the joins: the grant columns are NULL and the consent 0, for
    /// `facts(_:grants:)` to fill in from `Grants`.
    static func sqlUnjoined(columns: String, filter: String) -> String {
        "SELECT \(columns), CASE WHEN a.owner_app = :app THEN 1 ELSE 0 END, NULL, NULL, 0, CASE WHEN a.media_kind = 'heif' THEN 1 ELSE 0 END FROM assets a WHERE \(filter) ORDER BY a.rowid"
    }

    static let allColumns = Library.assetColumns.split(separator: ",")
        .map { "a." + $0.trimmingCharacters(in: .whitespacesAndNewlines) }.joined(separator: ", ")

    /// The facts of one row, given how to read its integer columns and which are NULL.
    @inline(__always)
    static func facts(int: (Int32) -> Int64, isNull: (Int32) -> Bool) -> AssetFacts {
        let selected = !isNull(selectionStrip), picked = !isNull(pickStrip)
        return AssetFacts(isShared: int(shared) != 0, isTrashed: !isNull(trashed), isOwned: int(owned) != 0,
                          isSelected: selected, isPicked: picked,
                          selectionStripsLocation: selected && int(selectionStrip) != 0,
                          pickStripsLocation: picked && int(pickStrip) != 0,
                          editConsent: int(consent) != 0, hasLocation: int(hasLocation) != 0, isHEIF: int(heif) != 0)
    }

    /// The facts of the row `h` stands on (the view build's loop).
    @inline(__always)
    static func facts<C: ColumnSource>(_ h: C) -> AssetFacts {
        facts(int: { h.int($0) }, isNull: { h.isNull($0) })
    }

    /// The facts of the row `h` of a `sqlUnjoined` statement stands on, its grants from `grants`.
    @inline(__always)
    static func facts<C: ColumnSource>(_ h: C, rowID: Int64, grants: Grants) -> AssetFacts {
        let selection = grants.selections.isEmpty ? nil : grants.selections[rowID]
        let pick = grants.picks.isEmpty ? nil : grants.picks[rowID]
        return facts(int: { c in
            switch c {
            case selectionStrip: return selection == true ? 1 : 0
            case pickStrip: return pick == true ? 1 : 0
            case consent: return grants.consents.contains(rowID) ? 1 : 0
            default: return h.int(c)
            }
        }, isNull: { c in
            switch c {
            case selectionStrip: return selection == nil
            case pickStrip: return pick == nil
            default: return h.isNull(c)
            }
        })
    }

    /// The facts of a fetched row.
    static func facts(_ row: Row) -> AssetFacts {
        facts(int: { (row[Int($0)] as Int64?) ?? 0 }, isNull: { row.hasNull(atIndex: Int($0)) })
    }

    /// Steps a statement made from `sql` and calls `body` on each row.
    static func each(_ db: Database, _ statement: Statement, _ body: (OpaquePointer) throws -> Void) throws {
        let h = statement.sqliteStatement
        defer { sqlite3_reset(h) }
        while true {
            let rc = sqlite3_step(h)
            if rc == SQLITE_DONE { return }
            guard rc == SQLITE_ROW else {
                throw DatabaseError(resultCode: ResultCode(rawValue: rc), message: String(cString: sqlite3_errmsg(db.sqliteConnection)))
            }
            try body(h)
        }
    }
}

extension Library {
    /// The facts of assets for one app, in row id order: these row ids (unknown ones are left
    /// out), or every asset when nil.
    static func facts(_ db: Database, app: AppID, rowIDs: [Int64]?) throws -> [(asset: Asset, facts: AssetFacts)] {
        guard let rowIDs else { return try facts(db, app: app, filter: "1 = 1") }
        return try facts(db, app: app, filter: "a.rowid IN (\(Library.boundList(db, "only")))", arguments: ["only": Library.rowIDsJSON(rowIDs)])
    }

    /// The facts of the assets a condition on `a` selects (its named arguments besides `:app`).
    /// Every filter's text is one of a few that do not change (values are bound), so the
    /// statement is cached (a commit asks through `renamedInView`).
    static func facts(_ db: Database, app: AppID, filter: String, arguments: StatementArguments = [:]) throws -> [(asset: Asset, facts: AssetFacts)] {
        var args: StatementArguments = ["app": app.rawValue]
        _ = args.append(contentsOf: arguments)
        let rows = try Row.fetchCursor(db.cachedStatement(sql: FactsReader.sql(columns: FactsReader.allColumns, filter: filter)), arguments: args)
        var out: [(asset: Asset, facts: AssetFacts)] = []
        while let row = try rows.next() { out.append((Library.asset(row), FactsReader.facts(row))) }
        return out
    }

    /// The facts only (no asset values), by row id: for visibility checks of many assets.
    static func factsOnly(_ db: Database, app: AppID, rowIDs: [Int64]) throws -> [Int64: AssetFacts] {
        let columns = FactsReader.columns([])
        var out: [Int64: AssetFacts] = [:]
        // The ids bound (a JSON array), so the statement is prepared once per connection.
        let statement = try db.cachedStatement(sql: FactsReader.sql(columns: columns, filter: "a.rowid IN (\(Library.boundList(db, "only")))",
                                                                    withConsent: false))
        let rows = try Row.fetchCursor(statement, arguments: ["app": app.rawValue, "only": Library.rowIDsJSON(rowIDs)])
        while let row = try rows.next() { out[row[0]] = FactsReader.facts(row) }
        return out
    }

    /// The facts only, for every app of the library at once (one statement, not one per app:
    /// every new photo's commit asks, for every app, inside its write transaction): `body` is
    /// called with each app's id, row id and facts (unknown row ids are left out).
    static func factsOfEveryApp(_ db: Database, rowIDs: [Int64], _ body: (String, Int64, AssetFacts) throws -> Void) throws {
        let statement = try db.cachedStatement(sql: FactsReader.sql(columns: FactsReader.columns([]), filter: "a.rowid IN (\(Library.boundList(db, "only")))",
                                                                    withConsent: false, everyApp: true))
        let rows = try Row.fetchCursor(statement, arguments: ["only": Library.rowIDsJSON(rowIDs)])
        while let row = try rows.next() { try body(row[FactsReader.everyAppID], row[0], FactsReader.facts(row)) }
    }

    /// The facts of one asset for one app, or nil when there is no such asset.
    static func facts(_ db: Database, app: AppID, rowID: Int64) throws -> AssetFacts? {
        let statement = try db.cachedStatement(sql: FactsReader.sql(columns: FactsReader.allColumns, filter: "a.rowid = :row"))
        return try Row.fetchOne(statement, arguments: ["app": app.rawValue, "row": rowID]).map(FactsReader.facts)
    }

    /// How the app stands at `access`: its status and options, for `AppContext.decide`.
    static func context(_ app: AppRecord, _ access: AccessLevel) -> AppContext {
        AppContext(access: access, status: app.status(for: access), options: app.options)
    }

    /// How the app `id` stands at `access`, known to the library or not (`AppContext.unknownApp`).
    static func context(_ db: Database, _ id: AppID, _ access: AccessLevel) throws -> AppContext {
        try fetchApp(db, id).map { context($0, access) } ?? .unknownApp(access)
    }
}

/// The columns of the row a view build stands on: SQLite's statement (the C API, no Row and no
/// String per value: a mount of a million assets reads them all) or a fetched row (a server's).
protocol ColumnSource {
    func int(_ c: Int32) -> Int64
    func double(_ c: Int32) -> Double
    func isNull(_ c: Int32) -> Bool
    /// Calls `body` with the column's text (nil for NULL); its bytes last only as long as the call.
    func withText<T>(_ c: Int32, _ body: (UnsafePointer<UInt8>?, Int) throws -> T) throws -> T
}

struct SQLiteColumns: ColumnSource {
    let h: OpaquePointer
    let connection: OpaquePointer?
    @inline(__always) func int(_ c: Int32) -> Int64 { sqlite3_column_int64(h, c) }
    @inline(__always) func double(_ c: Int32) -> Double { sqlite3_column_double(h, c) }
    @inline(__always) func isNull(_ c: Int32) -> Bool { sqlite3_column_type(h, c) == SQLITE_NULL }
    @inline(__always) func withText<T>(_ c: Int32, _ body: (UnsafePointer<UInt8>?, Int) throws -> T) throws -> T {
        // sqlite3_column_text before _bytes, as SQLite asks; nil for NULL (or out of memory).
        if let p = sqlite3_column_text(h, c) { return try body(p, Int(sqlite3_column_bytes(h, c))) }
        // A nil that is not NULL is SQLite out of memory (it then also says the value is NULL):
        // that must fail the view, not empty a path.
        guard sqlite3_errcode(connection) != SQLITE_NOMEM else { throw DatabaseError(resultCode: .SQLITE_NOMEM) }
        return try body(nil, 0)
    }
}

struct RowColumns: ColumnSource {
    let row: Row
    func int(_ c: Int32) -> Int64 { Int64(sqlValue: row.values[Int(c)]) ?? 0 }
    func double(_ c: Int32) -> Double { Double(sqlValue: row.values[Int(c)]) ?? 0 }
    func isNull(_ c: Int32) -> Bool { row.values[Int(c)].isNull }
    func withText<T>(_ c: Int32, _ body: (UnsafePointer<UInt8>?, Int) throws -> T) throws -> T {
        guard var s = String(sqlValue: row.values[Int(c)]) else { return try body(nil, 0) }
        return try s.withUTF8 { try body($0.baseAddress, $0.count) }
    }
}
