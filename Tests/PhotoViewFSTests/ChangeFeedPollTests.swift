import Foundation
import Synchronization
import Testing
import TestSupport
import FUSE
@testable import GrantStore
@testable import PhotoLibrary
@testable import PhotoViewFS
#if canImport(Glibc)
import Glibc
#endif

/// Issue 14: `.photogate/changes` poll handles piled up in the daemon (5,000 opens and polls:
/// 34 -> 137 MB, not freed when the app exits). PhotoFS is mounted in this process so the test
/// counts the handles it keeps: at most one per open file, none after release.
@Suite(.serialized) struct ChangeFeedPolls {
    /// Mounts `fs` on a fresh folder, serves it on its own thread, runs `body`, and always
    /// unmounts (also when `body` throws); a watchdog unmounts a hung test.
    static func withMounted(_ fs: PhotoFS, in dir: String, _ body: (String) throws -> Void) throws {
        let mp = dir + "/mnt"
        try FileManager.default.createDirectory(atPath: mp, withIntermediateDirectories: true)
        let session = try FUSESession(operations: fs, options: MountOptions(fsName: "photogate-test", subtype: "photogate",
                                                                            threads: 4, passthrough: false))
        try session.mount(at: mp)
        fs.setInvalidator(session)
        let finished = DispatchSemaphore(value: 0)
        let thread = Thread { _ = session.run(); finished.signal() }
        thread.start()
        let watchdog = DispatchWorkItem { session.unmount() }
        DispatchQueue.global().asyncAfter(deadline: .now() + 120, execute: watchdog)
        defer {
            watchdog.cancel()
            fs.setInvalidator(nil)
            session.unmount()
            if finished.wait(timeout: .now() + 60) != .success { umount2(mp, Int32(MNT_DETACH)) }
            #expect(!Self.mounted(mp), "a mount is left at \(mp)")
        }
        try #require(session.waitUntilReady(timeout: 60), "INIT not processed")
        try body(mp)
    }

    static func mounted(_ path: String) -> Bool {
        let text = TestSupport.readWhole("/proc/self/mounts") ?? ""
        return text.split(separator: "\n").contains { $0.split(separator: " ").dropFirst().first.map(String.init) == path }
    }


    /// poll(2) that sleeps (1 ms): the kernel asks the daemon to notify, handing it a handle.
    static func sleepingPoll(_ fd: Int32) -> Int32 {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, 1)
    }

    @Test func onePollHandlePerOpenFileFreedAtRelease() throws {
        guard access("/dev/fuse", R_OK | W_OK) == 0, getuid() == 0 else {
            print("onePollHandlePerOpenFileFreedAtRelease: SKIPPED — needs /dev/fuse and root to mount in process")
            return
        }
        let dir = TestSupport.tempDir("polls")
        defer { TestSupport.remove(dir) }
        let library = try Library.create(at: LibraryPaths(root: dir + "/library"))
        let app = AppID("org.example.Poller")!
        _ = try library.authorize(app, access: .readWrite, status: .limited)
        let fs = try PhotoFS(library: LibraryStorePort(library), app: app, access: .readWrite, passthrough: false)
        let pollers = { fs.feed.withLock { $0.pollers.count } }
        try Self.withMounted(fs, in: dir) { mp in
            let changes = mp + "/.photogate/changes"
            // One open file polled 100 times keeps one handle (the newest).
            let fd = open(changes, O_RDONLY | O_CLOEXEC)
            try #require(fd >= 0, "open: \(Errno.current)")
            #expect(Self.sleepingPoll(fd) == 0)
            #expect(pollers() == 1, "the daemon got a poll handle")
            for _ in 0..<100 { _ = Self.sleepingPoll(fd) }
            #expect(pollers() == 1, "repeated polls of one file keep one handle")
            close(fd)
            #expect(eventually(every: 2_000) { pollers() == 0 }, "released with its file: \(pollers()) left")
            // 5,000 opens, polls and closes: bounded while it runs, none left after.
            var most = 0
            for i in 0..<5000 {
                let f = open(changes, O_RDONLY | O_CLOEXEC)
                try #require(f >= 0, "open #\(i): \(Errno.current)")
                _ = Self.sleepingPoll(f)
                close(f)
                if i % 100 == 0 { most = max(most, pollers()) }
            }
            #expect(most < 100, "poll handles of closed files are freed as they close (most seen: \(most))")
            #expect(eventually(every: 2_000) { pollers() == 0 }, "\(pollers()) poll handles left after every file closed")
            // The feed still wakes a sleeping reader after all that.
            let g = open(changes, O_RDONLY | O_CLOEXEC)
            try #require(g >= 0)
            defer { close(g) }
            #expect(Self.sleepingPoll(g) == 0 && pollers() == 1)
            _ = try library.authorize(app, access: .readWrite, status: .authorized)
            fs.refresh()
            var p = pollfd(fd: g, events: Int16(POLLIN), revents: 0)
            #expect(poll(&p, 1, 60_000) == 1 && p.revents & Int16(POLLIN) != 0, "a change wakes the poller")
        }
    }
}
