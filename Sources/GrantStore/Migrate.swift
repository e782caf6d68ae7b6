// `photogate migrate` (issue 41): an SQLite library copied into a library whose catalog is on
// PostgreSQL; and, the other way, `photogate backup` of such a library into an SQLite one
// (Recovery.swift). Kept apart from the catalog's other code: it reads every table of one engine
// and writes every table of the other.
import Foundation
import GRDB
import LibraryRun
import PhotoLibrary
import PGSystem
#if canImport(Glibc)
import Glibc
#endif

/// What a migration copied.
public struct MigrationReport: Sendable {
    /// Rows copied, per table, in the order they were copied.
    public var rows: [(table: String, count: Int)] = []
    public var assets = 0
    /// Store files copied now, and those an earlier, interrupted run had copied already.
    public var filesCopied = 0
    public var filesAlreadyThere = 0
    public var bytesCopied: UInt64 = 0
    /// Store files the catalog names that are not in the source's store (relative to the
    /// library): not copied; `verify` reports them on both sides.
    public var missing: [String] = []
    /// Assets whose original is a `--reference` file outside the library: they stay references.
    public var referenced = 0
}

/// The catalog's tables as a migration sees them, from SchemaPostgres's DDL: the same list on
/// both engines (SchemaPostgresTests keeps the two schemas equal), in an order where every table
/// comes after the tables its foreign keys name (the DDL could not make them otherwise).
enum Migration {
    static let tables: [String] = names(after: "CREATE TABLE ")
    /// Tables the DDL gives a row of its own (the settings, the asset rowid high mark): that row
    /// is replaced by the source's.
    static let seeded: Set<String> = Set(names(after: "INSERT INTO ")).subtracting([schemaTable])
    /// The schema's own record: not copied (the source's migrations must be the ones it names).
    static let schemaTable = "photogate_schema"
    /// What a catalog holds of a library: a catalog with a row in any of these is not empty.
    static let dataTables: [String] = tables.filter { !seeded.contains($0) && $0 != schemaTable }
    /// Rows per INSERT: ~500, fewer for wide tables (a statement takes at most 65,535 values).
    static func batch(columns: Int) -> Int { max(1, min(500, 20_000 / max(1, columns))) }

    static func names(after prefix: String) -> [String] {
        var out: [String] = []
        for line in SchemaPostgres.ddl.split(separator: "\n") {
            let t = line.drop { $0 == " " }
            guard t.hasPrefix(prefix) else { continue }
            let name = String(t.dropFirst(prefix.count).prefix { $0.isLetter || $0.isNumber || $0 == "_" })
            if !name.isEmpty && !out.contains(name) { out.append(name) }
        }
        return out
    }

    static func quoted(_ name: String) -> String { "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }

    /// What a column stores, by its declared type on either engine (SchemaPostgres: INTEGER is
    /// BIGINT, booleans included; REAL is DOUBLE PRECISION; BLOB is BYTEA).
    enum Kind: String {
        case integer, real, text, blob

        init?(declared: String) {
            switch declared.lowercased() {
            case "integer", "bigint": self = .integer
            case "real", "double precision": self = .real
            case "text": self = .text
            case "blob", "bytea": self = .blob
            default: return nil
            }
        }
    }

    /// One column of a catalog's table: what it stores, and whether the engine numbers its rows
    /// (a PostgreSQL identity; SQLite's AUTOINCREMENT key, whose high mark is `sqlite_sequence`).
    struct Column {
        var name: String
        var kind: Kind
        var numbered: Bool
    }

    /// One table of the source, as read.
    struct Table {
        var name: String
        var columns: [String]
        var rows: [[SQLValue]]
    }

    /// The source's whole catalog, read in one transaction.
    struct Snapshot {
        var tables: [Table] = []
        /// Per table, the highest number its engine gave a row (SQLite's AUTOINCREMENT high marks,
        /// `sqlite_sequence`; PostgreSQL's identity sequences): numbers of rows deleted since are
        /// never given again, and must not be by the other engine either (apps hold change tokens).
        var sequences: [String: Int64] = [:]
    }

    /// The store files a catalog names (originals, versions, sidecars), relative to store/.
    static let storePathsSQL = """
        SELECT store_path FROM assets WHERE store_path IS NOT NULL
        UNION SELECT store_path FROM versions WHERE store_path IS NOT NULL
        UNION \(Library.sidecarStorePathsSQL)
        """
}

extension Library {
    /// What the catalog a link names already holds of a library: each table with rows, and how
    /// many (nothing when the database has no photogate catalog yet, or an empty one). Asked by
    /// `migrate` before it makes anything, and again in its transaction.
    public static func migrationTargetRows(_ link: CatalogLink) throws -> [(table: String, count: Int)] {
        let catalog = ServerCatalog(link: link, library: link.safeCatalog)
        defer { catalog.close() }
        return try catalog.read { db in
            guard try Bool.fetchOne(db, sql: "SELECT to_regclass('\(Migration.schemaTable)') IS NOT NULL") == true else { return [] }
            return try Library.heldRows(db)
        }
    }

