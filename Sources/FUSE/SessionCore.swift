// Kept in one file (over ~400 lines): the session's lifecycle and its notifier thread share one state machine.
import CFuse3
import PGSystem
import Dispatch
import Synchronization
import Threads
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The top bit of `fuse_file_info.fh` marks file opens the wrapper registered for passthrough
/// (the filesystem never sees it).
let passthroughHandleBit: UInt64 = 1 << 63

/// Everything the C callbacks reach through `fuse_req_userdata`: the filesystem, the session
/// pointer, the lifecycle, the passthrough table and the notifier.
///
/// Ownership: `FUSESession` holds it strongly, and libfuse's userdata holds one retained reference
/// (taken in `FUSESession.init`, released in `teardown()` after `fuse_session_destroy`), so the
/// callbacks can use it unretained. The notifier thread holds it while it runs.
final class SessionCore: @unchecked Sendable {
    enum Phase: Sendable {
        case created     // session exists, not mounted (or unmounted before run)
        case mounted     // fuse_session_mount done, loop not started
        case running     // inside fuse_session_loop_mt
        case stopping    // loop returned, tearing down
        case finished    // fuse_session_destroy done
    }

    struct State: Sendable {
        var phase: Phase = .created
        var mounted = false
        var mountpoint: String?
        /// The mount made, by id and device (MountIdentity.swift): unmounted by this, not by path.
        var own: MountIdentity?
        /// The connection's fusectl folder (ConnectionControl.swift), where fusectl is mounted.
        var control: ConnectionControl?
        /// confirmOwnMount() was asked; it keeps `own` and `control` only when its probe got here.
        var confirmAsked = false
        var confirmed = false
        /// The loop was started: from then on the session may end at any moment (a signal, its
        /// connection cut), also while its identity is still unconfirmed.
        var served = false

        /// The mount's identity and fusectl folder as far as they may be acted on (aborted,
        /// detached): before the loop serves, as identified when mounted; once it has served,
        /// only as confirmOwnMount() confirmed them. In between (INIT, the probe: milliseconds
        /// normally), a session that ends leaves its mount (cleared by the next mount there)
        /// rather than act on one that may not be its own.
        var trusted: (own: MountIdentity?, control: ConnectionControl?) {
            !served || confirmed ? (own, control) : (nil, nil)
        }
        var signalsInstalled = false
        /// unmount() asked the loop to stop (fuse_session_exit + a wake-up request).
        var exitRequested = false
        /// unmount() came before run(): run() returns at once.
        var unmountedBeforeRun = false
        /// invalidateNow() calls under way: each took the session pointer under this lock while
        /// the session was alive, and teardown destroys the session only once none is left.
        var directNotifies = 0
    }

    struct Backing: Sendable {
        var id: Int32
        var refs: Int
    }

    enum Notification: Sendable, Equatable {
        case inode(Inode, offset: Int64, length: Int64)
        case entry(parent: Inode, name: [UInt8])
        case delete(parent: Inode, child: Inode, name: [UInt8])
        case barrier(Barrier)
    }

    /// A one-shot wait for flushNotifications().
    final class Barrier: Sendable, Equatable {
        let semaphore = DispatchSemaphore(value: 0)
        static func == (a: Barrier, b: Barrier) -> Bool { a === b }
    }

    struct NotifyQueue: Sendable {
        var items: [Notification] = []
        var stopped = false
    }

    let fs: any FileSystemOperations
    let options: MountOptions
    /// READs under way, so that a revoke can wait for them before it drops pages (ReadGate.swift).
    let readGate = ReadGate()

    /// The `struct fuse_session *`. Written in `attach` (before any other thread sees this
    /// object) and in `teardown` (after the loop ended and the notifier thread was joined).
    /// Other threads read it only under `state` while the phase says it is alive.
    private(set) var se: OpaquePointer?
    private var userdata: UnsafeMutableRawPointer?

    let state = Mutex(State())
    let initialized = Atomic<Bool>(false)
    let passthroughActive = Atomic<Bool>(false)
    let connection = Mutex<ConnectionInfo?>(nil)
    let backing = Mutex<[Inode: Backing]>([:])

