import ArgumentParser
import PGSystem
import Foundation
import GrantStore
import LibraryRun
#if canImport(Glibc)
import Glibc
#endif

struct Unmount: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "unmount",
        abstract: "Unmount an app's view (waits for its daemon to finish).",
        discussion: """
            Returns once the view's daemon has ended (it commits the files still being closed \
            first). A daemon that has not ended after --timeout seconds (stuck), or that is \
            stopped (SIGSTOP), is named, and the exit code is 69: the view is unmounted, but what \
            the daemon still holds is not settled until it runs again.

            Example: photogate unmount ~/mnt/editor   (fusermount3 -u works too)
            """)

    @Argument(help: "The mount point.", completion: .directory) var mountpoint: String
    /// 60 s: a daemon that commits what is being closed on a loaded machine or a slow disk took
    /// longer than the 10 s this was, and a script was told its unmount failed (exit 69) while
    /// the daemon was only slow. A stopped one is told at once, without waiting.
    @Option(help: "How long to wait for the view's daemon to end, in seconds.") var timeout: Double = 60
    @OptionGroup var lib: LibraryOption

    func validate() throws {
        guard timeout.isFinite, timeout >= 0, timeout <= 3600 else { throw ValidationError("--timeout takes 0 to 3600 seconds") }
    }

    /// The mount acted on is found in the kernel's mount table at what the path names, resolved
    /// following no other user's symbolic link (`trustedPath`, exit 74), and must be a photogate
    /// view of this library (its registry says so, by mount point and device): nothing else is
    /// unmounted, whatever the path leads to (exit 66). root unmounts it by name in its folder
    /// held open (UMOUNT_NOFOLLOW), once that name is checked to be that very mount (its mount
    /// id), so a folder on the way may be another user's (a view root mounted in a user's home);
    /// any other user unmounts through fusermount3, which goes by the path again, so for them the
    /// folders on the way must be theirs or root's too.
    func execute() throws {
        do {
            let root = geteuid() == 0
            let target = try trustedPath(mountpoint, "unmount", folders: !root)
            let library = try lib.registryLocations()
            // The topmost mount there (mountinfo lists mounts in the order they were made).
            guard let entry = MountTable.entries().last(where: { $0.mountPointBytes.elementsEqual(target.utf8) }) else {
                throw CommandFailure("nothing is mounted at \(target)", .notFound)
            }
            guard entry.type == "fuse.photogate" else {
                throw CommandFailure("\(target) is a \(entry.type) mount, not a photogate view: photogate unmount unmounts only its library's views (use umount for anything else); nothing was unmounted", .notFound)
            }
            guard let found = MountRegistry.record(of: entry, run: library.runFolder) else {
                throw CommandFailure("the photogate view at \(target) is not a mount of the library at \(library.root) (pass that view's --library, or use fusermount3 -u); nothing was unmounted", .notFound)
            }
            let daemon = DaemonEnd(pid: found.alive ? found.record.pid : nil)
            defer { daemon.release() }
            let busy = CommandFailure("cannot unmount \(target): it is busy (files are open there); close them, or use fusermount3 -u -z", .conflict)
            if root {
                try unmountAsRoot(target, entry)
            } else if try runTool("/bin/fusermount3", ["-u", target]) != 0 {
                throw busy
            }
            guard daemon.waitForEnd(milliseconds: Int32(timeout * 1000), unlessStopped: found.record.pid) else {
                // Unmounted, but the daemon still runs: saying "unmounted" with exit 0 let a
                // script go on (move the library, back it up, shut down) while files closed
                // through the view were still being committed.
                let pid = found.record.pid
                let state = DaemonEnd.isStopped(pid) ? "it is stopped (resume it with kill -CONT \(pid))" : "it may be stuck"
                throw CommandFailure("unmounted \(target), but its daemon (pid \(pid)) has not ended after \(timeout == timeout.rounded() ? String(Int(timeout)) : String(timeout)) s: \(state); files closed through the view may not be committed until it ends (photogate mounts shows it)", .busy)
            }
            say("unmounted \(target)")
        }
    }

    /// Unmounts `entry`, the mount at `target`, by its name in its folder held open, after checking
    /// that name leads to that mount (its mount id), following no symbolic link: a folder on the
    /// way renamed meanwhile, and a link left in its place, make it refuse rather than unmount
    /// what the path leads to now.
    func unmountAsRoot(_ target: String, _ entry: MountTable.Entry) throws {
        let name = (target as NSString).lastPathComponent
        let parent = (target as NSString).deletingLastPathComponent
        let changed = CommandFailure("the mount at \(target) changed while photogate looked at it (a folder on the way was renamed?); nothing was unmounted", .conflict)
        guard !name.isEmpty, name != "/" else { throw changed }
        let folder = Glibc.open(parent, oPath | O_DIRECTORY | O_CLOEXEC)
        guard folder >= 0 else { throw changed }
        defer { close(folder) }
        let fd = openat(folder, name, oPath | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw changed }
        let id = SandboxHiding.mountID(fd: fd)
        // Closed before the unmount: it holds the mount, which would be busy.
        close(fd)
        guard id == entry.id else { throw changed }
        let cwd = Glibc.open(".", oPath | O_DIRECTORY | O_CLOEXEC)
        guard fchdir(folder) == 0 else { if cwd >= 0 { close(cwd) }; throw changed }
        let rc = umount2(name, Int32(UMOUNT_NOFOLLOW))
        let err = errno
        if cwd >= 0 { _ = fchdir(cwd); close(cwd) }
        if rc != 0 {
            if err == EBUSY {
                throw CommandFailure("cannot unmount \(target): it is busy (files are open there); close them, or use fusermount3 -u -z", .conflict)
            }
            throw CommandFailure("cannot unmount \(target): \(String(cString: strerror(err)))", .failure)
        }
    }
}

/// A mount's daemon, held by a pidfd taken before its unmount: its end is then waited on as it
/// happens (not polled), and a number the system gave to another process meanwhile is not.
struct DaemonEnd {
    private let fd: Int32
    init(pid: pid_t?) { fd = pid.map { pg_pidfd_open($0) } ?? -1 }
    /// Waits until the daemon has ended (it ends when the kernel lets go of its mount), at most
    /// `milliseconds`: true once it has (at once when there was none, or it had ended before),
    /// false when it still runs.
    @discardableResult
    func waitForEnd(milliseconds: Int32 = 10_000) -> Bool { fd < 0 || pg_pidfd_wait(fd, milliseconds) != 0 }

    /// Waits as `waitForEnd`, but gives up as soon as `pid` is seen stopped (asked every
    /// 100 ms): a stopped daemon does not end, however long it is waited for.
    func waitForEnd(milliseconds: Int32, unlessStopped pid: pid_t) -> Bool {
        var left = milliseconds
        while true {
            let slice = min(left, 100)
            if waitForEnd(milliseconds: slice) { return true }
            left -= slice
            if left <= 0 || DaemonEnd.isStopped(pid) { return false }
        }
    }
    func release() { if fd >= 0 { close(fd) } }

    /// Whether the process is stopped (SIGSTOP, a debugger): its state in /proc/PID/stat.
    static func isStopped(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.range(of: ")", options: .backwards) else { return false }
        let state = stat[close.upperBound...].split(separator: " ").first
        return state == "T" || state == "t"
    }
}
