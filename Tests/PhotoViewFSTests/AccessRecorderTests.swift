import Foundation
import Testing
import TestSupport
@testable import PhotoViewFS
import PhotoLibrary
import Synchronization

/// The access report's recorder (issue 36): tallies in memory, bounded, written in batches.
@Suite struct AccessRecorderTests {
    let app = AppID("org.example.Recorded")!

    @Test func accessesAreTalliedAndWrittenInOneBatchAtTheEnd() throws {
        let lib = try FakeLibrary()
        let r = AccessRecorder(app: app, library: lib, log: { _ in }, environment: ["PHOTOGATE_REPORT_FLUSH_MS": "600000"])
        for _ in 0..<1000 { r.note(7, .read) }
        r.note(7, .read, counts: false)
        r.note(8, .created)
        r.note(8, .deleted)
        #expect(lib.accessBatches.isEmpty, "written before its interval or its end")
        r.stop()
        let tallies = lib.accessBatches.flatMap(\.tallies)
        #expect(lib.accessBatches.count == 1 && lib.accessBatches[0].app == app)
        #expect(tallies.count == 3)
        #expect(tallies.first { $0.rowID == 7 && $0.kind == .read }?.count == 1000)
        #expect(Set(tallies.filter { $0.rowID == 8 }.map(\.kind)) == [.created, .deleted])
        // Nothing is taken once stopped.
        r.note(9, .read)
        #expect(lib.accessBatches.count == 1)
    }

    /// At `capacity` tallies the thread writes at once; past twice that (the database slow),
    /// new ones are dropped and counted, never held without bound (a failed batch goes back
    /// whole: at most four times the capacity in all).
    @Test func memoryIsBounded() throws {
        let lib = try FakeLibrary()
        let logged = LogLines()
        let r = AccessRecorder(app: app, library: lib, log: { logged.add($0) },
                               environment: ["PHOTOGATE_REPORT_FLUSH_MS": "600000", "PHOTOGATE_REPORT_CAPACITY": "16"])
        lib.failAccess = true
        for i in 0..<100 { r.note(Int64(i), .read) }
        // The full buffer woke the thread, whose write failed: the tallies stay, bounded.
        #expect(eventually(30) { logged.lines.contains { $0.contains("could not record") } })
        lib.failAccess = false
        r.stop()
        let written = lib.accessBatches.flatMap(\.tallies)
        // Held at most: twice the capacity of new keys, plus a failed batch put back whole
        // (itself at most twice the capacity).
        #expect(written.count <= 4 * 16 && written.count >= 16, "\(written.count) tallies held")
        #expect(logged.lines.contains { $0.contains("not recorded") })
    }
}

extension AccessRecorderTests {
    /// A batch whose write failed goes back before what arrived meanwhile: a flood during a
    /// locked database cannot push out an access already held (it did: the batch was put back
    /// only where room was left).
    @Test func aFailedBatchIsKeptBeforeWhatCameAfter() throws {
        let lib = try FakeLibrary()
        let r = AccessRecorder(app: app, library: lib, log: { _ in },
                               environment: ["PHOTOGATE_REPORT_FLUSH_MS": "600000", "PHOTOGATE_REPORT_CAPACITY": "16"])
        r.note(4242, .read)
        lib.failAccess = true
        lib.whileAccessFails = { for i in 0..<100 { r.note(Int64(i), .read) } }
        r.flush()
        // No more new keys, then one more failed write: it waits for a write the recorder's own
        // thread may have in flight (woken at capacity, it may have run the hook and be about to
        // fail or, once writes succeed, to write), so that what is held is written once, below.
        // (Turning failures off first let that write succeed with its batch while the hook's new
        // keys were held: two batches written, 64 tallies under load.)
        lib.whileAccessFails = nil
        r.flush()
        lib.failAccess = false
        r.stop()
        let written = lib.accessBatches.flatMap(\.tallies)
        #expect(written.contains { $0.rowID == 4242 }, "the access held before the flood was lost")
        // The bound: twice the capacity of new keys, the writing thread's failed batch put back
        // (at most as many), and this test's own batch of one.
        #expect(written.count <= 4 * 16 + 1, "\(written.count) tallies held")
    }
}

extension AccessRecorderTests {
    /// Failed writes in a row while new keys keep coming: what is held stays within twice the
    /// capacity (it grew by that much at each failed write), the held keys kept first.
    @Test func failedWritesInARowStayWithinTheBound() throws {
        let lib = try FakeLibrary()
        let logged = LogLines()
        let r = AccessRecorder(app: app, library: lib, log: { logged.add($0) },
                               environment: ["PHOTOGATE_REPORT_FLUSH_MS": "600000", "PHOTOGATE_REPORT_CAPACITY": "16"])
        r.note(4242, .read)
        lib.failAccess = true
        var next: Int64 = 0
        for _ in 0..<10 {
            // Each failed write, new keys arrive while it holds its batch.
            let base = next
            lib.whileAccessFails = { for i in 0..<40 { r.note(base + Int64(i), .read) } }
            r.flush()
            next += 40
        }
        // No more new keys, then one more failed write: it waits for a write the recorder's own
        // thread may have in flight (woken at capacity, it may have run the hook and be about to
        // fail or, once writes succeed, to write), so that what is held is written once, below.
        // (Turning failures off first let that write succeed with its batch while the hook's new
        // keys were held: two batches written, 64 tallies under load.)
        lib.whileAccessFails = nil
        r.flush()
        lib.failAccess = false
        r.stop()
        let written = lib.accessBatches.flatMap(\.tallies)
        #expect(written.contains { $0.rowID == 4242 }, "the first access held was lost")
        #expect(written.count <= 2 * 16, "\(written.count) tallies held")
        #expect(logged.lines.contains { $0.contains("not recorded") })
    }

    /// A dissolve waits for a batch in flight: written after the dissolve, it put back the
    /// `created` of the editor's temp file the dissolve had just deleted from the report.
    @Test func aDissolveWaitsForTheBatchInFlight() throws {
        let lib = try FakeLibrary()
        let r = AccessRecorder(app: app, library: lib, log: { _ in },
                               environment: ["PHOTOGATE_REPORT_FLUSH_MS": "600000"])
        r.note(7, .created)
        let entered = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        lib.beforeAccessWrite = { entered.signal(); release.wait() }
        let flushed = DispatchSemaphore(value: 0)
        Thread.detachNewThread { r.flush(); flushed.signal() }
        entered.wait()
        lib.beforeAccessWrite = nil
        let seen = Mutex<Int?>(nil)
        let dissolved = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            r.dissolving(7) { seen.withLock { $0 = lib.accessBatches.count } }
            dissolved.signal()
        }
        // While the batch is held, the dissolve must not run (it ran at once before the fix).
        let ranEarly = dissolved.wait(timeout: .now() + 1) == .success
        release.signal()
        flushed.wait()
        if !ranEarly { dissolved.wait() }
        #expect(!ranEarly, "the dissolve ran while a batch was in flight")
        #expect(seen.withLock { $0 } == 1, "the dissolve saw the batch written before it")
        r.note(7, .read)
        r.stop()
    }
}

final class LogLines: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [String] = []
    func add(_ s: String) { lock.lock(); list.append(s); lock.unlock() }
    var lines: [String] { lock.lock(); defer { lock.unlock() }; return list }
}