    static func heldRows(_ db: Database) throws -> [(table: String, count: Int)] {
        var held: [(table: String, count: Int)] = []
        for t in Migration.dataTables {
            let n = try Int.fetchOne(db, sql: "SELECT count(*) FROM \(Migration.quoted(t))") ?? 0
            if n > 0 { held.append((t, n)) }
        }
        return held
    }

    /// The refusal of a catalog that holds something already.
    public static func notEmpty(_ link: CatalogLink, _ held: [(table: String, count: Int)]) -> LibraryError {
        let assets = held.first { $0.table == "assets" }?.count ?? 0
        let rows = held.reduce(0) { $0 + $1.count }
        return .conflict("the catalog at \(link.safeCatalog) is not empty (\(assets) asset\(assets == 1 ? "" : "s"), "
            + "\(rows) row\(rows == 1 ? "" : "s") in \(held.map(\.table).joined(separator: ", "))): migrate copies a library into an empty "
            + "catalog only, and nothing was changed. If an earlier migrate into it was interrupted after it said it was verifying, "
            + "its copy is complete: check it with photogate verify --library DEST. Otherwise name another database, or empty this one")
    }

    /// Copies this library (SQLite) into `dest`, a library whose catalog is on a server and holds
    /// nothing yet (`Library.create(at:link:)`): every store file this catalog names into
    /// dest's store under the same name (copied, synced, never moved: this library stays as it
    /// was, and usable), then every row of every table in one server transaction, ids and keys
    /// as they are, each identity sequence set past the highest number SQLite gave. Files first:
    /// the catalog, committed last, never names a file that is not in the store; a run stopped
    /// before its commit leaves the server's catalog empty and files that a next run finds there
    /// (the same bytes: kept) or `verify --repair` moves to lost+found/.
    /// The rows are read under this catalog's write lock, held until the server's commit: no
    /// change made meanwhile is left behind (other writers wait, and fail busy after 15 s).
    /// Refused while mounts of this library run.
    public func migrate(into dest: Library) throws -> MigrationReport {
        guard let pool else {
            throw LibraryError.invalid("the library at \(paths.root) has its catalog on a server already (\(paths.link?.safeCatalog ?? "")): there is nothing to migrate")
        }
        guard dest.server != nil, let link = dest.paths.link else {
            throw LibraryError.invalid("\(dest.paths.root) is not a library whose catalog is on a server")
        }
        try refuseRunningMounts()
        var report = MigrationReport()
        let writer = try StoreWriter(library: dest, purpose: "migrate")
        defer { writer.shutDown() }
        var files = MigrationFiles(from: paths.store, to: dest.paths.store, writer: writer)
        // Most files while the library is in use as ever (store files never change once written).
        try files.copy(try read { db in try String.fetchAll(db, sql: Migration.storePathsSQL) }, &report)
        do {
            try pool.writeWithoutTransaction { g in
                try g.execute(sql: "BEGIN IMMEDIATE")
                defer { try? g.execute(sql: "ROLLBACK") }
                try refuseRunningMounts()
                let db = Database(sqlite: g)
                let snapshot = try Library.migrationSnapshot(db)
                // What was named since the first look; what is no longer named (deleted for good
                // meanwhile), taken back out of the store.
                let named = try String.fetchAll(db, sql: Migration.storePathsSQL)
                try files.copy(named, &report)
                files.removeCopies(except: Set(named), &report)
                try files.sync()
                report.referenced = try Int.fetchOne(db, sql: "SELECT count(*) FROM assets WHERE store_path IS NULL") ?? 0
                report.rows = try dest.write { pg in
                    let held = try Library.heldRows(pg)
                    if !held.isEmpty { throw Library.notEmpty(link, held) }
                    return try Library.load(snapshot, into: pg)
                }
                report.assets = report.rows.first { $0.table == "assets" }?.count ?? 0
            }
        } catch let e as DatabaseError {
            throw Library.map(e, paths: paths)
        }
        return report
    }

