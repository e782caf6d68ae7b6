import ArgumentParser
import PGSystem
import Foundation
import GrantStore
import LibraryRun
import PhotoLibrary
import PhotoViewFS
#if canImport(Glibc)
import Glibc
#endif

struct Mount: PhotogateCommand {
    /// Waits for no running mount: a mount's daemon (in this process, or started by it) is one.
    var waitsForRunningMounts: Bool { false }
    static let configuration = CommandConfiguration(
        commandName: "mount",
        abstract: "Mount an app's view of the library (returns once the mount is ready).",
        // A short synopsis: argument-parser does not wrap the generated one at 80 columns (issue 16).
        usage: "photogate mount <app> <mountpoint> [<options>]",
        discussion: """
            The mount shows exactly what the app may see (see the README's table). It runs in a \
            background daemon (logs in <library>/run/logs/) unless --foreground, which keeps it \
            attached with logs on stderr; SIGINT and SIGTERM unmount cleanly. A mount point left \
            stale by a killed daemon is cleared first.

            Options (-o, comma-separated, also from an fstab line): access=read-write|add-only, \
            library=DIR, no_passthrough, no_open, allow_other, and the usual mount flags (ro, nosuid, \
            nodev, noexec, noatime, default_permissions, ...); mount(8)'s own (noauto, nofail, \
            user, _netdev, x-*) are ignored.

            A user without CAP_SYS_ADMIN mounts through the setuid fusermount3 (libfuse runs it), and \
            needs read-write access to /dev/fuse (fusermount3 opens it as that user). Kernel \
            passthrough needs CAP_SYS_ADMIN: elsewhere photogate serves reads itself, and \
            `photogate mounts` says which.

            With --foreground under systemd (Type=notify), readiness is sent to $NOTIFY_SOCKET.

            fstab (mount.fuse3 runs `photogate SOURCE MOUNTPOINT -o OPTIONS`; photogate must be \
            on the default PATH, e.g. /usr/local/bin):
              photogate#org.example.Camera /cam fuse.photogate access=add-only,nofail 0 0

            Examples:
              photogate mount org.example.Editor ~/mnt/editor
              photogate mount org.example.Camera /run/camera --access add-only
              photogate mount org.example.Indexer /run/indexer --no-open
              mount -t fuse.photogate -o library=/srv/photos org.example.Editor /mnt/editor
            """)

    @Argument(help: "The app id.", completion: Complete.apps) var app: String
    @Argument(help: "An existing, empty folder.", completion: .directory) var mountpoint: String
    @Option(help: "read-write or add-only.") var access: AccessLevel = .readWrite
    @Flag(help: "Stay attached; log on stderr.") var foreground = false
    @Option(name: .customShort("o"), help: ArgumentHelp("Mount options, comma-separated (e.g. allow_other, access=add-only, library=DIR).", valueName: "options"))
    var options: [String] = []
    @Flag(help: "Never hand reads to the kernel (FUSE passthrough): photogate serves every read itself.")
    var noPassthrough = false
    @Flag(help: ArgumentHelp("A read-only mount whose opens never reach the daemon: for scripts that read many small files.",
                             discussion: "The kernel opens files itself and keeps their pages, so opening a file read before costs no round trip to photogate (about 3x the speed on 100 KB files). It implies -o ro and --no-passthrough; .photogate/changes cannot be read in it. Grants, revokes and strip-location still reach it at once."))
    var noOpen = false
    @Option(help: .hidden) var readyFd: Int32?
    /// `photogate run`'s own pid: the mount ends when that process does, SIGKILL included.
    @Option(help: .hidden) var whilePid: Int32?
    /// `photogate run` started by root: the unprivileged UID:GID its command runs as, whose view this is.
    @Option(help: .hidden) var owner: String?
    @OptionGroup var lib: LibraryOption

