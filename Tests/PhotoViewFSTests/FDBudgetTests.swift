import Foundation
import Synchronization
import Testing
import FUSE
@testable import PhotoViewFS
#if canImport(Glibc)
import Glibc
#endif

/// Issue 14: one app opening one granted file 20,000 times ran the daemon out of descriptors.
/// The budget refuses the excess open with EMFILE and leaves the descriptors the daemon needs.
@Suite(.serialized) struct FDBudgetTests {
    @Test func refusesBeyondTheLimitWithEMFILEAndTakesBackWhatIsReleased() throws {
        let b = FDBudget(limit: 3)
        for _ in 0..<3 { try b.acquire() }
        #expect(b.inUse == 3)
        #expect(throws: Errno(EMFILE)) { try b.acquire() }
        #expect(b.inUse == 3, "a refused acquire takes nothing")
        b.release()
        try b.acquire()
        #expect(b.inUse == 3)
        for _ in 0..<3 { b.release() }
        #expect(b.inUse == 0)
    }

    /// Users other than the owner: each within an eighth of the budget, all within half.
    @Test func otherUsersShareHalfTheBudgetAnEighthEach() throws {
        let b = FDBudget(limit: 160)
        #expect(b.perUserLimit == 20 && b.othersLimit == 80)
        for _ in 0..<20 { try b.charge(user: 1001) }
        #expect(throws: Errno(EMFILE)) { try b.charge(user: 1001) }
        for u: UInt32 in 1002...1004 { for _ in 0..<20 { try b.charge(user: u) } }
        #expect(b.heldByOthers() == 80)
        #expect(throws: Errno(EMFILE)) { try b.charge(user: 1005) }
        b.uncharge(user: 1001)
        #expect(b.heldByOthers(user: 1001) == 19)
        try b.charge(user: 1005)
        #expect(throws: Errno(EMFILE)) { try b.charge(user: 1001) }
        b.uncharge(user: 4242)   // never charged: nothing
        #expect(b.heldByOthers() == 80)
    }

    /// Real descriptors: an app's opens stop at the budget, and the process can still open files
    /// (the reserve), and everything comes back at close.
    @Test func openingStopsAtTheBudgetAndLeavesTheRestOfTheProcessWorking() throws {
        let b = FDBudget(limit: 64)
        // A file of this test's own: after the close, its descriptor numbers may be reused by
        // tests running alongside, but never for this file.
        let path = NSTemporaryDirectory() + "/photogate-fdbudget-\(UUID().uuidString)"
        #expect(FileManager.default.createFile(atPath: path, contents: Data()))
        defer { unlink(path) }
        var mine = stat()
        #expect(stat(path, &mine) == 0)
        var fds: [Int32] = []
        var refused: Errno?
        for _ in 0..<1000 {
            do {
                let fd = try b.opening { open(path, O_RDONLY | O_CLOEXEC) }
                #expect(fd >= 0)
                fds.append(fd)
            } catch {
                refused = error
                break
            }
        }
        #expect(fds.count == 64)
        #expect(refused == Errno(EMFILE))
        // Outside the budget, the process still opens files.
        let other = open("/dev/null", O_RDONLY | O_CLOEXEC)
        #expect(other >= 0)
        close(other)
        for fd in fds { b.close(fd) }
        #expect(b.inUse == 0)
        for fd in fds {
            var st = stat()
            #expect(fstat(fd, &st) != 0 || st.st_ino != mine.st_ino || st.st_dev != mine.st_dev, "descriptor \(fd) not closed by the budget")
        }
        // A failed open gives its share back and keeps its errno.
        let missing = try b.opening { open("/nonexistent/photogate-fd-budget", O_RDONLY) }
        #expect(missing == -1 && errno == ENOENT)
        #expect(b.inUse == 0)
    }

    @Test func concurrentHoldersNeverExceedTheLimit() async throws {
        let b = FDBudget(limit: 10)
        let peak = Atomic<Int>(0)
        let refusals = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<2000 {
                do {
                    try b.acquire()
                    let now = b.inUse
                    var seen = peak.load(ordering: .relaxed)
                    while now > seen {
                        let (done, was) = peak.compareExchange(expected: seen, desired: now, ordering: .relaxed)
                        if done { break }
                        seen = was
                    }
                    b.release()
                } catch {
                    refusals.add(1, ordering: .relaxed)
                }
            }
        }
        #expect(peak.load(ordering: .relaxed) <= 10)
        #expect(b.inUse == 0)
    }

    /// The daemon's budget raises the soft limit to the hard limit and keeps a reserve.
    @Test func theMountBudgetRaisesTheSoftLimitAndKeepsAReserve() throws {
        let budget = FDBudget.mount
        var rl = rlimit()
        #expect(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &rl) == 0)
        #expect(rl.rlim_cur == rl.rlim_max, "soft limit raised to the hard limit")
        #expect(budget.limit == max(16, Int(rl.rlim_cur) - FDBudget.reserve))
    }
}
