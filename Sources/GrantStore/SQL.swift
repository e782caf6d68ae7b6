// The catalog's SQL, over one engine or another (issue 41): SQLite through GRDB, the embedded
// default, or PostgreSQL. GrantStore's code is written against these few types, named as GRDB
// names them (`Database`, `Row`, `Statement`, `StatementArguments`, `Int64.fetchOne(db, ...)`), so
// that one text of every query and transaction serves both engines; they shadow GRDB's inside
// this module. What only SQLite has (the C API's stepping of a view's rows, the write-ahead log's
// care) asks `db.sqlite` for GRDB's own connection and has another way where it is nil.
import Foundation
import GRDB

/// One value of a row or an argument, as both engines store them (SQLite's storage classes; the
/// PostgreSQL schema keeps to integers, doubles, text and bytes so that the same SQL holds).
public enum SQLValue: Sendable, Equatable, Hashable {
    case null
    case int(Int64)
    case double(Double)
    case text(String)
    case blob(Data)

    public var isNull: Bool { if case .null = self { return true } else { return false } }
}

/// A Swift value that is stored as an `SQLValue` and read back from one.
public protocol SQLConvertible {
    var sqlValue: SQLValue { get }
    /// Nil for NULL or a value of another kind that does not convert.
    init?(sqlValue: SQLValue)
}

extension Int64: SQLConvertible {
    public var sqlValue: SQLValue { .int(self) }
    public init?(sqlValue v: SQLValue) {
        switch v {
        case .int(let i): self = i
        case .double(let d): guard let i = Int64(exactly: d.rounded(.towardZero)) else { return nil }; self = i
        default: return nil
        }
    }
}

extension Int: SQLConvertible {
    public var sqlValue: SQLValue { .int(Int64(self)) }
    public init?(sqlValue v: SQLValue) { guard let i = Int64(sqlValue: v), let n = Int(exactly: i) else { return nil }; self = n }
}

extension Int32: SQLConvertible {
    public var sqlValue: SQLValue { .int(Int64(self)) }
    public init?(sqlValue v: SQLValue) { guard let i = Int64(sqlValue: v), let n = Int32(exactly: i) else { return nil }; self = n }
}

extension UInt64: SQLConvertible {
    /// Stored as its bit pattern in a signed integer, as GRDB stores it when it fits.
    public var sqlValue: SQLValue { .int(Int64(bitPattern: self)) }
    public init?(sqlValue v: SQLValue) { guard let i = Int64(sqlValue: v), i >= 0 else { return nil }; self = UInt64(i) }
}

extension Bool: SQLConvertible {
    /// 0 and 1, in both engines (the schema's flags are integers there too).
    public var sqlValue: SQLValue { .int(self ? 1 : 0) }
    public init?(sqlValue v: SQLValue) {
        switch v {
        case .int(let i): self = i != 0
        case .double(let d): self = d != 0
        default: return nil
        }
    }
}

extension Double: SQLConvertible {
    public var sqlValue: SQLValue { .double(self) }
    public init?(sqlValue v: SQLValue) {
        switch v {
        case .double(let d): self = d
        case .int(let i): self = Double(i)
        default: return nil
        }
    }
}

extension String: SQLConvertible {
    public var sqlValue: SQLValue { .text(self) }
    public init?(sqlValue v: SQLValue) {
        switch v {
        case .text(let s): self = s
        case .blob(let d): guard let s = String(data: d, encoding: .utf8) else { return nil }; self = s
        default: return nil
        }
    }
}

extension Data: SQLConvertible {
    public var sqlValue: SQLValue { .blob(self) }
    public init?(sqlValue v: SQLValue) {
        switch v {
        case .blob(let d): self = d
        case .text(let s): self = Data(s.utf8)
        default: return nil
        }
    }
}

extension SQLValue: SQLConvertible {
    public var sqlValue: SQLValue { self }
    public init?(sqlValue v: SQLValue) { self = v }
}

/// A statement's arguments: positional (`?`) or named (`:name`), as GRDB takes them.
public struct StatementArguments: ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, Sendable {
    public var positional: [SQLValue] = []
    public var named: [String: SQLValue] = [:]

