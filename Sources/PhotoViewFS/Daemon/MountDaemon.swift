import FUSE
import Foundation
import LibraryRun
import PhotoLibrary
import Synchronization
import Threads
#if canImport(Glibc)
import Glibc
#endif

/// Runs one mount in this process until it is unmounted or signalled.
public enum MountDaemon {
    /// The access options for libfuse: allow_other, whether default_permissions is on (always
    /// when anyone but the owner may come in), and the other options without it.
    static func mountAccess(_ settings: Settings) -> (allowOther: Bool, defaultPermissions: Bool, extra: [String]) {
        // A mount for another user (`owner`) lets that user in through allow_other: the kernel
        // admits only the mounting user otherwise.
        let allowOther = settings.allowOther || settings.owner != nil || settings.extraOptions.contains("allow_other")
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
        /// Most requests served at once. 16: each close of a file being written waits for its
        /// fsync on the thread that serves it, so with 4 (the old number) four writers closing
        /// at once stopped every other writer's writes (issue 39); libfuse starts threads only
        /// when all are busy, so an idle mount keeps few.
        public var threads: Int
        /// A no-open mount: read-only, opens that never reach the daemon (PhotoFS.noOpen).
        public var noOpen: Bool
        /// The process this mount is for (`photogate run`'s), and a pidfd of it taken before the
        /// mount: when it ends, however it ends (SIGKILL included, which gives it no chance to
        /// unmount), the mount is detached. The caller keeps the descriptor open.
        public var whileProcess: (pid: pid_t, pidfd: Int32)?
        /// The user the mount is for, when not the daemon's (root mounting the view of a
        /// `photogate run` whose command runs as an unprivileged id): PhotoFS's owner.
        public var owner: MountOwner?
        public init(app: AppID, access: AccessLevel, mountpoint: String, extraOptions: [String] = [], passthrough: Bool = true,
                    allowOther: Bool = false, threads: Int = 16, noOpen: Bool = false, whileProcess: (pid: pid_t, pidfd: Int32)? = nil,
                    owner: MountOwner? = nil) {
            self.app = app
            self.access = access
            self.mountpoint = mountpoint
            self.extraOptions = extraOptions
            self.passthrough = passthrough
            self.allowOther = allowOther
            self.threads = threads
            self.noOpen = noOpen
            self.whileProcess = whileProcess
            self.owner = owner
        }
    }

