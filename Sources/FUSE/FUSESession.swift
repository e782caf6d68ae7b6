import CFuse3
import PGSystem
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One FUSE mount served by a `FileSystemOperations`.
///
/// ```swift
/// let session = try FUSESession(operations: fs, options: MountOptions(fsName: "photogate", subtype: "photogate"))
/// try session.mount(at: "/mnt/view")
/// try session.installSignalHandlers()      // optional: SIGINT/SIGTERM/SIGHUP end run()
/// let status = session.run()               // blocks on a dedicated thread; returns once unmounted
/// ```
///
/// - `run()` blocks in libfuse's multi-threaded loop: call it from a dedicated thread (or the
///   main thread of a daemon), never from a Swift concurrency task. It returns when the file
///   system is unmounted (`unmount()`, `fusermount3 -u`, `umount`), or a signal arrived, and
///   cleans up: unmount, `fuse_session_destroy`. A session runs once.
/// - Until `run()` processes the kernel's INIT, any access to the mount point blocks: use
///   `waitUntilReady(timeout:)` before touching it from the same process.
/// - Never forks (no `fuse_daemonize`). As root, mounting is a `mount(2)` call; as another user
///   libfuse runs `fusermount3`.
public final class FUSESession: @unchecked Sendable {
    // Immutable; all mutable state lives in the core behind Mutex/Atomic.
    let core: SessionCore

