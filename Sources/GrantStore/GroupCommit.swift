import Foundation
import PGSystem
import Threads
#if canImport(Glibc)
import Glibc
#endif

/// Group commit of a mount's saves (issue 39): one sync of the catalog's log for every save that
/// closed meanwhile, on a thread of its own, instead of one in each app's close(2).
///
/// A save's close makes it durable with one sync, of its own file: the temp file carries its
/// ready marker (`ReadyMarker`: who wrote it, under which name, or which asset it edits) when it
/// is fsynced. Its catalog row then commits to the log without a sync (synchronous=NORMAL), and the
/// file is hard-linked to its store path, so the view and every reader find it at once. The
/// close returns. Should the machine die before the log is synced, the marked temp file is still
/// in the process's temp folder, and recovery commits it again from its marker (or, when its row
/// did survive, finds the row and the store file and lets the temp go): nothing a close said
/// was saved is lost, and nothing is there twice.
///
/// This thread syncs the log once for all the saves that arrived while it synced the last batch
/// (and, with `PHOTOGATE_COMMIT_DELAY_MS`, for a while before), and only then removes their temp
/// names, which were the record until then. Any other process's sync of the log covers these rows
/// too (the log is one file, synced in order).
///
/// Locking: `condition` guards `pending`, `inFlight` and `started`; it is never held across a
/// sync. A save's own file lock is not held here either.
final class GroupCommit: @unchecked Sendable {
    private let condition = NSCondition()
    /// Temp files whose rows are committed but maybe not durable yet.
    private var pending: [String] = []
    /// Batches being synced now (by the thread, or by `drain`).
    private var inFlight = 0
    private var started = false
    /// How long the thread gathers saves before a sync (`PHOTOGATE_COMMIT_DELAY_MS`, default 0:
    /// a sync starts as soon as the last one ended).
    private let delay: TimeInterval
    /// Not retained (the library owns this). Unsafe rather than unowned: the library drains this
    /// from its `deinit` (`letGo`), while a batch the thread is syncing may still use it; `drain`
    /// waits for that batch, so the library is never used once it is gone.
    private unowned(unsafe) let library: Library
    /// Syncs done, and saves they made durable (for tests and the bench).
    private(set) var syncs = 0
    private(set) var settled = 0

    init(library: Library) {
        self.library = library
        let ms = ProcessInfo.processInfo.environment["PHOTOGATE_COMMIT_DELAY_MS"].flatMap { Int($0) } ?? 0
        delay = Double(min(max(ms, 0), 600_000)) / 1000
    }

    /// A save whose row is committed: its temp name goes once the log is synced.
    func add(_ temp: String) {
        condition.lock()
        pending.append(temp)
        let start = !started
        started = true
        condition.broadcast()
        condition.unlock()
        guard start else { return }
        guard let thread = NativeThread.spawn(name: "photogate-commit", { [self] in loop() }) else {
            // No thread to be had (a process or memory limit): each save is settled by its own
            // close, as before group commit.
            condition.withLock { started = false }
            drain()
            return
        }
        thread.detach()
    }

    /// Everything committed so far is durable and its temp names are gone (a mount's end, a
    /// process letting go of the library). Waits for a batch the thread is syncing.
    func drain() {
        condition.lock()
        let batch = pending
        pending = []
        inFlight += 1
        condition.unlock()
        settle(batch)
        condition.lock()
        inFlight -= 1
        while inFlight > 0 { condition.wait() }
        condition.unlock()
    }

    private func loop() {
        while true {
            condition.lock()
            while pending.isEmpty { condition.wait() }
            if delay > 0 {
                let until = Date(timeIntervalSinceNow: delay)
                while Date() < until, condition.wait(until: until) {}
            }
            let batch = pending
            pending = []
            inFlight += 1
            condition.unlock()
            settle(batch)
            condition.lock()
            inFlight -= 1
            condition.broadcast()
            condition.unlock()
        }
    }

    /// One sync of the log for the batch, then their temp names go. A log that cannot be synced
    /// (removed or replaced under the process) leaves them where they are: recovery commits each
    /// from its marker, or finds its row.
    private func settle(_ batch: [String]) {
        guard !batch.isEmpty else { return }
        do { try library.syncLog() } catch { return }
        for temp in batch {
            _ = pg_removexattr(temp, ReadyMarker.xattr)
            unlink(temp + ".ready")
            unlink(temp)
        }
        condition.withLock {
            syncs += 1
            settled += batch.count
        }
    }
}