    /// The lookup confirmOwnMount() sends: its random name and the thread that sends it.
    struct Probe: Sendable {
        let name: [UInt8]
        /// 0 until the probing thread runs.
        var tid: Int32 = 0
        var seen = false
    }
    /// Set while a probe is out, so that other lookups pay one relaxed load.
    let probing = Atomic<Bool>(false)
    let probe = Mutex<Probe?>(nil)

    private let queue = Mutex(NotifyQueue())
    private let wake = DispatchSemaphore(value: 0)
    private var notifierThread: NativeThread?

    init(fs: any FileSystemOperations, options: MountOptions) {
        self.fs = fs
        self.options = options
    }

    func attach(session: OpaquePointer, userdata: UnsafeMutableRawPointer) {
        self.se = session
        self.userdata = userdata
        notifierThread = NativeThread.spawn(name: "fuse-notify") { [self] in notifierLoop() }
    }

    // MARK: - Lifecycle

    /// Mounted-but-never-run, or after the loop: stop the notifier, unmount if still mounted,
    /// destroy the session and drop libfuse's reference to us. Idempotent.
    func teardown() {
        let (wasMounted, signals) = state.withLock { st -> (Bool, Bool) in
            guard st.phase != .finished, st.phase != .stopping else { return (false, false) }
            st.phase = .stopping
            return (st.mounted, st.signalsInstalled)
        }
        guard let se else { return }
        // The notifier may be blocked in the kernel on a lock held by a request that no worker
        // will ever answer now (an invalidation of a directory whose lookup is pending): joining
        // it first could hang. So cut the connection first: abort it (fusectl) and swap /dev/null
        // onto the device descriptor (closing the last /dev/fuse reference aborts it too), which
        // fails the pending requests and frees the lock; then join the notifier — any late
        // notification lands in /dev/null, never in a reused descriptor number — then detach our
        // own mount (below) and destroy.
        // Has the kernel let go of the mount already (unmounted, and its last use gone)? Then its
        // fusectl folder is gone and the device reports an error: there is nothing to unmount.
        let (own, control) = state.withLock { $0.trusted }
        var released = false
        if wasMounted {
            let deviceFD = deviceDescriptor
            released = control?.alive.map { !$0 } ?? deviceReportsError()
            // Closing our descriptor ends the connection only if it is the last one: a process
            // forked and not yet exec'd holds a copy, and a request it makes meanwhile (its chdir
            // into the mount before exec, say) would wait for ever, and so would it.
            if !released { control?.abort() }
            let placeholder = open("/dev/null", O_RDWR | O_CLOEXEC)
            if deviceFD >= 0 && placeholder >= 0 { dup2(placeholder, deviceFD) }
            if placeholder >= 0 { close(placeholder) }
        }
        stopNotifier()
        // Our own mount, by id, wherever it is now. libfuse's fuse_session_unmount unmounts by the
        // path it was mounted at, which may lead to another mount by now (and would, here: its
        // own check for a released connection polls the placeholder).
        // With fusectl, the mount found is held and then our connection asked whether it still
        // lives: if so, the device number is ours, and so is the mount held. Without it, between
        // the poll above and here the file system could only be gone if someone else unmounted it
        // and its last use ended in that moment (then its id and device, if taken again by then,
        // would be another mount's). A mount not identified when it was made is left (a stale
        // mount, cleared by the next mount there), never unmounted by path. An aborted connection
        // (fusectl's `abort`, by an administrator) is still alive: its mount is detached too.
        if wasMounted && !released, let own { _ = own.detach(alive: { control?.alive ?? true }) }
        if signals { fuse_remove_signal_handlers(se) }
        // No invalidateNow() still inside libfuse with the pointer (none starts once the phase
        // is .stopping; the connection is cut above, so one under way returns).
        while state.withLock({ $0.directNotifies }) > 0 { usleep(1000) }
        fuse_session_destroy(se)
        self.se = nil
        state.withLock { st in
            st.phase = .finished
            st.mounted = false
            st.signalsInstalled = false
            st.control = nil
        }
        if let userdata {
            self.userdata = nil
            Unmanaged<SessionCore>.fromOpaque(userdata).release()
        }
    }

