import Foundation
import PhotoLibrary
import Synchronization
import Threads
#if canImport(Glibc)
import Glibc
#endif

/// The access report's recorder (issue 36): what the app did to each asset through this mount
/// (read, created, edited, deleted, refused), tallied in memory per asset, kind and UTC day, and
/// handed to the library in one batch every few seconds by a thread of its own. A request pays
/// one clock read, one lock and one dictionary update; it never waits for the database. A crash
/// loses at most the tallies of the last interval, never writes a wrong one (a batch is one
/// transaction).
///
/// Bounded: at `capacity` tallies the thread is woken to write them at once; past twice that
/// (the database locked for long), new tallies are dropped and counted (the log says how many),
/// while those already held keep counting (a batch whose write failed goes back whole).
public final class AccessRecorder: @unchecked Sendable {
    struct Key: Hashable {
        var rowID: Int64
        var kind: AccessKind
        var day: Int64
    }
    struct Tally {
        var first: Int64
        var last: Int64
        var count: Int64
    }
    private struct State {
        var pending: [Key: Tally] = [:]
        var dropped = 0
        var thread: NativeThread?
        var stopping = false
    }

    private let app: AppID
    private let library: any LibraryPort
    private let log: @Sendable (String) -> Void
    private let state = Mutex(State())
    /// Wakes the writing thread early (full, or stopping).
    private let wake = DispatchSemaphore(value: 0)
    /// Whether the library records at all (`photogate report --recording off`); learned at each
    /// batch, so a change reaches a running mount within an interval.
    let enabled = Atomic<Bool>(true)
    let interval: Double
    let capacity: Int
    /// Days past the retention are pruned by the mount now and then (each hour), and by
    /// `photogate report` itself.
    private var lastPrune: Double = 0

    init(app: AppID, library: any LibraryPort, log: @escaping @Sendable (String) -> Void,
         environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.app = app
        self.library = library
        self.log = log
        // PHOTOGATE_REPORT=off: a mount that records nothing (benchmarks compare the two).
        if environment["PHOTOGATE_REPORT"] == "off" { enabled.store(false, ordering: .relaxed) }
        interval = max(0.05, Double(environment["PHOTOGATE_REPORT_FLUSH_MS"] ?? "").map { $0 / 1000 } ?? 5)
        capacity = max(16, Int(environment["PHOTOGATE_REPORT_CAPACITY"] ?? "") ?? 65_536)
        forcedOff = environment["PHOTOGATE_REPORT"] == "off"
        // Recording turned off by the person: nothing is noted from the start, and the thread
        // runs now, to learn when it is turned on again.
        if !forcedOff, (try? library.recordAccess(app, [], prune: false)) == false {
            enabled.store(false, ordering: .relaxed)
            state.withLock { $0.thread = start() }
        }
    }
    private let forcedOff: Bool

    /// Seconds since 1970, from the coarse clock (no system call).
    static func now() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME_COARSE, &ts)
        return Int64(ts.tv_sec)
    }

    /// Notes one access. `counts`: false for a read that is not the start of one (a --no-open
    /// mount's later reads of a file), which updates the last time only.
    func note(_ rowID: Int64, _ kind: AccessKind, counts: Bool = true) {
        guard enabled.load(ordering: .relaxed) else { return }
        let now = AccessRecorder.now()
        let key = Key(rowID: rowID, kind: kind, day: AccessRecorder.day(now))
        let full = state.withLock { s -> Bool in
            if s.stopping { return false }
            if var t = s.pending[key] {
                t.last = max(t.last, now)
                if counts { t.count += 1 }
                s.pending[key] = t
                return false
            }
            if s.pending.count >= 2 * capacity { s.dropped += 1; return false }
            s.pending[key] = Tally(first: now, last: now, count: counts ? 1 : 0)
            // The thread starts with the first access (a mount no app reads costs nothing).
            if s.thread == nil { s.thread = start() }
            return s.pending.count == capacity
        }
        if full { wake.signal() }
    }

    static func day(_ seconds: Int64) -> Int64 {
        seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
    }

    /// The writing thread (called once, under the state lock; the thread takes it only later).
    private func start() -> NativeThread? {
        let t = NativeThread.spawn(name: "photogate-report") { [self] in
            while true {
                _ = wake.wait(timeout: .now() + interval)
                let stop = state.withLock { $0.stopping }
                flush()
                if stop { return }
            }
        }
        if t == nil { log("access report: no thread to write it; this mount records nothing") }
        if t == nil { enabled.store(false, ordering: .relaxed) }
        return t
    }

    /// One flush at a time (the thread's, a test's, the last at `stop`), and none while an
    /// asset is dissolved (`dissolving`): a batch taken before a dissolve and written after it
    /// put back the `created` of a temp file that was never a photo.
    private let flushing = NSLock()

    /// Writes what is held, in one transaction. On a failure the tallies go back (within the
    /// bound) for the next try.
    func flush() {
        flushing.lock()
        defer { flushing.unlock() }
        let (batch, dropped) = state.withLock { s -> ([Key: Tally], Int) in
            defer { s.pending = [:]; s.dropped = 0 }
            return (s.pending, s.dropped)
        }
        if dropped > 0 { log("access report: \(dropped) accesses not recorded (the report could not be written fast enough)") }
        let wall = Date().timeIntervalSince1970
        let prune = wall - lastPrune > 3600
        // Nothing to write: still asks whether recording is on (a read), while it is off, so
        // that turning it on again reaches this mount.
        if batch.isEmpty && !prune && (enabled.load(ordering: .relaxed) || forcedOff) { return }
        let tallies = batch.map { k, t in
            AccessTally(rowID: k.rowID, kind: k.kind, day: k.day, first: t.first, last: t.last, count: t.count)
        }
        do {
            let on = try library.recordAccess(app, tallies, prune: prune)
            if prune { lastPrune = wall }
            if !forcedOff { enabled.store(on, ordering: .relaxed) }
        } catch {
            // The batch goes back whole, before what arrived since: an access already held is
            // never dropped for a newer one. New keys that arrived meanwhile stay as far as the
            // bound allows (twice the capacity), the rest dropped and counted as in `note`; so
            // what is held never passes the bound, however many writes fail in a row (it grew
            // by the bound at each failed write while new keys kept coming).
            state.withLock { s in
                var merged = batch
                var dropped = 0
                for (k, now) in s.pending {
                    if let t = merged[k] {
                        merged[k] = Tally(first: min(t.first, now.first), last: max(t.last, now.last), count: t.count + now.count)
                    } else if merged.count < 2 * capacity {
                        merged[k] = now
                    } else {
                        dropped += 1
                    }
                }
                s.pending = merged
                s.dropped += dropped
            }
            log("access report: could not record \(tallies.count) tallies now (kept for the next try): \(error)")
        }
    }

    /// Runs `dissolve`, which makes an asset gone as if it never was (an editor's temp file
    /// dissolved into the photo it saved, its report rows deleted with it), with no batch in
    /// flight, then forgets what is held of it: no tally of it is written after.
    func dissolving<T>(_ rowID: Int64, _ dissolve: () throws -> T) rethrows -> T {
        flushing.lock()
        defer { flushing.unlock() }
        let result = try dissolve()
        state.withLock { s in
            for k in s.pending.keys where k.rowID == rowID { s.pending[k] = nil }
        }
        return result
    }

    /// The mount is ending: writes what is held and stops the thread.
    public func stop() {
        let thread = state.withLock { s -> NativeThread? in
            s.stopping = true
            return s.thread
        }
        if let thread, !thread.isCurrent {
            wake.signal()
            thread.join()
        } else {
            flush()
        }
    }
}
