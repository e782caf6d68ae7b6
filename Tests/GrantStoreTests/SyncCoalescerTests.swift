import Foundation
import Testing
import TestSupport
@testable import GrantStore

/// The catalog log's shared syncs (`SyncCoalescer`, `Library.syncLog`): callers that ask while a
/// sync runs share the next one, and none is told done by a sync that began before it asked or
/// that failed.
@Suite struct SyncCoalescing {
    struct Failed: Error {}

    final class Record: @unchecked Sendable {
        let lock = NSLock()
        var started = 0               // syncs begun
        var asked: [Int: Int] = [:]   // caller -> syncs begun when it asked
        var doneAfter: [Int: Int] = [:]
        var succeeded = 0, failed = 0
    }

    /// Eight callers ask while a first sync is held: one more sync covers all of them (two syncs,
    /// not nine), and each returns only after a sync that began after it asked.
    @Test func callersWhoAskDuringASyncShareTheNextOne() throws {
        let c = SyncCoalescer()
        let r = Record()
        let holdFirst = DispatchSemaphore(value: 0), firstStarted = DispatchSemaphore(value: 0)
        let group = DispatchGroup()
        DispatchQueue.global().async(group: group) {
            try? c.run {
                r.lock.withLock { r.started += 1 }
                firstStarted.signal()
                holdFirst.wait()
            }
        }
        firstStarted.wait()
        for i in 0..<8 {
            DispatchQueue.global().async(group: group) {
                r.lock.withLock { r.asked[i] = r.started }
                try? c.run { r.lock.withLock { r.started += 1 } }
                r.lock.withLock { r.doneAfter[i] = r.started }
            }
        }
        // Every caller has asked (the coalescer counts it) before the first sync is let go.
        #expect(eventually(30) { c.pending == 9 }, "callers counted: \(c.pending)")
        holdFirst.signal()
        group.wait()
        #expect(c.syncs == 2, "syncs run: \(c.syncs)")
        for i in 0..<8 {
            #expect(r.doneAfter[i]! > r.asked[i]!, "caller \(i) returned after a sync that began after it asked")
        }
    }

    /// A sync that fails is no caller's success: the one that ran it gets the error, and the
    /// others it would have covered run another (here failing too, so every caller throws).
    @Test func aFailedSyncCoversNobody() {
        let c = SyncCoalescer()
        let r = Record()
        let group = DispatchGroup()
        for _ in 0..<6 {
            DispatchQueue.global().async(group: group) {
                do {
                    try c.run { throw Failed() }
                    r.lock.withLock { r.succeeded += 1 }
                } catch {
                    r.lock.withLock { r.failed += 1 }
                }
            }
        }
        group.wait()
        #expect(r.succeeded == 0 && r.failed == 6, "\(r.succeeded) told synced by a failed sync")
    }

    /// Through the library: commits each followed by syncLog from many threads at once all
    /// succeed, in at most as many syncs as asked. An SQLite catalog's log only: a server's
    /// commit is durable when it returns (syncLog does nothing there).
    @Test(.disabled(if: TestSupport.onPostgres, "a catalog on PostgreSQL has no log of its own to sync"))
    func theLibrarysLogSyncsAreShared() throws {
        let t = try TempLibrary()
        let library = t.library
        let r = Record()
        let group = DispatchGroup()
        for i in 0..<16 {
            DispatchQueue.global().async(group: group) {
                do {
                    try library.write { db in try db.execute(sql: "CREATE TABLE IF NOT EXISTS t\(i) (x)") }
                    try library.syncLog()
                    r.lock.withLock { r.succeeded += 1 }
                } catch {
                    r.lock.withLock { r.failed += 1 }
                }
            }
        }
        group.wait()
        #expect(r.succeeded == 16)
        #expect(library.logSyncs.syncs >= 1 && library.logSyncs.syncs <= 16)
    }
}
