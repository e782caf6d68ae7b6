import Foundation
import Testing
@testable import PhotoViewFS

/// Which process a close comes from (`PhotoFS.process(of:)`): only the opener's close commits a
/// file, so the thread group read from /proc must be exact, and a status without one says so.
@Suite struct CloserProcess {
    @Test func theTgidLineIsReadFromAStatus() {
        let status = "Name:\tcp\nUmask:\t0022\nState:\tR (running)\nTgid:\t41234\nNgid:\t0\nPid:\t41240\nPPid:\t1\n"
        #expect(PhotoFS.tgid(inStatus: Array(status.utf8)) == 41234)
        // At the end, without a newline; spaces rather than a tab.
        #expect(PhotoFS.tgid(inStatus: Array("Name:\tx\nTgid:   7".utf8)) == 7)
    }

    @Test func aStatusWithoutAWholeTgidLineGivesNothing() {
        #expect(PhotoFS.tgid(inStatus: []) == nil)
        #expect(PhotoFS.tgid(inStatus: Array("Name:\tTgid: 5\nPid:\t9\n".utf8)) == nil)   // not at a line's start
        #expect(PhotoFS.tgid(inStatus: Array("Tgid:\t\n".utf8)) == nil)
        #expect(PhotoFS.tgid(inStatus: Array("Tgid:\t12x\n".utf8)) == nil)
        #expect(PhotoFS.tgid(inStatus: Array("Tgid:\t99999999999\n".utf8)) == nil)
        #expect(PhotoFS.tgid(inStatus: Array("XTgid:\t5\n".utf8)) == nil)
    }

    @Test func thisProcessIsFoundFromAnyOfItsThreads() throws {
        let me = getpid()
        #expect(PhotoFS.process(of: me) == me)
        let tids = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").compactMap { Int32($0) }
        let other = try #require(tids.first { $0 != me }, "a test process has more than one thread")
        #expect(PhotoFS.process(of: other) == me)
    }
}
