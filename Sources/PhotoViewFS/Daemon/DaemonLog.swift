import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Where every line a mount daemon logs goes, bounded whatever apps or other users do.
///
/// Many lines are written because of a request: an open refused (strip-location on and metadata
/// unparseable, a referenced original changed since its import), a file refused at its close. An
/// app, or another user of an `allow_other` mount, repeating that request in a loop made one line
/// per request: 25 MB in 5 s, in the library's run/logs/, on the owner's disk and out of the disk
/// reserve kept for the database. Two limits, on every line:
///
/// - Repeats: the same line (its text) is written at most `burst` times per `window` seconds;
///   further repeats are counted, and the count is written with the line's next appearance after
///   the window (or at the daemon's end, `flush`). One-off lines (mounted, unmounted, an error
///   seen once) are never held back.
/// - Size: once the log file passes `maxBytes` it is renamed to `<name>.1` (replacing the older
///   one) and a new file is started, so a log takes at most about twice `maxBytes` on disk. Only
///   when the descriptors written to are that file (a background daemon's log, `attach`); stderr
///   on a terminal or a journal is left alone.
public final class DaemonLog: Sendable {
    public struct Limits: Sendable {
        public var window: Double
        public var burst: Int
        public var maxBytes: Int
        /// How many different lines are remembered at once (a bound on the limiter's own memory).
        public var keys: Int

        public init(window: Double = 60, burst: Int = 5, maxBytes: Int = 4 << 20, keys: Int = 4096) {
            self.window = window
            self.burst = burst
            self.maxBytes = maxBytes
            self.keys = keys
        }
    }

    /// The log file in `folder`/`sub`/`name` (found as the daemon's log was opened: following no
    /// symbolic link), for rotation.
    public struct File: Sendable {
        public let folder: String
        public let sub: String
        public let name: String

        public init(folder: String, sub: String, name: String) {
            self.folder = folder
            self.sub = sub
            self.name = name
        }
    }

    private struct Seen {
        var since: Double
        var written: Int
        var suppressed: Int
    }

    private struct State {
        var seen: [String: Seen] = [:]
        var file: File?
        /// Bytes in the log file as far as this process knows (others may append too: checked
        /// with fstat before rotating).
        var bytes = 0
    }

    public let limits: Limits
    /// The descriptors the log is written to (the first) and that follow a rotation (all).
    private let fds: [Int32]
    private let clock: @Sendable () -> Double
    private let format: @Sendable (String) -> String
    private let state = Mutex(State())

    public init(limits: Limits = Limits(), fds: [Int32] = [2, 1], clock: @escaping @Sendable () -> Double = DaemonLog.monotonic,
                format: @escaping @Sendable (String) -> String = { $0 + "\n" }) {
        self.limits = limits
        self.fds = fds
        self.clock = clock
        self.format = format
    }