    public init() {}
    public init(arrayLiteral elements: (any SQLConvertible)?...) { positional = elements.map { $0?.sqlValue ?? .null } }
    public init(_ elements: [(any SQLConvertible)?]) { positional = elements.map { $0?.sqlValue ?? .null } }
    public init<S: Sequence>(_ elements: S) where S.Element: SQLConvertible { positional = elements.map { $0.sqlValue } }
    public init(dictionaryLiteral elements: (String, (any SQLConvertible)?)...) {
        for (k, v) in elements { named[k] = v?.sqlValue ?? .null }
    }

    public var isEmpty: Bool { positional.isEmpty && named.isEmpty }

    /// Adds `other`'s values; a name both have keeps the value it had here, the first (unlike
    /// GRDB's `append(contentsOf:)`, where the later replaces it): a caller's arguments appended
    /// to `:app` (`Library.facts`) cannot name another app. Returns `other`'s values of the names
    /// both had (the ones not taken).
    @discardableResult
    public mutating func append(contentsOf other: StatementArguments) -> [String: SQLValue] {
        positional += other.positional
        var both: [String: SQLValue] = [:]
        for (k, v) in other.named {
            if named[k] != nil { both[k] = v } else { named[k] = v }
        }
        return both
    }

    public static func + (l: StatementArguments, r: StatementArguments) -> StatementArguments {
        var out = l
        out.append(contentsOf: r)
        return out
    }

    public static func += (l: inout StatementArguments, r: StatementArguments) { l.append(contentsOf: r) }

    /// GRDB's arguments for the same values.
    /// Made from existentials: GRDB's initializer from a sequence of one concrete type maps it
    /// with a key path, which its unspecialized generic code instantiates anew at every call
    /// (`swift_getKeyPath` and a type lookup by mangled name: ~2.5% of a mount daemon's CPU
    /// under `cp`, every statement of every close).
    var grdb: GRDB.StatementArguments {
        var a = GRDB.StatementArguments(positional.map { $0.grdb as (any DatabaseValueConvertible)? })
        if !named.isEmpty {
            _ = a.append(contentsOf: GRDB.StatementArguments(named.mapValues { $0.grdb as (any DatabaseValueConvertible)? }))
        }
        return a
    }
}

extension SQLValue {
    var grdb: DatabaseValue {
        switch self {
        case .null: return .null
        case .int(let i): return i.databaseValue
        case .double(let d): return d.databaseValue
        case .text(let s): return s.databaseValue
        case .blob(let d): return d.databaseValue
        }
    }

    init(_ v: DatabaseValue) {
        switch v.storage {
        case .null: self = .null
        case .int64(let i): self = .int(i)
        case .double(let d): self = .double(d)
        case .string(let s): self = .text(s)
        case .blob(let d): self = .blob(d)
        }
    }
}

/// One row of a result: its columns' names (shared by the rows of one query) and values.
public struct Row: Sendable {
    let names: [String]
    public let values: [SQLValue]

    init(names: [String], values: [SQLValue]) {
        self.names = names
        self.values = values
    }

    init(_ row: GRDB.Row, names: [String]) {
        self.names = names
        var v: [SQLValue] = []
        v.reserveCapacity(row.count)
        for dbv in row.databaseValues { v.append(SQLValue(dbv)) }
        values = v
    }

    public var count: Int { values.count }
    public var columnNames: [String] { names }

    func index(_ column: String) -> Int? {
        if let i = names.firstIndex(of: column) { return i }
        let lower = column.lowercased()
        return names.firstIndex { $0.lowercased() == lower }
    }

    public func hasNull(atIndex i: Int) -> Bool { values[i].isNull }

    public subscript<T: SQLConvertible>(_ i: Int) -> T? { T(sqlValue: values[i]) }
    public subscript<T: SQLConvertible>(_ i: Int) -> T {
        guard let v = T(sqlValue: values[i]) else { Row.notConvertible(values[i], T.self, "column \(i)") }
        return v
    }
    public subscript<T: SQLConvertible>(_ column: String) -> T? {
        guard let i = index(column) else { return nil }
        return T(sqlValue: values[i])
    }
    public subscript<T: SQLConvertible>(_ column: String) -> T {
        guard let i = index(column) else { fatalError("photogate: the catalog's row has no column \(column) (\(names))") }
        guard let v = T(sqlValue: values[i]) else { Row.notConvertible(values[i], T.self, column) }
        return v
    }

    /// As GRDB does: a NULL or a value of another kind read as a value that cannot be nil is a
    /// programming error (the schema says NOT NULL), not a condition to carry on from.
    static func notConvertible<T>(_ v: SQLValue, _ t: T.Type, _ column: String) -> Never {
        fatalError("photogate: the catalog's \(column) holds \(v), not a \(T.self)")
    }
}

