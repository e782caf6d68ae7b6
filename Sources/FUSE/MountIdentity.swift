import PGSystem
#if canImport(Glibc)
import Glibc
#endif

/// A mount as the kernel knows it: its id (as /proc/self/mountinfo numbers mounts) and its
/// device. A session unmounts its own mount by this, never by the path it was mounted at: that
/// path may lead elsewhere by then (a folder on the way renamed, and a symlink left at its name
/// to another mount), and libfuse's unmount by path then unmounted that other mount, with root's
/// rights for a daemon run as root.
public struct MountIdentity: Equatable, Sendable {
    public let id: Int64
    public let major: UInt32
    public let minor: UInt32

    /// O_PATH (Glibc hides it behind _GNU_SOURCE): names a file without opening it.
    static let oPath: Int32 = 0o10000000

    /// A line of /proc/self/mountinfo (the one reader of it: MountTable builds on this too).
    public struct Listed: Sendable {
        public let identity: MountIdentity
        /// The id of the mount it is mounted on.
        public let parentID: Int64
        /// "major:minor", as listed.
        public let device: String
        public let rootBytes: [UInt8]
        public let mountPoint: [UInt8]
        public let type: [UInt8]
        public let source: [UInt8]
        /// The filesystem's own options, as listed (escaped).
        public let superOptionsBytes: [UInt8]
    }

    /// This process's mount namespace, as /proc/self/mountinfo lists it. Parsed as bytes: split as
    /// a String, a line ending in "\r" joined the next one, and a name ending in U+0600 swallowed
    /// the space after it (both form one Character), which hid the mount listed next.
    public static func listed() -> [Listed] {
        guard let text = WholeFile.bytes("/proc/self/mountinfo") else { return [] }
        var out: [Listed] = []
        for line in text.split(separator: UInt8(ascii: "\n")) {
            // id parent major:minor root mountpoint options [optional...] - type source superoptions
            let f = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
            guard f.count > 7, let dash = f[6...].firstIndex(where: { $0.elementsEqual([UInt8(ascii: "-")]) }), dash + 1 < f.count,
                  let id = Int64(String(decoding: f[0], as: UTF8.self)) else { continue }
            let dev = f[2].split(separator: UInt8(ascii: ":"))
            guard dev.count == 2, let major = UInt32(String(decoding: dev[0], as: UTF8.self)),
                  let minor = UInt32(String(decoding: dev[1], as: UTF8.self)) else { continue }
            out.append(Listed(identity: MountIdentity(id: id, major: major, minor: minor),
                              parentID: Int64(String(decoding: f[1], as: UTF8.self)) ?? 0,
                              device: String(decoding: f[2], as: UTF8.self), rootBytes: unescape(f[3]), mountPoint: unescape(f[4]),
                              type: unescape(f[dash + 1]), source: dash + 2 < f.count ? unescape(f[dash + 2]) : [],
                              superOptionsBytes: dash + 3 < f.count ? Array(f[dash + 3]) : []))
        }
        return out
    }

    /// The ids of the mounts listed now.
    public static func currentIDs() -> Set<Int64> { Set(listed().map(\.identity.id)) }

    /// The mount this process has just made: listed now and not in `before`, of `type` from
    /// `source`, all of one device (a shared parent may show it twice); when several devices
    /// qualify (someone else mounting the same at the same moment), the one at `path`. Read from
    /// the kernel's list, not by looking the path up again: a folder on the way swapped for a
    /// symlink meanwhile would lead to another mount. nil when none or no single one qualifies.
    public static func made(since before: Set<Int64>, type: String, source: String, at path: [UInt8]) -> MountIdentity? {
        let new = listed().filter {
            !before.contains($0.identity.id) && $0.type.elementsEqual(type.utf8) && $0.source.elementsEqual(source.utf8)
        }
        let devices = Set(new.map { [$0.identity.major, $0.identity.minor] })
        if devices.count == 1 { return (new.first { $0.mountPoint == path } ?? new.first)?.identity }
        let here = new.filter { $0.mountPoint == path }
        return here.count == 1 ? here[0].identity : nil
    }

    static func of(fd: Int32) -> MountIdentity? {
        var id: Int64 = 0
        var major: UInt32 = 0, minor: UInt32 = 0
        guard pg_mount_identity(fd, &id, &major, &minor) == 0 else { return nil }
        return MountIdentity(id: id, major: major, minor: minor)
    }