    /// The session's /dev/fuse descriptor, -1 without a session.
    var deviceDescriptor: Int32 { se.map { fuse_session_fd($0) } ?? -1 }

    /// Whether the session's /dev/fuse reports an error: the connection is gone (its file system
    /// unmounted and let go of, or the connection aborted), and the mount's id and device may be
    /// another mount's by now. False without a session.
    func deviceReportsError() -> Bool {
        guard se != nil else { return false }
        var p = pollfd(fd: deviceDescriptor, events: 0, revents: 0)
        return poll(&p, 1, 0) == 1 && (p.revents & Int16(POLLERR | POLLNVAL)) != 0
    }

    /// Ask a running loop to stop, from any thread, without blocking: set the exit flag, then make
    /// the kernel send one request so that a worker wakes up, sees the flag and ends the loop
    /// (libfuse < 3.18 does not wake on fuse_session_exit alone). The request is a statfs(2) of
    /// the mount point from a short-lived helper thread: the kernel never caches statfs, and the
    /// caller — maybe a request handler itself — does not wait for the reply. (A 0-byte
    /// FUSE_NOTIFY_RETRIEVE of the root would need no path, but Linux 6.18 answers it EINVAL.)
    /// The loop's own cleanup then unmounts, lazily, so open files do not keep it alive.
    /// Must be called with `state` locked and the phase `.running`.
    private func requestExitLocked(_ st: inout State) {
        guard let se, !st.exitRequested else { return }
        st.exitRequested = true
        fuse_session_exit(se)
        guard let mountpoint = st.mountpoint else { return }
        // Before INIT the worker that handles INIT sees the flag afterwards; the statfs then
        // waits for INIT and fails with ENOTCONN once the connection is gone. Either way it ends.
        let own = st.own
        let poke = NativeThread.spawn(name: "fuse-wake") {
            var sv = statvfs()
            // Through the mount itself, found by id (its path may lead elsewhere by now).
            if let own {
                let fd = own.openRoot()
                if fd >= 0 { _ = fstatvfs(fd, &sv); close(fd) }
            } else {
                _ = statvfs(mountpoint, &sv)
            }
        }
        poke?.detach()
    }

    func unmount() {
        state.withLock { st in
            switch st.phase {
            case .created:
                break
            case .mounted:
                if st.mounted {
                    // Not serving yet. Whatever waits for INIT fails now rather than when the
                    // device's last copy is closed. The mount may have been unmounted by someone
                    // else already (before INIT nothing holds it), its id and device then free
                    // for the next mount: detached only while our connection lives.
                    st.control?.abort()
                    let control = st.control
                    if let own = st.own { _ = own.detach(alive: { control?.alive ?? !deviceReportsError() }) }
                    st.mounted = false
                }
                st.unmountedBeforeRun = true
                st.phase = .created
            case .running:
                requestExitLocked(&st)
            case .stopping, .finished:
                break
            }
        }
    }

    // MARK: - Whose mount

    /// Confirms, once the session serves, that the mount identified in the kernel's list when it
    /// was made (MountIdentity.made) is this session's: a lookup of a random name, sent through
    /// that mount's root by a thread of this process, must reach this session's own handler.
    /// That list can mislead: a mount detached right after it was made, and kept alive by whoever
    /// holds it, is not listed, and another of the same type and source made meanwhile is. If the
    /// probe does not get here within `timeout` seconds, the identity and fusectl folder are
    /// dropped: this session then never aborts or unmounts that mount (its own is left to whoever
    /// holds it). Once per session; from outside request handlers.
    func confirmOwnMount(timeout: Double) {
        let own = state.withLock { st -> MountIdentity? in
            guard !st.confirmAsked, st.phase == .running else { return nil }
            st.confirmAsked = true
            return st.own
        }
        guard let own else { return }
        var rng = SystemRandomNumberGenerator()
        var random = Array(".photogate-probe-".utf8)
        for _ in 0..<2 { random += Array(String(rng.next() as UInt64, radix: 16).utf8) }
        let name = random
        let sent = DispatchSemaphore(value: 0)
        // Set before the thread starts, so that clearing it below is final even if the thread
        // runs late; the thread fills in its id.
        probe.withLock { $0 = Probe(name: name) }
        probing.store(true, ordering: .releasing)
        let prober = NativeThread.spawn(name: "fuse-probe") { [self] in
            let tid = pg_gettid()
            probe.withLock { $0?.tid = tid }
            let fd = own.openRoot()
            if fd >= 0 {
                var st = stat()
                _ = (name + [0]).withUnsafeBufferPointer { b in
                    fstatat(fd, UnsafeRawPointer(b.baseAddress!).assumingMemoryBound(to: CChar.self), &st, AT_SYMLINK_NOFOLLOW)
                }
                close(fd)
            }
            sent.signal()
        }
        // A mount that is not ours may never answer: the thread is left waiting then. The proof
        // is the handler seeing the probe, not the answer coming back.
        if prober != nil { _ = sent.wait(timeout: .now() + max(timeout, 0)) }
        prober?.detach()
        probing.store(false, ordering: .releasing)
        let seen = probe.withLock { p -> Bool in
            defer { p = nil }
            return p?.seen == true
        }
        state.withLock { st in
            if seen {
                st.confirmed = true
            } else {
                st.own = nil
                st.control = nil
            }
        }
    }

