import FUSE
import Foundation
import PhotoLibrary
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Wakes a mount when the library changes: inotify on the library's bell file (rung after every
/// committed change by any photogate process), plus a slow safety check of the change sequence.
/// Idle cost: one blocked poll(2).
final class ChangeWatcher: @unchecked Sendable {
    let fs: PhotoFS
    let stopPipe: [Int32]

    init(fs: PhotoFS) {
        self.fs = fs
        var p: [Int32] = [0, 0]
        _ = pipe(&p)
        for fd in p { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        stopPipe = p
    }

    func start() {
        NativeThread.detached(name: "photogate-watcher") { [self] in loop() }
    }

    func stop() {
        var b: UInt8 = 1
        _ = Glibc.write(stopPipe[1], &b, 1)
    }

    private func loop() {
        let ifd = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        defer { if ifd >= 0 { close(ifd) } }
        if ifd >= 0 {
            _ = inotify_add_watch(ifd, fs.library.runDir, UInt32(IN_CLOSE_WRITE | IN_MODIFY | IN_MOVED_TO | IN_CREATE))
        }
        var lastSeq = fs.model.withLock { $0.seq }
        var buf = [UInt8](repeating: 0, count: 4096)
        while true {
            var fds = [pollfd(fd: ifd, events: Int16(POLLIN), revents: 0), pollfd(fd: stopPipe[0], events: Int16(POLLIN), revents: 0)]
            let n = poll(&fds, 2, 5000)
            if n < 0 && errno != EINTR { return }
            if fds[1].revents != 0 { return }
            if fds[0].revents != 0 { while read(ifd, &buf, buf.count) > 0 {} }
            guard let seq = try? fs.library.lastChange() else { continue }
            if seq != lastSeq {
                fs.refresh()
                lastSeq = fs.model.withLock { $0.seq }
                if lastSeq < seq { lastSeq = seq }
            }
        }
    }
}
