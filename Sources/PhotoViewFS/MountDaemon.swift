import FUSE
import Foundation
import GrantStore
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
}

public enum MountRegistry {
    static func dir(_ library: Library) -> String { library.paths.run + "/mounts" }

    static func write(_ r: MountRecord, library: Library) {
        let d = dir(library)
        try? FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        if let data = try? JSONEncoder().encode(r) {
            let tmp = d + "/.\(r.pid).json.tmp"
            if (try? data.write(to: URL(fileURLWithPath: tmp))) != nil { rename(tmp, d + "/\(r.pid).json") }
        }
    }

    static func remove(pid: Int32, library: Library) { unlink(dir(library) + "/\(pid).json") }

    /// Running mounts; records of dead daemons are dropped.
    public static func list(_ library: Library) -> [MountRecord] {
        let d = dir(library)
        var out: [MountRecord] = []
        for name in (try? FileManager.default.contentsOfDirectory(atPath: d)) ?? [] where name.hasSuffix(".json") && !name.hasPrefix(".") {
            guard let data = FileManager.default.contents(atPath: d + "/" + name),
                  let r = try? JSONDecoder().decode(MountRecord.self, from: data) else { continue }
            if kill(r.pid, 0) != 0 && errno == ESRCH {
                unlink(d + "/" + name)
                continue
            }
            out.append(r)
        }
        return out.sorted { ($0.mountpoint, $0.pid) < ($1.mountpoint, $1.pid) }
    }
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
            _ = inotify_add_watch(ifd, fs.library.paths.run, UInt32(IN_CLOSE_WRITE | IN_MODIFY | IN_MOVED_TO | IN_CREATE))
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
    public static func run(library: Library, settings: Settings, log: @escaping @Sendable (String) -> Void,
                           ready: (String?) -> Void) -> Int32 {
        let fs: PhotoFS
        do {
            fs = try PhotoFS(library: library, app: settings.app, access: settings.access, passthrough: settings.passthrough, log: log)
        } catch {
            ready("\(error)")
            return 1
        }
        let opts = MountOptions(fsName: "photogate:\(settings.app.rawValue)", subtype: "photogate", allowOther: settings.allowOther,
                                extra: settings.extraOptions, threads: settings.threads, passthrough: settings.passthrough)
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
        let record = MountRecord(app: settings.app.rawValue, access: settings.access.rawValue, mountpoint: settings.mountpoint,
                                 pid: getpid(), readPath: session.passthroughActive ? "passthrough" : "daemon",
                                 libfuse: session.libfuseVersion, started: Date().timeIntervalSince1970,
                                 readaheadKiB: readahead)
        MountRegistry.write(record, library: library)
        log("mounted \(settings.app) (\(settings.access.rawValue)) at \(settings.mountpoint), reads: \(record.readPath), readahead \(readahead.map { "\($0) KiB" } ?? "unknown"), libfuse \(record.libfuse)")
        ready(nil)
        done.wait()
        watcher.stop()
        MountRegistry.remove(pid: getpid(), library: library)
        log("unmounted \(settings.mountpoint)")
        let s = status.withLock { $0 }
        return s < 0 ? 1 : 0
    }
}
