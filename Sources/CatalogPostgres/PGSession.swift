import Logging
import PostgresNIO

/// One connection to PostgreSQL, used synchronously from a plain thread.
///
/// Every call blocks its caller until the server answers (or the timeout passes); the I/O runs
/// on an event loop thread of this module's own (one for the process), which never blocks. Never
/// call a PGSession from an event loop thread (a NIO callback): it would wait on itself.
///
/// Not thread-safe: a session runs one statement at a time, and its caller serializes the calls
/// (one thread at a time; a lock around it if several share it). Only `close()` and `isClosed`
/// may be called from any thread at any time (to abandon a session another thread is blocked in).
///
/// Sessions run with TimeZone=UTC (timestamptz columns read as "...+00").
public final class PGSession: @unchecked Sendable {
    /// The event loop every session's I/O runs on; never shut down (it lives as long as the process).
    static let eventLoopGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    private static let ids = Locked(0)

    let connection: PostgresConnection
    public let url: PGURL
    private let logger: Logger
    private let closedBox = Locked(false)

    /// When set, a statement that takes longer fails with `isConnectionLost` and the session is
    /// closed (its state on the server is unknown). nil: wait as long as the server takes.
    /// For a bound on the server's side use `SET statement_timeout`.
    public var queryTimeout: Duration?

    private init(connection: PostgresConnection, url: PGURL, logger: Logger) {
        self.connection = connection
        self.url = url
        self.logger = logger
    }

    deinit {
        close()
    }

    /// Connects and authenticates, within `timeout` for the whole of it.
    public static func connect(_ url: PGURL, timeout: Duration, logger: Logger? = nil) throws -> PGSession {
        let logger = logger ?? Logger(label: "photogate.postgres", factory: { _ in SwiftLogNoOpLogHandler() })
        var config: PostgresConnection.Configuration
        if let path = url.socketPath {
            config = .init(unixSocketPath: path, username: url.user, password: url.password, database: url.database)
        } else {
            config = .init(host: url.host ?? "localhost", port: url.port, username: url.user, password: url.password,
                           database: url.database, tls: .disable)
        }
        config.options.connectTimeout = TimeAmount(timeout)
        var parameters = [("TimeZone", "UTC")]
        if let app = url.applicationName { parameters.append(("application_name", app)) }
        config.options.additionalStartupParameters = parameters

        let id = ids.withLockedValue { $0 += 1; return $0 }
        let future = PostgresConnection.connect(on: eventLoopGroup.next(), configuration: config, id: id, logger: logger)
        do {
            let connection = try wait(future, timeout: timeout) { late in
                // Kept until closed: postgres-nio asserts that a connection is closed when it goes.
                let closed: EventLoopFuture<Void> = late.close()
                closed.whenComplete { _ in withExtendedLifetime(late) {} }
            }
            return PGSession(connection: connection, url: url, logger: logger)
        } catch {
            var e = convert(error)
            e.message = "could not connect to \(url): " + e.message
            e.isConnectionLost = true
            throw e
        }
    }

    public var isClosed: Bool { closedBox.withLockedValue { $0 } || connection.isClosed }

    /// Closes the connection (the socket; the server is not waited for) and returns once it is
    /// closed; safe to call more than once, and from any thread but an event loop's.
    public func close() {
        closedBox.withLockedValue { $0 = true }
        let closed: EventLoopFuture<Void> = connection.close()
        if !connection.eventLoop.inEventLoop { try? closed.wait() }
    }