    /// In the lookup handler: whether this lookup is the probe of confirmOwnMount() (from its
    /// thread, of its name, in the root), which is then answered ENOENT without the filesystem.
    func isProbe(parent: UInt64, name: UnsafePointer<CChar>?, pid: Int32) -> Bool {
        guard probing.load(ordering: .acquiring), parent == 1, let name else { return false }
        return probe.withLock { p -> Bool in
            guard var q = p, q.tid != 0, q.tid == pid, strlen(name) == q.name.count,
                  q.name.withUnsafeBytes({ memcmp(name, $0.baseAddress!, q.name.count) }) == 0 else { return false }
            q.seen = true
            p = q
            return true
        }
    }

    // MARK: - Notifications

    func enqueue(_ item: Notification) {
        let accepted = queue.withLock { q -> Bool in
            guard !q.stopped else { return false }
            q.items.append(item)
            return true
        }
        if accepted {
            wake.signal()
        } else if case .barrier(let barrier) = item {
            barrier.semaphore.signal()
        }
    }

    /// Drops `ino`'s cached attributes and pages (a folder's: its cached listing) now, from the
    /// calling thread, a request handler included: only for an inode whose locks no request under
    /// way can hold (callers say why), since the kernel may wait for them.
    func invalidateNow(_ ino: UInt64) {
        // Under `state`, as the pointer's rule says: a thread outside the loop (the change
        // watcher) read it unlocked while teardown destroyed the session (issue 34).
        let session = state.withLock { st -> OpaquePointer? in
            guard st.phase != .stopping, st.phase != .finished, let se else { return nil }
            st.directNotifies += 1
            return se
        }
        guard let session else { return }
        _ = fuse_lowlevel_notify_inval_inode(session, ino, 0, 0)
        state.withLock { $0.directNotifies -= 1 }
    }

    func flush() -> Bool {
        // Inside a handler, waiting could deadlock (the kernel may hold a lock the invalidation
        // needs until this very request is answered): queue only.
        guard !HandlerThread.isCurrent, let thread = notifierThread, !thread.isCurrent else { return false }
        let barrier = Barrier()
        enqueue(.barrier(barrier))
        barrier.semaphore.wait()
        return true
    }

    private func stopNotifier() {
        queue.withLock { $0.stopped = true }
        wake.signal()
        notifierThread?.join()
        notifierThread = nil
        // Anything queued after the thread's last drain.
        let rest = queue.withLock { q -> [Notification] in
            defer { q.items = [] }
            return q.items
        }
        for case .barrier(let b) in rest { b.semaphore.signal() }
    }

    private func notifierLoop() {
        while true {
            _ = wake.wait(timeout: .now() + .milliseconds(200))
            let (batch, stopped) = queue.withLock { q -> ([Notification], Bool) in
                defer { q.items = [] }
                return (q.items, q.stopped)
            }
            perform(batch)
            if stopped { return }
            watchdog()
        }
    }