    func execute() throws {
        do {
            let parsed = try MountOptionList(options)
            let id = try parseApp(appFromMountSource(app))
            let access = parsed.access ?? self.access
            let noPassthrough = self.noPassthrough || parsed.noPassthrough
            let noOpen = self.noOpen || parsed.noOpen
            // An add-only mount shows nothing and only takes new files: it has nothing to read.
            if noOpen && access == .addOnly {
                throw CommandFailure("--no-open makes a read-only mount, and an add-only mount only takes new files: choose one", .usage)
            }
            let owner = try self.owner.map { spec -> MountOwner in
                guard let o = MountOwner(spec), o.uid != 0, o.gid != 0 else { throw CommandFailure("--owner takes UID:GID, neither 0", .usage) }
                guard geteuid() == 0 else { throw CommandFailure("--owner is for root (photogate run started by root)", .usage) }
                return o
            }
            let library = try Library.open(at: LibraryPaths.resolve(parsed.library ?? lib.library))
            let mp = try prepareMountpoint(mountpoint, library: library)
            guard Glibc.access("/dev/fuse", F_OK) == 0 else {
                throw CommandFailure("/dev/fuse is missing: FUSE is not available on this machine (load the fuse module, or run the container with --device /dev/fuse)", .mountFailed)
            }
            // fusermount3 opens /dev/fuse as the calling user (by design: the device's mode is
            // the machine's policy on who may mount FUSE), so say so instead of "Permission denied".
            if geteuid() != 0 && Glibc.access("/dev/fuse", R_OK | W_OK) != 0 {
                let user = String(cString: getpwuid(geteuid())?.pointee.pw_name ?? strdup("you"))
                throw CommandFailure("/dev/fuse is not open to \(user): no FUSE filesystem can be mounted by this user (fusermount3 opens the device as the caller). Ask an administrator to make it 0666 (Debian's default), or to grant this user access: setfacl -m u:\(user):rw /dev/fuse", .mountFailed)
            }
            if foreground || readyFd != nil {
                // Where `photogate mounts --all` finds this library's views.
                if let why = UserLibraries.note(library.paths.root) { logLine("mounts --all will not list this library: \(why)") }
                // SIGINT/SIGTERM/SIGHUP must reach libfuse's handlers even if our parent blocked them.
                var unblock = sigset_t()
                sigemptyset(&unblock)
                for sig in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&unblock, sig) }
                pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
                let readyFd = self.readyFd
                let report = { (err: String?) in
                    let msg = err.map { "error: \($0)\n" } ?? "ok\n"
                    if let fd = readyFd {
                        reportReadiness(msg, to: fd)
                    } else if let err {
                        printError(err)
                    }
                    // systemd (Type=notify): ready once mounted, or why not.
                    if err == nil {
                        ServiceManager.notify("READY=1\nSTATUS=mounted \(id) (\(access.rawValue)) at \(mp)")
                    } else if let err {
                        ServiceManager.notify("STATUS=mount failed: \(err)")
                    }
                }
                // The process the mount is for, held from before the mount: one that ended already
                // (or never was) is refused, and its end is noticed by this descriptor (the daemon
                // watches it), not by a number that may be reused.
                var runEnd: Int32 = -1
                if let pid = whilePid {
                    runEnd = pg_pidfd_open(pid)
                    guard runEnd >= 0 else {
                        report("the process this mount is for (pid \(pid)) is not running: \(String(cString: strerror(errno)))")
                        throw ExitCode(Exit.mountFailed.rawValue)
                    }
                }
                // Left open until this process exits: the daemon's thread polls it to the end.
                let settings = MountDaemon.Settings(app: id, access: access, mountpoint: mp, extraOptions: parsed.fuse,
                                                    passthrough: !noPassthrough, allowOther: parsed.allowOther, noOpen: noOpen,
                                                    whileProcess: whilePid.map { ($0, runEnd) }, owner: owner)
                // A background daemon's stderr is its log file in run/logs/ (spawnDaemon): rotated
                // when it grows past its limit. A foreground one's is its caller's, left alone.
                if readyFd != nil {
                    daemonLog.attach(DaemonLog.File(folder: library.paths.run, sub: RunFolder.logs, name: daemonLogName(id, access)))
                }
                // PHOTOGATE_TRACE_CLOSES opened now, before any request is served (only a mount's
                // daemon traces), and a path refused said in the log: a measurement must not lose
                // its trace unseen.
                if let why = CloseTrace.start() { logLine("warning: \(why)") }
                // Marked in use now, not at its first commit: a log replaced under a mount that has
                // not committed yet is told to every command as one that was (CatalogFiles).
                do { try library.markInUse() } catch {
                    report("cannot mark the library in use: \(error)")
                    throw ExitCode(Exit.mountFailed.rawValue)
                }
                // The daemon's commits ring the bell from a thread of its own (BellRinger); once it
                // is done, a ring still owed is rung here before the process goes on to exit.
                Library.ringsBellAside.store(true, ordering: .relaxed)
                let status = MountDaemon.run(library: LibraryStorePort(library), settings: settings, log: { logLine($0) }, ready: report)
                Library.ringsBellAside.store(false, ordering: .relaxed)
                library.ringBell()
                daemonLog.flush()
                ServiceManager.notify("STOPPING=1")
                // Ended with the run (a run killed, even not yet reaped, has ended): its folder goes.
                if runEnd >= 0 {
                    var ended = pollfd(fd: runEnd, events: Int16(POLLIN), revents: 0)
                    if poll(&ended, 1, 0) == 1 { removeRunFolder(mp, library: library) }
                }
                // The daemon's end is the library's: when it is the last to let go (unmounted by
                // fusermount3, SIGTERM, a shutdown), the log goes into the database now. Its
                // threads may still hold the library, so this does not wait for its release.
                library.letGo()
                if status != 0 { throw ExitCode(Exit.mountFailed.rawValue) }
                return
            }
            try spawnDaemon(library: library, app: id, access: access, mountpoint: mp, options: parsed, noPassthrough: noPassthrough,
                            noOpen: noOpen, whilePID: whilePid, owner: owner)
            say("mounted \(id) (\(access.rawValue)\(noOpen ? ", no-open, read-only" : "")) at \(mp)")
        }
    }

    /// Resolves the mount point, refusing a missing or busy one and clearing a stale one. Resolved
    /// following no other user's symbolic link and through no folder another user may change
    /// (`trustedPath`, exit 74), and refused inside the library (`refuseInsideLibrary`, exit 72).
    func prepareMountpoint(_ path: String, library: Library) throws -> String {
        let abs = try trustedPath(path, "mount on")
        if let top = MountTable.entries().last(where: { $0.mountPointBytes.elementsEqual(abs.utf8) }) {
            // statfs always reaches the daemon (stat may be answered from the kernel's cache).
            // Only a photogate mount left by a dead daemon is cleared: nothing else is ours.
            var sfs = statvfs()
            if top.type == "fuse.photogate" && statvfs(abs, &sfs) != 0 && (errno == ENOTCONN || errno == EIO) {
                logLine("clearing stale mount at \(abs)")
                _ = try? runTool("/bin/fusermount3", ["-u", "-z", abs])
                if isMounted(abs) { umount2(abs, Int32(MNT_DETACH) | Int32(UMOUNT_NOFOLLOW)) }
            } else {
                throw CommandFailure("mount point \(abs) is busy: something is already mounted there", .mountFailed)
            }
        }
        guard let real = realpath(abs, nil) else {
            throw CommandFailure("mount point \(abs) does not exist (create the folder first)", .mountFailed)
        }
        defer { free(real) }
        let resolved = String(cString: real)
        var st = stat()
        guard stat(resolved, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else {
            throw CommandFailure("mount point \(abs) is not a folder", .mountFailed)
        }
        try refuseInsideLibrary(resolved, library: library)
        return resolved
    }

    /// After the run it was made for ended without unmounting it (killed): the folder `run` made
    /// for the view in the library's run/sandbox/ (`XXXXXX/view`), if empty, is removed as `run`
    /// would have. By descriptors, following no symlink: its name may lead elsewhere by now.
    func removeRunFolder(_ mountpoint: String, library: Library) {
        let folder = (mountpoint as NSString).deletingLastPathComponent
        guard (mountpoint as NSString).lastPathComponent == "view" else { return }
        let parents = [library.paths.run + "/" + RunFolder.sandbox, RunFolders.rootBase].compactMap { p -> String? in
            guard let r = realpath(p, nil) else { return nil }
            defer { free(r) }
            return String(cString: r)
        }
        guard let parent = parents.first(where: { (folder as NSString).deletingLastPathComponent == $0 }) else { return }
        let base = Glibc.open(parent, O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard base >= 0 else { return }
        defer { close(base) }
        let name = (folder as NSString).lastPathComponent
        let dir = openat(base, name, O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard dir >= 0 else { return }
        let removed = unlinkat(dir, "view", AT_REMOVEDIR) == 0
        close(dir)
        if removed { unlinkat(base, name, AT_REMOVEDIR) }
    }

    func spawnDaemon(library: Library, app: AppID, access: AccessLevel, mountpoint: String, options: MountOptionList,
                     noPassthrough: Bool, noOpen: Bool, whilePID: Int32?, owner: MountOwner? = nil) throws {
        let logName = daemonLogName(app, access)
        let logPath = library.paths.run + "/" + RunFolder.logs + "/" + logName
        // Opened here, in run/logs/, following no symbolic link (at run/, logs/ or the log): a link
        // left at its name never takes the daemon's output to another file.
        let logFD = pg_open_in_folder(library.paths.run, RunFolder.logs, logName, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        guard logFD >= 0 else {
            let why = errno == ELOOP || errno == ENOTDIR ? "it, or a folder on its way in run/, is a symbolic link, which photogate does not follow"
                : errno == EINVAL ? "it is not a regular file" : String(cString: strerror(errno))
            throw CommandFailure("cannot open the daemon's log \(logPath): \(why)", .mountFailed)
        }
        defer { close(logFD) }
        var p: [Int32] = [0, 0]
        guard pipe(&p) == 0 else { throw CommandFailure("pipe failed", .failure) }
        for fd in p { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var args = [exe, "mount", app.rawValue, mountpoint, "--access", access.rawValue, "--ready-fd", "3", "--library", library.paths.root]
        args += options.daemonArguments
        if noPassthrough { args.append("--no-passthrough") }
        if noOpen { args.append("--no-open") }
        if let whilePID { args += ["--while-pid", String(whilePID)] }
        if let owner { args += ["--owner", owner.description] }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, logFD, 1)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        posix_spawn_file_actions_adddup2(&actions, p[1], 3)
        // The daemon must not keep our caller's pipes open (a caller waiting for our output
        // would wait forever): close everything above the readiness descriptor.
        pg_spawn_closefrom(&actions, 4)
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        // A new session (survives our exit), an empty signal mask and default dispositions: our
        // caller may block or ignore SIGTERM, and the daemon must still unmount on it.
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attr, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for sig in [SIGINT, SIGTERM, SIGHUP, SIGPIPE] { sigaddset(&defaults, sig) }
        posix_spawnattr_setsigdefault(&attr, &defaults)
        posix_spawnattr_setflags(&attr, Int16(0x80 | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))   // 0x80: POSIX_SPAWN_SETSID
        var pid: pid_t = 0
        let cargs = args.map { strdup($0) } + [nil]
        defer { cargs.forEach { free($0) } }
        let rc = posix_spawn(&pid, exe, &actions, &attr, cargs, environ)
        close(p[1])
        guard rc == 0 else { close(p[0]); throw CommandFailure("cannot start the mount daemon: \(String(cString: strerror(rc)))", .mountFailed) }
        // Wait for "ok" or "error: ..." (or EOF if it died), at most 20 s.
        var reply = [UInt8]()
        var buf = [UInt8](repeating: 0, count: 512)
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            var pfd = pollfd(fd: p[0], events: Int16(POLLIN), revents: 0)
            if poll(&pfd, 1, 200) > 0 {
                let n = read(p[0], &buf, buf.count)
                if n <= 0 { break }
                reply += buf[0..<n]
                if reply.contains(0x0a) { break }
            }
        }
        close(p[0])
        let text = String(decoding: reply, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if text == "ok" { return }
        if text.isEmpty {
            kill(pid, SIGTERM)
            throw CommandFailure("the mount daemon did not start (see \(logPath))", .mountFailed)
        }
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        throw CommandFailure(text.hasPrefix("error: ") ? String(text.dropFirst(7)) : text, .mountFailed)
    }
}

/// True if `path` is a mount point listed in /proc/mounts.
func isMounted(_ path: String) -> Bool { MountTable.isMountPoint(path) }

@discardableResult
func runTool(_ path: String, _ args: [String], environment: [String: String]? = nil) throws -> Int32 {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = args
    if let environment { p.environment = environment }
    p.standardOutput = FileHandle.nullDevice
    p.standardError = FileHandle.nullDevice
    try p.run()
    p.waitUntilExit()
    return p.terminationStatus
}

/// Writes a background daemon's readiness (`message`) to `fd`, the pipe `photogate mount` waits on
/// (`--ready-fd`), and closes it. That command may have stopped waiting (after 20 s, or killed):
/// the write then fails with EPIPE, and raises no SIGPIPE. By then the daemon's session may have
/// ended (a SIGTERM while the probe of its mount was out), and libfuse, ending it, gave SIGPIPE its
/// default action back: the daemon was killed there, before its own end (the last writes settled,
/// its registry entry removed, the library let go).
func reportReadiness(_ message: String, to fd: Int32) {
    _ = message.withCString { DaemonLog.writeWithoutSIGPIPE(fd, $0, strlen($0)) }
    close(fd)
}

/// The daemon's log (stderr, and stdout with it): every line goes through its limits (DaemonLog:
/// repeats counted rather than written, the file rotated past a few MiB), whatever apps or other
/// users make the daemon log.
let daemonLog = DaemonLog(format: { "[\(iso(Date()))] photogate[\(getpid())]: \(escaped($0))\n" })

func logLine(_ s: String) { daemonLog.log(s) }

/// The name of an app's daemon log in the library's run/logs/.
func daemonLogName(_ app: AppID, _ access: AccessLevel) -> String { "\(app.rawValue).\(access.rawValue).log" }