/// The rows of a query, one at a time.
public final class RowCursor {
    private let step: () throws -> Row?
    init(_ step: @escaping () throws -> Row?) { self.step = step }
    public func next() throws -> Row? { try step() }
}

/// A statement prepared on one connection (cached ones live as long as it).
public final class Statement {
    public let sql: String
    unowned let db: Database
    /// GRDB's statement, on SQLite.
    let grdb: GRDB.Statement?
    var arguments = StatementArguments()

    init(db: Database, sql: String, grdb: GRDB.Statement?) {
        self.db = db
        self.sql = sql
        self.grdb = grdb
    }

    public func setArguments(_ arguments: StatementArguments) throws {
        self.arguments = arguments
        if let grdb { try grdb.setArguments(arguments.grdb) }
    }

    public func execute(arguments: StatementArguments? = nil) throws {
        if let arguments { try setArguments(arguments) }
        try db.run(self)
    }

    /// SQLite's own statement, for the C API's stepping (SQLite only).
    public var sqliteStatement: SQLiteStatement { grdb!.sqliteStatement }
}

/// A connection to a database server (PostgreSQL), as GrantStore's SQL needs one: statements
/// with `$1...` placeholders, and scripts of several statements without arguments.
public protocol SQLServerConnection: AnyObject {
    func query(_ sql: String, _ binds: [SQLValue]) throws -> SQLServerResult
    func execute(script: String) throws
}

public struct SQLServerResult: Sendable {
    public var columns: [String]
    public var rows: [[SQLValue]]
    public var affectedRows: Int
    public init(columns: [String], rows: [[SQLValue]], affectedRows: Int) {
        self.columns = columns
        self.rows = rows
        self.affectedRows = affectedRows
    }
}

/// One connection in one access (a transaction, or a read): what every query of GrantStore is
/// given. Over GRDB's database on SQLite, or a server connection (PostgreSQL).
public final class Database {
    /// GRDB's connection, on SQLite: for what only SQLite has.
    public let sqlite: GRDB.Database?
    /// The server's connection, on PostgreSQL.
    let server: SQLServerConnection?
    private var serverChanges = 0

    init(sqlite: GRDB.Database) {
        self.sqlite = sqlite
        server = nil
    }

    init(server: SQLServerConnection) {
        sqlite = nil
        self.server = server
    }

    public var isPostgres: Bool { server != nil }

    /// SQLite's connection handle (nil on PostgreSQL).
    public var sqliteConnection: SQLiteConnection? { sqlite?.sqliteConnection }

    /// Rows the last statement changed.
    public var changesCount: Int { sqlite?.changesCount ?? serverChanges }

    /// The row id the last INSERT gave (on PostgreSQL: the key its `RETURNING` gave, which
    /// `ServerSQL.keyed` adds to an INSERT of a table with a row id).
    public var lastInsertedRowID: Int64 { sqlite?.lastInsertedRowID ?? serverLastInserted }
    private var serverLastInserted: Int64 = 0

    public func execute(sql: String, arguments: StatementArguments = StatementArguments()) throws {
        if let sqlite { return try sqlite.execute(sql: sql, arguments: arguments.grdb) }
        if arguments.isEmpty && ServerSQL.hasSeveralStatements(sql) {
            try server!.execute(script: sql)
            serverChanges = 0
            return
        }
        _ = try serverQuery(sql, arguments)
    }

    public func cachedStatement(sql: String) throws -> Statement {
        Statement(db: self, sql: sql, grdb: try sqlite?.cachedStatement(sql: sql))
    }

    public func makeStatement(sql: String) throws -> Statement {
        Statement(db: self, sql: sql, grdb: try sqlite?.makeStatement(sql: sql))
    }

    public func tableExists(_ name: String) throws -> Bool {
        if let sqlite { return try sqlite.tableExists(name) }
        return try Bool.fetchOne(self, sql: "SELECT to_regclass(?) IS NOT NULL", arguments: [name]) ?? false
    }

    func serverQuery(_ sql: String, _ arguments: StatementArguments) throws -> SQLServerResult {
        var (text, binds) = try ServerSQL.translate(sql, arguments)
        let key = ServerSQL.keyed(text)
        if let key {
            while let last = text.last, last.isWhitespace || last == ";" { text.removeLast() }
            text += " RETURNING " + key
        }
        let r = try server!.query(text, binds)
        serverChanges = r.affectedRows
        if key != nil, let last = r.rows.last, let id = Int64(sqlValue: last[0]) { serverLastInserted = id }
        return r
    }