    /// Runs one statement with `$1..$n` parameters (the extended protocol: one statement).
    ///
    /// Binds: .int as int8, .double as float8, .text as text, .bytes as bytea, and .null with no
    /// type, which the server infers from where it stands (an INSERT's column, the other side of
    /// `=`, a function's argument). Where nothing gives it a type (`SELECT $1 IS NULL` alone),
    /// PostgreSQL refuses any untyped parameter (42P18, as with every driver), and also one
    /// whose first use is untyped and a later one typed (42P08: `$1 IS NULL OR x = $1`); then
    /// that null is sent as text. (So `$1 IS NULL OR n = $1` with n a number still fails,
    /// bigint = text: write `CAST($1 AS BIGINT) IS NULL`, which SQLite reads too.) Finding that
    /// out costs, the first time a statement runs with a given set of null parameters in this
    /// process, a SAVEPOINT around it (so that a refusal inside a transaction block does not
    /// abort the caller's transaction); the answer is remembered.
    /// Columns are decoded by type (see PGDecoding).
    @discardableResult
    public func query(_ sql: String, _ binds: [PGValue] = []) throws -> PGResult {
        let nulls = binds.indices.filter { binds[$0] == .null }
        if nulls.isEmpty { return try run(sql, binds, textNulls: []) }
        let key = NullKey(sql: sql, nulls: nulls)
        if let known = Self.nullTypings.withLockedValue({ $0[key] }) {
            return try run(sql, binds, textNulls: known)
        }
        // First time: which of these nulls can the server not type? Inside a transaction block,
        // under a savepoint; outside one, SAVEPOINT fails harmlessly (25P01) and so would Parse.
        let inBlock: Bool
        do {
            try run("SAVEPOINT pgsession_null_probe", [], textNulls: [])
            inBlock = true
        } catch let e as PGError where e.sqlState == "25P01" {
            inBlock = false
        }
        var typed = Set<Int>()
        while true {
            do {
                let result = try run(sql, binds, textNulls: typed)
                if inBlock { try run("RELEASE SAVEPOINT pgsession_null_probe", [], textNulls: []) }
                Self.nullTypings.withLockedValue { cache in
                    if cache.count >= 10_000 { cache.removeAll() }
                    cache[key] = typed
                }
                return result
            } catch let e as PGError where e.sqlState == "42P18" || e.sqlState == "42P08" {
                // "could not determine data type of parameter $n": indeterminate (42P18), or
                // ambiguous (42P08: `$n IS NULL OR x = $n`, typed by its second use only)
                guard let n = Self.parameterNumber(e.message), nulls.contains(n - 1), !typed.contains(n - 1) else { throw e }
                typed.insert(n - 1)
                if inBlock { try run("ROLLBACK TO SAVEPOINT pgsession_null_probe", [], textNulls: []) }
            }
        }
    }

    private struct NullKey: Hashable {
        var sql: String
        var nulls: [Int]
    }
    /// For each statement and set of null parameters seen, the nulls to send as text.
    private static let nullTypings = Locked([NullKey: Set<Int>]())

    private static func parameterNumber(_ message: String) -> Int? {
        guard let dollar = message.lastIndex(of: "$") else { return nil }
        return Int(message[message.index(after: dollar)...].prefix(while: { $0.isASCII && $0.isNumber }))
    }

    @discardableResult
    private func run(_ sql: String, _ binds: [PGValue], textNulls: Set<Int>) throws -> PGResult {
        if closedBox.withLockedValue({ $0 }) { throw PGError(message: "the session is closed", isConnectionLost: true) }
        if connection.isClosed {
            close()
            throw PGError(message: "the connection was closed by the server or the network", isConnectionLost: true)
        }
        var bindings = PostgresBindings(capacity: binds.count)
        for (i, b) in binds.enumerated() {
            switch b {
            case .null:
                if textNulls.contains(i) { bindings.append(PostgresData(type: .text, value: nil)) } else { bindings.appendNull() }
            case .int(let v): bindings.append(v)
            case .double(let v): bindings.append(v)
            case .text(let v): bindings.append(v)
            case .bytes(let v): bindings.append(ByteBuffer(bytes: v))
            }
        }
        let result: PostgresQueryResult
        let connection = self.connection, logger = self.logger
        let query = PostgresQuery(unsafeSQL: sql, binds: bindings)
        do {
            // Sent from the event loop, so that the channel cannot close between the check and
            // the write: postgres-nio writes a request to its channel without a promise, and a
            // write to a closed channel drops the request, whose answer would never come.
            let future = connection.eventLoop.flatSubmit { () -> EventLoopFuture<PostgresQueryResult> in
                guard !connection.isClosed else {
                    return connection.eventLoop.makeFailedFuture(PGError(message: "the connection is closed", isConnectionLost: true))
                }
                return connection.query(query, logger: logger)
            }
            result = try Self.wait(future, timeout: queryTimeout)
        } catch {
            let e = Self.convert(error)
            if e.isConnectionLost { close() }
            throw e
        }
        var out = PGResult()
        out.rows.reserveCapacity(result.rows.count)
        for row in result.rows {
            if out.columns.isEmpty { out.columns = row.map(\.columnName) }
            var values: [PGValue] = []
            values.reserveCapacity(row.count)
            for cell in row {
                do {
                    values.append(try PGDecoding.value(cell))
                } catch let u as PGDecoding.Unsupported {
                    throw PGError(message: "column \"\(u.column)\" has a type (OID \(u.typeOID)) that PGSession does not decode; cast it to text in the query (\(u.column)::text)")
                }
            }
            out.rows.append(values)
        }
        if let n = result.metadata.rows {
            out.affectedRows = n
        } else if let last = result.metadata.command.split(separator: " ").last, let n = Int(last) {
            out.affectedRows = n   // MERGE n, and tags postgres-nio does not know
        }
        return out
    }

