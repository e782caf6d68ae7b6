import Foundation
import GrantStore
import LibraryRun
import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

/// The view `photogate run` binds in as the command's pictures folder: a live mount of the app
/// with that access reused, or one mounted for the run and unmounted after it (`release`), even
/// when the run is killed (the view's daemon then ends with it: `mount --while-pid`).
final class RunView {
    /// Where the view is mounted (for a view mounted for the run: `<folder>/view`).
    let mountpoint: String
    /// The folder made for a view mounted for the run, held open from before the mount (nil for
    /// a view that was already there): the view is found in it whatever it is called by then.
    let folderFD: Int32?
    /// The view, opened once it is checked to be this app's (`SandboxHiding.openView`): a view
    /// mounted for the run is unmounted by it.
    var viewFD: Int32 = -1
    /// The folder made for a view mounted for the run (nil: a view that was already there).
    private let ours: String?
    /// The daemon of a view mounted for the run.
    private let daemon: DaemonEnd

    private init(mountpoint: String, folderFD: Int32?, ours: String?, daemon: DaemonEnd) {
        self.mountpoint = mountpoint
        self.folderFD = folderFD
        self.ours = ours
        self.daemon = daemon
    }

    /// The view of `id` with `access` for the command's user (`user`, a root run's; nil: the
    /// caller's own). `asRoot`: the run was started by root.
    static func acquire(_ id: AppID, access: AccessLevel, library: Library, user: SandboxUser.ID?, asRoot: Bool) throws -> RunView {
        // Not a no-open mount: it is read-only and has no change feed, which the app may need.
        // A view for the user the command runs as (as root, one another root run mounted for
        // that user: a view root mounted for itself is root's).
        let owner = user?.description
        if let existing = MountRegistry.list(library.paths.runFolder).first(where: { $0.app == id.rawValue && $0.access == access.rawValue && $0.opensFiles == .daemon && $0.owner == owner }) {
            return RunView(mountpoint: existing.mountpoint, folderFD: nil, ours: nil, daemon: DaemonEnd(pid: nil))
        }
        // In the library's run/ folder, not /tmp: a sandbox given /tmp could rename a folder
        // there (it is the same user's) and swap it, before the mount or after, for a
        // symlink to wherever it likes. No sandbox is given the library writable (see
        // RunSandbox.swift), so nothing inside one can rename anything in it.
        // Root's runs: in /run/photogate-run (RunFolders.rootBase), which the command's
        // user can pass through (bubblewrap resolves the view's path as that user): the
        // library's folder is closed to it. Other users who read the path in the mount
        // table get EACCES from the view for every request (MountOptions.onlyUsers).
        let base = asRoot ? RunFolders.rootBase : library.paths.run + "/" + RunFolder.sandbox
        let mode: mode_t = asRoot ? 0o711 : 0o700
        if mkdir(base, mode) != 0 && errno != EEXIST {
            throw CommandFailure("cannot make \(base): \(String(cString: strerror(errno)))", .failure)
        }
        // A folder, not a symbolic link to one elsewhere (photogate follows none in run/),
        // and (root's) root's alone to change.
        var baseStat = stat()
        guard lstat(base, &baseStat) == 0, (baseStat.st_mode & S_IFMT) == S_IFDIR else {
            throw CommandFailure("\(base) is not a folder (a symbolic link?): remove it", .failure)
        }
        if asRoot {
            guard baseStat.st_uid == 0, baseStat.st_mode & 0o022 == 0 else {
                throw CommandFailure("\(base) belongs to another user or is writable by others: remove it", .failure)
            }
            // Made under photogate's umask (077): the command's user must pass through.
            chmod(base, mode)
        }
        var template = Array((base + "/XXXXXX").utf8CString)
        guard let dir = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }).map({ String(cString: $0) }) else {
            throw CommandFailure("cannot make a folder in \(base): \(String(cString: strerror(errno)))", .failure)
        }
        chmod(dir, mode)
        let mountpoint = dir + "/view"
        mkdir(mountpoint, 0o700)
        // Held from before the mount: the view is then found in this folder even if it is
        // renamed and a symlink left at its old path (no sandbox can do that here; a second
        // line, should one of the user's own processes).
        let folder = SandboxHiding.openFolder(dir)
        guard folder >= 0 else {
            rmdir(mountpoint); rmdir(dir)
            throw CommandFailure("cannot open \(dir): \(String(cString: strerror(errno)))", .failure)
        }
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        // Mounted for as long as this process runs: killed (SIGKILL), it cannot unmount the view
        // itself, and its daemon does instead.
        let (st, err) = try runCapturing(exe, ["mount", id.rawValue, mountpoint, "--access", access.rawValue, "--library", library.paths.root,
                                               "--while-pid", String(getpid())]
                                              + (user.map { ["--owner", $0.description] } ?? []))
        guard st == 0 else {
            close(folder)
            rmdir(mountpoint); rmdir(dir)
            throw CommandFailure("cannot mount the view of \(id): \(err.trimmingCharacters(in: .whitespacesAndNewlines))", .mountFailed)
        }
        return RunView(mountpoint: mountpoint, folderFD: folder, ours: dir,
                       daemon: DaemonEnd(pid: MountRegistry.record(mountedAt: mountpoint, run: library.paths.runFolder)?.pid))
    }

    /// At the run's end: a view mounted for it is unmounted, its daemon waited for, and the folder
    /// made for it removed; every descriptor is closed.
    func release() {
        if ours != nil {
            // Unmounted where it is now (a rename of its folder moves the mount along, and
            // the old path may then name anything, another of the user's views included).
            // As root, by the descriptor itself (the kernel takes it to the mount it names);
            // else by where the kernel says it is now (or, when it could not be opened, by
            // its path, which resolves as it did for the mount).
            let byDescriptor = viewFD >= 0 && geteuid() == 0 && umount2("/proc/self/fd/\(viewFD)", Int32(MNT_DETACH)) == 0
            let at = byDescriptor ? nil : (viewFD >= 0 ? SandboxHiding.realPath(fd: viewFD) : nil).map { String(decoding: $0, as: UTF8.self) } ?? mountpoint
            // Closed first: it holds the mount, and so keeps the daemon from ending.
            if viewFD >= 0 { close(viewFD) }
            viewFD = -1
            if let at, (try? runTool("/bin/fusermount3", ["-u", at])) != 0 { _ = try? runTool("/bin/fusermount3", ["-u", "-z", at]) }
            daemon.waitForEnd()
            // The folder made for the run, wherever it is now.
            if let f = folderFD {
                unlinkat(f, "view", AT_REMOVEDIR)
                if let real = SandboxHiding.realPath(fd: f) { rmdir(String(decoding: real, as: UTF8.self)) }
            }
        }
        if viewFD >= 0 { close(viewFD) }
        viewFD = -1
        if let f = folderFD { close(f) }
        daemon.release()
    }
}
