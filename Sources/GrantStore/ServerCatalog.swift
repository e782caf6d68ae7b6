import Foundation
import PhotoLibrary
import Synchronization
import CatalogPostgres

/// A write whose COMMIT's answer was lost, and whose outcome the server could not be asked
/// within its wait (`ServerCatalog.committed`): it may have committed. A caller whose file the
/// commit names leaves it where recovery finds it by its id (moved into the store if its row is
/// there, deleted if not) instead of deleting it.
public struct CommitOutcomeUnknown: Error, CustomStringConvertible {
    public let error: Error
    public var description: String { "\(error) (whether the change was saved is not known until the catalog answers again)" }
}

/// An error a server connection reports: the server's SQLSTATE and message, or a lost connection.
public protocol SQLServerError: Error {
    var sqlState: String? { get }
    var serverMessage: String { get }
    var isConnectionLost: Bool { get }
}

/// A library's catalog on a server (PostgreSQL; issue 41): a few connections, each access one
/// transaction on one of them. Writers are serialized by one advisory lock, taken first in every
/// write transaction, as SQLite serializes them: the code's read-then-write steps stay right, and
/// the change log's sequence numbers commit in their order (a mount that has seen number n has
/// seen every change before it). A write that changes what views show notifies the channel
/// `photogate_changes` at its commit: the doorbell of every host's mounts, never the record (they
/// read the change log).
public final class ServerCatalog: @unchecked Sendable {
    public let link: CatalogLink
    let library: String
    /// Connections not in use.
    private let idle = Mutex<[ConnectionBox]>([])
    /// The most connections kept open while not in use.
    static let keepIdle = 4

    public static let channel = "photogate_changes"
    /// The key of the advisory lock every write transaction takes first.
    static let writeLock: Int64 = 0x7068_6f74_6f67   // "photog"
    /// How long a write transaction may wait for its client's next statement before the server
    /// ends it (well within a statement's timeout: a writer waiting behind a silent one gets the lock).
    static let idleWriterTimeout = "10s"
    /// The newest change in the snapshot a read sees (never a sequence's last value: that one counts
    /// numbers of transactions not committed yet, which a reader would then skip for good).
    static let lastChangeSQL = "SELECT COALESCE(max(seq), 0) FROM changes"

    final class ConnectionBox: @unchecked Sendable {
        let connection: SQLServerConnection
        init(_ c: SQLServerConnection) { connection = c }
    }

    /// The catalog's identity (the comment on `photogate_schema`; nil for a catalog made before
    /// catalogs had one), and whether this `open` made the catalog (see SharedIdentity.swift).
    private(set) var identity: String?
    private(set) var madeNow = false

    init(link: CatalogLink, library: String) {
        self.link = link
        self.library = library
    }

    /// Opens the catalog a link names; when `creating`, makes its schema if the database has none
    /// yet (a second host's `init` joins the catalog the first one made).
    static func open(_ link: CatalogLink, library: String, creating: Bool) throws -> ServerCatalog {
        let catalog = ServerCatalog(link: link, library: library)
        try catalog.withConnection { c in
            let has = try c.query("SELECT to_regclass('photogate_schema') IS NOT NULL", []).rows.first?.first == .int(1)
            if !has {
                guard creating else {
                    throw LibraryError.serverCatalogDamaged(library: library, catalog: link.safeCatalog, why: "holds no photogate catalog")
                }
                // Two hosts making it at once: one does, the other waits and finds it made.
                _ = try c.query("BEGIN", [])
                do {
                    _ = try c.query("SELECT pg_advisory_xact_lock($1)", [.int(writeLock)])
                    let again = try c.query("SELECT to_regclass('photogate_schema') IS NOT NULL", []).rows.first?.first == .int(1)
                    if !again {
                        try c.execute(script: SchemaPostgres.ddl)
                        try c.execute(script: ServerCatalog.identitySQL(StoreWriter.randomID() + StoreWriter.randomID()))
                        catalog.madeNow = true
                    }
                    _ = try c.query("COMMIT", [])
                } catch {
                    _ = try? c.query("ROLLBACK", [])
                    throw error
                }
            }
            catalog.identity = try ServerCatalog.readIdentity(c)
            // The migrations the catalog's schema equals, against the ones this photogate knows.
            var applied = try ServerCatalog.appliedMigrations(c)
            if applied.contains(where: { !SchemaPostgres.migrations.contains($0) }) { throw LibraryError.libraryTooNew(library) }
            if Set(applied) != Set(SchemaPostgres.migrations) {
                applied = try ServerCatalog.upgrade(c, applied: applied, catalog: link.safeCatalog, library: library)
            }
            guard Set(applied) == Set(SchemaPostgres.migrations) else {
                let lacking = SchemaPostgres.migrations.filter { !applied.contains($0) }
                throw LibraryError.serverCatalogDamaged(library: library, catalog: link.safeCatalog, why: "lacks the migration\(lacking.count == 1 ? "" : "s") "
                    + "\(lacking.joined(separator: ", ")) of this photogate's schema (\(SchemaPostgres.version)), which no upgrade makes")
            }
        }
        return catalog
    }

