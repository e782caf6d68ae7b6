import Foundation
import GrantStore
import LibraryRun
#if canImport(Glibc)
import Glibc
#endif

extension SandboxHiding {
    /// What `photogate run` keeps out of the sandbox (RunSandbox.swift says how): the library, the
    /// host's /proc (through it, /proc/PID/root reaches every file), and every photogate mount but
    /// the run's own view, `view` (mounted at `viewPath`), and its aliases. `commandUID`: the user
    /// the command runs as; `asRoot`: the run was started by root.
    static func keptFromRun(library paths: LibraryPaths, mounts: [MountTable.Entry], view: MountTable.Entry, viewPath: String,
                            commandUID: UInt32, asRoot: Bool) -> [Hidden] {
        // The library and each of its parts (a store moved to another disk and left as a symlink
        // is not under the library's folder), each named as what it is (issue 38: a refusal named
        // a place inside it, the run's own view folder, as "the photo library").
        var hidden = [(paths.root, "the photo library"), (paths.database, "the catalog of the photo library \(paths.root)"),
                      (paths.store, "the store of the photo library \(paths.root)"), (paths.tmp, "the temporary folder of the photo library \(paths.root)"),
                      (paths.run, "the run folder of the photo library \(paths.root)")].map {
            SandboxHiding.Hidden(path: Array($0.0.utf8), what: $0.1, policy: .maskReadOnly)
        }
        // A library whose catalog is on a server: the shared folder its originals are in, whole.
        if let shared = paths.link?.shared {
            hidden.append(SandboxHiding.Hidden(path: Array(shared.utf8), what: "the shared folder of the photo library \(paths.root)",
                                               policy: .maskReadOnly))
        }
        // Every proc mount, not only /proc: each shows the host's processes (a chroot's own).
        // Mount points as the kernel's bytes: a name need not be UTF-8.
        hidden += ([Array("/proc".utf8)] + mounts.filter { $0.type == "proc" }.map(\.mountPointBytes)).map {
            SandboxHiding.Hidden(path: $0, what: "the host's /proc", policy: .maskReadOnly)
        }
        // Views the command could enter: another user's view without allow_other (which the
        // kernel closes to everyone but its owner) does not count, so that no one stops
        // another's run by mounting a view below a shared folder (/srv, /tmp, /).
        // Root's runs' views (in RunFolders.rootBase, a folder of root's alone) serve only the
        // sandbox user of their run (the daemon refuses everyone else): masked with the folder
        // below, never a reason to refuse another's run (a red-team finding: one root run
        // made every other user's --ro-bind /:/ fail, naming a view they could not unmount).
        let rootRunViews = Array((RunFolders.rootBase + "/").utf8)
        let viewMounts = mounts.filter {
            $0.type == "fuse.photogate" && $0.device != view.device && $0.admits(uid: commandUID)
                && !$0.mountPointBytes.starts(with: rootRunViews)
        }
        let views = viewMounts.map(\.mountPointBytes)
        hidden += viewMounts.map { m in
            let owner = m.superOption("user_id").flatMap { UInt32($0) }
            let whose = owner.map { $0 == getuid() ? "yours" : "\(accountName($0))'s, mounted with allow_other" } ?? "of an unknown user"
            return SandboxHiding.Hidden(path: m.mountPointBytes, what: "another photogate view (\(whose))", policy: .refuse)
        }
        // Root's runs' view folders, masked for every run (the views in them are left out above).
        if asRoot || Glibc.access(RunFolders.rootBase, F_OK) == 0 {
            hidden.append(SandboxHiding.Hidden(path: Array(RunFolders.rootBase.utf8), what: "photogate run's view folders", policy: .mask))
        }
        // Registered mount points no longer mounted (a daemon that died): an empty folder now,
        // masked all the same.
        hidden += MountRegistry.entries(paths.runFolder).map { Array($0.record.mountpoint.utf8) }
            .filter { p in !p.elementsEqual(viewPath.utf8) && !views.contains(p) }
            .map { SandboxHiding.Hidden(path: $0, what: "a photogate mount point", policy: .mask) }
        return hidden
    }
}

extension MountTable.Entry {
    /// The value of one of the filesystem's own options (`user_id=1000`), as listed.
    func superOption(_ key: String) -> String? {
        for o in superOptionsBytes.split(separator: UInt8(ascii: ",")) where o.starts(with: Array((key + "=").utf8)) {
            return String(decoding: o.dropFirst(key.utf8.count + 1), as: UTF8.self)
        }
        return nil
    }

    /// Whether the kernel lets `uid` into this FUSE mount: its owner (user_id), or anyone with
    /// allow_other (the daemon may then refuse some, which is not known from here).
    func admits(uid: UInt32) -> Bool {
        if superOptionsBytes.split(separator: UInt8(ascii: ",")).contains(where: { $0.elementsEqual("allow_other".utf8) }) { return true }
        return superOption("user_id").flatMap { UInt32($0) } == uid
    }
}

/// "alice (uid 1000)", or "uid 1000" for an id no account has.
func accountName(_ uid: UInt32) -> String {
    guard let pw = getpwuid(uid), let n = pw.pointee.pw_name else { return "uid \(uid)" }
    return "\(String(cString: n)) (uid \(uid))"
}
