import ArgumentParser
import Foundation
import GrantStore
import PhotoViewFS

struct Mounts: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "mounts",
        abstract: "List mounts: app, access level, mount point, pid, state and read path.",
        discussion: """
            Only mounts whose daemon runs are "live". A daemon that died without unmounting (killed \
            with SIGKILL, crashed) leaves a stale mount point: it is listed as "dead" with why \
            (e.g. "Transport endpoint is not connected"), and a warning says how to clear it \
            (`fusermount3 -u -z MOUNTPOINT`, or mount again there); the entry goes once the mount \
            point is clear.

            The read path is the one in effect: "passthrough" when the kernel reads originals itself \
            (FUSE passthrough, which needs libfuse >= 3.17 and a daemon with CAP_SYS_ADMIN), \
            "daemon" when photogate serves reads. --json also gives the state, the reason of a dead \
            mount (problem) and the mount's readahead in KiB (readaheadKiB): a daemon run as root \
            raises it to 512 for the reads it serves. Who opens files (opens): "daemon", or \
            "kernel" for a no-open mount (`photogate mount --no-open`).

            Example: photogate mounts --json
            """)
    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag
    @OptionGroup var columns: ColumnsOption

    func execute() throws {
        do {
            let entries = MountRegistry.entries(try lib.registryLocations())
            if output.json {
                printJSON(entries.map { e -> [String: Any] in
                    let r = e.record
                    return ["app": r.app, "access": r.access, "mountpoint": r.mountpoint, "pid": r.pid,
                            "readPath": r.readPath, "opens": r.opensFiles.rawValue, "libfuse": r.libfuse,
                            "readaheadKiB": r.readaheadKiB.map { $0 as Any } ?? NSNull(),
                            "started": iso(Date(timeIntervalSince1970: r.started)),
                            "state": e.state.rawValue, "problem": e.problem.map { $0 as Any } ?? NSNull()]
                })
            } else {
                try printTable(["APP", "ACCESS", "MOUNTPOINT", "PID", "STATE", "READS"], entries.map {
                    [$0.record.app, $0.record.access, $0.record.mountpoint, String($0.record.pid),
                     $0.state == .live ? "live" : "dead", $0.state == .live ? $0.record.readPath : "-"]
                }, columns: columns)
            }
            for e in entries where e.state == .dead {
                printWarning("the daemon of \(e.record.app) (pid \(e.record.pid)) is gone; \(e.record.mountpoint) is stale (\(e.problem ?? "not connected")): clear it with fusermount3 -u -z \(e.record.mountpoint)")
            }
        }
    }
}
