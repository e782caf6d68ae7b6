import Foundation
import Testing
import TestSupport
@testable import CatalogPostgres
#if canImport(Glibc)
import Glibc
#endif

/// What a listener reported, for the tests to wait on.
final class ListenerLog: @unchecked Sendable {
    private let lock = NSLock()
    private var _connected = 0
    private var _notes: [String] = []
    private var _disconnects: [PGError] = []
    func connected() { lock.withLock { _connected += 1 } }
    func note(_ p: String) { lock.withLock { _notes.append(p) } }
    func disconnected(_ e: PGError) { lock.withLock { _disconnects.append(e) } }
    var connects: Int { lock.withLock { _connected } }
    var notes: [String] { lock.withLock { _notes } }
    var disconnects: [PGError] { lock.withLock { _disconnects } }

    func listener(_ server: PostgresServer, app: String, options: PGListener.Options) throws -> PGListener {
        try PGListener(url: PGURL(server.url(applicationName: app)), channel: "photogate.changes", options: options,
                       onConnected: { self.connected() }, onNotify: { self.note($0) }, onDisconnected: { self.disconnected($0) })
    }
}

/// Fast settings, so that the tests see reconnects and heartbeats soon.
let quick: PGListener.Options = {
    var o = PGListener.Options()
    o.heartbeat = .milliseconds(100)
    o.heartbeatTimeout = .milliseconds(500)
    o.connectTimeout = .milliseconds(500)
    o.minBackoff = .milliseconds(20)
    o.maxBackoff = .milliseconds(200)
    return o
}()

/// PGListener against a real server: notifications arrive; a killed connection, a restarted
/// server and a frozen one are noticed, reported, and followed by a reconnect and onConnected.
@Suite(.serialized, .enabled(if: PostgresServer.available, "needs PostgreSQL 15 (apt-get install postgresql)"))
struct PGListenerTests {
    func notify(_ s: PGSession, _ payload: String) throws {
        try s.query("SELECT pg_notify($1, $2)", [.text("photogate.changes"), .text(payload)])
    }

    @Test func receivesNotificationsAndSurvivesATerminatedBackend() throws {
        let server = try PostgresServer()
        let log = ListenerLog()
        let listener = try log.listener(server, app: "pg-listener", options: quick)
        listener.start()
        defer { listener.stop() }
        let s = try connect(server)
        defer { s.close() }
        #expect(eventually(20) { log.connects == 1 })
        try notify(s, "one")
        try notify(s, "two ünïcode")
        #expect(eventually(20) { log.notes == ["one", "two ünïcode"] })
        // A NOTIFY inside a transaction is delivered at COMMIT, not before, and not after ROLLBACK.
        try s.query("BEGIN"); try notify(s, "rolled back"); try s.query("ROLLBACK")
        try s.query("BEGIN"); try notify(s, "three"); try s.query("COMMIT")
        #expect(eventually(20) { log.notes.count == 3 })
        #expect(log.notes.last == "three")

        let firstPID = try #require(listener.backendPID)
        #expect(try server.terminateBackends(applicationName: "pg-listener") == 1)
        #expect(eventually(20) { log.disconnects.count >= 1 && log.connects == 2 })
        #expect(log.disconnects.first?.isConnectionLost == true)
        #expect(listener.backendPID != firstPID)
        try notify(s, "after reconnect")
        #expect(eventually(20) { log.notes.last == "after reconnect" })
        listener.stop()
        // Stopped: its connection is gone from the server, and no callback comes after stop().
        let count = log.notes.count
        #expect(eventually(20) {
            (try? server.psql("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pg-listener'"))?
                .trimmingCharacters(in: .whitespacesAndNewlines) == "0"
        })
        try notify(s, "after stop")
        #expect(log.notes.count == count)
    }

    @Test func reconnectsAfterAFullServerRestart() throws {
        let server = try PostgresServer()
        let log = ListenerLog()
        let listener = try log.listener(server, app: "pg-listener", options: quick)
        listener.start()
        defer { listener.stop() }
        #expect(eventually(20) { log.connects == 1 })
        server.stop()
        #expect(eventually(20) { log.disconnects.count >= 2 })   // the drop, then a refused reconnect
        #expect(!listener.isConnected)
        #expect(log.connects == 1)
        let confirmed = listener.lastConfirmed
        try server.start()
        #expect(eventually(20) { log.connects == 2 })
        #expect(try #require(listener.lastConfirmed) > #require(confirmed))
        let s = try connect(server)
        defer { s.close() }
        try notify(s, "after restart")
        #expect(eventually(20) { log.notes == ["after restart"] })
    }

    /// A server that stops answering without closing the connection (frozen with SIGSTOP, as a
    /// dead host or network looks): only the heartbeat can notice.
    @Test func heartbeatNoticesAFrozenServer() throws {
        let server = try PostgresServer()
        let log = ListenerLog()
        let listener = try log.listener(server, app: "pg-listener", options: quick)
        listener.start()
        defer { listener.stop() }
        #expect(eventually(20) { log.connects == 1 })
        // Heartbeats confirm the connection over and over.
        let first = try #require(listener.lastConfirmed)
        #expect(eventually(20) { (listener.lastConfirmed ?? first) > first })

        let pids = try serverProcesses(server)
        for p in pids { kill(p, SIGSTOP) }
        var frozen = true
        defer { if frozen { for p in pids { kill(p, SIGCONT) } } }
        #expect(eventually(20) { log.disconnects.count >= 1 })
        let heartbeatError = try #require(log.disconnects.first)
        #expect(heartbeatError.isConnectionLost)
        #expect(heartbeatError.message.contains("no answer within"), "\(heartbeatError)")
        let lastSign = try #require(listener.lastConfirmed)
        // Reconnects time out too; meanwhile nothing is confirmed.
        #expect(eventually(20) { log.disconnects.count >= 3 })
        #expect(listener.lastConfirmed == lastSign)
        #expect(!listener.isConnected)

        for p in pids { kill(p, SIGCONT) }
        frozen = false
        #expect(eventually(20) { log.connects >= 2 })
        #expect(try #require(listener.lastConfirmed) > lastSign)
        let s = try connect(server)
        defer { s.close() }
        try notify(s, "thawed")
        #expect(eventually(20) { log.notes.last == "thawed" })
    }

    /// The postmaster and its children.
    func serverProcesses(_ server: PostgresServer) throws -> [pid_t] {
        let pm = try #require(server.pid)
        let children = try TestSupport.run("pgrep", ["-P", "\(pm)"]).stdout.split(separator: "\n").compactMap { pid_t($0) }
        // server.pid is setpriv's pid, which exec'd postgres: the same process.
        return [pm] + children
    }
}