    /// Refused while mounts of the library run (a migration copies a library nothing writes to).
    public func refuseRunningMounts() throws {
        let running = MountRegistry.list(paths.runFolder)
        guard running.isEmpty else {
            throw LibraryError.conflict("the library has mounts running (\(running.map { "\($0.app) at \($0.mountpoint)" }.joined(separator: ", "))): "
                + "unmount them first (photogate unmount), then migrate; nothing was changed")
        }
    }

    /// Every table of the catalog, read in the caller's transaction, on either engine (SQLite for
    /// `migrate`, PostgreSQL for `backup`), with the numbers its engine gave.
    static func migrationSnapshot(_ db: Database) throws -> Migration.Snapshot {
        let applied = try String.fetchAll(db, sql: db.isPostgres ? "SELECT version FROM \(Migration.schemaTable)" : "SELECT identifier FROM grdb_migrations")
        guard Set(applied) == Set(SchemaPostgres.migrations) else {
            throw LibraryError.invalid("the catalog's schema (\(applied.last ?? "none")) is not the one this photogate copies between SQLite and PostgreSQL (\(SchemaPostgres.version))")
        }
        let columns = try Migration.columns(db)
        let expected = Set(Migration.tables).subtracting([Migration.schemaTable])
        let present = Set(columns.keys)
        guard present == expected else {
            throw LibraryError.invalid("the catalog's tables are not the ones of the schema this photogate copies (only in the catalog: "
                + "\(present.subtracting(expected).sorted()); only in the schema: \(expected.subtracting(present).sorted())): nothing was copied")
        }
        var s = Migration.Snapshot()
        for t in Migration.tables where t != Migration.schemaTable {
            let names = columns[t, default: []].map(\.name)
            let rows = try Row.fetchAll(db, sql: "SELECT \(names.map(Migration.quoted).joined(separator: ", ")) FROM \(Migration.quoted(t))")
            s.tables.append(Migration.Table(name: t, columns: names, rows: rows.map(\.values)))
        }
        s.sequences = try highMarks(db)
        return s
    }

    /// Per table, the highest number the catalog's engine gave its rows, deleted ones included:
    /// SQLite's `sqlite_sequence`, PostgreSQL's identity sequences (which no transaction rolls
    /// back: what they say is the newest, whatever the caller's snapshot).
    static func highMarks(_ db: Database) throws -> [String: Int64] {
        let sql = db.isPostgres ? """
            SELECT table_name::text, pg_sequence_last_value(pg_get_serial_sequence(quote_ident(table_name::text), column_name::text)::regclass)
            FROM information_schema.columns WHERE table_schema = current_schema() AND is_identity = 'YES'
            """ : "SELECT name, seq FROM sqlite_sequence"
        var marks: [String: Int64] = [:]
        for r in try Row.fetchAll(db, sql: sql) {
            if let name: String = r[0], let seq: Int64 = r[1] { marks[name] = max(marks[name] ?? 0, seq) }
        }
        return marks
    }

