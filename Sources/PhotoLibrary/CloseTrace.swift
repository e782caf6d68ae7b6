import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Where the time of each close that commits a file goes, phase by phase (issue 39: "the profile
/// that shows where the time goes"), for `scripts/bench` and whoever measures a mount's writes.
/// Off unless the mount's daemon was started with `PHOTOGATE_TRACE_CLOSES=FILE`: then each close
/// that commits a new photo, saves an edit, or a rename that saves one over a photo, appends one
/// line to FILE,
///
///     close new checks=0.410 fsync=6.520 scan=0.550 hash=0.070 queue=0.160 catalog=1.300 logsync=1.120 store=0.210 view=0.350
///
/// milliseconds from one mark to the next, in the order the close passed them (`new`, `edit` for
/// a save over a photo, `rename` for a rename over one). Only times and the kind: no name, no id,
/// nothing of the photo. A close refused, kept for later or saving nothing new writes no line.
/// A new file whose content one of the app's assets has already (that asset is kept) has no `store`.
///
/// The phases, each measured from the previous mark: `access` (an edit: may the app still edit
/// the photo), `checks` (its access and the add limits; a rename: the access, the link and the
/// comparison with the bytes shown), `fsync` (the file), `scan` (its kind, date and metadata
/// read), `hash` (the rest of its content hash), `queue` (waiting for the catalog's writer),
/// `catalog` (the transaction), `logsync` (the catalog's log made durable, shared by the closes at
/// once), `store` (the file moved into the store), `dissolve` (a rename: the file renamed away
/// leaves the catalog), `view` (the mount's view updated to show it).
public enum CloseTrace {
    /// The trace file, or -1 (off): set once by `start`, at a mount daemon's start, before it
    /// serves a request (its threads are made after). No other process opens it: a command that
    /// commits files too (`import`, recovery) marks nothing, whatever its environment.
    nonisolated(unsafe) private static var sink: Int32 = -1

    /// Opens `PHOTOGATE_TRACE_CLOSES` when it is set (a mount's daemon, at its start); returns why
    /// a FILE given is not taken, for the daemon's log, or nil. Append-only, and never anything
    /// but a regular file of this process's user with one link, made 0600: a daemon run as root
    /// must not write into a file another user put at the path, nor through a hard link to one
    /// (the times say when an app saved, and about how much). A file that is there already is
    /// looked at through O_PATH before it is opened, so that no FIFO (which would hold the open),
    /// device or other user's file is ever opened for writing; no symbolic link is followed.
    public static func start() -> String? {
        guard sink < 0, let path = ProcessInfo.processInfo.environment["PHOTOGATE_TRACE_CLOSES"], !path.isEmpty else { return nil }
        let refused = "PHOTOGATE_TRACE_CLOSES=\(path) is not a regular file of this user with one link; no close is traced"
        var fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if fd < 0 && errno == EEXIST {
            let named = open(path, CloseTrace.oPath | O_NOFOLLOW | O_CLOEXEC)
            guard named >= 0 else { return "PHOTOGATE_TRACE_CLOSES=\(path): \(String(cString: strerror(errno))); no close is traced" }
            defer { close(named) }
            var st = stat()
            guard fstat(named, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_uid == geteuid(), st.st_nlink == 1 else { return refused }
            // The very file looked at (the descriptor's, not the name's: it may be swapped since).
            fd = open("/proc/self/fd/\(named)", O_WRONLY | O_APPEND | O_CLOEXEC)
            var now = stat()
            guard fd >= 0, fstat(fd, &now) == 0, now.st_dev == st.st_dev, now.st_ino == st.st_ino, fchmod(fd, 0o600) == 0 else {
                if fd >= 0 { close(fd) }
                return refused
            }
        }
        guard fd >= 0 else { return "PHOTOGATE_TRACE_CLOSES=\(path): \(String(cString: strerror(errno))); no close is traced" }
        sink = fd
        return nil
    }

    /// O_PATH (Glibc hides it behind _GNU_SOURCE): names a file without opening it.
    private static let oPath: Int32 = 0o10000000

    /// The close each thread is committing (a close is committed on the request thread that
    /// serves it, start to end): its kind, when it began, and each phase's end.
    private struct Close {
        let kind: StaticString
        let start: UInt64
        var marks: [(StaticString, UInt64)] = []
    }
    private static let lock = NSLock()
    nonisolated(unsafe) private static var closes: [UInt: Close] = [:]

    private static func now() -> UInt64 {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
    }

    /// A close of this thread starts committing a file (`kind`: "new", "edit" or "rename").
    public static func begin(_ kind: StaticString) {
        guard sink >= 0 else { return }
        let t = now(), me = UInt(pthread_self())
        lock.withLock { closes[me] = Close(kind: kind, start: t) }
    }

    /// The close of this thread is done with `phase`. Nothing when this thread is not tracing a
    /// close (recovery, a retry of a commit whose answer was lost).
    public static func mark(_ phase: StaticString) {
        guard sink >= 0 else { return }
        let t = now(), me = UInt(pthread_self())
        lock.withLock { closes[me]?.marks.append((phase, t)) }
    }

    /// The close of this thread is over: its line is written when it `committed`; nothing is
    /// otherwise (refused, kept for later, failed, nothing new saved).
    public static func end(committed: Bool) {
        guard sink >= 0 else { return }
        let me = UInt(pthread_self())
        guard let c = lock.withLock({ closes.removeValue(forKey: me) }), committed else { return }
        var line = "close \(c.kind)"
        var last = c.start
        for (phase, t) in c.marks {
            let us = (t - last) / 1000
            line += " \(phase)=\(us / 1000).\(String(repeating: "0", count: 3 - String(us % 1000).count))\(us % 1000)"
            last = t
        }
        line += "\n"
        _ = line.utf8CString.withUnsafeBufferPointer { b in write(sink, b.baseAddress, b.count - 1) }
    }
}
