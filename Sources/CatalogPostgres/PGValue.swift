/// A value sent to or read from PostgreSQL: the few kinds the catalog's SQL layer deals in, the
/// same on SQLite (its storage classes) and on PostgreSQL (how PGSession decodes and binds).
public enum PGValue: Sendable, Equatable, Hashable, CustomStringConvertible {
    case null
    case int(Int64)
    case double(Double)
    case text(String)
    case bytes([UInt8])

    public var description: String {
        switch self {
        case .null: return "NULL"
        case .int(let v): return String(v)
        case .double(let v): return String(v)
        case .text(let v): return "'" + v.replacingOccurrences(of: "'", with: "''") + "'"
        case .bytes(let v): return "<\(v.count) bytes>"
        }
    }
}

/// What a statement returned: its columns' names, its rows (values in column order), and the count
/// the server's command tag gave (rows inserted, updated, deleted, selected...; 0 when it gives none,
/// as for DDL).
///
/// `columns` comes from the rows themselves: it is empty when a query returned no row
/// (postgres-nio's collected results carry the row description only inside each row).
public struct PGResult: Sendable {
    public var columns: [String]
    public var rows: [[PGValue]]
    public var affectedRows: Int

    public init(columns: [String] = [], rows: [[PGValue]] = [], affectedRows: Int = 0) {
        self.columns = columns
        self.rows = rows
        self.affectedRows = affectedRows
    }
}

/// An error from PostgreSQL or from the way to it.
///
/// `sqlState` is the server's SQLSTATE when the server answered with an error (23505 unique
/// violation, 23503 foreign key, 23514 check, 40001 serialization failure, 57P01 admin shutdown...),
/// nil for errors of the client or the connection. `message` is the server's message (with its
/// detail and hint, when it gave them) or a description of what failed. `isConnectionLost` says the
/// session cannot be used again: the connection is closed or in an unknown state (dropped, timed
/// out, terminated by the server); open a new session.
public struct PGError: Error, CustomStringConvertible, Sendable {
    public var sqlState: String?
    public var message: String
    public var detail: String?
    public var hint: String?
    public var isConnectionLost: Bool

    public init(sqlState: String? = nil, message: String, detail: String? = nil, hint: String? = nil,
                isConnectionLost: Bool = false) {
        self.sqlState = sqlState
        self.message = message
        self.detail = detail
        self.hint = hint
        self.isConnectionLost = isConnectionLost
    }

    public var description: String {
        var s = "PostgreSQL: " + message
        if let sqlState { s += " (SQLSTATE \(sqlState))" }
        if let detail, !detail.isEmpty { s += " — " + detail }
        if let hint, !hint.isEmpty { s += " (hint: \(hint))" }
        if isConnectionLost { s += " [connection lost]" }
        return s
    }

    /// SQLSTATEs named for the callers' sake.
    public static let uniqueViolation = "23505"
    public static let foreignKeyViolation = "23503"
    public static let checkViolation = "23514"
    public static let notNullViolation = "23502"
    public static let serializationFailure = "40001"
    public static let deadlockDetected = "40P01"
    public static let adminShutdown = "57P01"
    public static let queryCanceled = "57014"
}