    /// Mounts, reports readiness through `ready` (nil on success, else the error message), serves,
    /// then cleans up. Returns the process exit status.
    public static func run(library: any LibraryPort, settings: Settings, log: @escaping @Sendable (String) -> Void,
                           ready: (String?) -> Void) -> Int32 {
        let fs: PhotoFS
        do {
            fs = try PhotoFS(library: library, app: settings.app, access: settings.access, passthrough: settings.passthrough,
                             noOpen: settings.noOpen, owner: settings.owner.map { ($0.uid, $0.gid) }, log: log)
        } catch {
            ready("\(error)")
            return 1
        }
        // Who may use the mount (issue 14). Without allow_other the kernel lets only the mounting
        // user in. With allow_other (or allow_root), other users reach the same handlers, which
        // decide for the app, not per caller: the kernel must check the mode bits photogate
        // reports (files and folders owned by the mount's owner; 0444 originals, 0755/0555
        // folders, `.photogate/request` 0200), so default_permissions always goes with it.
        var (allowOther, defaultPermissions, extra) = mountAccess(settings)
        // A no-open mount is read-only for the kernel too: writes fail with EROFS before they
        // reach the daemon, which could not tell one open for writing from another.
        if settings.noOpen { extra = extra.filter { $0 != "rw" } + (extra.contains("ro") ? [] : ["ro"]) }
        // Never a set-user-id program or a device node through a view, however it was mounted:
        // mount(8) and fstab hand libfuse `suid`/`dev` unless told otherwise, and a file being
        // written can be given mode 04755.
        extra = extra.filter { !["suid", "dev", "nosuid", "nodev"].contains($0) } + ["nosuid", "nodev"]
        let opts = MountOptions(fsName: "photogate:\(settings.app.rawValue)", subtype: "photogate", allowOther: allowOther,
                                defaultPermissions: defaultPermissions, extra: extra, threads: settings.threads,
                                passthrough: settings.passthrough && !settings.noOpen,
                                // A view for another user (a root `run`'s command) serves that user
                                // and the daemon's own (root, checking it is the view): its path is
                                // in the mount table for every user to read.
                                // open(O_TRUNC) in one request: a save over a photo then skips the
                                // copy of the version it empties at once (PhotoFS.open).
                                atomicOpenTruncate: true, onlyUsers: settings.owner.map { [$0.uid, getuid()] })
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
        guard let loop = NativeThread.spawn(name: "photogate-fuse", {
            let s = session.run()
            status.withLock { $0 = s }
            done.signal()
        }) else {
            ready("cannot start the thread that serves the mount")
            session.unmount()
            watcher.stop()
            return 1
        }
        loop.detach()
        // Touch the mount so the kernel sends INIT, then wait for it.
        let mp = settings.mountpoint
        NativeThread.detached(name: "photogate-touch") { var st = stat(); _ = stat(mp, &st) }
        guard session.waitUntilReady(timeout: 10) else {
            ready("the kernel did not finish setting up the mount at \(settings.mountpoint)")
            session.unmount()
            done.wait()
            watcher.stop()
            return 1
        }
        if !session.mountIdentified {
            log("warning: the mount at \(settings.mountpoint) could not be told apart in the kernel's mount list, or was not this daemon's (it was unmounted, moved or covered as it was made); this daemon will not unmount it at its end")
        }
        // Reads the daemon serves (all of them without passthrough, redacted files with it) come
        // in requests of the mount's readahead: 512 KiB instead of the kernel's 128 made a 1 GiB
        // read whose store copy is cached 3.3 GB/s instead of 2.4 (needs root; else unchanged).
        let readahead = session.raiseReadahead(toKiB: 512)
        fs.setReadPath { [session] in session.passthroughActive ? "passthrough" : "daemon" }
        let record = MountRecord(app: settings.app.rawValue, access: settings.access.rawValue, mountpoint: settings.mountpoint,
                                 pid: getpid(), readPath: session.passthroughActive ? "passthrough" : "daemon",
                                 libfuse: session.libfuseVersion, started: Date().timeIntervalSince1970,
                                 readaheadKiB: readahead, device: MountTable.device(of: settings.mountpoint),
                                 opens: settings.noOpen ? .kernel : .daemon,
                                 owner: settings.owner?.description)
        let run = RunFolder(library.runDir)
        MountRegistry.write(record, run: run)
        log("mounted \(settings.app) (\(settings.access.rawValue)) at \(settings.mountpoint), reads: \(record.readPath), opens: \(record.opensFiles.rawValue), readahead \(readahead.map { "\($0) KiB" } ?? "unknown"), libfuse \(record.libfuse)")
        ready(nil)
        if let (pid, fd) = settings.whileProcess {
            NativeThread.detached(name: "photogate-while") {
                // Readable once the process has ended.
                var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                while poll(&pfd, 1, -1) < 0 && errno == EINTR {}
                guard pfd.revents & Int16(POLLIN) != 0 else { return }
                // Detached, as the run would have: a second run that reused this view and has it
                // bound keeps it, and the session ends when the kernel lets go of the last use.
                // Never ended outright: the run may have unmounted the view itself already, and
                // another run may still be reading it.
                // By id (FUSESession.detachMount): this mount and nothing else, wherever it is by then.
                switch session.detachMount() {
                case .detached: log("the process this mount is for (pid \(pid)) ended: unmounted (served until its last use ends)")
                case .gone: log("the process this mount is for (pid \(pid)) ended; it was unmounted already (served until its last use ends)")
                case .failed(let why): log("the process this mount is for (pid \(pid)) ended, but its view could not be unmounted: \(why)")
                }
            }
        }
        // The registry keeps telling the read path in effect: should the kernel refuse a backing
        // file after all, the session falls back to daemon reads, and the record follows.
        var record2 = record
        while done.wait(timeout: .now() + 2) == .timedOut {
            let now = session.passthroughActive ? "passthrough" : "daemon"
            if now != record2.readPath {
                record2.readPath = now
                MountRegistry.write(record2, run: run)
                log("reads: \(now) from now on (the kernel refused passthrough)")
            } else if !MountRegistry.hasRecord(pid: getpid(), run: run), ChangeWatcher.folderIdentity(library.runDir) != nil {
                // Its entry removed (run/ cleaned away, made again by the watcher): written again,
                // so that `mounts` lists it and `unmount` knows it.
                MountRegistry.write(record2, run: run)
                log("the mount registry entry was removed: written again")
            }
        }
        watcher.stop()
        // The access report's last batch (what the app did since the last one).
        fs.recorder.stop()
        // Sidecars still waiting for a photo this mount never wrote are not kept (and say so).
        fs.dropWaitingSidecars()
        // No more writes can arrive: the temp folder is settled now (files whose close returned
        // 0 but could not be committed then are committed), not left for the next start.
        fs.writer.shutDown()
        MountRegistry.remove(pid: getpid(), run: run)
        log("unmounted \(settings.mountpoint)")
        let s = status.withLock { $0 }
        return s < 0 ? 1 : 0
    }
}
