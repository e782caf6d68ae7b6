import Foundation
import Testing
import TestSupport
@testable import CatalogPostgres

func connect(_ server: PostgresServer, app: String? = nil) throws -> PGSession {
    try PGSession.connect(PGURL(server.url(applicationName: app)), timeout: .seconds(10))
}

/// PGSession against a real PostgreSQL 15: values both ways, errors with their SQLSTATE,
/// transactions, scripts, and a connection the server ends.
@Suite(.serialized, .enabled(if: PostgresServer.available, "needs PostgreSQL 15 (apt-get install postgresql)"))
struct PGSessionTests {
    @Test func valuesRoundTrip() throws {
        let server = try PostgresServer()
        let s = try connect(server)
        defer { s.close() }
        try s.execute("CREATE TABLE t(id bigserial PRIMARY KEY, i bigint, d double precision, x text, b bytea, small integer)")
        let text = "héllo 📷 ünïcode — 漢字 'quoted' \\ ;"
        let bytes: [UInt8] = [0, 1, 2, 0x7F, 0x80, 0xFF, 0]
        var r = try s.query("INSERT INTO t(i, d, x, b, small) VALUES ($1, $2, $3, $4, $5)",
                            [.int(Int64.max), .double(-1.5e300), .text(text), .bytes(bytes), .int(-7)])
        #expect(r.affectedRows == 1)
        // Untyped nulls, where the column gives the type.
        try s.query("INSERT INTO t(i, d, x, b, small) VALUES ($1, $2, $3, $4, $5)", [.null, .null, .null, .null, .null])
        try s.query("INSERT INTO t(i, x, b) VALUES ($1, $2, $3)", [.int(Int64.min), .text(""), .bytes([])])
        r = try s.query("SELECT i, d, x, b, small FROM t ORDER BY id", [])
        #expect(r.columns == ["i", "d", "x", "b", "small"])
        #expect(r.rows == [
            [.int(Int64.max), .double(-1.5e300), .text(text), .bytes(bytes), .int(-7)],
            [.null, .null, .null, .null, .null],
            [.int(Int64.min), .null, .text(""), .bytes([]), .null],
        ])
        // Binds come back as what they were sent as.
        r = try s.query("SELECT $1, $2, $3, $4", [.int(-42), .double(0.1), .text(text), .bytes(bytes)])
        #expect(r.rows == [[.int(-42), .double(0.1), .text(text), .bytes(bytes)]])
        // A null where nothing gives it a type, outside and inside a transaction block (where the
        // retry must not abort the caller's transaction), and next to typed uses.
        #expect(try s.query("SELECT $1 IS NULL, $2 IS NULL", [.null, .int(3)]).rows == [[.int(1), .int(0)]])
        try s.query("BEGIN")
        #expect(try s.query("SELECT $2 IS NULL, $1 IS NULL", [.int(3), .null]).rows == [[.int(1), .int(0)]])
        #expect(try s.query("SELECT count(*) FROM t WHERE ($1 IS NULL OR i = $2) AND ($3 IS NULL OR x = $3)",
                            [.null, .int(1), .null]).rows == [[.int(3)]])
        #expect(try s.query("SELECT count(*) FROM t WHERE ($1 IS NULL OR x = $1)", [.text("")]).rows == [[.int(1)]])
        try s.query("INSERT INTO t(i) VALUES ($1)", [.int(5)])
        try s.query("COMMIT")
        #expect(try s.query("SELECT count(*) FROM t WHERE i = 5").rows == [[.int(1)]])
        r = try s.query("UPDATE t SET small = 1 WHERE i IS NOT NULL")
        #expect(r.affectedRows == 3)
        // No row: no columns, as documented.
        #expect(try s.query("SELECT i FROM t WHERE false").rows.isEmpty)
    }

    @Test func typesDecodeLikeTheServersTextForm() throws {
        let server = try PostgresServer()
        let s = try connect(server)
        defer { s.close() }
        let r = try s.query("""
            SELECT 1::int2, 2::int4, 3::int8, 4::oid, 1.25::float4, 2.5::float8, true, false,
                   'abc'::varchar, 'nm'::name, 'c'::char(3), 'x'::"char", '\\x00ff'::bytea, '{"a": [1, 2]}'::json
            """)
        #expect(r.rows == [[.int(1), .int(2), .int(3), .int(4), .double(1.25), .double(2.5), .int(1), .int(0),
                            .text("abc"), .text("nm"), .text("c  "), .text("x"), .bytes([0, 0xFF]), .text("{\"a\": [1, 2]}")]])
        // Numerics to Double, as the server's own text parsed.
        let numerics = ["0", "12345.678", "-0.000012345", "98765432109876543210.5", "1e-20", "'NaN'", "-3"]
        for n in numerics {
            let row = try #require(try s.query("SELECT (\(n))::numeric, (\(n))::numeric::text").rows.first)
            guard case .double(let d) = row[0], case .text(let t) = row[1] else { Issue.record("\(row)"); continue }
            if t == "NaN" { #expect(d.isNaN) } else { #expect(d == Double(t), "\(n): \(d) vs \(t)") }
        }
        // Types read in their text form: the same text as the server's ::text (TimeZone is UTC).
        let samples = [
            "'123e4567-e89b-12d3-a456-426614174000'::uuid", "'{\"b\": 1, \"a\": [true, null]}'::jsonb",
            "'2024-02-29'::date", "'0044-03-15 BC'::date", "'infinity'::date", "'1999-12-31'::date", "'1970-01-01'::date",
            "'2024-02-29 13:14:15.5'::timestamp", "'2000-01-01 00:00:00'::timestamp", "'1900-06-30 23:59:59.000001'::timestamp",
            "'2024-02-29 13:14:15.123+02'::timestamptz", "'-infinity'::timestamptz", "'0001-01-01 00:00:00 BC'::timestamp",
            "'13:14:15.25'::time", "'00:00:00'::time", "'<a>x</a>'::xml",
        ]
        for sample in samples {
            let row = try #require(try s.query("SELECT \(sample), (\(sample))::text").rows.first)
            #expect(row[0] == row[1], "\(sample)")
        }
        // Anything else: an error that says what to do.
        do {
            try s.query("SELECT '1 day'::interval AS span")
            Issue.record("an interval decoded")
        } catch let e as PGError {
            #expect(e.message.contains("span::text"), "\(e)")
            #expect(!e.isConnectionLost)
        }
        #expect(try s.query("SELECT '1 day'::interval::text").rows == [[.text("1 day")]])
    }

    @Test func serverErrorsCarrySQLStateAndMessage() throws {
        let server = try PostgresServer()
        let s = try connect(server)
        defer { s.close() }
        try s.execute("""
            CREATE TABLE p(id int PRIMARY KEY);
            CREATE TABLE c(p int REFERENCES p(id), v int CHECK (v > 0));
            INSERT INTO p VALUES (1);
            """)
        func failure(_ sql: String, _ binds: [PGValue] = []) -> PGError? {
            do { try s.query(sql, binds); return nil } catch { return error as? PGError }
        }
        let dup = try #require(failure("INSERT INTO p VALUES ($1)", [.int(1)]))
        #expect(dup.sqlState == PGError.uniqueViolation)
        #expect(dup.message.contains("duplicate key value violates unique constraint \"p_pkey\""), "\(dup)")
        #expect(dup.detail?.contains("(id)=(1) already exists") == true)
        #expect(!dup.isConnectionLost)
        #expect(failure("INSERT INTO c VALUES ($1, $2)", [.int(2), .int(1)])?.sqlState == PGError.foreignKeyViolation)
        #expect(failure("INSERT INTO c VALUES ($1, $2)", [.int(1), .int(-1)])?.sqlState == PGError.checkViolation)
        let syntax = try #require(failure("SELEC 1"))
        #expect(syntax.sqlState == "42601" && syntax.message.contains("syntax error"))
        // The session goes on after errors.
        #expect(try s.query("SELECT count(*) FROM p").rows == [[.int(1)]])
        // A script stops at its first error and says where.
        let scriptError: PGError? = {
            do { try s.execute("INSERT INTO p VALUES (2); INSERT INTO p VALUES (2); INSERT INTO p VALUES (3)"); return nil }
            catch { return error as? PGError }
        }()
        #expect(scriptError?.sqlState == PGError.uniqueViolation)
        #expect(scriptError?.message.contains("statement 2 of 3") == true)
        #expect(try s.query("SELECT array_agg(id ORDER BY id)::text FROM p").rows == [[.text("{1,2}")]])
    }

    @Test func transactions() throws {
        let server = try PostgresServer()
        let s = try connect(server), other = try connect(server)
        defer { s.close(); other.close() }
        try s.execute("CREATE TABLE t(x int UNIQUE)")
        try s.query("BEGIN")
        try s.query("INSERT INTO t VALUES ($1)", [.int(1)])
        #expect(try other.query("SELECT count(*) FROM t").rows == [[.int(0)]])
        try s.query("ROLLBACK")
        #expect(try s.query("SELECT count(*) FROM t").rows == [[.int(0)]])
        try s.query("BEGIN ISOLATION LEVEL SERIALIZABLE")
        try s.query("INSERT INTO t VALUES ($1)", [.int(2)])
        try s.query("COMMIT")
        #expect(try other.query("SELECT x FROM t").rows == [[.int(2)]])
        // An error aborts the transaction until ROLLBACK.
        try s.query("BEGIN")
        #expect(throws: PGError.self) { try s.query("INSERT INTO t VALUES (2)") }
        let aborted = #expect(throws: PGError.self) { try s.query("SELECT 1") }
        #expect(aborted?.sqlState == "25P02")
        try s.query("ROLLBACK")
        #expect(try s.query("SELECT 1").rows == [[.int(1)]])
        // A script with its own transaction and a function with semicolons in its body.
        try s.execute("""
            BEGIN;
            CREATE FUNCTION note() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN PERFORM pg_notify('changes', NEW.x::text); RETURN NEW; END; $$;
            CREATE TRIGGER t_note AFTER INSERT ON t FOR EACH ROW EXECUTE FUNCTION note();
            INSERT INTO t VALUES (3);
            COMMIT;
            """)
        #expect(try other.query("SELECT count(*) FROM t").rows == [[.int(2)]])
    }

    @Test func aConnectionTheServerEndsIsLost() throws {
        let server = try PostgresServer()
        let s = try connect(server, app: "pg-victim")
        defer { s.close() }
        #expect(try s.query("SELECT 1").rows == [[.int(1)]])
        #expect(try server.terminateBackends(applicationName: "pg-victim") == 1)
        let e = #expect(throws: PGError.self) { try s.query("SELECT 1") }
        #expect(e?.isConnectionLost == true, "\(String(describing: e))")
        print("PGSessionTests: a query on a terminated session: \(e.map { "\($0)" } ?? "-")")
        #expect(s.isClosed)
        // A new session works.
        let again = try connect(server)
        #expect(try again.query("SELECT 2").rows == [[.int(2)]])
        again.close()
    }

    @Test func connectFailureIsClearAndHidesThePassword() throws {
        let dir = TestSupport.tempDir("pgnone")
        defer { TestSupport.remove(dir) }
        let url = try PGURL("postgresql:///db?host=\(dir)&user=u&password=hunter2-secret")
        let e = #expect(throws: PGError.self) { try PGSession.connect(url, timeout: .seconds(5)) }
        #expect(e?.isConnectionLost == true)
        let text = "\(String(describing: e))"
        #expect(text.contains("could not connect to postgresql:///db?host="), "\(text)")
        #expect(!text.contains("hunter2"), "\(text)")
    }
}
