import Foundation
import GrantStore
import Testing
@testable import PhotoViewFS
#if canImport(Glibc)
import Glibc
#endif

/// A mount wakes for the bell only: other names in run/ (the in-use mark, ui-port, its folders being
/// made) must not make every mount query the database.
@Suite struct ChangeWatcherEvents {
    /// One inotify event as the kernel lays it out: wd, mask, cookie, len, then the name padded.
    func event(_ name: String, mask: UInt32 = UInt32(IN_CLOSE_WRITE)) -> [UInt8] {
        var nameBytes = Array(name.utf8) + [0]
        while nameBytes.count % 16 != 0 { nameBytes.append(0) }
        var out: [UInt8] = []
        for v in [UInt32(1), mask, 0, UInt32(nameBytes.count)] { withUnsafeBytes(of: v.littleEndian) { out += $0 } }
        return out + nameBytes
    }

    @Test func onlyTheBellRings() {
        let logs = event("mount-123.log") + event("mounts.tmp", mask: UInt32(IN_MOVED_TO))
        #expect(!ChangeWatcher.namesBell(logs, count: logs.count))
        let withBell = logs + event("bell")
        #expect(ChangeWatcher.namesBell(withBell, count: withBell.count))
        #expect(!ChangeWatcher.namesBell(event("bellows"), count: event("bellows").count))
    }

    @Test func anOverflowCountsAsARing() {
        var overflow: [UInt8] = []
        for v in [UInt32.max, UInt32(IN_Q_OVERFLOW), 0, 0] { withUnsafeBytes(of: v.littleEndian) { overflow += $0 } }
        #expect(ChangeWatcher.namesBell(overflow, count: overflow.count))
    }
}

/// The bell a library rings after a commit (GrantStore) is the one a mount's watcher hears
/// (PhotoViewFS): both name it through LibraryRun's `RunFolder`.
@Suite struct LibraryBellReachesWatcher {
    @Test func aCommitsRingWakesTheWatcher() throws {
        let dir = NSTemporaryDirectory() + "/photogate-bell-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let library = try Library.create(at: LibraryPaths(root: dir))
        let ifd = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        try #require(ifd >= 0)
        defer { close(ifd) }
        try #require(inotify_add_watch(ifd, library.paths.run, UInt32(IN_CLOSE_WRITE)) >= 0)
        library.ringBell()
        var buf = [UInt8](repeating: 0, count: 4096)
        let got = read(ifd, &buf, buf.count)
        try #require(got > 0)
        #expect(ChangeWatcher.namesBell(buf, count: got))
    }
}
