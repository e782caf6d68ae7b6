import PGSystem
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The user a view is mounted for when not its daemon's: a root `photogate run`'s command, which
/// runs as an unprivileged id (`photogate mount --owner UID:GID`). Its text, "UID:GID", is made and
/// read here only: for `run --show-user`, the `--owner` option `run` and `mount` pass on and
/// `mount` parses, and the registry's `owner`, by which `run` finds a view to reuse (three
/// places each built it by hand, and a view written one way and looked for another is not found).
public struct MountOwner: Equatable, Hashable, Sendable, CustomStringConvertible {
    public let uid: UInt32
    public let gid: UInt32

    public init(uid: UInt32, gid: UInt32) {
        self.uid = uid
        self.gid = gid
    }

    /// "UID:GID", two decimal numbers; nil for anything else.
    public init?(_ text: String) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let uid = UInt32(parts[0]), let gid = UInt32(parts[1]) else { return nil }
        self.init(uid: uid, gid: gid)
    }

    /// "UID:GID".
    public var description: String { "\(uid):\(gid)" }
}

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
    /// Who opens the mount's files (nil: a record of an older daemon, which opened them itself).
    public var opens: Opens?
    public var opensFiles: Opens { opens ?? .daemon }
    /// The user the view is for when not its daemon's (`MountOwner`'s "UID:GID": a root
    /// `photogate run`'s command, which runs as an unprivileged id), else nil.
    public var owner: String?

    public init(app: String, access: String, mountpoint: String, pid: Int32, readPath: String, libfuse: String, started: Double,
                readaheadKiB: Int? = nil, device: String? = nil, opens: Opens? = nil, owner: String? = nil) {
        self.app = app
        self.access = access
        self.mountpoint = mountpoint
        self.pid = pid
        self.readPath = readPath
        self.libfuse = libfuse
        self.started = started
        self.readaheadKiB = readaheadKiB
        self.device = device
        self.opens = opens
        self.owner = owner
    }

    /// Who opens a mount's files: its daemon (each open a request it answers), or the kernel
    /// (a no-open mount: the kernel opens files without asking). Decoded from its name; a name
    /// this version does not know (a newer daemon's record) is `.unknown`, not a lost record.
    public enum Opens: String, Codable, Sendable {
        case daemon, kernel, unknown

        public init(from decoder: any Decoder) throws {
            self = Opens(rawValue: try decoder.singleValueContainer().decode(String.self)) ?? .unknown
        }
    }
}

/// The running mounts of a library: each mount daemon's record in run/mounts/ (`<pid>.json`, a
/// `MountRecord` in JSON), written by the daemon (`write`, `remove`) and read by the CLI, which
/// checks each against the kernel's mount table and the daemon's process (`entries`).
public enum MountRegistry {
    static func dir(_ run: RunFolder) -> String { run.path + "/" + RunFolder.mounts }

    /// A record's file name.
    static func fileName(pid: Int32) -> String { "\(pid).json" }