    /// Runs queued notifications in order, skipping an item identical to the one just before it.
    /// Never inside a request handler, never with a lock held that a handler could need.
    private func perform(_ batch: [Notification]) {
        guard let se else {
            for case .barrier(let b) in batch { b.semaphore.signal() }
            return
        }
        var previous: Notification?
        for item in batch {
            defer { previous = item }
            if case .barrier(let b) = item {
                b.semaphore.signal()
                continue
            }
            if item == previous { continue }
            // Results are ignored: -ENOENT (not cached), -ENOTCONN (before INIT) are normal.
            switch item {
            case .inode(let ino, let offset, let length):
                _ = fuse_lowlevel_notify_inval_inode(se, ino, off_t(offset), off_t(length))
            case .entry(let parent, let name):
                withCName(name) { ptr, len in
                    _ = fuse_lowlevel_notify_inval_entry(se, parent, ptr, len)
                }
            case .delete(let parent, let child, let name):
                withCName(name) { ptr, len in
                    _ = fuse_lowlevel_notify_delete(se, parent, child, ptr, len)
                }
            case .barrier:
                break
            }
        }
    }

    /// A signal caught by libfuse's handler only sets the exit flag; if it landed on a thread
    /// that is not blocked in the loop, nothing wakes the loop (libfuse < 3.18). Notice it here.
    private func watchdog() {
        state.withLock { st in
            guard st.phase == .running, !st.exitRequested, let se else { return }
            if fuse_session_exited(se) != 0 { requestExitLocked(&st) }
        }
    }

    func notifyPoll(_ handle: OpaquePointer) {
        state.withLock { st in
            guard st.phase == .running else { return }
            _ = fuse_lowlevel_notify_poll(handle)
        }
    }

    // MARK: - Passthrough

    /// Registers `fd` as the backing file of `inode` (one backing id per inode, refcounted).
    /// Returns the backing id, or 0 when passthrough is not possible.
    func acquireBacking(_ req: fuse_req_t?, inode: Inode, fd: Int32) -> Int32 {
        guard fd >= 0 else { return 0 }
        return backing.withLock { table -> Int32 in
            // An inode already in passthrough stays so (the kernel fails mixed opens with EIO).
            if var b = table[inode] {
                b.refs += 1
                table[inode] = b
                return b.id
            }
            guard passthroughActive.load(ordering: .relaxed) else { return 0 }
            let id = cfuse_passthrough_open(req, fd)
            guard id > 0 else {
                // EPERM: the kernel will not take backing files from us after all. Serve reads
                // ourselves from now on (an inode never mixes: this one never got a backing id),
                // and say so in `passthroughActive`.
                passthroughActive.store(false, ordering: .relaxed)
                return 0
            }
            table[inode] = Backing(id: id, refs: 1)
            return id
        }
    }

    func releaseBacking(_ req: fuse_req_t?, inode: Inode) {
        backing.withLock { table in
            guard var b = table[inode] else { return }
            b.refs -= 1
            if b.refs > 0 {
                table[inode] = b
            } else {
                table[inode] = nil
                _ = cfuse_passthrough_close(req, b.id)
            }
        }
    }

    // MARK: - INIT

