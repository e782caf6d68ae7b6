import FUSE
import Foundation
import PhotoLibrary
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What `photogate mounts` lists: one file per running daemon in `run/mounts/<pid>.json`.
public struct MountRecord: Codable, Sendable, Equatable {
    public var app: String
    public var access: String
    public var mountpoint: String
    public var pid: Int32
    /// "passthrough" (the kernel reads originals itself) or "daemon" (photogate serves reads).
    public var readPath: String
    public var libfuse: String
    public var started: Double
    /// The kernel's readahead for the mount in KiB (nil: unknown, or a record of an older daemon).
    public var readaheadKiB: Int?
    /// The mount's device ("major:minor", as in /proc/self/mountinfo): tells this mount from a
    /// later one at the same mount point (nil: a record of an older daemon).
    public var device: String?
}

public enum MountRegistry {
    static func dir(_ library: some LibraryLocations) -> String { library.runDir + "/mounts" }

    static func write(_ r: MountRecord, library: some LibraryLocations) {
        let d = dir(library)
        try? FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        if let data = try? JSONEncoder().encode(r) {
            let tmp = d + "/.\(r.pid).json.tmp"
            if (try? data.write(to: URL(fileURLWithPath: tmp))) != nil { rename(tmp, d + "/\(r.pid).json") }
        }
    }

    static func remove(pid: Int32, library: some LibraryLocations) { unlink(dir(library) + "/\(pid).json") }

    /// Running mounts (live daemons whose mount is in place); see `entries` for the dead ones.
    public static func list(_ library: some LibraryLocations) -> [MountRecord] {
        entries(library).filter { $0.state == .live }.map(\.record)
    }

    /// Every registered mount with the truth about it: `.live`, or `.dead` when its daemon is gone
    /// (killed with SIGKILL, crashed) but its mount point is still mounted, stale. Records whose
    /// daemon is gone and whose mount point is clear are dropped; so are records of a daemon that
    /// is unmounting. A pid reused by another process does not count as the daemon.
    public static func entries(_ library: some LibraryLocations) -> [MountEntry] {
        let d = dir(library)
        let mounted = mountedPhotogatePoints()
        var records: [(String, MountRecord)] = []
        for name in (try? FileManager.default.contentsOfDirectory(atPath: d)) ?? [] where name.hasSuffix(".json") && !name.hasPrefix(".") {
            guard let data = FileManager.default.contents(atPath: d + "/" + name),
                  let r = try? JSONDecoder().decode(MountRecord.self, from: data) else { continue }
            records.append((name, r))
        }
        var out: [MountEntry] = []
        for (name, r) in records {
            let alive = daemonAlive(r)
            // The same mount: same mount point and, when recorded, the same device (a newer
            // mount at that point is someone else's).
            var isMounted = mounted.contains { $0.path == r.mountpoint && (r.device == nil || $0.device == r.device) }
            // Device numbers of FUSE connections are reused: a newer live mount at the same
            // point makes this dead one gone for good (it was detached to make room).
            if !alive && records.contains(where: { $0.1.pid != r.pid && $0.1.mountpoint == r.mountpoint && daemonAlive($0.1) }) {
                isMounted = false
            }
            switch (alive, isMounted) {
            case (true, true):
                out.append(MountEntry(record: r, state: .live, problem: nil))
            case (false, true):
                // statfs always reaches the daemon: a dead one's connection answers ENOTCONN at once.
                var sfs = statvfs()
                let problem = statvfs(r.mountpoint, &sfs) == 0 ? "the daemon is gone" : String(cString: strerror(errno))
                out.append(MountEntry(record: r, state: .dead, problem: problem))
            case (true, false):
                continue
            case (false, false):
                unlink(d + "/" + name)
            }
        }
        return out.sorted { ($0.record.mountpoint, $0.record.pid) < ($1.record.mountpoint, $1.record.pid) }
    }

    /// The daemon of `r` still runs: the pid exists and is a `mount` of that app (not a pid reused
    /// by another process).
    static func daemonAlive(_ r: MountRecord) -> Bool {
        if kill(r.pid, 0) != 0 && errno == ESRCH { return false }
        guard let cmd = FileManager.default.contents(atPath: "/proc/\(r.pid)/cmdline") else { return false }
        let args = cmd.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        return args.contains("mount") && args.contains { $0 == r.app || $0.hasSuffix("#" + r.app) }
    }