    /// Writes a snapshot into a catalog that holds nothing but its schema's own rows, in the
    /// caller's transaction, on either engine (PostgreSQL for `migrate`, SQLite for `backup`): ids
    /// and keys as they are, the schema's seeded rows replaced by the source's, and each column
    /// the engine numbers set past the highest number the source gave.
    static func load(_ s: Migration.Snapshot, into db: Database) throws -> [(table: String, count: Int)] {
        let target = try Migration.columns(db)
        let engine = db.isPostgres ? "PostgreSQL" : "SQLite"
        var counts: [(table: String, count: Int)] = []
        var highest: [(table: String, column: String, top: Int64)] = []
        for table in s.tables {
            guard let columns = target[table.name], Set(columns.map(\.name)) == Set(table.columns) else {
                throw LibraryError.invalid("the table \(table.name) has other columns in the catalog copied (\(table.columns)) than in \(engine) "
                    + "(\(target[table.name]?.map(\.name).sorted() ?? [])): nothing was copied")
            }
            let byName = Dictionary(uniqueKeysWithValues: columns.map { ($0.name, $0) })
            // The row the schema gave it, replaced by the source's (in the order of the tables).
            if Migration.seeded.contains(table.name) { try db.execute(sql: "DELETE FROM \(Migration.quoted(table.name))") }
            let kinds = table.columns.map { byName[$0]!.kind }
            let head = "INSERT INTO \(Migration.quoted(table.name)) (\(table.columns.map(Migration.quoted).joined(separator: ", "))) VALUES "
            let per = Migration.batch(columns: table.columns.count)
            var start = 0
            while start < table.rows.count {
                let rows = table.rows[start..<min(start + per, table.rows.count)]
                var binds: [SQLValue] = []
                binds.reserveCapacity(rows.count * kinds.count)
                var values: [String] = []
                values.reserveCapacity(rows.count)
                for (i, row) in zip(rows.indices, rows) {
                    var tuple: [String] = []
                    for (c, v) in row.enumerated() {
                        binds.append(try Migration.convert(v, to: kinds[c]) {
                            "the catalog's \(table.name).\(table.columns[c]) holds \(v) (row \(i + 1)), which \(engine)'s \(kinds[c].rawValue) column cannot hold as it is: nothing was copied"
                        })
                        tuple.append(db.isPostgres ? "$\(binds.count)" : "?")
                    }
                    values.append("(" + tuple.joined(separator: ", ") + ")")
                }
                let sql = head + values.joined(separator: ", ")
                if let server = db.server {
                    _ = try server.query(sql, binds)
                } else {
                    var arguments = StatementArguments()
                    arguments.positional = binds
                    try db.execute(sql: sql, arguments: arguments)
                }
                start += rows.count
            }
            counts.append((table.name, table.rows.count))
            for (c, column) in table.columns.enumerated() where byName[column]!.numbered {
                let top = table.rows.compactMap { Int64(sqlValue: $0[c]) }.max() ?? 0
                highest.append((table.name, column, max(top, s.sequences[table.name] ?? 0)))
            }
        }
        // Each numbered column past the highest number given, as the source's next would be.
        for (table, column, top) in highest where top > 0 {
            if let server = db.server {
                _ = try server.query("SELECT setval(pg_get_serial_sequence($1, $2), $3)", [.text(table), .text(column), .int(top)])
            } else {
                try db.execute(sql: "UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = ?", arguments: [top, table])
                if db.changesCount == 0 { try db.execute(sql: "INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", arguments: [table, top]) }
            }
        }
        return counts
    }
}

extension Migration {
    /// The catalog's tables and their columns, in the engine's order of columns, without the
    /// schema's own record (`grdb_migrations`, `photogate_schema`) and SQLite's own tables.
    static func columns(_ db: Database) throws -> [String: [Column]] {
        let sql = db.isPostgres ? """
            SELECT table_name::text, column_name::text, data_type::text, is_identity::text = 'YES'
            FROM information_schema.columns WHERE table_schema = current_schema() AND table_name::text <> '\(schemaTable)'
            ORDER BY table_name, ordinal_position
            """ : """
            SELECT m.name, p.name, p.type, p.pk = 1 AND m.sql LIKE '%AUTOINCREMENT%'
            FROM sqlite_master m, pragma_table_info(m.name) p
            WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite%' AND m.name <> 'grdb_migrations'
            ORDER BY m.name, p.cid
            """
        var out: [String: [Column]] = [:]
        for r in try Row.fetchAll(db, sql: sql) {
            let table: String = r[0], name: String = r[1], declared: String = r[2]
            guard let kind = Kind(declared: declared) else {
                throw LibraryError.invalid("the catalog's \(table).\(name) is a column of type \(declared), which this photogate does not copy: nothing was copied")
            }
            out[table, default: []].append(Column(name: name, kind: kind, numbered: r[3]))
        }
        return out
    }

