import Foundation
import Testing
import TestSupport
@testable import GrantStore
@testable import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

/// `photogate migrate`'s parts that need no server (issue 41; the whole of it runs on a real
/// PostgreSQL in scripts/test.d/migrate.sh): what it reads of an SQLite catalog, how values meet
/// the server's column types, and how it puts store files into the shared folder.
@Suite(.serialized) struct MigrationParts {
    func storePaths(_ l: Library) throws -> [String] {
        try l.read { db in try String.fetchAll(db, sql: Migration.storePathsSQL) }
    }

    func files(_ from: TempLibrary, _ to: TempLibrary) throws -> MigrationFiles {
        MigrationFiles(from: from.library.paths.store, to: to.library.paths.store,
                       writer: try StoreWriter(library: to.library, purpose: "migrate"))
    }

    func bytes(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    /// Every table of the catalog (SQLite's, which migrate reads; PostgreSQL's, which backup
    /// reads) is one of the PostgreSQL schema's, in an order where a table follows those its
    /// foreign keys name, with the numbers the engine gave; a table on one side only stops it.
    @Test func theSnapshotHoldsEveryTableOfTheCatalog() throws {
        let src = try TempLibrary()
        try src.importJPEGs(["a.jpg", "b.jpg"])
        let s = try src.library.read { db in try Library.migrationSnapshot(db) }
        #expect(s.tables.map(\.name) == Migration.tables.filter { $0 != Migration.schemaTable })
        #expect(s.tables.first { $0.name == "assets" }?.rows.count == 2)
        #expect(s.tables.first { $0.name == "asset_rowid_high" }?.rows.count == 1)
        let changes = try src.library.read { db in try Int64.fetchOne(db, sql: "SELECT max(seq) FROM changes") }
        #expect(changes != nil && s.sequences["changes"] == changes, "\(s.sequences)")
        #expect(Migration.tables.firstIndex(of: "apps")! < Migration.tables.firstIndex(of: "assets")!)
        #expect(Migration.tables.firstIndex(of: "assets")! < Migration.tables.firstIndex(of: "versions")!)
        #expect(Migration.seeded == ["asset_rowid_high", "report_settings", "trash_settings"])
        try src.library.write { db in try db.execute(sql: "CREATE TABLE extra (x INTEGER)") }
        #expect(throws: LibraryError.self) { try src.library.read { db in try Library.migrationSnapshot(db) } }
    }

    /// A value goes to the other engine as its column holds it, exactly, or not at all; each
    /// engine's declared types are the same four kinds (backup copies PostgreSQL to SQLite).
    @Test func valuesMeetTheServersTypesExactly() throws {
        func c(_ v: SQLValue, _ t: String) throws -> SQLValue {
            try Migration.convert(v, to: try #require(Migration.Kind(declared: t))) { "\(v) into \(t)" }
        }
        for (sqlite, postgres) in [("INTEGER", "bigint"), ("REAL", "double precision"), ("TEXT", "text"), ("BLOB", "bytea")] {
            #expect(Migration.Kind(declared: sqlite) != nil && Migration.Kind(declared: sqlite) == Migration.Kind(declared: postgres))
        }
        #expect(Migration.Kind(declared: "boolean") == nil && Migration.Kind(declared: "timestamp with time zone") == nil)
        #expect(try c(.int(3), "REAL") == .double(3))
        #expect(try c(.blob(Data([0, 0xff])), "BLOB") == .blob(Data([0, 0xff])))
        #expect(try c(.int(3), "double precision") == .double(3))
        #expect(try c(.double(4), "bigint") == .int(4))
        #expect(try c(.blob(Data("é".utf8)), "text") == .text("é"))
        #expect(try c(.text("x"), "bytea") == .blob(Data("x".utf8)))
        #expect(try c(.null, "bigint") == .null)
        #expect(throws: LibraryError.self) { try c(.double(1.5), "bigint") }
        #expect(throws: LibraryError.self) { try c(.blob(Data([0xff, 0xfe])), "text") }
        #expect(throws: LibraryError.self) { try c(.text("1"), "bigint") }
    }

    /// Store files are copied under their names with their bytes and times; a second run keeps
    /// the copies a first one made; a file there with other bytes is refused, never replaced; a
    /// file the catalog names but the store lacks is reported; and what this run copied that
    /// the catalog no longer names (deleted for good meanwhile) goes again.
    @Test func storeFilesAreCopiedNeverReplacedAndTakenBackWhenNoLongerNamed() throws {
        let src = try TempLibrary(), dst = try TempLibrary()
        try src.importJPEGs(["a.jpg", "b.jpg", "c.jpg"])
        let rels = try storePaths(src.library).sorted()
        #expect(rels.count == 3)
        var report = MigrationReport()
        var first = try files(src, dst)
        try first.copy(rels, &report)
        #expect(report.filesCopied == 3 && report.filesAlreadyThere == 0)
        for rel in rels {
            let a = src.library.paths.store + "/" + rel, b = dst.library.paths.store + "/" + rel
            #expect(bytes(a) != nil && bytes(a) == bytes(b), "\(rel)")
            var x = stat(), y = stat()
            #expect(stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_mtim.tv_sec == y.st_mtim.tv_sec && x.st_mtim.tv_nsec == y.st_mtim.tv_nsec)
            #expect(y.st_mode & 0o777 == 0o600)
        }
        // Nothing left in the writer's temp folder.
        let tmpFiles = try FileManager.default.subpathsOfDirectory(atPath: dst.library.paths.tmp).filter { !$0.hasSuffix(".lock") && $0.contains("/") }
        #expect(tmpFiles.isEmpty, "\(tmpFiles)")

        // A second run (after an interruption) keeps them.
        var again = MigrationReport()
        var second = try files(src, dst)
        try second.copy(rels, &again)
        #expect(again.filesCopied == 0 && again.filesAlreadyThere == 3)

        // Other bytes at a name: refused, and left as they are.
        let other = dst.library.paths.store + "/" + rels[0]
        try Data("not the same".utf8).write(to: URL(fileURLWithPath: other))
        var third = try files(src, dst)
        var r3 = MigrationReport()
        #expect(throws: LibraryError.self) { try third.copy(rels, &r3) }
        #expect(bytes(other) == Data("not the same".utf8))

        // Named but not in the store: reported, not copied.
        let fresh = try TempLibrary()
        unlink(src.library.paths.store + "/" + rels[1])
        var r4 = MigrationReport()
        var fourth = try files(src, fresh)
        try fourth.copy(rels, &r4)
        #expect(r4.missing == ["store/" + rels[1]] && r4.filesCopied == 2)

        // Copied, then no longer named: taken back out (and out of the counts).
        let size = UInt64(bytes(src.library.paths.store + "/" + rels[2])!.count)
        let before = r4.bytesCopied
        fourth.removeCopies(except: [rels[0]], &r4)
        #expect(access(fresh.library.paths.store + "/" + rels[2], F_OK) != 0)
        #expect(access(fresh.library.paths.store + "/" + rels[0], F_OK) == 0)
        #expect(r4.filesCopied == 1 && r4.bytesCopied == before - size)
    }
}
