import PGSystem
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What each running mount has applied of the library's changes, so that a command that changed
/// the library (`photogate revoke`, `authorize`, `options`, `delete`...; not `grant`, which only
/// adds to what an app sees, unless it turns strip-location on) returns once every running mount shows the change, not merely once
/// it is committed: a script that revokes a photo and then starts the app must find it gone. Each
/// daemon keeps `run/acks/<pid>`: the change sequence number its view has applied (8 bytes,
/// little-endian), written after every refresh. The folder is not the one daemons watch (`run/`),
/// so an acknowledgment wakes no mount.
public enum MountAcks {
    /// A daemon's acknowledgment file, written after each refresh of its view.
    public final class Publisher {
        private let fd: Int32
        private let path: String

        public init?(run: RunFolder) {
            let name = String(getpid())
            let fd = pg_open_in_folder(run.path, RunFolder.acks, name, O_RDWR | O_CREAT | O_TRUNC, 0o600)
            guard fd >= 0 else { return nil }
            self.fd = fd
            path = run.path + "/" + RunFolder.acks + "/" + name
        }

        public func publish(_ seq: Int64) {
            var s = seq.littleEndian
            _ = pwrite(fd, &s, 8, 0)
        }

        /// At the daemon's end: no command waits for it any more.
        public func remove() {
            unlink(path)
            close(fd)
        }
    }

    /// The sequence number the daemon `pid` has acknowledged; nil when it keeps no file (an
    /// older daemon, or one that could not make it: not waited for).
    static func acknowledged(run: RunFolder, pid: Int32) -> Int64? {
        let fd = pg_open_in_folder(run.path, RunFolder.acks, String(pid), O_RDONLY, 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var s: Int64 = 0
        guard pread(fd, &s, 8, 0) == 8 else { return 0 }
        return Int64(littleEndian: s)
    }

    /// Waits until every running mount of the library has applied change `seq`, at most `timeout`
    /// seconds. Returns the mounts still behind then (a daemon stopped or too busy to answer).
    /// Every registered daemon still running counts, wherever its mount is now: one whose folder
    /// was renamed, or that was detached lazily while an app still uses it, serves all the same.
    public static func wait(for seq: Int64, run: RunFolder, timeout: Double) -> [MountRecord] {
        let live = MountRegistry.records(run).map(\.record).filter(MountRegistry.daemonAlive)
        guard !live.isEmpty else { return [] }
        let dir = run.path + "/" + RunFolder.acks
        // Watched before the files are read: an acknowledgment written in between still wakes us.
        let ifd = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        defer { if ifd >= 0 { close(ifd) } }
        if ifd >= 0 { _ = inotify_add_watch(ifd, dir, UInt32(IN_MODIFY | IN_CREATE | IN_DELETE)) }
        let deadline = Date().addingTimeInterval(timeout)
        var buf = [UInt8](repeating: 0, count: 4096)
        while true {
            let behind = live.filter { r in
                guard let acked = acknowledged(run: run, pid: r.pid) else { return false }
                return acked < seq && MountRegistry.daemonAlive(r)
            }
            let left = deadline.timeIntervalSinceNow
            if behind.isEmpty || left <= 0 { return behind }
            var p = pollfd(fd: ifd, events: Int16(POLLIN), revents: 0)
            // Without inotify, or to notice a daemon that died meanwhile: look again every 50 ms.
            _ = poll(&p, 1, Int32(min(left, 0.05) * 1000) + 1)
            if ifd >= 0 { while read(ifd, &buf, buf.count) > 0 {} }
        }
    }
}
