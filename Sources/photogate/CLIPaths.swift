import Foundation
import GrantStore
import LibraryRun
#if canImport(Glibc)
import Glibc
#endif

/// Paths the CLI mounts on, unmounts, or binds into a sandbox (issue: hostile review of the CLI's
/// paths). They are resolved as the library's own path is (`LibraryOwnership.walk`): one name at
/// a time, following only symbolic links of the caller's or root's, and passing only through
/// folders of the caller's or root's that no one else may change. Another user's link (a
/// `mnt/frame -> /mnt/disk` left in a folder of theirs that root mounted a view in, a
/// `/tmp/work -> ~alice/.ssh`) could send root's unmount to an unrelated mount, its mount over
/// `/etc/pam.d`, or a sandbox's writable folder to alice's keys; and in another user's folder
/// such a link can appear between the check and the use. Refused with exit 74, as a library on
/// such a path is.
func trustedPath(_ path: String, _ doing: String, folders: Bool = true) throws -> String {
    do {
        return try LibraryOwnership.walk(path, folders: folders).resolved
    } catch {
        throw CommandFailure("""
            cannot \(doing) \(path): \(error.description). photogate follows no symbolic link, and \
            passes through no folder, that another user (neither you nor root) owns or may change on \
            the way to a place it mounts on, unmounts or binds into a sandbox: name a place whose \
            every folder and link is yours or root's (and writable by no one else, or sticky as /tmp \
            is); nothing was changed
            """, .notOwner)
    }
}

/// Refuses a mount point inside the library (its folder, the database's folder, store/, tmp/,
/// run/, or anything in them) or holding it, however it is reached (a link, a bind mount, a store
/// moved to another disk): compared by device and inode, the mount point and each folder above
/// it against the library's folders as they resolve now. A view mounted over its own store waits
/// on itself (its statfs asks the store's disk, now the view), and its daemon, the other mounts'
/// reads and `photogate mounts` hang until the connection is aborted. The folder `photogate run`
/// makes for its view (run/sandbox/NAME/view) is the one place in the library a view goes.
func refuseInsideLibrary(_ mountpoint: String, library: Library) throws {
    struct ID: Hashable { let dev: UInt64; let ino: UInt64 }
    func id(_ path: String) -> ID? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return ID(dev: UInt64(st.st_dev), ino: UInt64(st.st_ino))
    }
    func ancestors(_ path: String) -> [String] {
        var out = [path]
        var p = path
        while p != "/" && !p.isEmpty {
            p = (p as NSString).deletingLastPathComponent
            out.append(p)
        }
        return out
    }
    let paths = library.paths
    let parts = [paths.root, (paths.database as NSString).deletingLastPathComponent, paths.store, paths.tmp, paths.run]
    let inside = Set(parts.compactMap(id))
    // The folders holding the library (as each part resolves: a store may be elsewhere).
    var holding = Set<ID>()
    for part in parts {
        guard let real = realpath(part, nil) else { continue }
        defer { free(real) }
        for a in ancestors(String(cString: real)) { if let i = id(a) { holding.insert(i) } }
    }
    let chain = ancestors(mountpoint)
    // run/sandbox/NAME/view: where `photogate run` mounts its view.
    if (mountpoint as NSString).lastPathComponent == "view", chain.count > 2, let sandbox = id(paths.run + "/" + RunFolder.sandbox),
       id(chain[2]) == sandbox {
        return
    }
    let why: String?
    if let a = chain.first(where: { id($0).map(inside.contains) ?? false }) {
        why = a == mountpoint ? "it is one of the folders of the library at \(paths.root)"
            : "it is inside the library at \(paths.root) (in \(a), one of its folders)"
    } else if let mine = id(mountpoint), holding.contains(mine) {
        why = "it holds the library at \(paths.root)"
    } else {
        why = nil
    }
    if let why {
        throw CommandFailure("""
            cannot mount on \(mountpoint): \(why). A view mounted over the library's own folders would \
            hide them from its daemon, or wait on itself for ever (a view over its store asks itself \
            for the store's free space); choose a folder outside the library; nothing was changed
            """, .mountFailed)
    }
}
