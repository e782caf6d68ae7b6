import Foundation
import Testing
import TestSupport
@testable import PhotoViewFS
import PhotoLibrary

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
        lib.failAccess = false
        lib.whileAccessFails = nil
        r.stop()
        let written = lib.accessBatches.flatMap(\.tallies)
        #expect(written.contains { $0.rowID == 4242 }, "the access held before the flood was lost")
        // The bound: twice the capacity of new keys, the writing thread's failed batch put back
        // (at most as many), and this test's own batch of one.
        #expect(written.count <= 4 * 16 + 1, "\(written.count) tallies held")
    }
}

final class LogLines: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [String] = []
    func add(_ s: String) { lock.lock(); list.append(s); lock.unlock() }
    var lines: [String] { lock.lock(); defer { lock.unlock() }; return list }
}
