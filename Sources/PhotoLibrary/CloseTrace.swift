import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Where the time of each close that commits a file goes, phase by phase (issue 39: "the profile
/// that shows where the time goes"), for `scripts/bench` and whoever measures a mount's writes.
/// Off unless the mount's daemon was started with `PHOTOGATE_TRACE_CLOSES=FILE`: then each close
/// that commits a new photo or saves an edit appends one line to FILE,
///
///     close new checks=0.41 fsync=6.52 scan=0.55 hash=0.07 queue=0.16 catalog=1.30 logsync=1.12 store=0.21 view=0.35
///
/// milliseconds from one mark to the next, in the order the close passed them (`edit` for a save
/// over a photo). Only times and the kind of close: no name, no id, nothing of the photo. A close
/// refused or kept for later writes nothing. Off, a mark costs one load and a compare.
///
/// The phases a close passes, each measured from the previous mark: `checks` (its access and the
/// add limits), `fsync` (the file), `scan` (its kind, date and metadata read), `hash` (the rest of
/// its content hash), `queue` (waiting for the catalog's writer), `catalog` (the transaction),
/// `logsync` (the catalog's log made durable, shared by the closes at once), `store` (the file
/// moved into the store), `view` (the mount's view updated to show it).
public enum CloseTrace {
    /// The trace file, or -1 (off). Opened once, append-only, never through a symbolic link.
    static let sink: Int32 = {
        guard let path = ProcessInfo.processInfo.environment["PHOTOGATE_TRACE_CLOSES"], !path.isEmpty else { return -1 }
        return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
    }()

    public static var isOn: Bool { sink >= 0 }

    /// Marks of the close each thread is committing (a close is committed on the request thread
    /// that serves it, start to end).
    private static let lock = NSLock()
    nonisolated(unsafe) private static var marks: [UInt: (kind: StaticString, last: UInt64, line: String)] = [:]

    private static func now() -> UInt64 {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
    }

    /// A close of this thread starts committing a file (`kind`: "new" or "edit").
    public static func begin(_ kind: StaticString) {
        guard sink >= 0 else { return }
        let t = now(), me = UInt(pthread_self())
        lock.withLock { marks[me] = (kind, t, "") }
    }

    /// The close of this thread is done with `phase` (the time since the previous mark).
    public static func mark(_ phase: StaticString) {
        guard sink >= 0 else { return }
        let t = now(), me = UInt(pthread_self())
        lock.withLock {
            guard var c = marks[me] else { return }
            c.line += " \(phase)=\(String(format: "%.3f", Double(t - c.last) / 1e6))"
            c.last = t
            marks[me] = c
        }
    }

    /// The close of this thread committed its file: its line is written. `committed` false (refused,
    /// kept for later, failed): nothing is.
    public static func end(committed: Bool) {
        guard sink >= 0 else { return }
        let me = UInt(pthread_self())
        guard let c = lock.withLock({ marks.removeValue(forKey: me) }), committed else { return }
        let line = "close \(c.kind)\(c.line)\n"
        _ = line.utf8CString.withUnsafeBufferPointer { b in write(sink, b.baseAddress, b.count - 1) }
    }
}