    static func appliedMigrations(_ c: SQLServerConnection) throws -> [String] {
        try c.query("SELECT version FROM photogate_schema", []).rows.compactMap { String(sqlValue: $0[0]) }
    }

    /// Applies the migrations a catalog made by an earlier photogate lacks (`SchemaPostgres.upgrades`),
    /// in one transaction under the write lock: hosts opening it at once upgrade it once, and a
    /// failed upgrade leaves it as it was. Returns the migrations the catalog has after. A catalog
    /// that lacks one of the first migrations (made as one script, never upgraded) is left alone:
    /// the caller calls it damaged.
    ///
    /// The transaction holds the lock every host's writes wait for, and, from its DROP INDEX on,
    /// a lock on `assets` every host's reads wait for too: the server ends it should its client
    /// go silent in it (a process stopped, a host cut off), as it ends a write's; and a step that
    /// waits for a lock (DROP INDEX waits for every read of the table, and every read from then
    /// on waits behind it) gives up after `upgradeLockTimeout`, so that a read that never ends
    /// cannot stop every host. A step that fails (an index of the step's name made by hand, say)
    /// is an error that says what was upgraded, what stopped it, and that nothing was changed.
    static func upgrade(_ c: SQLServerConnection, applied: [String], catalog: String, library: String) throws -> [String] {
        let known = Set(SchemaPostgres.upgrades.map(\.id))
        let missing = SchemaPostgres.migrations.filter { !applied.contains($0) }
        guard !missing.isEmpty, missing.allSatisfy(known.contains) else { return applied }
        var step = ""
        var committing = false
        do {
            _ = try c.query("BEGIN", [])
            do {
                _ = try c.query("SELECT set_config('idle_in_transaction_session_timeout', $1, true), pg_advisory_xact_lock($2)",
                                [.text(idleWriterTimeout), .int(writeLock)])
                _ = try c.query("SELECT set_config('lock_timeout', $1, true)", [.text(upgradeLockTimeout)])
                let now = try appliedMigrations(c)
                for s in SchemaPostgres.upgrades where !now.contains(s.id) {
                    step = s.id
                    try c.execute(script: s.sql)
                    _ = try c.query("INSERT INTO photogate_schema (version) VALUES ($1)", [.text(s.id)])
                }
                committing = true
                _ = try c.query("COMMIT", [])
            } catch {
                if !committing { _ = try? c.query("ROLLBACK", []) }
                throw error
            }
        } catch {
            throw upgradeFailed(error, from: applied, step: step, committing: committing, catalog: catalog, library: library)
        }
        return try appliedMigrations(c)
    }

    /// How long a step of an upgrade waits for a lock on a table (behind the reads of every host).
    static let upgradeLockTimeout = "15s"

    /// The error of an upgrade that failed: what it upgraded, what stopped it, and what is left.
    static func upgradeFailed(_ error: Error, from applied: [String], step: String, committing: Bool,
                              catalog: String, library: String) -> Error {
        let e = error as? SQLServerError
        let what = "the catalog at \(catalog) of the library at \(library) has the schema of an earlier photogate "
            + "(\(SchemaPostgres.migrations.last { applied.contains($0) } ?? "none")), and its upgrade to \(SchemaPostgres.version)"
            + (step.isEmpty ? "" : " (step \(step))") + " failed: \(e?.serverMessage ?? "\(error)")"
        if e?.isConnectionLost == true {
            // A COMMIT whose answer was lost may have gone through: the next open knows.
            return LibraryError.io(what + (committing ? "; whether it was upgraded is known at the next open, which finishes it if not"
                                                      : "; nothing was changed, and the next open tries again"))
        }
        let why: String
        switch e?.sqlState ?? "" {
        case "55P03":
            why = "another host held the catalog's tables for longer than \(upgradeLockTimeout) (a read or write that does not end: a process stopped?); try again"
        case "42P07", "42704", "42710":
            why = "the catalog's schema was changed by hand (an index or table of that name made, or one photogate made dropped): "
                + "put it back as photogate made it, then open the library again"
        default:
            why = "try again; if it fails again, the photogate that made the catalog still opens it"
        }
        return LibraryError.io(what + "; nothing was changed (the catalog is as it was): " + why)
    }

    static let identityPrefix = "photogate catalog "