    func run(_ s: Statement) throws {
        if let g = s.grdb { return try g.execute() }
        _ = try serverQuery(s.sql, s.arguments)
    }

    func rows(_ s: Statement) throws -> [Row] {
        guard let g = s.grdb else {
            let r = try serverQuery(s.sql, s.arguments)
            return r.rows.map { Row(names: r.columns, values: $0) }
        }
        let cursor = try GRDB.Row.fetchCursor(g)
        var out: [Row] = []
        var names: [String]?
        while let r = try cursor.next() {
            if names == nil { names = g.columnNames }
            out.append(Row(r, names: names!))
        }
        return out
    }

    func cursor(_ s: Statement) throws -> RowCursor {
        guard let g = s.grdb else {
            var rows = try self.rows(s).makeIterator()
            return RowCursor { rows.next() }
        }
        let cursor = try GRDB.Row.fetchCursor(g)
        let names = g.columnNames
        return RowCursor { try cursor.next().map { Row($0, names: names) } }
    }

    func first(_ s: Statement) throws -> Row? {
        guard let g = s.grdb else { return try rows(s).first }
        let cursor = try GRDB.Row.fetchCursor(g)
        return try cursor.next().map { Row($0, names: g.columnNames) }
    }
}

/// SQLite's SQL text as the server takes it: `?` and `:name` placeholders become `$1...`.
enum ServerSQL {
    struct BadArguments: Error, CustomStringConvertible {
        var description: String
    }

    /// The text with numbered placeholders, and the values in their order.
    static func translate(_ sql: String, _ arguments: StatementArguments) throws -> (String, [SQLValue]) {
        var out = ""
        out.reserveCapacity(sql.utf8.count + 16)
        var binds: [SQLValue] = []
        var nameIndex: [String: Int] = [:]
        var positional = 0
        let chars = Array(sql.unicodeScalars)
        var i = 0
        func isNameChar(_ c: Unicode.Scalar) -> Bool { c == "_" || c.properties.isAlphabetic || ("0"..."9").contains(c) }
        while i < chars.count {
            let c = chars[i]
            switch c {
            case "'", "\"":
                // A string or a quoted name: copied as is, a doubled quote inside it included.
                out.unicodeScalars.append(c)
                i += 1
                while i < chars.count {
                    out.unicodeScalars.append(chars[i])
                    if chars[i] == c {
                        if i + 1 < chars.count && chars[i + 1] == c { out.unicodeScalars.append(chars[i + 1]); i += 2; continue }
                        i += 1
                        break
                    }
                    i += 1
                }
                continue
            case "-" where i + 1 < chars.count && chars[i + 1] == "-":
                while i < chars.count && chars[i] != "\n" { out.unicodeScalars.append(chars[i]); i += 1 }
                continue
            case "?":
                guard positional < arguments.positional.count else {
                    throw BadArguments(description: "the statement has more ? than the \(arguments.positional.count) arguments given: \(sql)")
                }
                binds.append(arguments.positional[positional])
                positional += 1
                out += "$\(binds.count)"
                i += 1
                continue
            case ":" where i + 1 < chars.count && (chars[i + 1] == "_" || chars[i + 1].properties.isAlphabetic)
                           && (i == 0 || chars[i - 1] != ":"):
                var j = i + 1
                while j < chars.count && isNameChar(chars[j]) { j += 1 }
                let name = String(String.UnicodeScalarView(chars[(i + 1)..<j]))
                guard let value = arguments.named[name] else {
                    throw BadArguments(description: "the statement names :\(name), which no argument gives: \(sql)")
                }
                if let n = nameIndex[name] {
                    out += "$\(n)"
                } else {
                    binds.append(value)
                    nameIndex[name] = binds.count
                    out += "$\(binds.count)"
                }
                i = j
                continue
            default:
                out.unicodeScalars.append(c)
                i += 1
            }
        }
        guard positional == arguments.positional.count else {
            throw BadArguments(description: "\(arguments.positional.count) arguments for \(positional) ? in: \(sql)")
        }
        return (out, binds)
    }