    /// Seconds on the monotonic clock.
    public static let monotonic: @Sendable () -> Double = {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// Rotates `file` from now on, if the log's descriptor is that file (same device and inode);
    /// returns whether it is.
    @discardableResult
    public func attach(_ file: File) -> Bool {
        guard let fd = fds.first, let (dev, ino, size) = DaemonLog.identity(fd), let dir = DaemonLog.openFolder(file) else { return false }
        defer { close(dir) }
        var st = stat()
        guard fstatat(dir, file.name, &st, AT_SYMLINK_NOFOLLOW) == 0, UInt64(st.st_dev) == dev, UInt64(st.st_ino) == ino else { return false }
        state.withLock {
            $0.file = file
            $0.bytes = size
        }
        return true
    }

    /// Writes `message` as a line, unless it is a repeat past its limit (counted instead).
    public func log(_ message: String) {
        let now = clock()
        state.withLock { s in
            if var seen = s.seen[message], now - seen.since < limits.window {
                guard seen.written < limits.burst else {
                    seen.suppressed += 1
                    s.seen[message] = seen
                    return
                }
                seen.written += 1
                s.seen[message] = seen
                let last = seen.written == limits.burst
                write(last ? message + " (repeats in the next \(Int(limits.window)) s are counted, not logged)" : message, &s)
                return
            }
            let earlier = s.seen[message]
            if earlier == nil && s.seen.count >= limits.keys { prune(now, &s) }
            s.seen[message] = Seen(since: now, written: 1, suppressed: 0)
            write(message + (earlier.map { DaemonLog.note($0, now) } ?? ""), &s)
        }
    }

    /// Writes the counts of repeats not logged yet (at the daemon's end).
    public func flush() {
        let now = clock()
        state.withLock { s in
            for (message, seen) in s.seen where seen.suppressed > 0 { write(message + DaemonLog.note(seen, now), &s) }
            s.seen = [:]
        }
    }

    private static func note(_ seen: Seen, _ now: Double) -> String {
        seen.suppressed == 0 ? "" : " (and \(seen.suppressed) more times in the \(Int(now - seen.since)) s before, not logged)"
    }

    /// Forgets lines whose window has passed (writing their counts); all of them if that is not enough.
    private func prune(_ now: Double, _ s: inout State) {
        for (message, seen) in s.seen where now - seen.since >= limits.window {
            if seen.suppressed > 0 { write(message + DaemonLog.note(seen, now), &s) }
            s.seen[message] = nil
        }
        if s.seen.count >= limits.keys / 2 {
            for (message, seen) in s.seen where seen.suppressed > 0 { write(message + DaemonLog.note(seen, now), &s) }
            s.seen = [:]
        }
    }

    private func write(_ message: String, _ s: inout State) {
        guard let fd = fds.first else { return }
        let line = format(message)
        let n = line.utf8.count
        // Stderr may be a pipe nobody reads any more (a foreground daemon's terminal gone): the
        // line is lost, and the daemon goes on (libfuse ignores SIGPIPE only while its session
        // runs; a log after it killed the daemon before its end's work).
        _ = line.withCString { DaemonLog.writeWithoutSIGPIPE(fd, $0, n) }
        guard let file = s.file else { return }
        s.bytes += n
        if s.bytes >= limits.maxBytes { rotate(file, &s) }
    }

    /// Renames the log to `<name>.1` and writes to a new one, if the file at its name is still
    /// the one written to (another daemon appending to the same log may have rotated it: then
    /// only the new file is opened).
    private func rotate(_ file: File, _ s: inout State) {
        guard let fd = fds.first, let (dev, ino, size) = DaemonLog.identity(fd) else { s.file = nil; return }
        guard size >= limits.maxBytes else { s.bytes = size; return }
        guard let dir = DaemonLog.openFolder(file) else { s.file = nil; return }
        defer { close(dir) }
        var st = stat()
        if fstatat(dir, file.name, &st, AT_SYMLINK_NOFOLLOW) == 0, UInt64(st.st_dev) == dev, UInt64(st.st_ino) == ino {
            guard renameat(dir, file.name, dir, file.name + ".1") == 0 else { s.file = nil; return }
        }
        let new = openat(dir, file.name, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0o600)
        guard new >= 0 else { s.file = nil; return }
        defer { close(new) }
        guard fstat(new, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { s.file = nil; return }
        _ = fcntl(new, F_SETFL, fcntl(new, F_GETFL) & ~O_NONBLOCK)
        for target in fds { _ = dup2(new, target) }
        s.bytes = Int(st.st_size)
        let line = format("log continued from \(file.name).1 (at \(limits.maxBytes >> 10) KiB)")
        _ = line.withCString { Glibc.write(fd, $0, line.utf8.count) }
        s.bytes += line.utf8.count
    }

    /// `write(2)` that raises no SIGPIPE when `fd` is a pipe with no reader: it fails with EPIPE
    /// instead. SIGPIPE is blocked on this thread for the write (the kernel sends it to the thread
    /// that wrote) and taken back if it came; the process's signal dispositions are left as they are.
    public static func writeWithoutSIGPIPE(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
        var pipeSignal = sigset_t(), mask = sigset_t()
        sigemptyset(&pipeSignal)
        sigaddset(&pipeSignal, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &pipeSignal, &mask)
        let written = Glibc.write(fd, buffer, count)
        let e = errno
        if written < 0 && e == EPIPE {
            var now = timespec(tv_sec: 0, tv_nsec: 0)
            _ = sigtimedwait(&pipeSignal, nil, &now)
        }
        pthread_sigmask(SIG_SETMASK, &mask, nil)
        errno = e
        return written
    }

    private static func identity(_ fd: Int32) -> (dev: UInt64, ino: UInt64, size: Int)? {
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        return (UInt64(st.st_dev), UInt64(st.st_ino), Int(st.st_size))
    }

    private static func openFolder(_ file: File) -> Int32? {
        let top = open(file.folder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard top >= 0 else { return nil }
        defer { close(top) }
        let dir = openat(top, file.sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        return dir >= 0 ? dir : nil
    }
}