    /// Creates the libfuse session (`fuse_session_new`). Throws EINVAL when libfuse rejects the
    /// options (it prints why on stderr).
    public init(operations: some FileSystemOperations, options: MountOptions) throws(Errno) {
        let core = SessionCore(fs: operations, options: options)
        var ops = makeLowLevelOperations(readdirplus: options.readdirplus)

        var arguments = ["photogate-fuse", "-o", Self.mountOptionString(options)]
        if options.debug { arguments.append("-d") }
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) }
        argv.append(nil)
        defer { for p in argv { free(p) } }

        let userdata = Unmanaged.passRetained(core).toOpaque()
        let session: OpaquePointer? = argv.withUnsafeMutableBufferPointer { buf in
            var args = cfuse_args(Int32(arguments.count), buf.baseAddress)
            defer { fuse_opt_free_args(&args) }
            return cfuse_session_new(&args, &ops, userdata)
        }
        guard let session else {
            Unmanaged<SessionCore>.fromOpaque(userdata).release()
            throw .invalid
        }
        core.attach(session: session, userdata: userdata)
        self.core = core
    }

    deinit {
        core.teardown()
    }

    static func mountOptionString(_ options: MountOptions) -> String {
        // libfuse's option parser takes "\," for a literal comma and "\\" for a backslash.
        func escape(_ s: String) -> String {
            var out = ""
            for ch in s {
                if ch == "\\" || ch == "," { out.append("\\") }
                out.append(ch)
            }
            return out
        }
        var opts = ["fsname=\(escape(options.fsName))", "subtype=\(escape(options.subtype))"]
        if options.allowOther { opts.append("allow_other") }
        if options.defaultPermissions { opts.append("default_permissions") }
        if let maxRead = options.maxRead { opts.append("max_read=\(maxRead)") }
        opts += options.extra.map(escape)
        return opts.joined(separator: ",")
    }

    /// The libfuse this process runs with (`fuse_pkgversion()`, e.g. "3.14.0").
    public var libfuseVersion: String { String(cString: fuse_pkgversion()) }

    /// True once INIT negotiated FUSE_CAP_PASSTHROUGH (asked for only with CAP_SYS_ADMIN, which
    /// the kernel requires to register backing files) and no registration has failed since.
    public var passthroughActive: Bool { core.passthroughActive.load(ordering: .relaxed) }

    /// What INIT negotiated; nil before the kernel's INIT was processed.
    public var connection: ConnectionInfo? { core.connection.withLock { $0 } }

    /// Whether the mount was identified when it was made (MountIdentity.made) and, once ready
    /// (`waitUntilReady`), confirmed to be this session's: only then does the session unmount it
    /// at its end. False also before `mount(at:)`.
    public var mountIdentified: Bool { core.state.withLock { $0.trusted.own != nil } }

    /// Mounts the filesystem (`fuse_session_mount`). Errors: ENOENT/ENOTDIR for a bad mount
    /// point, ENODEV when /dev/fuse is missing, EACCES/EPERM when not allowed, EBUSY when this
    /// session is already mounted or has run; otherwise the mount's errno (EIO if unknown;
    /// libfuse also prints the reason on stderr).
    public func mount(at path: String) throws(Errno) {
        guard let resolved = realpath(path, nil) else { throw .current }
        let mountpoint = String(cString: resolved)
        free(resolved)
        var st = stat()
        guard stat(mountpoint, &st) == 0 else { throw .current }
        guard st.st_mode & S_IFMT == S_IFDIR else { throw .notDirectory }
        // Only a missing device is ours to report. Opening it here would refuse a user whom
        // libfuse can still mount for: its mount(2) fails with EPERM and it runs the setuid
        // fusermount3 (which opens /dev/fuse as that user: a device mode that shuts the user
        // out shuts out FUSE altogether, and libfuse says so).
        guard access("/dev/fuse", F_OK) == 0 else { throw .noDevice }

        try core.state.withLock { (st: inout SessionCore.State) throws(Errno) in
            guard st.phase == .created, !st.mounted, let se = core.se else { throw .busy }
            errno = 0
            let before = MountIdentity.currentIDs()
            guard fuse_session_mount(se, mountpoint) == 0 else {
                let code = errno
                throw code != 0 ? Errno(code) : .io
            }
            st.mounted = true
            st.mountpoint = mountpoint
            let o = core.options
            st.own = MountIdentity.made(since: before, type: o.subtype.isEmpty ? "fuse" : "fuse." + o.subtype, source: o.fsName,
                                        at: Array(mountpoint.utf8))
            st.control = st.own.flatMap { ConnectionControl(of: $0) }
            // Both were read by device number and mount id, which the kernel hands out again at
            // once: if someone unmounted this mount meanwhile (possible before INIT), they may be
            // the next mount's. Ours are ours only if our connection still lives now.
            if core.deviceReportsError() {
                st.own = nil
                st.control = nil
            }
            st.unmountedBeforeRun = false
            st.phase = .mounted
        }
    }

    /// Raises the kernel's readahead for this mount to at least `kib` KiB (the `read_ahead_kb` of
    /// the mount's backing device info in sysfs) and returns the readahead now in effect, in KiB;
    /// nil when it cannot be read. Call after INIT, from outside request handlers (it stats the
    /// mount point). Writing needs root; otherwise the kernel's value stays and is returned.
    ///
    /// The kernel gives a FUSE mount 128 KiB, and INIT can only lower that, so a sequential read
    /// served by the daemon arrives as 128 KiB requests, and the per-request round trip, not the
    /// copy, bounds it. 512 KiB still fits one reply in libfuse's splice pipe (1 MiB, the most
    /// a pipe may have without CAP_SYS_RESOURCE); a 1 MiB reply does not, and libfuse then copies
    /// through a buffer it allocates for each request, which is slower than 128 KiB.
    public func raiseReadahead(toKiB kib: Int) -> Int? {
        guard let mp = core.state.withLock({ $0.mounted ? $0.mountpoint : nil }) else { return nil }
        // Only this mount's device: the path must still lead to a FUSE root (inode 1), not to
        // something mounted over it since.
        var st = stat()
        guard stat(mp, &st) == 0, st.st_ino == 1, pg_is_fuse(mp) == 1 else { return nil }
        let dev = UInt64(st.st_dev)
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & ~0xfff)
        let minor = (dev & 0xff) | ((dev >> 12) & ~0xff)
        let path = "/sys/class/bdi/\(major):\(minor)/read_ahead_kb"
        func current() -> Int? {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return nil }
            defer { close(fd) }
            var buf = [UInt8](repeating: 0, count: 32)
            let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { return nil }
            return Int(String(decoding: buf[0..<n], as: UTF8.self).filter(\.isNumber))
        }
        guard let now = current() else { return nil }
        if now >= kib { return now }
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        if fd >= 0 {
            let text = Array("\(kib)\n".utf8)
            _ = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            close(fd)
        }
        return current()
    }

    /// Installs libfuse's handlers (`fuse_set_signal_handlers`): SIGINT, SIGTERM and SIGHUP end
    /// `run()`, SIGPIPE is ignored; all are restored when `run()` returns. Process-wide: one
    /// session at a time. A signal landing on a thread outside the loop is noticed within ~0.2 s.
    public func installSignalHandlers() throws(Errno) {
        try core.state.withLock { (st: inout SessionCore.State) throws(Errno) in
            guard !st.signalsInstalled else { return }
            guard st.phase == .created || st.phase == .mounted || st.phase == .running,
                  let se = core.se else { throw .invalid }
            guard fuse_set_signal_handlers(se) == 0 else { throw .invalid }
            st.signalsInstalled = true
        }
    }

    /// Serves requests until the filesystem is unmounted or a handled signal arrives, then
    /// unmounts (if still mounted) and destroys the session. Returns 0 after an unmount, the
    /// signal number after a signal, a negative errno on a loop error, and -EINVAL when the
    /// session is not mounted (or already ran). Run it on a dedicated thread.
    public func run() -> Int32 {
        let start = core.state.withLock { st -> Int32? in
            if st.phase == .created && st.unmountedBeforeRun { return 0 }
            guard st.phase == .mounted else { return -EINVAL }
            st.phase = .running
            st.served = true
            return nil
        }
        if let start {
            if start == 0 { core.teardown() }
            return start
        }
        guard let se = core.se else { return -EINVAL }
        let config = fuse_loop_cfg_create()  // nil only without memory: libfuse's defaults then
        if let config {
            fuse_loop_cfg_set_max_threads(config, UInt32(max(1, core.options.threads)))
            fuse_loop_cfg_set_clone_fd(config, 0)
        }
        let status = cfuse_session_loop_mt(se, config)
        if let config { fuse_loop_cfg_destroy(config) }
        core.teardown()
        return status
    }

    /// Detaches the mount where it is now, found by its id (not by the path it was mounted at),
    /// as `umount -l` does: gone from the mount table, served until its last use ends, after which
    /// `run()` returns. `.gone`: unmounted already.
    public func detachMount() -> MountIdentity.Detached {
        guard let own = core.state.withLock({ $0.trusted.own }) else {
            return .failed("this mount could not be identified when it was made, or not confirmed to be this session's")
        }
        // Alive: still serving, and the device reports no error (it does once the file system is
        // gone, and its device number may then be another mount's).
        return own.detach(alive: { [core] in
            core.state.withLock { st in st.phase == .running && !core.deviceReportsError() }
        })
    }

    /// Ends the session from any thread, without hanging: before `run()`, unmounts at once (and
    /// `run()` will return immediately); during `run()`, makes the loop return promptly (even if
    /// files are still open on the mount), after which `run()` unmounts and cleans up. Returns
    /// without waiting for `run()` to return.
    public func unmount() {
        core.unmount()
    }

    /// Waits until the kernel's INIT was processed (the mount is usable), up to `timeout`
    /// seconds. False on timeout or if the session ended first.
    public func waitUntilReady(timeout: Double) -> Bool {
        var remaining = max(0, timeout)
        while true {
            if core.initialized.load(ordering: .acquiring) {
                core.confirmOwnMount(timeout: max(remaining, 5))
                return true
            }
            let ended = core.state.withLock { $0.phase == .stopping || $0.phase == .finished }
            if ended || remaining <= 0 { return false }
            var pause = timespec(tv_sec: 0, tv_nsec: 1_000_000)
            nanosleep(&pause, nil)
            remaining -= 0.001
        }
    }

    // MARK: - Cache invalidation
    //
    // Callable from any thread at any time, including from request handlers: the calls are queued
    // and run in order, in batches, on the session's own notifier thread — never inside a handler
    // and never while holding a lock a handler needs (the kernel may wait for the very request a
    // handler is serving). Before INIT or after the session ended they do nothing. Names are raw
    // bytes.

    /// Forget the cached lookup of `name` in `parent` (`fuse_lowlevel_notify_inval_entry`): the
    /// next access looks it up again. Use when a name appears, disappears or changes inode.
    public func invalidateEntry(parent: Inode, name: [UInt8]) {
        core.enqueue(.entry(parent: parent, name: name))
    }

    /// Waits until every READ the daemon was serving when called has been replied to (see
    /// ReadGate.swift), so that invalidations queued next also drop the pages those replies
    /// insert. Returns at once on a request handler thread: there a mount removes what the app
    /// itself removed or replaced (its unlink, rename, or a close that saved a new version), and
    /// waiting could wait on that very thread.
    public func quiesceReads() {
        guard !HandlerThread.isCurrent else { return }
        core.readGate.quiesce()
    }

    /// Drop the cached attributes of `inode` and its page cache from `offset`, `length` bytes
    /// (`fuse_lowlevel_notify_inval_inode`). `length` 0 means to the end of the file, so the
    /// defaults drop attributes and all cached data; a negative `offset` drops only the attributes.
    public func invalidateInode(_ inode: Inode, offset: Int64 = 0, length: Int64 = 0) {
        core.enqueue(.inode(inode, offset: offset, length: length))
    }

    /// `name` (inode `child`) was deleted from `parent` (`fuse_lowlevel_notify_delete`): drops the
    /// dentry like `invalidateEntry` and also marks the cached inode deleted (nlink 0), so
    /// inotify watchers of that file get IN_DELETE_SELF. Measured on Linux 6.18: watchers of the
    /// parent directory get no IN_DELETE (the kernel's fsnotify hook is not on this path).
    /// Nothing happens if the kernel has no dentry for `name` or it is not `child`.
    public func notifyDelete(parent: Inode, child: Inode, name: [UInt8]) {
        core.enqueue(.delete(parent: parent, child: child, name: name))
    }

    /// Blocks until everything queued before this call has reached the kernel. From inside a
    /// request handler it returns at once (waiting there could deadlock).
    @discardableResult
    public func flushNotifications() -> Bool {
        core.flush()
    }

    /// `SessionCore.invalidateNow`: `inode`'s cached attributes and pages dropped before this
    /// returns, not queued.
    public func invalidateInodeNow(_ inode: Inode) {
        core.invalidateNow(inode)
    }
}