    /// Runs a script of statements separated by semicolons, without parameters (DDL, a schema).
    ///
    /// postgres-nio has no simple-query protocol: the statements are split here (see SQLScript)
    /// and sent one by one; the first error stops the script and is thrown, saying which
    /// statement failed. Unlike a multi-statement simple query, the script gets no implicit
    /// transaction: each statement commits on its own unless the script (or the caller) wraps
    /// them in BEGIN ... COMMIT.
    public func execute(_ sql: String) throws {
        let statements = SQLScript.statements(sql)
        for (i, statement) in statements.enumerated() {
            do {
                try query(statement, [])
            } catch var e as PGError {
                if statements.count > 1 {
                    e.message += " (in statement \(i + 1) of \(statements.count): \(statement.prefix(80)))"
                }
                throw e
            }
        }
    }

    /// The server process serving this session (pg_stat_activity's pid).
    public func backendPID() throws -> Int32 {
        guard case .int(let pid) = try query("SELECT pg_backend_pid()").rows.first?.first else {
            throw PGError(message: "pg_backend_pid() returned no number")
        }
        return Int32(pid)
    }

    // MARK: waiting, errors

    private final class Once: @unchecked Sendable { var done = false }   // touched on the event loop only

    /// Blocks the calling (non event loop) thread until `future` completes or `timeout` passes;
    /// a value that arrives after the timeout goes to `late` (to close a connection nobody took).
    static func wait<T: Sendable>(_ future: EventLoopFuture<T>, timeout: Duration?,
                                  late: (@Sendable (T) -> Void)? = nil) throws -> T {
        guard let timeout else { return try future.wait() }
        let loop = future.eventLoop
        let promise = loop.makePromise(of: T.self)
        let once = Once()
        let task = loop.scheduleTask(in: TimeAmount(timeout)) {
            guard !once.done else { return }
            once.done = true
            promise.fail(PGError(message: "no answer within \(timeout)", isConnectionLost: true))
        }
        future.whenComplete { result in
            task.cancel()
            guard !once.done else {
                if case .success(let v) = result { late?(v) }
                return
            }
            once.done = true
            promise.completeWith(result)
        }
        return try promise.futureResult.wait()
    }

    static func convert(_ error: any Error) -> PGError {
        if let e = error as? PGError { return e }
        if let e = error as? PSQLError {
            if e.code == .server, let info = e.serverInfo {
                let state = info[.sqlState]
                let severity = info[.severity] ?? ""
                let lost = severity == "FATAL" || severity == "PANIC" || state?.hasPrefix("08") == true
                return PGError(sqlState: state, message: info[.message] ?? "the server reported an error",
                               detail: info[.detail], hint: info[.hint], isConnectionLost: lost)
            }
            var message: String
            switch e.code {
            case .serverClosedConnection: message = "the server closed the connection"
            case .clientClosedConnection: message = "the connection was closed"
            case .uncleanShutdown: message = "the connection ended uncleanly"
            case .connectionError: message = "connection error"
            case .queryCancelled: return PGError(sqlState: "57014", message: "the statement was cancelled")
            case .tooManyParameters: return PGError(message: "too many parameters (at most 65535)")
            case .unsupportedAuthMechanism, .authMechanismRequiresPassword, .saslError:
                message = "authentication failed (\(e.code))"
            default: message = "\(e.code)"
            }
            if let u = e.underlying {
                let inner = convert(u)
                message += ": " + inner.message
                if inner.sqlState != nil { return PGError(sqlState: inner.sqlState, message: message, isConnectionLost: true) }
            }
            return PGError(message: message, isConnectionLost: true)
        }
        if let e = error as? IOError { return PGError(message: e.description, isConnectionLost: true) }
        if let e = error as? ChannelError { return PGError(message: "\(e)", isConnectionLost: true) }
        return PGError(message: String(describing: error), isConnectionLost: true)
    }
}
