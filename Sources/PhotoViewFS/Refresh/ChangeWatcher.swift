import FUSE
import Foundation
import LibraryRun
import PhotoLibrary
import Synchronization
import Threads
#if canImport(Glibc)
import Glibc
#endif

/// Wakes a mount when the library changes: inotify on the library's bell file (rung after every
/// committed change by any photogate process), plus a slow safety check of the change sequence.
/// Idle cost: one blocked poll(2).
final class ChangeWatcher: @unchecked Sendable {
    let fs: PhotoFS
    let stopPipe: [Int32]
    /// Whether the view is blanked (fail closed, a catalog on a server: issue 41).
    let blanked = Atomic<Bool>(false)
    let stopping = Atomic<Bool>(false)

    init(fs: PhotoFS) {
        self.fs = fs
        var p: [Int32] = [0, 0]
        _ = pipe(&p)
        for fd in p { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        stopPipe = p
    }

    func start() {
        NativeThread.detached(name: "photogate-watcher") { [self] in loop() }
        if fs.library.catalogIsRemote {
            NativeThread.detached(name: "photogate-failclosed") { [self] in failClosedLoop() }
        }
    }

    func stop() {
        stopping.store(true, ordering: .relaxed)
        var b: UInt8 = 1
        _ = Glibc.write(stopPipe[1], &b, 1)
    }

    /// Blanks the view once the catalog has gone unconfirmed past the fail-closed delay, on a
    /// thread of its own: the watcher's loop may be blocked meanwhile in a statement the server
    /// does not answer (a partition, a hung server: until the statement's timeout, 30 s), and the
    /// view must not go on showing what may have been revoked for that long.
    private func failClosedLoop() {
        while !stopping.load(ordering: .relaxed) {
            // Blank (change position -1) it stays: a refresh that ran meanwhile is blanked again.
            if fs.library.failsClosed, fs.model.withLock({ $0.seq }) >= 0 {
                if !blanked.exchange(true, ordering: .relaxed) {
                    fs.log("the catalog has not answered for too long: this view shows nothing until it does (fail closed)")
                }
                fs.blank()
            }
            var ts = timespec(tv_sec: 0, tv_nsec: 200_000_000)
            nanosleep(&ts, nil)
        }
    }

    private func loop() {
        let ifd = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        defer { if ifd >= 0 { close(ifd) } }
        // The bell is opened, written and closed once per change: IN_CLOSE_WRITE alone wakes
        // once per ring (IN_MODIFY doubled every wake); the other names in run/ (the in-use mark,
        // ui-port, its folders being made) are filtered out by name below without touching the
        // database. What daemons write inside run/'s folders (logs/, mounts/, acks/) is not
        // reported for run/ at all (RunFolder).
        let watchMask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE) | UInt32(IN_DONT_FOLLOW) | UInt32(IN_ONLYDIR)
        if ifd >= 0 { _ = inotify_add_watch(ifd, fs.library.runDir, watchMask) }
        var runFolder = ChangeWatcher.folderIdentity(fs.library.runDir)
        var lastSeq = fs.model.withLock { $0.seq }
        // What this view has applied, for commands that wait for running mounts (MountAcks).
        var ack = MountAcks.Publisher(run: RunFolder(fs.library.runDir))
        defer { ack?.remove() }
        ack?.publish(lastSeq)
        var buf = [UInt8](repeating: 0, count: 4096)
        var lastLook = ContinuousClock.now
        // A catalog on a server is confirmed every second; the view fails closed while it is not.
        let remote = fs.library.catalogIsRemote
        while true {
            var fds = [pollfd(fd: ifd, events: Int16(POLLIN), revents: 0), pollfd(fd: stopPipe[0], events: Int16(POLLIN), revents: 0)]
            let n = poll(&fds, 2, remote ? 1000 : 2000)
            if n < 0 && errno != EINTR { return }
            if fds[1].revents != 0 { return }
            if remote {
                if fs.library.failsClosed {
                    // Blanked by failClosedLoop.
                    if fds[0].revents != 0 { while read(ifd, &buf, buf.count) > 0 {} }
                    continue
                }
                if blanked.load(ordering: .relaxed) {
                    blanked.store(false, ordering: .relaxed)
                    fs.log("the catalog answers again: the view is rebuilt")
                    fs.refresh()
                    lastSeq = fs.model.withLock { $0.seq }
                    ack?.publish(lastSeq)
                    continue
                }
            }
            // Every 2 s, rung or not: the catalog's log removed under this daemon is emptied into
            // the database within that, not at the next close (a kill then would lose it).
            if lastLook.duration(to: .now) >= .seconds(2) {
                lastLook = .now
                fs.library.keepCommitsSafe()
                // run/ removed (a cleanup that took it for a runtime folder): made again, watched
                // again, and this view's acknowledgement published again, so that a revoke still
                // returns once this mount applied it (it returned at once, the photo still open
                // for up to 2 s); the daemon's loop writes its registry entry again.
                if ChangeWatcher.folderIdentity(fs.library.runDir) != runFolder {
                    _ = mkdir(fs.library.runDir, 0o700)
                    if let now = ChangeWatcher.folderIdentity(fs.library.runDir) {
                        runFolder = now
                        if ifd >= 0 { _ = inotify_add_watch(ifd, fs.library.runDir, watchMask) }
                        ack = MountAcks.Publisher(run: RunFolder(fs.library.runDir))
                        lastSeq = fs.model.withLock { $0.seq }
                        ack?.publish(lastSeq)
                        fs.refresh()
                    }
                }
            }
            var rang = false
            if fds[0].revents != 0 {
                while true {
                    let got = read(ifd, &buf, buf.count)
                    if got <= 0 { break }
                    rang = rang || ChangeWatcher.namesBell(buf, count: got)
                }
                if !rang { continue }
            }
            if rang {
                // A ring means a committed change: the refresh reads what changed (nothing for this
                // view is an empty answer), with no separate look at the sequence first.
                fs.refresh()
                let applied = fs.model.withLock { $0.seq }
                lastSeq = max(lastSeq, applied)
                ack?.publish(applied)
                continue
            }
            // The slow safety check (a ring lost, the bell removed): compare the sequence.
            guard let seq = try? fs.library.lastChange() else { continue }
            if seq != lastSeq {
                fs.refresh()
                lastSeq = fs.model.withLock { $0.seq }
                ack?.publish(lastSeq)
                if lastSeq < seq { lastSeq = seq }
            }
        }
    }

    /// A real folder's device and inode (nil: missing, or not a folder: a link is not followed).
    static func folderIdentity(_ path: String) -> [UInt64]? {
        var st = stat()
        guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { return nil }
        return [UInt64(st.st_dev), UInt64(st.st_ino)]
    }

    /// Whether a buffer of inotify events names the bell (or overflowed, which may hide a ring).
    static func namesBell(_ buf: [UInt8], count: Int) -> Bool {
        var off = 0
        let header = MemoryLayout<inotify_event>.size
        return buf.withUnsafeBytes { raw -> Bool in
            while off + header <= count {
                let mask = raw.loadUnaligned(fromByteOffset: off + 4, as: UInt32.self)
                let len = Int(raw.loadUnaligned(fromByteOffset: off + 12, as: UInt32.self))
                if mask & UInt32(IN_Q_OVERFLOW) != 0 { return true }
                let nameStart = off + header
                if len > 0, nameStart + len <= count {
                    let name = raw[nameStart..<(nameStart + len)].prefix { $0 != 0 }
                    if RunFolder.isBell(name) { return true }
                }
                off = nameStart + len
            }
            return false
        }
    }
}