    /// Names the catalog: a comment on its schema table (no table of its own, so the schema stays
    /// the SQLite catalog's; a dump and restore keep it). `id` is hex, made here.
    static func identitySQL(_ id: String) -> String {
        precondition(id.allSatisfy { $0.isHexDigit })
        return "COMMENT ON TABLE photogate_schema IS '\(identityPrefix)\(id)'"
    }

    static func readIdentity(_ c: SQLServerConnection) throws -> String? {
        let text = try c.query("SELECT obj_description('photogate_schema'::regclass, 'pg_class')", []).rows.first?.first
            .flatMap { String(sqlValue: $0) }
        guard let text, text.hasPrefix(identityPrefix) else { return nil }
        return String(text.dropFirst(identityPrefix.count))
    }

    /// Gives a catalog made before catalogs had an identity one (the first host to open it after
    /// this photogate came does); returns the catalog's identity, its own if another host gave
    /// it one first.
    func adoptIdentity() throws -> String {
        let id = try write(notify: false) { db -> String in
            let c = db.server!
            if let id = try ServerCatalog.readIdentity(c) { return id }
            let id = StoreWriter.randomID() + StoreWriter.randomID()
            try c.execute(script: ServerCatalog.identitySQL(id))
            return id
        }
        identity = id
        return id
    }

    /// Whether `store` holds any of the catalog's originals (up to 16 looked for), or the catalog
    /// names none: a folder that may be named the catalog's (SharedIdentity).
    func storeHoldsSome(_ store: String) throws -> Bool {
        let paths = try read { db in
            try String.fetchAll(db, sql: "SELECT store_path FROM assets WHERE store_path IS NOT NULL ORDER BY rowid LIMIT 16")
        }
        return paths.isEmpty || paths.contains { StorePath.isValid($0) && access(store + "/" + $0, F_OK) == 0 }
    }

    /// Takes back the identity this `open` gave the catalog it made (see SharedIdentity).
    func forgetIdentity() throws {
        try write(notify: false) { db in try db.server!.execute(script: "COMMENT ON TABLE photogate_schema IS NULL") }
        identity = nil
    }

    func connect() throws -> SQLServerConnection {
        do {
            return try PostgresCatalog.connect(link.catalog)
        } catch {
            throw map(error)
        }
    }

    /// Runs `body` on a connection of its own; a connection that failed is not used again.
    /// `begin`: the statement that starts the access (BEGIN, or a ping's SELECT 1). A connection
    /// kept idle that the server closed meanwhile (a restart, a terminated backend) fails at
    /// it, before anything of the access was sent: the next idle one, then a new one, is tried
    /// (after a server restart every idle connection was dead, and each failed one access of the
    /// daemon's with EIO until the pool was drained).
    func withConnection<T>(begin: String? = nil, _ body: (SQLServerConnection) throws -> T) throws -> T {
        var box: ConnectionBox
        while true {
            let pooled = idle.withLock { $0.popLast() }
            box = try pooled ?? ConnectionBox(connect())
            guard let begin else { break }
            let sent = DispatchTime.now().uptimeNanoseconds
            do {
                _ = try box.connection.query(begin, [])
                break
            } catch let e as SQLServerError where e.isConnectionLost {
                // Only a connection found closed at once (its socket at its end) is replaced: one
                // that went unanswered for its whole timeout is a server that does not answer,
                // and trying every kept connection in turn multiplied that wait.
                if pooled != nil && DispatchTime.now().uptimeNanoseconds - sent < 1_000_000_000 { continue }
                throw map(e)
            } catch {
                idle.withLock { if $0.count < ServerCatalog.keepIdle { $0.append(box) } }
                throw map(error)
            }
        }
        do {
            let r = try body(box.connection)
            idle.withLock { if $0.count < ServerCatalog.keepIdle { $0.append(box) } }
            return r
        } catch let e as SQLServerError where e.isConnectionLost {
            throw map(e)
        } catch {
            idle.withLock { if $0.count < ServerCatalog.keepIdle { $0.append(box) } }
            throw map(error)
        }
    }