    func negotiate(_ conn: UnsafeMutablePointer<fuse_conn_info>) {
        let wantedWrite = options.maxWrite ?? (1 << 20)
        if wantedWrite > 0 { conn.pointee.max_write = min(conn.pointee.max_write, wantedWrite) }

        _ = cfuse_want(conn, UInt64(FUSE_CAP_ASYNC_READ))
        _ = cfuse_want(conn, UInt64(FUSE_CAP_PARALLEL_DIROPS))
        _ = cfuse_want(conn, UInt64(FUSE_CAP_AUTO_INVAL_DATA))
        // Files opened with direct I/O (files being written) may be mapped MAP_SHARED (else ENODEV).
        if cfuse_cap_direct_io_allow_mmap() != 0 { _ = cfuse_want(conn, cfuse_cap_direct_io_allow_mmap()) }
        let splice = cfuse_want(conn, UInt64(FUSE_CAP_SPLICE_WRITE)) != 0
        // No SPLICE_MOVE: the kernel then tries to steal each backing page (dropping it from the
        // store's page cache) and copies it anyway. Measured on Linux 6.18, a read whose store
        // file is cached but whose mount cache is cold: 2.9 GB/s without, 2.5 GB/s with.
        cfuse_unwant(conn, UInt64(FUSE_CAP_SPLICE_MOVE))
        // Splicing requests in only pays with a write_buf handler; ours copies to memory anyway.
        cfuse_unwant(conn, UInt64(FUSE_CAP_SPLICE_READ))
        // open(O_TRUNC): in one request where the file system asks (MountOptions.atomicOpenTruncate),
        // else an open without O_TRUNC, then setattr(size: 0).
        if options.atomicOpenTruncate { _ = cfuse_want(conn, UInt64(FUSE_CAP_ATOMIC_O_TRUNC)) } else { cfuse_unwant(conn, UInt64(FUSE_CAP_ATOMIC_O_TRUNC)) }
        // The kernel clears setuid/setgid itself.
        cfuse_unwant(conn, UInt64(FUSE_CAP_HANDLE_KILLPRIV))
        cfuse_unwant(conn, UInt64(FUSE_CAP_EXPORT_SUPPORT))
        cfuse_unwant(conn, UInt64(FUSE_CAP_POSIX_ACL))

        var plus = false
        if options.readdirplus {
            plus = cfuse_want(conn, UInt64(FUSE_CAP_READDIRPLUS)) != 0
            cfuse_unwant(conn, UInt64(FUSE_CAP_READDIRPLUS_AUTO))
        } else {
            cfuse_unwant(conn, UInt64(FUSE_CAP_READDIRPLUS))
            cfuse_unwant(conn, UInt64(FUSE_CAP_READDIRPLUS_AUTO))
        }

        let passthroughCap = cfuse_cap_passthrough()
        let passthroughAvailable = passthroughCap != 0 && cfuse_capable(conn, passthroughCap) != 0
        var passthrough = false
        // The kernel registers backing files only for a daemon with CAP_SYS_ADMIN (in the
        // initial user namespace): without it every passthrough open would fail with EPERM.
        if options.passthrough && passthroughAvailable && hasCapSysAdmin() {
            passthrough = cfuse_want(conn, passthroughCap) != 0
            if passthrough { cfuse_set_max_stack_depth(conn, 1) }
        }
        var writeback = false
        if options.writebackCache && !passthrough {
            writeback = cfuse_want(conn, UInt64(FUSE_CAP_WRITEBACK_CACHE)) != 0
        } else {
            cfuse_unwant(conn, UInt64(FUSE_CAP_WRITEBACK_CACHE))
        }
        passthroughActive.store(passthrough, ordering: .relaxed)

        let info = ConnectionInfo(
            protocolMajor: conn.pointee.proto_major, protocolMinor: conn.pointee.proto_minor,
            maxWrite: conn.pointee.max_write, maxReadahead: conn.pointee.max_readahead,
            passthroughAvailable: passthroughAvailable, passthroughActive: passthrough,
            readdirplus: plus, writebackCache: writeback, spliceWrite: splice)
        connection.withLock { $0 = info }
        initialized.store(true, ordering: .releasing)
    }
}

/// Calls `body` with `name` as a NUL-terminated C string and its length without the NUL
/// (libfuse's notify calls send namelen + 1 bytes).
func withCName<R>(_ name: [UInt8], _ body: (UnsafePointer<CChar>, Int) -> R) -> R {
    var bytes = name
    bytes.append(0)
    return bytes.withUnsafeBufferPointer { buf in
        buf.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buf.count) { body($0, name.count) }
    }
}

/// True if this process has CAP_SYS_ADMIN in its effective set (bit 21 of CapEff in
/// /proc/self/status).
func hasCapSysAdmin() -> Bool {
    let fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return geteuid() == 0 }
    defer { close(fd) }
    var data = [UInt8]()
    var buf = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n <= 0 { break }
        data += buf[0..<n]
    }
    for line in String(decoding: data, as: UTF8.self).split(separator: "\n") where line.hasPrefix("CapEff:") {
        let hex = String(line.dropFirst("CapEff:".count).filter { !$0.isWhitespace })
        guard let caps = UInt64(hex, radix: 16) else { return false }
        return caps & (1 << 21) != 0
    }
    return false
}
