import ArgumentParser
import CSystem
import Foundation
import GrantStore
import PhotoViewFS
#if canImport(Glibc)
import Glibc
#endif

struct Unmount: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "unmount",
        abstract: "Unmount an app's view (waits for its daemon to finish).",
        discussion: "Example: photogate unmount ~/mnt/editor   (fusermount3 -u works too)")

    @Argument(help: "The mount point.") var mountpoint: String
    @OptionGroup var lib: LibraryOption

    func execute() throws {
        do {
            let abs = mountpoint.hasPrefix("/") ? mountpoint : FileManager.default.currentDirectoryPath + "/" + mountpoint
            let resolved = realpath(abs, nil).map { p -> String in defer { free(p) }; return String(cString: p) } ?? abs
            guard isMounted(resolved) || isMounted(abs) else {
                throw CommandFailure("nothing is mounted at \(abs)", .notFound)
            }
            let target = isMounted(resolved) ? resolved : abs
            let record = (try? lib.open()).map { MountRegistry.list($0) }?.first { MountTable.samePath($0.mountpoint, target) }
            let daemon = DaemonEnd(pid: record?.pid)
            defer { daemon.release() }
            if try runTool("/bin/fusermount3", ["-u", target]) != 0 {
                if getuid() == 0 && umount2(target, 0) == 0 {
                    // unmounted by the kernel directly
                } else {
                    throw CommandFailure("cannot unmount \(target): it is busy (files are open there); close them, or use fusermount3 -u -z", .conflict)
                }
            }
            daemon.waitForEnd()
            say("unmounted \(target)")
        }
    }
}

/// A mount's daemon, held by a pidfd taken before its unmount: its end is then waited on as it
/// happens (not polled), and a number the system gave to another process meanwhile is not.
struct DaemonEnd {
    private let fd: Int32
    init(pid: pid_t?) { fd = pid.map { pg_pidfd_open($0) } ?? -1 }
    /// Returns once the daemon has ended (it ends when the kernel lets go of its mount), or after
    /// 10 s. At once when there was none, or it had ended before.
    func waitForEnd() { if fd >= 0 { _ = pg_pidfd_wait(fd, 10_000) } }
    func release() { if fd >= 0 { close(fd) } }
}