    /// The tables whose rows SQLite numbers (a rowid, or an INTEGER PRIMARY KEY that is one) and
    /// whose number the library reads after an INSERT (`lastInsertedRowID`), with that column.
    static let rowKeys = ["assets": "rowid", "albums": "id", "requests": "id", "refusals": "id", "report_apps": "id",
                          "set_grants": "id", "changes": "seq", "app_changes": "token"]

    /// The key column an INSERT of `sql` should return, or nil (another statement, another
    /// table, or one that says RETURNING itself).
    static func keyed(_ sql: String) -> String? {
        var rest = sql.drop { $0.isWhitespace }
        guard rest.prefix(6).uppercased() == "INSERT" else { return nil }
        rest = rest.dropFirst(6).drop { $0.isWhitespace }
        guard rest.prefix(4).uppercased() == "INTO" else { return nil }
        rest = rest.dropFirst(4).drop { $0.isWhitespace }
        let table = String(rest.prefix { $0.isLetter || $0.isNumber || $0 == "_" })
        guard let key = rowKeys[table], sql.range(of: "RETURNING", options: .caseInsensitive) == nil,
              !hasSeveralStatements(sql) else { return nil }
        return key
    }

    /// Whether the text holds more than one statement (a `;` outside strings, not at its end).
    static func hasSeveralStatements(_ sql: String) -> Bool {
        var quote: Character?
        var seenEnd = false
        for ch in sql {
            if let q = quote { if ch == q { quote = nil }; continue }
            if ch == "'" || ch == "\"" { quote = ch; if seenEnd { return true }; continue }
            if ch == ";" { seenEnd = true; continue }
            if seenEnd && !ch.isWhitespace { return true }
        }
        return false
    }
}

extension Row {
    public static func fetchAll(_ db: Database, sql: String, arguments: StatementArguments = StatementArguments()) throws -> [Row] {
        let s = try db.makeStatement(sql: sql)
        try s.setArguments(arguments)
        return try db.rows(s)
    }
    public static func fetchAll(_ s: Statement, arguments: StatementArguments? = nil) throws -> [Row] {
        if let arguments { try s.setArguments(arguments) }
        return try s.db.rows(s)
    }
    public static func fetchOne(_ db: Database, sql: String, arguments: StatementArguments = StatementArguments()) throws -> Row? {
        let s = try db.makeStatement(sql: sql)
        try s.setArguments(arguments)
        return try db.first(s)
    }
    public static func fetchOne(_ s: Statement, arguments: StatementArguments? = nil) throws -> Row? {
        if let arguments { try s.setArguments(arguments) }
        return try s.db.first(s)
    }
    public static func fetchCursor(_ db: Database, sql: String, arguments: StatementArguments = StatementArguments()) throws -> RowCursor {
        let s = try db.makeStatement(sql: sql)
        try s.setArguments(arguments)
        return try db.cursor(s)
    }
    public static func fetchCursor(_ s: Statement, arguments: StatementArguments? = nil) throws -> RowCursor {
        if let arguments { try s.setArguments(arguments) }
        return try s.db.cursor(s)
    }
}

/// `Int64.fetchOne(db, sql: ...)` and the like: the first column of each row.
extension SQLConvertible {
    public static func fetchOne(_ db: Database, sql: String, arguments: StatementArguments = StatementArguments()) throws -> Self? {
        try Row.fetchOne(db, sql: sql, arguments: arguments).flatMap { Self(sqlValue: $0.values[0]) }
    }
    public static func fetchOne(_ s: Statement, arguments: StatementArguments? = nil) throws -> Self? {
        try Row.fetchOne(s, arguments: arguments).flatMap { Self(sqlValue: $0.values[0]) }
    }
    /// NULLs are left out (GRDB's fetchAll of a non-optional type would stop at one).
    public static func fetchAll(_ db: Database, sql: String, arguments: StatementArguments = StatementArguments()) throws -> [Self] {
        try Row.fetchAll(db, sql: sql, arguments: arguments).compactMap { Self(sqlValue: $0.values[0]) }
    }
    public static func fetchAll(_ s: Statement, arguments: StatementArguments? = nil) throws -> [Self] {
        try Row.fetchAll(s, arguments: arguments).compactMap { Self(sqlValue: $0.values[0]) }
    }
    public static func fetchSet(_ db: Database, sql: String, arguments: StatementArguments = StatementArguments()) throws -> Set<Self> where Self: Hashable {
        Set(try fetchAll(db, sql: sql, arguments: arguments))
    }
}