    /// A value as the target's column stores it, exactly, or an error (`what` says where).
    static func convert(_ v: SQLValue, to kind: Kind, _ what: () -> String) throws -> SQLValue {
        switch (kind, v) {
        case (_, .null): return v
        case (.integer, .int), (.real, .double), (.text, .text), (.blob, .blob): return v
        case (.integer, .double(let d)):
            if let i = Int64(exactly: d) { return .int(i) }
        case (.real, .int(let i)):
            if let d = Double(exactly: i) { return .double(d) }
        case (.text, .blob(let data)):
            if let s = String(data: data, encoding: .utf8) { return .text(s) }
        case (.blob, .text(let s)):
            return .blob(Data(s.utf8))
        default:
            break
        }
        throw LibraryError.invalid(what())
    }
}

/// The store files of a migration: each copied into a temp file of the destination's writer,
/// synced, and renamed to its name in the destination's store, never over a file that is there
/// (one with the same bytes, from an interrupted run, is kept; one with others is refused).
struct MigrationFiles {
    let from: String
    let to: String
    let writer: StoreWriter
    private var seen = Set<String>()
    private var folders = Set<String>()
    /// The files this run put into the store (not those an earlier run had), with their sizes.
    private var copiedNow: [String: UInt64] = [:]

    init(from: String, to: String, writer: StoreWriter) {
        self.from = from
        self.to = to
        self.writer = writer
    }

