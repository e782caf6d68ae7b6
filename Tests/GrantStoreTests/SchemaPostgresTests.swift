import Foundation
import Testing
import TestSupport
@testable import GrantStore
import GRDB

/// The PostgreSQL DDL (`SchemaPostgres`, issue 41) stays the final state of the SQLite migrations:
/// a migration added without its PostgreSQL side, a column, index or trigger left out or put in
/// another place, fails here. (Whether PostgreSQL accepts the DDL is not checked here: no server.)
@Suite(.disabled(if: TestSupport.onPostgres, "compares a new SQLite catalog with the PostgreSQL DDL; run once, on the SQLite run")) struct SchemaPostgresAgreement {
    @Test func itCoversEveryMigrationUpToItsVersion() {
        #expect(SchemaPostgres.migrations == Schema.migrator.migrations)
        #expect(SchemaPostgres.version == Schema.migrator.migrations.last)
        for m in SchemaPostgres.migrations { #expect(SchemaPostgres.ddl.contains("('\(m)')"), "photogate_schema records \(m)") }
    }

    /// Every table of a new SQLite catalog, with its columns in the same order and of the matching
    /// type, and every index and trigger by name.
    @Test func itHasTheTablesColumnsIndexesAndTriggersOfANewCatalog() throws {
        let t = try TempLibrary()
        let ddl = SchemaPostgres.ddl
        let pgTables = Self.tables(ddl)
        // The SQLite file itself, through GRDB: what the migrations made, whatever the library reads it through.
        var configuration = GRDB.Configuration()
        configuration.readonly = true
        let sqlite = try GRDB.DatabaseQueue(path: t.library.paths.database, configuration: configuration)
        defer { try? sqlite.close() }
        let (tables, indexes, triggers) = try sqlite.read { db in
            (try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT IN ('sqlite_sequence', 'grdb_migrations') ORDER BY name"),
             try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"),
             try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'trigger'"))
        }
        #expect(Set(pgTables.keys) == Set(tables + ["photogate_schema"]))
        let types = ["INTEGER": "BIGINT", "REAL": "DOUBLE PRECISION", "TEXT": "TEXT", "BLOB": "BYTEA"]
        for table in tables {
            let columns = try sqlite.read { db in
                try GRDB.Row.fetchAll(db, sql: "SELECT name, type FROM pragma_table_info(?) ORDER BY cid", arguments: [table])
                    .map { ($0[0] as String, $0[1] as String) }
            }
            let pg = pgTables[table] ?? []
            #expect(pg.map(\.name) == columns.map(\.0), "the columns of \(table), in order")
            for ((name, type), p) in zip(columns, pg) {
                #expect(p.type.hasPrefix(types[type] ?? "?"), "\(table).\(name): \(type) is \(types[type] ?? "?"), not \(p.type)")
            }
        }
        for i in indexes { #expect(ddl.range(of: "INDEX \(i) ON ") != nil, "index \(i)") }
        for tr in triggers { #expect(ddl.contains("CREATE TRIGGER \(tr) "), "trigger \(tr)") }
    }

    /// The tables of the DDL and their columns (name, and the declaration that follows it), in order.
    static func tables(_ ddl: String) -> [String: [(name: String, type: String)]] {
        var out: [String: [(name: String, type: String)]] = [:]
        var current: String?
        for line in ddl.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("CREATE TABLE ") {
                current = String(line.dropFirst("CREATE TABLE ".count).prefix { $0 != " " })
                out[current!] = []
            } else if line.hasPrefix(")") {
                current = nil
            } else if let table = current, line.hasPrefix("    "), !line.hasPrefix("     ") {
                let words = line.split(separator: " ")
                guard let first = words.first, !["CHECK", "PRIMARY", "UNIQUE", "FOREIGN"].contains(first) else { continue }
                out[table]!.append((String(first), words.dropFirst().joined(separator: " ")))
            }
        }
        return out
    }
}
