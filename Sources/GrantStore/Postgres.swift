import CatalogPostgres
import Foundation

// The PostgreSQL client (CatalogPostgres) as the catalog's server connection (`ServerCatalog`).

extension PGSession: SQLServerConnection {
    public func query(_ sql: String, _ binds: [SQLValue]) throws -> SQLServerResult {
        let r: PGResult = try query(sql, binds.map(PGValue.init))
        return SQLServerResult(columns: r.columns, rows: r.rows.map { $0.map(SQLValue.init) }, affectedRows: r.affectedRows)
    }

    public func execute(script: String) throws { try execute(script) }
}

extension PGError: SQLServerError {
    public var serverMessage: String { message }
}

extension PGValue {
    init(_ v: SQLValue) {
        switch v {
        case .null: self = .null
        case .int(let i): self = .int(i)
        case .double(let d): self = .double(d)
        case .text(let s): self = .text(s)
        case .blob(let d): self = .bytes([UInt8](d))
        }
    }
}

extension SQLValue {
    init(_ v: PGValue) {
        switch v {
        case .null: self = .null
        case .int(let i): self = .int(i)
        case .double(let d): self = .double(d)
        case .text(let s): self = .text(s)
        case .bytes(let b): self = .blob(Data(b))
        }
    }
}

enum PostgresCatalog {
    /// How long a connection may take to be made, and a statement to answer: past them the
    /// catalog counts as unreachable (a host cut off from it fails closed rather than hangs).
    static let connectTimeout: Duration = .seconds(5)
    static let queryTimeout: Duration = .seconds(30)

    static func connect(_ url: String, application: String = "photogate") throws -> SQLServerConnection {
        var u = try PGURL(url)
        if u.applicationName == nil { u.applicationName = application }
        let s = try PGSession.connect(u, timeout: connectTimeout)
        s.queryTimeout = queryTimeout
        return s
    }

    static func url(_ url: String, application: String) throws -> PGURL {
        var u = try PGURL(url)
        if u.applicationName == nil { u.applicationName = application }
        return u
    }
}

extension PGURL.ParseError: SQLServerError {
    public var sqlState: String? { nil }
    public var serverMessage: String { "the catalog's URL is not valid: \(reason)" }
    public var isConnectionLost: Bool { false }
}