    /// photogate's FUSE mounts in this mount namespace (fuse.photogate): mount point and device.
    static func mountedPhotogatePoints() -> [(path: String, device: String)] {
        guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return [] }
        var out: [(path: String, device: String)] = []
        for line in text.split(separator: "\n") {
            let parts = line.components(separatedBy: " - ")
            guard parts.count >= 2 else { continue }
            let fields = parts[0].split(separator: " ")
            let after = parts[1].split(separator: " ")
            guard fields.count > 4, let type = after.first, type == "fuse.photogate" else { continue }
            out.append((unescapeMountPath(String(fields[4])), String(fields[2])))
        }
        return out
    }

    /// /proc/self/mountinfo writes space, tab, newline and backslash as octal escapes.
    static func unescapeMountPath(_ s: String) -> String {
        var bytes: [UInt8] = []
        let u = Array(s.utf8)
        var i = 0
        while i < u.count {
            if u[i] == UInt8(ascii: "\\"), i + 3 < u.count,
               let v = UInt8(String(decoding: u[(i + 1)...(i + 3)], as: UTF8.self), radix: 8) {
                bytes.append(v)
                i += 4
            } else {
                bytes.append(u[i])
                i += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// "major:minor" of the filesystem at `path` (the FUSE connection once mounted), as mountinfo
/// writes it.
func deviceOf(_ path: String) -> String? {
    var st = stat()
    guard stat(path, &st) == 0 else { return nil }
    let dev = UInt64(st.st_dev)
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & ~0xfff)
    let minor = (dev & 0xff) | ((dev >> 12) & ~0xff)
    return "\(major):\(minor)"
}

/// One registered mount and whether it is really there.
public struct MountEntry: Sendable {
    public enum State: String, Sendable { case live, dead }
    public var record: MountRecord
    public var state: State
    /// Why a dead mount is stale (e.g. "Transport endpoint is not connected").
    public var problem: String?
}

/// Wakes a mount when the library changes: inotify on the library's bell file (rung after every
/// committed change by any photogate process), plus a slow safety check of the change sequence.
/// Idle cost: one blocked poll(2).
final class ChangeWatcher: @unchecked Sendable {
    let fs: PhotoFS
    let stopPipe: [Int32]
    var thread: Thread?

    init(fs: PhotoFS) {
        self.fs = fs
        var p: [Int32] = [0, 0]
        _ = pipe(&p)
        for fd in p { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        stopPipe = p
    }

    func start() {
        let t = Thread { [self] in loop() }
        t.name = "photogate-watcher"
        t.start()
        thread = t
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

/// Runs one mount in this process until it is unmounted or signalled.
public enum MountDaemon {
    /// The access options for libfuse: allow_other, whether default_permissions is on (always
    /// when anyone but the owner may come in), and the other options without it.
    static func mountAccess(_ settings: Settings) -> (allowOther: Bool, defaultPermissions: Bool, extra: [String]) {
        let allowOther = settings.allowOther || settings.extraOptions.contains("allow_other")
        let others = allowOther || settings.extraOptions.contains("allow_root")
        let extra = settings.extraOptions.filter { $0 != "default_permissions" && $0 != "allow_other" }
        return (allowOther, others || settings.extraOptions.contains("default_permissions"), extra)
    }

    public struct Settings: Sendable {
        public var app: AppID
        public var access: AccessLevel
        public var mountpoint: String
        public var extraOptions: [String]
        public var passthrough: Bool
        public var allowOther: Bool
        public var threads: Int
        public init(app: AppID, access: AccessLevel, mountpoint: String, extraOptions: [String] = [], passthrough: Bool = true,
                    allowOther: Bool = false, threads: Int = 4) {
            self.app = app
            self.access = access
            self.mountpoint = mountpoint
            self.extraOptions = extraOptions
            self.passthrough = passthrough
            self.allowOther = allowOther
            self.threads = threads
        }
    }

    /// Mounts, reports readiness through `ready` (nil on success, else the error message), serves,
    /// then cleans up. Returns the process exit status.
    public static func run(library: any LibraryPort, settings: Settings, log: @escaping @Sendable (String) -> Void,
                           ready: (String?) -> Void) -> Int32 {
        let fs: PhotoFS
        do {
            fs = try PhotoFS(library: library, app: settings.app, access: settings.access, passthrough: settings.passthrough, log: log)
        } catch {
            ready("\(error)")
            return 1
        }
        // Who may use the mount (issue 14). Without allow_other the kernel lets only the mounting
        // user in. With allow_other (or allow_root), other users reach the same handlers, which
        // decide for the app, not per caller: the kernel must check the mode bits photogate
        // reports (files and folders owned by the mount's owner; 0444 originals, 0755/0555
        // folders, `.photogate/request` 0200), so default_permissions always goes with it.
        let (allowOther, defaultPermissions, extra) = mountAccess(settings)
        let opts = MountOptions(fsName: "photogate:\(settings.app.rawValue)", subtype: "photogate", allowOther: allowOther,
                                defaultPermissions: defaultPermissions, extra: extra, threads: settings.threads,
                                passthrough: settings.passthrough)
        // Descriptors: the soft limit goes up to the hard limit, and an app's opens of originals
        // may hold all but a reserve (FDBudget.swift).
        let budget = FDBudget.mount
        log("descriptors: \(budget.limit) for the app's opens, \(FDBudget.reserve) kept for the daemon")
        let session: FUSESession
        do {
            session = try FUSESession(operations: fs, options: opts)
            try session.mount(at: settings.mountpoint)
        } catch {
            ready("cannot mount at \(settings.mountpoint): \(error)")
            return 1
        }
        fs.setInvalidator(session)
        do { try session.installSignalHandlers() } catch { log("no signal handlers: \(error)") }
        let watcher = ChangeWatcher(fs: fs)
        watcher.start()
        // Serve on a dedicated thread; this one reports readiness once the kernel's INIT is done.
        let status = Mutex<Int32>(0)
        let done = DispatchSemaphore(value: 0)
        let loop = Thread {
            let s = session.run()
            status.withLock { $0 = s }
            done.signal()
        }
        loop.name = "photogate-fuse"
        loop.start()
        // Touch the mount so the kernel sends INIT, then wait for it.
        let mp = settings.mountpoint
        DispatchQueue.global().async { var st = stat(); _ = stat(mp, &st) }
        guard session.waitUntilReady(timeout: 10) else {
            ready("the kernel did not finish setting up the mount at \(settings.mountpoint)")
            session.unmount()
            done.wait()
            watcher.stop()
            return 1
        }
        // Reads the daemon serves (all of them without passthrough, redacted files with it) come
        // in requests of the mount's readahead: 512 KiB instead of the kernel's 128 made a 1 GiB
        // read whose store copy is cached 3.3 GB/s instead of 2.4 (needs root; else unchanged).
        let readahead = session.raiseReadahead(toKiB: 512)
        fs.setReadPath { [session] in session.passthroughActive ? "passthrough" : "daemon" }
        let record = MountRecord(app: settings.app.rawValue, access: settings.access.rawValue, mountpoint: settings.mountpoint,
                                 pid: getpid(), readPath: session.passthroughActive ? "passthrough" : "daemon",
                                 libfuse: session.libfuseVersion, started: Date().timeIntervalSince1970,
                                 readaheadKiB: readahead, device: deviceOf(settings.mountpoint))
        MountRegistry.write(record, library: library)
        log("mounted \(settings.app) (\(settings.access.rawValue)) at \(settings.mountpoint), reads: \(record.readPath), readahead \(readahead.map { "\($0) KiB" } ?? "unknown"), libfuse \(record.libfuse)")
        ready(nil)
        // The registry keeps telling the read path in effect: should the kernel refuse a backing
        // file after all, the session falls back to daemon reads, and the record follows.
        var record2 = record
        while done.wait(timeout: .now() + 2) == .timedOut {
            let now = session.passthroughActive ? "passthrough" : "daemon"
            if now != record2.readPath {
                record2.readPath = now
                MountRegistry.write(record2, library: library)
                log("reads: \(now) from now on (the kernel refused passthrough)")
            }
        }
        watcher.stop()
        MountRegistry.remove(pid: getpid(), library: library)
        log("unmounted \(settings.mountpoint)")
        let s = status.withLock { $0 }
        return s < 0 ? 1 : 0
    }
}