    /// One write transaction, writers one at a time; `notify`: ring every host's doorbell at commit.
    ///
    /// A COMMIT whose answer is lost (the connection cut as it committed) may have committed or
    /// not. The transaction's id, asked just before, tells which once the server is reached again
    /// (`pg_xact_status`): committed, the write returns as done (a close told failed whose photo
    /// the catalog names, and whose temp file its caller then deleted, was a row without its
    /// file); not committed, or not to be known, the lost connection is the error.
    func write<T>(notify: Bool, _ body: (Database) throws -> T) throws -> T {
        var pending: (result: T, xid: String?, backend: Int64?)? = nil
        var commitLost = false
        do {
            return try withConnection(begin: "BEGIN") { c in
                do {
                    // The server ends this transaction should its client go silent in it (a process
                    // stopped, a host cut off): it holds the lock every host's writes, revokes
                    // included, wait for, and would for as long as the client stays so. No write of
                    // photogate's waits on anything but its own statements between them.
                    _ = try c.query("SELECT set_config('idle_in_transaction_session_timeout', $1, true), pg_advisory_xact_lock($2)",
                                    [.text(ServerCatalog.idleWriterTimeout), .int(ServerCatalog.writeLock)])
                    let r = try body(Database(server: c))
                    // The id is only there if the body wrote (asking for it would give a read-only
                    // transaction one, and a commit record to flush).
                    // And the server process that commits it, to end should its answer never come.
                    let row = try c.query(notify ? "SELECT pg_current_xact_id_if_assigned()::text, pg_backend_pid(), pg_notify($1, '')"
                                                 : "SELECT pg_current_xact_id_if_assigned()::text, pg_backend_pid()",
                                          notify ? [.text(ServerCatalog.channel)] : []).rows.first
                    let xid = row?.first.flatMap { String(sqlValue: $0) }
                    let backend: Int64? = row.flatMap { $0.count > 1 ? Int64(sqlValue: $0[1]) : nil }
                    pending = (r, xid, backend)
                    _ = try c.query("COMMIT", [])
                    return r
                } catch {
                    if pending != nil, (error as? SQLServerError)?.isConnectionLost == true { commitLost = true }
                    if pending == nil { _ = try? c.query("ROLLBACK", []) }
                    throw error
                }
            }
        } catch {
            guard commitLost, let (result, xid, backend) = pending else { throw error }
            // Nothing written: nothing to lose either way.
            guard let xid else { return result }
            switch committed(xid, backend: backend) {
            case true?: return result
            case false?: throw error   // not saved: the lost connection is the error, as any
            case nil: throw CommitOutcomeUnknown(error: error)
            }
        }
    }

    /// Whether transaction `xid` committed, asked on new connections until the server answers
    /// or `within` seconds pass (false then: not known, the caller keeps the lost connection as
    /// its error). A transaction whose client is gone is still in progress until its server
    /// process sees so and aborts it, which it may never do by itself (a commit waiting for a
    /// synchronous standby waits for as long as the standby stays away, then commits, long after
    /// the caller was told it failed and deleted its file): the server process that runs it
    /// (`backend`, while it still runs that transaction) is ended, which settles it either way.
    func committed(_ xid: String, backend: Int64? = nil, within: Double = 10) -> Bool? {
        let deadline = Date().addingTimeInterval(within)
        var pause = 0.02
        while true {
            let status = try? withConnection { c in
                let s = try c.query("SELECT pg_xact_status($1::xid8)", [.text(xid)]).rows.first?.first.flatMap { String(sqlValue: $0) } ?? "unknown"
                if s == "in progress", let backend {
                    _ = try? c.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = $1 AND backend_xid = $2::xid8::xid",
                                    [.int(backend), .text(xid)])
                }
                return s
            }
            switch status {
            case "committed"?: return true
            case "aborted"?: return false
            case "unknown"?: return nil   // too old to be known (never for one just sent)
            default: break   // in progress, or the server not reached
            }
            if Date() >= deadline { return nil }
            Thread.sleep(forTimeInterval: pause)
            pause = min(pause * 2, 0.5)
        }
    }

    /// One read, on one snapshot of the catalog (as a SQLite read transaction is).
    func read<T>(_ body: (Database) throws -> T) throws -> T {
        try withConnection(begin: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") { c in
            do {
                let r = try body(Database(server: c))
                _ = try c.query("COMMIT", [])
                return r
            } catch {
                _ = try? c.query("ROLLBACK", [])
                throw error
            }
        }
    }

    /// Connections kept idle now (for tests).
    var idleCount: Int { idle.withLock { $0.count } }

    func close() {
        let all = idle.withLock { i -> [ConnectionBox] in defer { i.removeAll() }; return i }
        for b in all { (b.connection as? PGSession)?.close() }
    }

    /// One round trip to the server (a heartbeat): true when it answered.
    public func ping() -> Bool {
        (try? withConnection(begin: "SELECT 1") { _ in }) != nil
    }

    func map(_ error: Error) -> Error {
        if error is LibraryError { return error }
        guard let e = error as? SQLServerError else { return error }
        if e.isConnectionLost {
            return LibraryError.io("the catalog at \(link.safeCatalog) cannot be reached: \(e.serverMessage)")
        }
        switch e.sqlState ?? "" {
        case let s where s.hasPrefix("23"): return LibraryError.conflict(e.serverMessage)
        case "53100": return LibraryError.noSpace(link.safeCatalog)
        case "25006": return LibraryError.io("the catalog at \(link.safeCatalog) is read-only: \(e.serverMessage)")
        default: return LibraryError.io("database error: \(e.serverMessage)")
        }
    }
}
