import ArgumentParser
import Foundation
import GrantStore
import PhotoViewFS

struct Mounts: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List running mounts: app, access level, mount point, pid and read path.",
        discussion: """
            The read path is "passthrough" when the kernel reads originals itself (FUSE passthrough),
            "daemon" when photogate serves reads. --json also gives the mount's readahead in KiB
            (readaheadKiB): a daemon run as root raises it to 512 for the reads it serves.

            Example: photogate mounts --json
            """)
    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag

    func run() throws {
        try photogate.run {
            let records = MountRegistry.list(try lib.open())
            if output.json {
                printJSON(records.map { ["app": $0.app, "access": $0.access, "mountpoint": $0.mountpoint, "pid": $0.pid,
                                         "readPath": $0.readPath, "libfuse": $0.libfuse,
                                         "readaheadKiB": $0.readaheadKiB.map { $0 as Any } ?? NSNull(),
                                         "started": iso(Date(timeIntervalSince1970: $0.started))] as [String: Any] })
            } else {
                printTable(["APP", "ACCESS", "MOUNTPOINT", "PID", "READS"], records.map {
                    [$0.app, $0.access, $0.mountpoint, String($0.pid), $0.readPath]
                })
            }
        }
    }
}
