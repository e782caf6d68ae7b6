import ArgumentParser
import Foundation
import GrantStore
import LibraryRun

struct Mounts: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "mounts",
        abstract: "List mounts: app, access, mount point, pid, state and read path.",
        usage: "photogate mounts [--all] [<options>]",
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

            The views of this library only, unless --all: every library of yours whose views a \
            mount of yours served (each mount daemon notes its library in \
            $XDG_STATE_HOME/photogate/libraries, else ~/.local/state/photogate/libraries), with a \
            LIBRARY column first. Each library's views are those its own registry (run/mounts/) \
            holds, as without --all: a FUSE mount that says it is photogate is not taken at its word.

            Examples:
              photogate mounts --json
              photogate mounts --all
            """)
    @Flag(help: "List the views of every library of yours, not only this one.") var all = false
    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag
    @OptionGroup var columns: ColumnsOption

    func execute() throws {
        do {
            let entries: [(library: String, entry: MountEntry)]
            if all {
                entries = allLibraries()
            } else {
                let paths = try lib.registryLocations()
                entries = MountRegistry.entries(paths.runFolder).map { (paths.root, $0) }
            }
            if output.json {
                printJSON(entries.map { (root, e) -> [String: Any] in
                    let r = e.record
                    return ["library": root, "app": r.app, "access": r.access, "mountpoint": r.mountpoint, "pid": r.pid,
                            "readPath": r.readPath, "opens": r.opensFiles.rawValue, "libfuse": r.libfuse,
                            "readaheadKiB": r.readaheadKiB.map { $0 as Any } ?? NSNull(),
                            "started": iso(Date(timeIntervalSince1970: r.started)),
                            "state": e.state.rawValue, "problem": e.problem.map { $0 as Any } ?? NSNull()]
                })
            } else {
                let header = ["APP", "ACCESS", "MOUNTPOINT", "PID", "STATE", "READS"]
                try printTable((all ? ["LIBRARY"] : []) + header, entries.map { (root, e) in
                    (all ? [root] : []) + [e.record.app, e.record.access, e.record.mountpoint, String(e.record.pid),
                                           e.state == .live ? "live" : "dead", e.state == .live ? e.record.readPath : "-"]
                }, columns: columns)
            }
            for e in entries.map(\.entry) where e.state == .dead {
                printWarning("the daemon of \(e.record.app) (pid \(e.record.pid)) is gone; \(e.record.mountpoint) is stale (\(e.problem ?? "not connected")): clear it with fusermount3 -u -z \(e.record.mountpoint)")
            }
        }
    }

    /// Every noted library's views, and this library's (noted or not: mounted by an older
    /// photogate, say), each library once however spelled. A library that is not the user's (or
    /// root's) is left out, as every command refuses it, and said so.
    func allLibraries() -> [(library: String, entry: MountEntry)] {
        var roots = UserLibraries.list()
        if lib.paths.exists { roots.append(UserLibraries.canonical(lib.paths.root) ?? lib.paths.root) }
        var out: [(library: String, entry: MountEntry)] = []
        for root in Set(roots).sorted() {
            let paths = LibraryPaths(root: root)
            do {
                try LibraryOwnership.check(paths)
            } catch {
                printWarning("not listing the views of \(root): \(error)")
                continue
            }
            out += MountRegistry.entries(paths.runFolder).map { (root, $0) }
        }
        return out
    }
}
