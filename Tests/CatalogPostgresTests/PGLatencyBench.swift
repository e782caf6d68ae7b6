import Foundation
import Testing
import TestSupport
@testable import CatalogPostgres

/// Figures for the catalog's design (printed, not asserted): a statement's round trip over the
/// Unix socket, and a NOTIFY's way to the listener's callback.
@Suite(.serialized, .enabled(if: PostgresServer.available, "needs PostgreSQL 15 (apt-get install postgresql)"))
struct PGLatencyBench {
    func median(_ xs: [Duration]) -> Duration { xs.sorted()[xs.count / 2] }
    func µs(_ d: Duration) -> String {
        let (s, a) = d.components
        return String(format: "%.1f µs", Double(s) * 1e6 + Double(a) / 1e12)
    }

    @Test func roundTrips() throws {
        let server = try PostgresServer()
        let s = try connect(server)
        defer { s.close() }
        for _ in 0..<100 { try s.query("SELECT $1", [.int(1)]) }   // warm up
        var times: [Duration] = []
        for _ in 0..<1000 {
            let t0 = ContinuousClock.now
            let r = try s.query("SELECT $1", [.int(1)])
            times.append(ContinuousClock.now - t0)
            #expect(r.rows == [[.int(1)]])
        }
        print("PGLatencyBench: query(\"SELECT $1\", [.int(1)]) over the Unix socket: median \(µs(median(times))), p90 \(µs(times.sorted()[900])) (1000 runs)")

        // NOTIFY -> onNotify: from the start of the notifying statement to the callback.
        final class Arrivals: @unchecked Sendable {
            let cond = NSCondition()
            var stamps: [String: ContinuousClock.Instant] = [:]
            var connected = false
        }
        let a = Arrivals()
        let listener = try PGListener(url: PGURL(server.url(applicationName: "bench-listener")), channel: "bench",
                                      onConnected: { a.cond.lock(); a.connected = true; a.cond.broadcast(); a.cond.unlock() },
                                      onNotify: { p in
                                          let now = ContinuousClock.now
                                          a.cond.lock(); a.stamps[p] = now; a.cond.broadcast(); a.cond.unlock()
                                      },
                                      onDisconnected: { _ in })
        listener.start()
        defer { listener.stop() }
        #expect(eventually(20) { a.cond.lock(); defer { a.cond.unlock() }; return a.connected })
        var notifyTimes: [Duration] = []
        for i in 0..<220 {
            let key = "n\(i)"
            let t0 = ContinuousClock.now
            try s.query("SELECT pg_notify('bench', $1)", [.text(key)])
            a.cond.lock()
            while a.stamps[key] == nil && a.cond.wait(until: Date().addingTimeInterval(20)) {}
            let t1 = a.stamps[key]
            a.cond.unlock()
            let arrived = try #require(t1, "notification \(key) did not arrive")
            if i >= 20 { notifyTimes.append(arrived - t0) }   // the first 20 warm up
        }
        print("PGLatencyBench: NOTIFY -> onNotify: median \(µs(median(notifyTimes))), p90 \(µs(notifyTimes.sorted()[180])) (200 runs)")
    }
}
