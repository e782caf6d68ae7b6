import Glibc
import Synchronization

/// Lets a caller wait until every READ the daemon was serving has been replied to.
///
/// Why: a READ the daemon answered just before a revoke can reach the kernel's page cache just
/// *after* the revoke's invalidation dropped the pages (read-ahead in flight): the pages then stay,
/// and a handle opened before the revoke reads them from the cache without asking the daemon.
/// The mount therefore publishes the new view (so every later READ is refused), waits here for
/// the READs already under way (their replies insert their pages while the daemon writes them),
/// and only then invalidates. READs count themselves in one of two generations; `quiesce` flips
/// the generation and waits for the old one to drain. Atomic counters only: no lock on the READ
/// path.
final class ReadGate: Sendable {
    private let generation = Atomic<Int>(0)
    private let inFlight0 = Atomic<Int>(0)
    private let inFlight1 = Atomic<Int>(0)
    private let quiescing = Mutex<Void>(())

    @inline(__always) func enter() -> Int {
        let g = generation.load(ordering: .sequentiallyConsistent) & 1
        if g == 0 { inFlight0.add(1, ordering: .sequentiallyConsistent) } else { inFlight1.add(1, ordering: .sequentiallyConsistent) }
        return g
    }

    @inline(__always) func leave(_ g: Int) {
        if g == 0 { inFlight0.subtract(1, ordering: .sequentiallyConsistent) } else { inFlight1.subtract(1, ordering: .sequentiallyConsistent) }
    }

    /// Waits (at most `limit` seconds) until every READ that entered before this call has left.
    /// Returns false if it gave up. READs take microseconds; the bound only keeps a stuck reply
    /// (a hung reader of /dev/fuse) from stalling the caller for ever.
    @discardableResult
    func quiesce(limit: Double = 2) -> Bool {
        quiescing.withLock { _ in
            let old = generation.load(ordering: .sequentiallyConsistent) & 1
            generation.store(old ^ 1, ordering: .sequentiallyConsistent)
            var spins = 0
            var start = timespec()
            clock_gettime(CLOCK_MONOTONIC, &start)
            while (old == 0 ? inFlight0.load(ordering: .sequentiallyConsistent) : inFlight1.load(ordering: .sequentiallyConsistent)) > 0 {
                spins += 1
                if spins < 64 { sched_yield(); continue }
                var now = timespec()
                clock_gettime(CLOCK_MONOTONIC, &now)
                if Double(now.tv_sec - start.tv_sec) + Double(now.tv_nsec - start.tv_nsec) / 1e9 > limit { return false }
                usleep(50)
            }
            return true
        }
    }
}
