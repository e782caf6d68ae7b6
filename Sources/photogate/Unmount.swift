import ArgumentParser
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
            if try runTool("/bin/fusermount3", ["-u", target]) != 0 {
                if getuid() == 0 && umount2(target, 0) == 0 {
                    // unmounted by the kernel directly
                } else {
                    throw CommandFailure("cannot unmount \(target): it is busy (files are open there); close them, or use fusermount3 -u -z", .conflict)
                }
            }
            if let pid = record?.pid {
                for _ in 0..<200 where kill(pid, 0) == 0 { usleep(50_000) }
            }
            say("unmounted \(target)")
        }
    }
}