    /// A descriptor naming the folder at `path` (O_PATH, no final symlink followed), or -1.
    static func open(_ path: some Collection<UInt8>) -> Int32 {
        (Array(path) + [0]).withUnsafeBufferPointer { b in
            Glibc.open(UnsafeRawPointer(b.baseAddress!).assumingMemoryBound(to: CChar.self), oPath | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        }
    }

    /// Where this mount is now in this process's mount namespace (mountinfo), nil when it is not
    /// mounted here any more.
    public func mountPoint() -> [UInt8]? {
        MountIdentity.listed().first { $0.identity == self }?.mountPoint
    }

    /// A descriptor (O_PATH) of this mount's root, found where mountinfo says it is and checked to
    /// be this mount; -1 when it is not mounted here or its path leads elsewhere.
    public func openRoot() -> Int32 {
        guard let at = mountPoint() else { return -1 }
        let fd = MountIdentity.open(at)
        guard fd >= 0 else { return -1 }
        guard MountIdentity.of(fd: fd) == self else { close(fd); return -1 }
        return fd
    }

    public enum Detached: Equatable, Sendable { case detached, gone, failed(String) }

    /// Detaches this mount wherever it is now, as `umount -l` does (a user's through fusermount3):
    /// gone from the mount table at once, served until its last use ends. `.gone`: it is not
    /// mounted in this namespace (unmounted already), or `alive` says the session's file system
    /// is gone. Mount ids and devices are handed out again once free: `alive` is asked after the
    /// mount found is held by a descriptor, so a yes means the device is still this session's, and
    /// the mount held (that device's) is this session's.
    public func detach(alive: () -> Bool) -> Detached {
        guard let at = mountPoint() else { return .gone }
        let fd = MountIdentity.open(at)
        guard fd >= 0 else { return .failed("cannot open \(String(decoding: at, as: UTF8.self)): \(String(cString: strerror(errno)))") }
        // Closed before the unmount completes: a descriptor of the mount would keep it alive.
        defer { close(fd) }
        guard MountIdentity.of(fd: fd) == self else { return .failed("\(String(decoding: at, as: UTF8.self)) is another mount now") }
        guard alive() else { return .gone }
        if geteuid() == 0 {
            // The kernel takes the descriptor's link to the mount it names.
            return umount2("/proc/self/fd/\(fd)", Int32(MNT_DETACH)) == 0 ? .detached : .failed(String(cString: strerror(errno)))
        }
        // fusermount3 takes a path (it checks the mount is this user's); checked just above. The
        // bytes mountinfo lists, whatever their encoding (a folder on the way renamed to a name
        // that is not UTF-8 is still the user's mount).
        return MountIdentity.fusermount(["-u", "-z", "-q", "--"], at) ? .detached : .failed("fusermount3 failed")
    }

    /// Runs /bin/fusermount3 with `options` and then `path` as raw bytes, its output discarded,
    /// and waits for it. True when it exits 0.
    static func fusermount(_ options: [String], _ path: [UInt8]) -> Bool {
        var argv: [UnsafeMutablePointer<CChar>?] = (["fusermount3"] + options).map { strdup($0) }
        argv.append((path + [0]).withUnsafeBufferPointer { b in
            strdup(UnsafeRawPointer(b.baseAddress!).assumingMemoryBound(to: CChar.self))
        })
        argv.append(nil)
        defer { argv.forEach { free($0) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        pg_spawn_closefrom(&actions, 3)
        // An empty signal mask and default dispositions, whatever the daemon has blocked.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t(), defaults = sigset_t()
        sigemptyset(&empty)
        sigemptyset(&defaults)
        for sig in [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD] { sigaddset(&defaults, sig) }
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: pid_t = 0
        guard posix_spawn(&pid, "/bin/fusermount3", &actions, &attributes, argv, environ) == 0 else { return false }
        var status: Int32 = 0
        var waited: pid_t
        repeat { waited = waitpid(pid, &status, 0) } while waited < 0 && errno == EINTR
        // Exited (low 7 bits 0) with status 0; not known when someone else reaped it.
        return waited == pid && status == 0
    }

    /// mountinfo writes space, tab, newline and backslash as octal escapes.
    public static func unescape(_ field: some Collection<UInt8>) -> [UInt8] {
        let b = Array(field)
        guard b.contains(UInt8(ascii: "\\")) else { return b }
        var out = [UInt8](), i = 0
        out.reserveCapacity(b.count)
        while i < b.count {
            if b[i] == UInt8(ascii: "\\"), i + 3 < b.count,
               let v = UInt8(String(decoding: b[(i + 1)...(i + 3)], as: UTF8.self), radix: 8) {
                out.append(v); i += 4
            } else { out.append(b[i]); i += 1 }
        }
        return out
    }
}
