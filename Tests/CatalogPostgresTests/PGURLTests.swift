import Testing
@testable import CatalogPostgres

/// Connection URLs: both forms parse to the right place; a password never shows, in a URL's
/// description, its dump, or a parse error of a malformed URL.
struct PGURLTests {
    @Test func tcpURL() throws {
        let u = try PGURL("postgresql://alice:s3cr%40t@db.example:6543/photos?application_name=pg-test")
        #expect(u.user == "alice")
        #expect(u.password == "s3cr@t")
        #expect(u.host == "db.example")
        #expect(u.port == 6543)
        #expect(u.socketDirectory == nil)
        #expect(u.database == "photos")
        #expect(u.applicationName == "pg-test")
        #expect(u.description == "postgresql://alice:***@db.example:6543/photos?application_name=pg-test")
    }

    @Test func unixSocketURLs() throws {
        let a = try PGURL("postgresql:///photos?host=/tmp/pg%20dir&user=bob")
        #expect(a.host == nil)
        #expect(a.socketDirectory == "/tmp/pg dir")
        #expect(a.socketPath == "/tmp/pg dir/.s.PGSQL.5432")
        #expect(a.user == "bob")
        #expect(a.database == "photos")
        let b = try PGURL("postgresql://bob@%2Ftmp%2Fpgdir:5433/photos")
        #expect(b.socketPath == "/tmp/pgdir/.s.PGSQL.5433")
        #expect(b.user == "bob")
        // The description reads back as the same URL.
        #expect(try PGURL(a.description) == a)
        #expect(try PGURL(b.description) == b)
        let ipv6 = try PGURL("postgres://u@[::1]:5434/d")
        #expect(ipv6.host == "::1" && ipv6.port == 5434)
    }

    @Test func passwordNeverShows() throws {
        let u = try PGURL("postgresql://alice:hunter2-secret@db/photos")
        #expect(!u.description.contains("hunter2"))
        #expect(!String(reflecting: u).contains("hunter2"))
        var dumped = ""
        dump(u, to: &dumped)
        #expect(!dumped.contains("hunter2"))
        #expect(!"\(u)".contains("hunter2"))
    }

    @Test(arguments: [
        "postgresql://alice:hunter2-secret@db:notaport/photos",      // bad port
        "postgresql://alice:hunter2-secret",                          // no @: read as host:port
        "postgresql://alice:hunter2/secret@db/photos",                // an unencoded '/' in it
        "postgresql://alice:hunter2-secret@db/photos?sslmode=require",
        "postgresql://alice:hunter2-secret@db/photos?bogus=1",
        "postgresql://alice:hunter2%zz-secret@db/photos",             // bad percent-encoding
        "postgresql://alice:hunter2-secret@db1,db2/photos",
        "mysql://alice:hunter2-secret@db/photos",
    ])
    func malformedURLErrorHidesPassword(_ string: String) {
        do {
            let u = try PGURL(string)
            Issue.record("parsed \(u), expected an error")
        } catch {
            let text = "\(error)"
            #expect(text.contains("invalid PostgreSQL URL"))
            #expect(!text.contains("hunter2"), "the error shows the password: \(text)")
        }
    }
}