    mutating func copy(_ paths: [String], _ report: inout MigrationReport) throws {
        for rel in paths where !seen.contains(rel) {
            seen.insert(rel)
            // A path photogate never writes (a damaged row): its asset is missing on both sides,
            // and `verify` says so on both.
            guard StorePath.isValid(rel) else { continue }
            let src = from + "/" + rel, dst = to + "/" + rel
            let s = pg_open_original(src, 0)
            guard s >= 0 else {
                if errno == ENOENT { report.missing.append(LibraryLayout.store + "/" + rel); continue }
                throw StoreWriter.ioError(errno, "cannot open \(src)")
            }
            defer { Glibc.close(s) }
            var st = stat()
            guard fstat(s, &st) == 0 else { throw StoreWriter.ioError(errno, "cannot stat \(src)") }
            let folder = (dst as NSString).deletingLastPathComponent
            if mkdir(folder, 0o700) != 0 && errno != EEXIST { throw StoreWriter.ioError(errno, "cannot make \(folder)") }
            folders.insert(folder)
            if try MigrationFiles.alreadyThere(s, dst) {
                report.filesAlreadyThere += 1
                continue
            }
            let (_, temp, d) = try writer.makeTemp(extension: "migrate")
            var placed = false
            defer { if !placed { unlink(temp) } }
            let n = pg_copy_fd(s, d)
            // The original's times with its bytes (a view shows the store file's).
            var times = [st.st_atim, st.st_mtim]
            let synced = n >= 0 && futimens(d, &times) == 0 && fsync(d) == 0
            let e = errno
            Glibc.close(d)
            guard synced else { throw StoreWriter.ioError(e, "cannot copy \(src) to \(temp)") }
            if pg_rename_noreplace(temp, dst) == 0 {
                placed = true
            } else if errno == EINVAL || errno == ENOSYS {
                // A filesystem without RENAME_NOREPLACE (NFS): a link fails over a file as well.
                if link(temp, dst) == 0 {
                    unlink(temp)
                    placed = true
                } else if errno != EEXIST {
                    throw StoreWriter.ioError(errno, "cannot link \(temp) to \(dst)")
                }
            } else if errno != EEXIST {
                throw StoreWriter.ioError(errno, "cannot rename \(temp) to \(dst)")
            }
            if !placed {
                // Made meanwhile (another migrate of the same library into the same store).
                guard try MigrationFiles.alreadyThere(s, dst) else { throw MigrationFiles.otherBytes(dst) }
                report.filesAlreadyThere += 1
                continue
            }
            report.filesCopied += 1
            report.bytesCopied += UInt64(n)
            copiedNow[rel] = UInt64(n)
        }
    }

    /// Removes the files this run copied that `named` does not name.
    mutating func removeCopies(except named: Set<String>, _ report: inout MigrationReport) {
        for (rel, size) in copiedNow where !named.contains(rel) {
            guard unlink(to + "/" + rel) == 0 else { continue }
            copiedNow[rel] = nil
            report.filesCopied -= 1
            report.bytesCopied -= size
        }
    }

    /// Every rename so far durable (the files were synced before theirs).
    func sync() throws {
        for f in folders { fsyncDirectory(of: f + "/x") }
        fsyncDirectory(of: to + "/x")
    }

    static func otherBytes(_ dst: String) -> LibraryError {
        .conflict("\(dst) is there already with other bytes than the library's file of that name: is --store another library's "
            + "shared folder? Nothing was migrated")
    }

    /// Whether `dst` is there; true when it holds the same bytes as `src` (an earlier run's
    /// copy), an error when it holds others or is not a file.
    static func alreadyThere(_ src: Int32, _ dst: String) throws -> Bool {
        let d = pg_open_original(dst, 0)
        guard d >= 0 else {
            if errno == ENOENT { return false }
            throw errno == ELOOP ? otherBytes(dst) : StoreWriter.ioError(errno, "cannot open \(dst)")
        }
        defer { Glibc.close(d) }
        var a = stat(), b = stat()
        guard fstat(src, &a) == 0, fstat(d, &b) == 0 else { throw StoreWriter.ioError(errno, "cannot stat \(dst)") }
        guard (b.st_mode & S_IFMT) == S_IFREG, a.st_size == b.st_size else { throw otherBytes(dst) }
        let chunk = 1 << 20
        var x = [UInt8](repeating: 0, count: chunk), y = [UInt8](repeating: 0, count: chunk)
        var offset: off_t = 0
        while offset < a.st_size {
            let want = min(chunk, Int(a.st_size - offset))
            let n = x.withUnsafeMutableBytes { pread(src, $0.baseAddress, want, offset) }
            let m = y.withUnsafeMutableBytes { pread(d, $0.baseAddress, want, offset) }
            guard n == want, m == want else { throw StoreWriter.ioError(n < 0 || m < 0 ? errno : EIO, "cannot read \(dst)") }
            guard x[..<want] == y[..<want] else {
                throw otherBytes(dst)
            }
            offset += off_t(want)
        }
        return true
    }
}
