import Foundation
import Testing
import TestSupport
@testable import GrantStore
@testable import PhotoLibrary

/// The catalog on a PostgreSQL server (issue 41): its connections.
@Suite(.serialized, .enabled(if: TestSupport.onPostgres, "a PostgreSQL catalog's connections: the PostgreSQL run only"))
struct ServerCatalogConnections {
    /// Connections kept idle that the server closed meanwhile (a restart, a terminated backend)
    /// are not errors of the accesses that take them: each failed one access with EIO (a daemon's
    /// close told it could not be saved) until the pool was drained.
    @Test func idleConnectionsTheServerClosedAreReplaced() throws {
        let t = try TempLibrary()
        try t.importJPEGs(["a.jpg"])
        let library = t.library
        let server = try #require(library.server)
        // Accesses inside one another, each on a connection of its own: the pool keeps them.
        try server.read { _ in try server.read { _ in try server.read { _ in } } }
        #expect(server.idleCount >= 3, "the pool kept \(server.idleCount) idle connections")
        try endOtherConnections(t)
        // Each access after it works, reads and writes, every one of them.
        for _ in 0..<ServerCatalog.keepIdle + 1 {
            #expect(try t.library.assets().count == 1)
        }
        try server.read { _ in try server.read { _ in } }
        try endOtherConnections(t)
        _ = try t.library.authorize(camera, access: .readWrite, status: .limited)
        _ = try t.library.grant(camera, ["a.jpg"])
        #expect(server.ping())
    }

    /// Ends every connection to the library's database but the one asking (as a server restart
    /// would), and waits until they are gone (pg_terminate_backend only signals).
    func endOtherConnections(_ t: TempLibrary) throws {
        let ended = try TestSupport.catalogSQL(library: t.library.paths.root, """
            SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid()
            """)
        #expect(ended.status == 0, "\(ended.stderr)")
        #expect(eventually { (try? TestSupport.catalogSQL(library: t.library.paths.root, """
            SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
            """).stdout.trimmingCharacters(in: .whitespacesAndNewlines)) == "0" })
    }
}
