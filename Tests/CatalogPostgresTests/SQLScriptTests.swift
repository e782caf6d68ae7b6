import Testing
@testable import CatalogPostgres

/// Splitting a script into statements as psql does.
struct SQLScriptTests {
    @Test func splitsAtTopLevelSemicolonsOnly() {
        let script = """
            -- a comment; with a semicolon
            CREATE TABLE a(x text DEFAULT 'it''s; here');  /* block; /* nested; */ still */
            INSERT INTO a VALUES (E'back\\'slash;'), ("quoted;ident");
            CREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS $fn$
            BEGIN PERFORM pg_notify('c', 'x;y'); RETURN NEW; END; $fn$;
            SELECT $1, $$a;b$$, x$y FROM a;
            ;;
            """
        let s = SQLScript.statements(script)
        #expect(s.count == 4, "\(s)")
        #expect(s.first?.hasSuffix("'it''s; here')") == true)
        #expect(s[1].hasPrefix("/* block") && s[1].hasSuffix("(\"quoted;ident\")"))
        #expect(s[2].hasSuffix("END; $fn$"))
        #expect(s[3] == "SELECT $1, $$a;b$$, x$y FROM a")
        #expect(SQLScript.statements("  -- only a comment\n ; ").isEmpty)
        #expect(SQLScript.statements("SELECT 1") == ["SELECT 1"])
    }
}
