import ArgumentParser
import PGSystem
import Foundation
import GrantStore
import PhotoLibrary
import LibraryRun
#if canImport(Glibc)
import Glibc
#endif

/// `photogate run`: a command in a bubblewrap sandbox that sees the app's view as its pictures
/// folder and nothing of the library behind it. This file is the command and the sandbox's
/// bubblewrap arguments; the rest is in its own files: the view (RunView.swift), what is kept out
/// (RunHidden.swift) and how (RunSandbox.swift, SandboxPlaces.swift), who the command runs as and
/// its environment (RunIdentity.swift), and starting bubblewrap with signals relayed to the
/// command (RunSpawn.swift).
struct Run: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a command in a sandbox whose pictures folder is the app's view.",
        // A short synopsis: argument-parser does not wrap the generated one at 80 columns (issue 16).
        usage: "photogate run <app> [<options>] -- [<command> ...]",
        discussion: """
            The view is mounted for the run (and unmounted after, even if the run is killed), or reused if that app's view \
            with that access is already mounted. Inside: the system read-only (/usr, /etc), a \
            private /tmp, /proc and /dev; the home is empty except the pictures folder (the view: \
            ~/Pictures, the XDG pictures folder, or --pictures); no network unless --share-net. \
            The command gets no capabilities and no inherited descriptor but 0-2. Its environment \
            is not the caller's: only PATH, LANG, LANGUAGE, LC_*, TERM, COLORTERM, TZ and NO_COLOR \
            are passed, with what --env names; HOME is the sandbox's home and PHOTOGATE_APP the app \
            id. Started by root, the command never runs as root: it runs as --user, by default \
            the app's own uid and gid, which no account has (--show-user prints them: a folder it \
            writes through --bind must be writable to them); /proc/sys is read-only inside. The library (its store, database and run/ folder) and the other apps' mounts \
            are not reachable by any path: a folder passed with --ro-bind that holds the library \
            gets it covered by an empty folder; one passed with --bind that holds it, or a symlink \
            on the way to it (the command could move the library out from under the cover), one \
            inside the library, or one holding another app's mounted view, is refused (64). \
            Folders are bound outer ones first, so a --bind inside a --ro-bind stays writable. The exit status is the command's (128+N if it died of \
            signal N); 72 if the view could not be mounted.

            Needs bwrap (Debian's bubblewrap) on the PATH.

            Examples:
              photogate run org.example.Editor -- gimp
              photogate run org.example.Camera --access add-only --pictures /out \\
                -- ./capture.sh
              photogate run org.example.Batch --bind ~/work:/work --share-net \\
                -- /work/resize.sh
            """)

    @Argument(help: "The app id.", completion: Complete.apps) var app: String
    @Option(help: "read-write or add-only.") var access: AccessLevel = .readWrite
    @Option(help: ArgumentHelp("Where the view appears inside (default: the XDG pictures folder, else ~/Pictures).", valueName: "dir"))
    var pictures: String?
    @Option(name: .customLong("bind"), help: ArgumentHelp("Make a host folder writable inside: SRC or SRC:DEST (repeatable).", valueName: "src[:dest]"))
    var binds: [String] = []
    @Option(name: .customLong("ro-bind"), help: ArgumentHelp("Make a host folder readable inside: SRC or SRC:DEST (repeatable).", valueName: "src[:dest]"))
    var roBinds: [String] = []
    @Flag(help: "Share the network with the sandbox.") var shareNet = false
    @Option(name: .customLong("env"), help: ArgumentHelp("Pass an environment variable in: NAME (its value here) or NAME=VALUE (repeatable).", valueName: "name[=value]"))
    var envs: [String] = []
    @Option(name: .customLong("user"), help: ArgumentHelp("Started as root: the user the command runs as, a name or UID[:GID], never root (default: the app's own ids, which no account has: see --show-user).", valueName: "user"))
    var user: String?
    @Flag(help: "Print the UID:GID the command of this app's runs started by root runs as (make a --bind folder writable to it), and exit.")
    var showUser = false
    @OptionGroup var lib: LibraryOption
    @Argument(parsing: .postTerminator, help: "The command and its arguments (after --).") var command: [String] = []

    func validate() throws {
        if command.isEmpty && !showUser { throw ValidationError("give the command to run after --") }
        for e in envs {
            let name = e.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
            guard SandboxEnvironment.isName(name) else { throw ValidationError("--env \"\(e)\": give NAME or NAME=VALUE") }
            guard !name.hasPrefix("PHOTOGATE_"), name != "HOME" else {
                throw ValidationError("--env \(name): HOME and PHOTOGATE_* are set by photogate run, not passed in")
            }
        }
    }

    func execute() throws {
        var status: Int32 = 0
        do {
            let id = try parseApp(app)
            let library = try lib.open()
            // Started by root (a person, sudo, a system unit), the command never runs as root: as
            // uid 0 without capabilities it could still write what root owns and the sandbox shows,
            // /proc/sys first (kernel.core_pattern: a program of its own run by the kernel as root).
            let asRoot = getuid() == 0 || geteuid() == 0
            if showUser {
                let u = try SandboxUser.resolve(user, library: library.paths.root, app: id.rawValue)
                print(u)
                return
            }
            let sandboxUser: SandboxUser.ID?
            if asRoot {
                sandboxUser = try SandboxUser.resolve(user, library: library.paths.root, app: id.rawValue)
            } else {
                if user != nil { throw CommandFailure("--user is for root: the command runs as you", .usage) }
                sandboxUser = nil
            }
            // The command's environment goes to bubblewrap through a descriptor (--args), not
            // to what runs before it: setpriv runs as root, and an LD_PRELOAD or GCONV_PATH
            // passed for the app loaded code into it as root; nor on a command line, which
            // every local user reads (/proc/PID/cmdline). What runs before it gets a bare PATH.
            let environment = try SandboxEnvironment.make(passing: envs, from: ProcessInfo.processInfo.environment)
            let launcherEnvironment = ["PATH": "/usr/sbin:/usr/bin:/sbin:/bin"]
            let bwrapCandidates: [String] = ["/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"]
            guard let bwrap = bwrapCandidates.first(where: { Glibc.access($0, X_OK) == 0 }) else {
                throw CommandFailure("bwrap is missing: install bubblewrap (apt-get install bubblewrap)", .failure)
            }
            let home = ProcessInfo.processInfo.environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
            let inside = pictures.map { $0.hasPrefix("/") ? $0 : home + "/" + $0 } ?? xdgPicturesDir(home: home)

            // The view: reuse a live mount of this app and access, else mount one for the run
            // (RunView.swift), unmounted at the end.
            let runView = try RunView.acquire(id, access: access, library: library, user: sandboxUser, asRoot: asRoot)
            defer { runView.release() }
            let mountpoint = runView.mountpoint

            // What must stay out of reach (RunHidden.swift): the library, the host's /proc, every
            // photogate mount but this view; as the mount table shows them now.
            let mounts = MountTable.entries()
            // The view is bound by a descriptor checked to be this app's view (RunSandbox.swift).
            let view: (source: SandboxHiding.Source, mount: MountTable.Entry)
            do {
                view = try SandboxHiding.openView(mountpoint, in: runView.folderFD, app: id.rawValue, access: access.rawValue, mounts: mounts)
            } catch {
                throw CommandFailure("cannot pass the view in: \(error.description)", .failure)
            }
            runView.viewFD = view.source.fd
            let paths = library.paths
            let hidden = SandboxHiding.keptFromRun(library: paths, mounts: mounts, view: view.mount, viewPath: mountpoint,
                                                   commandUID: sandboxUser?.uid ?? getuid(), asRoot: asRoot)

            var args = [bwrap, "--die-with-parent", "--new-session", "--unshare-all"]
            // Root drops to the sandbox's user before anything else runs (bubblewrap included),
            // with no supplementary group and no capability left to gain.
            var asUser: [String] = []
            if let u = sandboxUser {
                let setpriv = "/usr/bin/setpriv"
                guard Glibc.access(setpriv, X_OK) == 0 else {
                    throw CommandFailure("\(setpriv) is missing (util-linux): run cannot leave root for the command's user", .failure)
                }
                asUser = [setpriv, "--reuid=\(u.uid)", "--regid=\(u.gid)", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--"]
            }
            // Host mounts propagate into bubblewrap's binds (systemd makes "/" shared): a view
            // mounted under a bound folder after the start would come in unmasked. So bubblewrap
            // starts in a mount namespace of its own with nothing shared, where nothing arrives:
            // as root, a copy of the host's; else one owned by a user namespace of the user's own
            // (the user's id mapped to itself; bubblewrap nests its own inside it).
            let unshare = "/usr/bin/unshare"
            let later = "a view mounted under a folder passed in after the command starts will reach it"
            if Glibc.access(unshare, X_OK) != 0 {
                printWarning("\(unshare) is missing (util-linux): \(later)")
            } else {
                // Tried first as the run will use it (bubblewrap nests two user namespaces of its
                // own inside), so that a machine that allows fewer goes on without the wrapper.
                let wrap = [unshare, "--user", "--map-current-user", "--mount", "--propagation", "private", "--"]
                let probe = [bwrap, "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "/bin/true"]
                if (try? runTool((asUser + wrap).first!, Array((asUser + wrap).dropFirst()) + probe, environment: launcherEnvironment)) == 0 {
                    args = wrap + args
                } else if sandboxUser != nil {
                    throw CommandFailure("the command's user (\(sandboxUser!.uid)) cannot make the sandbox's namespaces (unshare --user): "
                        + "user namespaces may be turned off for unprivileged users here (sysctl kernel.unprivileged_userns_clone)", .failure)
                } else {
                    printWarning("cannot start bubblewrap in a user namespace of its own (unshare --user): \(later)")
                }
            }
            args = asUser + args
            if shareNet { args.append("--share-net") }
            args.append("--cap-drop")
            args.append("ALL")
            // The command's environment, from a descriptor (see `launcherEnvironment`): bubblewrap
            // starts the command with only these.
            var commandEnvironment = environment
            commandEnvironment["HOME"] = home
            commandEnvironment["PHOTOGATE_APP"] = id.rawValue
            var envArgs: [UInt8] = []
            for a in ["--clearenv"] + commandEnvironment.keys.sorted().flatMap({ ["--setenv", $0, commandEnvironment[$0]!] }) {
                envArgs += Array(a.utf8) + [0]
            }
            guard envArgs.count < 1 << 20 else { throw CommandFailure("the environment passed in is too large (\(envArgs.count) bytes; at most 1 MiB)", .usage) }
            // An in-memory file, written whole before bubblewrap starts (a pipe holds 8 KiB for a
            // user over pipe-user-pages-soft: the write would block for ever).
            let envFD = pg_memfd("photogate-run-environment")
            guard envFD >= 0 else { throw CommandFailure("cannot pass the environment in: \(String(cString: strerror(errno)))", .failure) }
            defer { close(envFD) }
            let wroteEnv = envArgs.withUnsafeBytes { Glibc.write(envFD, $0.baseAddress, $0.count) }
            guard wroteEnv == envArgs.count, lseek(envFD, 0, SEEK_SET) == 0 else { throw CommandFailure("cannot pass the environment in", .failure) }
            // Every folder bound in is opened here and checked for what it is (RunSandbox.swift);
            // the user's are handed to bubblewrap as descriptors 3, 4, ... (--bind-fd, which it
            // closes once bound: an open directory left in the sandbox would reach past every mask).
            var bound: [(src: SandboxHiding.Source, dest: String, writable: Bool)] = []
            var handed: [Int32] = []
            defer { for b in bound { close(b.src.fd) } }
            func bind(_ flag: String, _ src: String, _ dest: String, byDescriptor: Bool) throws {
                let source: SandboxHiding.Source
                // The user's folders are opened where they are, reached following no other user's
                // symbolic link and through no folder another user may change (exit 74): a
                // `/tmp/work -> ~alice/.ssh` left by someone else is not bound in for them.
                let src = byDescriptor ? try trustedPath(src, "pass in") : src
                do { source = try SandboxHiding.open(src) } catch {
                    throw CommandFailure("cannot pass \(src) in: \(error.description)", .usage)
                }
                bound.append((source, dest, flag == "--bind"))
                if byDescriptor {
                    args += [flag + "-fd", "\(3 + handed.count)", dest]
                    handed.append(source.fd)
                } else {
                    args += [flag, src, dest]
                }
            }
            for d in ["/usr", "/etc", "/opt"] where isDirectory(d) {
                try bind("--ro-bind", d, d, byDescriptor: false)
            }
            for d in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
                if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: d) {
                    args += ["--symlink", target, d]
                } else if isDirectory(d) {
                    try bind("--ro-bind", d, d, byDescriptor: false)
                }
            }
            // /proc/sys read-only: the kernel's settings (the sandbox's own namespaces' among
            // them, as every process reads its own) are not the command's to change; bound from
            // the host's /proc, which shows each reader its own namespaces' values.
            args += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/run", "--dir", "/var/tmp",
                     "--tmpfs", "/home", "--dir", home]
            var specs: [(flag: String, src: String, dest: String)] = []
            for (flag, list) in [("--bind", binds), ("--ro-bind", roBinds)] {
                for spec in list {
                    let parts = spec.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                    guard let first = parts.first, !first.isEmpty, parts.count == 1 || !parts[1].isEmpty else {
                        throw CommandFailure("\(flag) \"\(spec)\": give SRC or SRC:DEST", .usage)
                    }
                    let src = absolute(first)
                    let dest = String(decoding: lexicallyNormal(Array(absolute(parts.count > 1 ? parts[1] : first).utf8)), as: UTF8.self)
                    // The view is bound over the pictures folder after these: a folder put inside it
                    // would be covered, and its masks made in the view, as folders of the app's.
                    if pathBytes(Array(dest.utf8), within: lexicallyNormal(Array(inside.utf8))) != nil {
                        throw CommandFailure("cannot pass \(src) in at \(dest): that is inside the pictures folder \(inside), which is the view", .usage)
                    }
                    guard specs.count < 64 else { throw CommandFailure("too many folders passed in (at most 64)", .usage) }
                    specs.append((flag, src, dest))
                }
            }
            // Outer places first, so that a folder passed in inside another lands on top of it
            // (`--ro-bind ~:~ --bind ~/work:~/work` leaves ~/work writable), whichever flag each has.
            let depth = { (dest: String) in dest.utf8.split(separator: UInt8(ascii: "/")).count }
            for s in specs.enumerated().sorted(by: { (depth($0.element.dest), $0.offset) < (depth($1.element.dest), $1.offset) }).map(\.element) {
                try bind(s.flag, s.src, s.dest, byDescriptor: true)
            }
            args += ["--bind-fd", "\(3 + handed.count)", inside]
            handed.append(view.source.fd)
            args += ["--args", "\(3 + handed.count)"]
            handed.append(envFD)
            // Binds are recursive: a hidden place under a bound folder gets an empty tmpfs on top, or
            // refuses the run (RunSandbox.swift).
            let masks: [SandboxHiding.Mask]
            do {
                masks = try SandboxHiding(hidden: hidden, mounts: mounts, links: SandboxHiding.symlinks(along: Array(paths.root.utf8)))
                    .masks(for: bound)
            } catch {
                throw CommandFailure("cannot pass that folder in: \(error.description)", .usage)
            }
            // Root's run: the command's user must reach each folder passed in (bubblewrap, as
            // that user, resolves its path), checked once the library's rules have passed.
            if let u = sandboxUser {
                for b in bound {
                    guard let blocked = SandboxUser.blocked(b.src.real, for: u) else { continue }
                    throw CommandFailure("cannot pass \(b.src.spelled) in: the command runs as uid \(u.uid) (run was started by root), "
                        + "which cannot pass through \(blocked.folder) (mode \(String(blocked.mode, radix: 8)), owned by uid \(blocked.owner)): "
                        + "let that user through (setfacl -m u:\(u.uid):x \(blocked.folder)), pass a folder it can reach, or choose the user with --user", .usage)
                }
            }
            // Masks that would land in the view (a bound folder holding the pictures folder and the
            // library beneath it) would be made there, as folders of the app's.
            let insidePath = lexicallyNormal(Array(inside.utf8))
            if let m = masks.first(where: { pathBytes($0.path, within: insidePath) != nil }) {
                throw CommandFailure("cannot pass that folder in: the library would show at \(String(decoding: m.path, as: UTF8.self)), inside the pictures folder \(inside), which is the view", .usage)
            }
            // bubblewrap names the sandbox's first process here: signals to this run go to its
            // process group (spawnAndWait).
            var infoPipe: [Int32] = [-1, -1]
            guard pipe(&infoPipe) == 0 else {
                throw CommandFailure("cannot make a pipe: \(String(cString: strerror(errno)))", .failure)
            }
            defer { close(infoPipe[1]) }
            for fd in infoPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            args += ["--info-fd", "\(3 + handed.count)"]
            handed.append(infoPipe[1])
            let argv = args.map { Array($0.utf8) }
                + masks.flatMap { m in m.isFolder ? [Array("--tmpfs".utf8), m.path] : [Array("--ro-bind".utf8), Array("/dev/null".utf8), m.path] }
                + (["--chdir", home, "--"] + command).map { Array($0.utf8) }
            // A session keyring of its own (empty): the caller's (root's, from a login or a unit)
            // would be the command's to read and change.
            guard pg_join_new_session_keyring() >= 0 || errno == ENOSYS else {
                throw CommandFailure("cannot give the command a session keyring of its own: \(String(cString: strerror(errno)))", .failure)
            }
            status = try spawnAndWait(argv, handing: handed, info: infoPipe[0], environment: launcherEnvironment)
        }
        if status != 0 { throw ExitCode(status) }
    }

    func absolute(_ p: String) -> String {
        let home = ProcessInfo.processInfo.environment["HOME"] ?? NSHomeDirectory()
        let expanded = p == "~" ? home : p.hasPrefix("~/") ? home + p.dropFirst(1) : p
        return expanded.hasPrefix("/") ? expanded : FileManager.default.currentDirectoryPath + "/" + expanded
    }
}

/// The XDG pictures folder ($XDG_CONFIG_HOME/user-dirs.dirs), else ~/Pictures.
func xdgPicturesDir(home: String) -> String {
    let env = ProcessInfo.processInfo.environment
    let config = env["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? home + "/.config"
    if let text = try? String(contentsOfFile: config + "/user-dirs.dirs", encoding: .utf8) {
        for line in text.split(separator: "\n") where line.hasPrefix("XDG_PICTURES_DIR=") {
            let value = line.dropFirst("XDG_PICTURES_DIR=".count).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            let path = value.replacingOccurrences(of: "$HOME", with: home)
            if path.hasPrefix("/") && path != home { return path }
        }
    }
    return home + "/Pictures"
}

func isDirectory(_ path: String) -> Bool {
    var st = stat()
    return lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
}
