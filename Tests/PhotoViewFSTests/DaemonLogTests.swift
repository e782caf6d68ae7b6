import Foundation
import Synchronization
import Testing
import TestSupport
@testable import PhotoViewFS
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's log stays bounded whatever apps or other users make it log (found by a hostile
/// review: another user looping refused opens grew the owner's log by 25 MB in 5 s).
@Suite struct DaemonLogTests {
    /// A clock the test moves by hand.
    final class Clock: Sendable {
        let now = Mutex<Double>(1000)
        func advance(_ s: Double) { now.withLock { $0 += s } }
    }

    /// A log file in `<dir>/logs/test.log`, opened as the daemon's is (append), on a descriptor of its own.
    func logFile() -> (dir: String, path: String, fd: Int32) {
        let dir = TestSupport.tempDir("daemonlog")
        mkdir(dir + "/logs", 0o700)
        let path = dir + "/logs/test.log"
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        return (dir, path, fd)
    }

    func lines(_ path: String) -> [String] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    @Test func repeatsPastTheBurstAreCountedNotWritten() throws {
        let (dir, path, fd) = logFile()
        defer { close(fd); TestSupport.remove(dir) }
        let clock = Clock()
        let log = DaemonLog(limits: .init(window: 60, burst: 3), fds: [fd], clock: { clock.now.withLock { $0 } })
        log.log("mounted x")
        for _ in 0..<10_000 { log.log("refused a.jpg to x: its original changed") }
        log.log("an error, once")
        var l = lines(path)
        #expect(l.count == 5, "\(l)")
        #expect(l.first == "mounted x")
        #expect(l.filter { $0.hasPrefix("refused a.jpg") }.count == 3)
        #expect(l.last == "an error, once", "a one-off line is never held back")
        // After the window the line is written again, with how many were not.
        clock.advance(61)
        log.log("refused a.jpg to x: its original changed")
        l = lines(path)
        #expect(l.last?.contains("9997 more times") == true, "\(l.last ?? "")")
        // At the end, counts not written yet are.
        for _ in 0..<10 { log.log("refused a.jpg to x: its original changed") }
        log.flush()
        #expect(lines(path).last?.contains("8 more times") == true, "\(lines(path).last ?? "")")
    }

    @Test func theLimiterRemembersBoundedlyManyLines() throws {
        let (dir, path, fd) = logFile()
        defer { close(fd); TestSupport.remove(dir) }
        let log = DaemonLog(limits: .init(window: 60, burst: 1, keys: 64), fds: [fd], clock: { 0 })
        for i in 0..<1000 { log.log("line \(i)"); log.log("line \(i)") }
        let l = lines(path)
        #expect(l.filter { $0.hasPrefix("line 999") }.count <= 2)
        #expect(l.count >= 1000 && l.count <= 2000, "\(l.count)")
    }

    /// Distinct lines without end: the file is rotated once past its limit, one old file kept.
    @Test func theFileIsRotatedPastItsLimitKeepingOneOldFile() throws {
        let (dir, path, fd) = logFile()
        defer { close(fd); TestSupport.remove(dir) }
        let log = DaemonLog(limits: .init(maxBytes: 64 << 10), fds: [fd], clock: { 0 })
        #expect(log.attach(DaemonLog.File(folder: dir, sub: "logs", name: "test.log")))
        log.log("mounted x")
        for i in 0..<20_000 { log.log("refused file-\(i).jpg to x: its original changed after it was imported") }
        let names = try FileManager.default.contentsOfDirectory(atPath: dir + "/logs").sorted()
        #expect(names == ["test.log", "test.log.1"])
        for n in names {
            var st = stat()
            #expect(stat(dir + "/logs/" + n, &st) == 0 && st.st_size < 80 << 10, "\(n): \(st.st_size) bytes")
            #expect(st.st_mode & 0o077 == 0, "\(n) is the owner's alone")
        }
        #expect(lines(path).last?.hasPrefix("refused file-19999.jpg") == true, "the descriptor follows the new file")
        #expect(lines(path).first?.hasPrefix("log continued from test.log.1") == true)
    }

    /// A descriptor that is not the named file (stderr on a terminal, a journal) is never rotated.
    @Test func onlyTheFileWrittenToIsRotated() throws {
        let (dir, _, fd) = logFile()
        defer { close(fd); TestSupport.remove(dir) }
        let other = open(dir + "/logs/elsewhere.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        defer { close(other) }
        let log = DaemonLog(limits: .init(maxBytes: 4096), fds: [other], clock: { 0 })
        #expect(!log.attach(DaemonLog.File(folder: dir, sub: "logs", name: "test.log")))
        for i in 0..<1000 { log.log("line \(i)") }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir + "/logs").sorted() == ["elsewhere.log", "test.log"])
    }
}