    /// Written in run/mounts/ following no symbolic link (there, at mounts/, or at the file): to a
    /// temp name (a dot name, which readers skip), then renamed over the record.
    public static func write(_ r: MountRecord, run: RunFolder) {
        let d = dir(run)
        guard let data = try? JSONEncoder().encode(r) else { return }
        let name = ".\(r.pid).json.tmp"
        let fd = pg_open_in_folder(run.path, RunFolder.mounts, name, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { return }
        let written = data.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        close(fd)
        if written == data.count { rename(d + "/" + name, d + "/" + fileName(pid: r.pid)) } else { unlink(d + "/" + name) }
    }

    /// Whether the record of the daemon `pid` is there (a daemon whose record was removed, with
    /// run/ cleaned away, writes it again).
    public static func hasRecord(pid: Int32, run: RunFolder) -> Bool { contents(run, fileName(pid: pid)) != nil }

    /// A record file's bytes, read following no symbolic link (nor blocking on a FIFO).
    static func contents(_ run: RunFolder, _ name: String) -> Data? {
        let fd = pg_open_in_folder(run.path, RunFolder.mounts, name, O_RDONLY, 0)
        guard fd >= 0 else { return nil }
        return try? FileHandle(fileDescriptor: fd, closeOnDealloc: true).readToEnd()
    }

    public static func remove(pid: Int32, run: RunFolder) { unlink(dir(run) + "/" + fileName(pid: pid)) }

    /// The record of the mount made at `mountpoint` (byte for byte), whatever its state: for a
    /// caller that made that mount and must find it again if its folder is moved.
    public static func record(mountedAt mountpoint: String, run: RunFolder) -> MountRecord? {
        records(run).first { $0.record.mountpoint.utf8.elementsEqual(mountpoint.utf8) }?.record
    }

    /// The record of `mount` (a mount in the kernel's table) when it is one of this library's
    /// views: recorded at that mount point with that device (a record of an older daemon, with
    /// no device: at that mount point), or with that device by a daemon still running (a mount
    /// whose folder was renamed since). `alive`: its daemon still runs. nil for any other mount,
    /// a photogate mount of another library included.
    public static func record(of mount: MountTable.Entry, run: RunFolder) -> (record: MountRecord, alive: Bool)? {
        guard mount.type == "fuse.photogate" else { return nil }
        let all = records(run).map(\.record)
        if let r = all.first(where: { $0.mountpoint.utf8.elementsEqual(mount.mountPointBytes) && ($0.device ?? mount.device) == mount.device }) {
            return (r, daemonAlive(r))
        }
        if let r = all.first(where: { $0.device == mount.device && daemonAlive($0) }) { return (r, true) }
        return nil
    }

    /// Every record file (its name) and what it says, whatever the state of its mount.
    static func records(_ run: RunFolder) -> [(file: String, record: MountRecord)] {
        let d = dir(run)
        return ((try? FileManager.default.contentsOfDirectory(atPath: d)) ?? []).compactMap { name in
            guard name.hasSuffix(".json") && !name.hasPrefix("."),
                  let data = contents(run, name),
                  let r = try? JSONDecoder().decode(MountRecord.self, from: data) else { return nil }
            return (name, r)
        }
    }

    /// Running mounts (live daemons whose mount is in place); see `entries` for the dead ones.
    public static func list(_ run: RunFolder) -> [MountRecord] {
        entries(run).filter { $0.state == .live }.map(\.record)
    }

    /// Every registered mount with the truth about it: `.live`, or `.dead` when its daemon is gone
    /// (killed with SIGKILL, crashed) but its mount point is still mounted, stale. Records whose
    /// daemon is gone and whose mount point is clear are dropped; so are records of a daemon that
    /// is unmounting. A pid reused by another process does not count as the daemon.
    public static func entries(_ run: RunFolder) -> [MountEntry] {
        let d = dir(run)
        let mounted = mountedPhotogatePoints()
        let all = records(run).map { ($0.file, $0.record) }
        var out: [MountEntry] = []
        for (name, r) in all {
            let alive = daemonAlive(r)
            // The same mount: same mount point and, when recorded, the same device (a newer
            // mount at that point is someone else's).
            var isMounted = mounted.contains { MountTable.samePath($0.path, r.mountpoint) && (r.device == nil || $0.device == r.device) }
            // Device numbers of FUSE connections are reused: a newer live mount at the same
            // point makes this dead one gone for good (it was detached to make room).
            if !alive && all.contains(where: { $0.1.pid != r.pid && MountTable.samePath($0.1.mountpoint, r.mountpoint) && daemonAlive($0.1) }) {
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
        // Run by this user or root: another user's process given the pid (after a crash) with a
        // look-alike command line is not it.
        var st = stat()
        guard stat("/proc/\(r.pid)", &st) == 0, st.st_uid == geteuid() || st.st_uid == 0 else { return false }
        guard let cmd = FileManager.default.contents(atPath: "/proc/\(r.pid)/cmdline") else { return false }
        let args = cmd.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        return args.contains("mount") && args.contains { $0 == r.app || $0.hasSuffix("#" + r.app) }
    }

    /// photogate's FUSE mounts in this mount namespace (fuse.photogate): mount point and device.
    static func mountedPhotogatePoints() -> [(path: String, device: String)] {
        MountTable.photogateMounts().map { ($0.mountPoint, $0.device) }
    }
}

/// One registered mount and whether it is really there.
public struct MountEntry: Sendable {
    public enum State: String, Sendable { case live, dead }
    public var record: MountRecord
    public var state: State
    /// Why a dead mount is stale (e.g. "Transport endpoint is not connected").
    public var problem: String?
}
