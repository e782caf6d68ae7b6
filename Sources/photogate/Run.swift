import ArgumentParser
import CSystem
import Foundation
import GrantStore
import PhotoLibrary
import PhotoViewFS
#if canImport(Glibc)
import Glibc
#endif

/// `photogate run`: a command in a bubblewrap sandbox that sees the app's view as its pictures
/// folder and nothing of the library behind it.
struct Run: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a command in a sandbox (bubblewrap) whose pictures folder is the app's view.",
        // A short synopsis: argument-parser does not wrap the generated one at 80 columns (issue 16).
        usage: "photogate run <app> [<options>] -- [<command> ...]",
        discussion: """
            The view is mounted for the run (and unmounted after), or reused if that app's view \
            with that access is already mounted. Inside: the system read-only (/usr, /etc), a \
            private /tmp, /proc and /dev; the home is empty except the pictures folder (the view: \
            ~/Pictures, the XDG pictures folder, or --pictures); no network unless --share-net. \
            The library (its store, database and run/ folder) and the other apps' mounts are not \
            reachable by any path, even under a folder passed with --bind. The exit status is the \
            command's (128+N if it died of signal N); 72 if the view could not be mounted.

            Needs bwrap (Debian's bubblewrap) on the PATH.

            Examples:
              photogate run org.example.Editor -- gimp
              photogate run org.example.Camera --access add-only --pictures /out -- ./capture.sh
              photogate run org.example.Batch --bind ~/work:/work --share-net -- /work/resize.sh
            """)

    @Argument(help: "The app id.") var app: String
    @Option(help: "read-write or add-only.") var access: AccessLevel = .readWrite
    @Option(help: ArgumentHelp("Where the view appears inside (default: the XDG pictures folder, else ~/Pictures).", valueName: "dir"))
    var pictures: String?
    @Option(name: .customLong("bind"), help: ArgumentHelp("Make a host folder writable inside: SRC or SRC:DEST (repeatable).", valueName: "src[:dest]"))
    var binds: [String] = []
    @Option(name: .customLong("ro-bind"), help: ArgumentHelp("Make a host folder readable inside: SRC or SRC:DEST (repeatable).", valueName: "src[:dest]"))
    var roBinds: [String] = []
    @Flag(help: "Share the network with the sandbox.") var shareNet = false
    @OptionGroup var lib: LibraryOption
    @Argument(parsing: .postTerminator, help: "The command and its arguments (after --).") var command: [String] = []

    func validate() throws {
        if command.isEmpty { throw ValidationError("give the command to run after --") }
    }

    func execute() throws {
        var status: Int32 = 0
        do {
            let id = try parseApp(app)
            let library = try lib.open()
            let bwrapCandidates: [String] = ["/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"]
            guard let bwrap = bwrapCandidates.first(where: { Glibc.access($0, X_OK) == 0 }) else {
                throw CommandFailure("bwrap is missing: install bubblewrap (apt-get install bubblewrap)", .failure)
            }
            let home = ProcessInfo.processInfo.environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
            let inside = pictures.map { $0.hasPrefix("/") ? $0 : home + "/" + $0 } ?? xdgPicturesDir(home: home)

            // The view: reuse a live mount of this app and access, else mount one for the run.
            var mountpoint: String
            var ours: String? = nil
            // Not a no-open mount: it is read-only and has no change feed, which the app may need.
            if let existing = MountRegistry.list(library).first(where: { $0.app == id.rawValue && $0.access == access.rawValue && $0.opens != "kernel" }) {
                mountpoint = existing.mountpoint
            } else {
                var template = Array("/tmp/photogate-run.XXXXXX".utf8CString)
                guard let dir = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }).map({ String(cString: $0) }) else {
                    throw CommandFailure("cannot make a temporary folder", .failure)
                }
                chmod(dir, 0o700)
                mountpoint = dir + "/view"
                mkdir(mountpoint, 0o700)
                let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
                let (st, err) = try runCapturing(exe, ["mount", id.rawValue, mountpoint, "--access", access.rawValue, "--library", library.paths.root])
                guard st == 0 else {
                    rmdir(mountpoint); rmdir(dir)
                    throw CommandFailure("cannot mount the view of \(id): \(err.trimmingCharacters(in: .whitespacesAndNewlines))", .mountFailed)
                }
                ours = dir
            }
            defer {
                if let dir = ours {
                    let pid = MountRegistry.list(library).first { samePath($0.mountpoint, mountpoint) }?.pid
                    if (try? runTool("/bin/fusermount3", ["-u", mountpoint])) != 0 { _ = try? runTool("/bin/fusermount3", ["-u", "-z", mountpoint]) }
                    if let pid { for _ in 0..<200 where kill(pid, 0) == 0 { usleep(50_000) } }
                    rmdir(mountpoint); rmdir(dir)
                }
            }

            // What must stay out of reach: the library and every photogate mount but this one.
            var hidden = [library.paths.root, library.paths.run]
            hidden += MountRegistry.entries(library).map(\.record.mountpoint).filter { !samePath($0, mountpoint) }
            hidden += photogateMountPoints().filter { !samePath($0, mountpoint) }

            var args = [bwrap, "--die-with-parent", "--new-session", "--unshare-all"]
            if shareNet { args.append("--share-net") }
            var bound: [(src: String, dest: String)] = []
            for d in ["/usr", "/etc", "/opt"] where isDirectory(d) {
                args += ["--ro-bind", d, d]
                bound.append((d, d))
            }
            for d in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
                if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: d) {
                    args += ["--symlink", target, d]
                } else if isDirectory(d) {
                    args += ["--ro-bind", d, d]
                    bound.append((d, d))
                }
            }
            args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/run", "--dir", "/var/tmp",
                     "--tmpfs", "/home", "--dir", home, "--setenv", "HOME", home, "--setenv", "PHOTOGATE_APP", id.rawValue]
            for (flag, list) in [("--bind", binds), ("--ro-bind", roBinds)] {
                for spec in list {
                    let parts = spec.split(separator: ":", maxSplits: 1).map(String.init)
                    let src = absolute(parts[0]), dest = parts.count > 1 ? absolute(parts[1]) : src
                    args += [flag, src, dest]
                    bound.append((src, dest))
                }
            }
            args += ["--bind", mountpoint, inside]
            // Binds are recursive: a hidden path under a bound folder gets an empty tmpfs on top.
            var masks = Set<[UInt8]>()
            for h in hidden {
                for b in bound {
                    if let rest = pathBytes(h, within: b.src) { masks.insert(joinedPath(b.dest, rest)) }
                }
            }
            // Only the outermost: a mask inside another would show up there as an empty folder.
            let outermost = masks.filter { m in !masks.contains { $0 != m && pathBytes(m, within: $0) != nil } }
            for m in outermost.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                args += ["--tmpfs", String(decoding: m, as: UTF8.self)]
            }
            args += ["--chdir", home, "--"] + command
            status = try spawnAndWait(args)
        }
        if status != 0 { throw ExitCode(status) }
    }

    func absolute(_ p: String) -> String {
        let expanded = p.hasPrefix("~/") ? (ProcessInfo.processInfo.environment["HOME"] ?? NSHomeDirectory()) + p.dropFirst(1) : p
        return expanded.hasPrefix("/") ? expanded : FileManager.default.currentDirectoryPath + "/" + expanded
    }
}

/// The bytes of `path` after `folder` (empty when they are the same folder, else starting with
/// "/") when `path` is `folder` or inside it, else nil. Byte for byte, as the kernel names files:
/// String's comparison would call canonically equivalent names (`café` and `cafe` + U+0301, two
/// folders on disk) the same, and folds a combining mark that follows a "/" into the "/", so a
/// path inside a folder (`folder/` + U+0301 `lib`) would not have `folder/` as its prefix.
func pathBytes<P: Collection, F: Collection>(_ path: P, within folder: F) -> [UInt8]?
where P.Element == UInt8, F.Element == UInt8 {
    var f = Array(folder)
    while f.count > 1 && f.last == UInt8(ascii: "/") { f.removeLast() }
    let p = Array(path)
    guard p.starts(with: f) else { return nil }
    let rest = p[f.count...]
    if rest.isEmpty { return [] }
    if f == [UInt8(ascii: "/")] { return p }
    return rest.first == UInt8(ascii: "/") ? Array(rest) : nil
}

func pathBytes(_ path: String, within folder: String) -> [UInt8]? {
    pathBytes(path.utf8, within: folder.utf8)
}

/// `folder` followed by `rest` (empty, or starting with "/"), with no doubled "/".
func joinedPath(_ folder: String, _ rest: [UInt8]) -> [UInt8] {
    var f = Array(folder.utf8)
    while !f.isEmpty && f.last == UInt8(ascii: "/") { f.removeLast() }
    if f.isEmpty && rest.isEmpty { return [UInt8(ascii: "/")] }
    return f + rest
}

/// The same path, byte for byte (String's == also calls canonically equivalent names equal).
func samePath(_ a: String, _ b: String) -> Bool { a.utf8.elementsEqual(b.utf8) }

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

/// Mount points of every fuse.photogate mount in this namespace.
func photogateMountPoints() -> [String] { MountTable.photogateMounts().map(\.mountPoint) }

/// Runs a program and returns its status and stderr.
func runCapturing(_ path: String, _ args: [String]) throws -> (Int32, String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = args
    let err = Pipe()
    p.standardOutput = FileHandle.nullDevice
    p.standardError = err
    try p.run()
    let data = err.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: data, as: UTF8.self))
}

/// Runs argv[0] with our stdin/stdout/stderr and default signal dispositions, while this process
/// ignores SIGINT/SIGTERM/SIGHUP/SIGQUIT (so it can unmount after); returns the exit status, or
/// 128+N when the child died of signal N.
func spawnAndWait(_ argv: [String]) throws -> Int32 {
    var attr = posix_spawnattr_t()
    posix_spawnattr_init(&attr)
    defer { posix_spawnattr_destroy(&attr) }
    var defaults = sigset_t()
    sigemptyset(&defaults)
    let forwarded = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]
    for sig in forwarded + [SIGPIPE] { sigaddset(&defaults, sig) }
    var empty = sigset_t()
    sigemptyset(&empty)
    posix_spawnattr_setsigdefault(&attr, &defaults)
    posix_spawnattr_setsigmask(&attr, &empty)
    posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
    let cargs = argv.map { strdup($0) } + [nil]
    defer { cargs.forEach { free($0) } }
    var pid: pid_t = 0
    let old = forwarded.map { signal($0, SIG_IGN) }
    defer { for (sig, h) in zip(forwarded, old) { signal(sig, h) } }
    let rc = posix_spawn(&pid, argv[0], nil, &attr, cargs, environ)
    guard rc == 0 else { throw CommandFailure("cannot run \(argv[0]): \(String(cString: strerror(rc)))", .failure) }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
    let exited = status & 0x7f == 0
    return exited ? (status >> 8) & 0xff : 128 + (status & 0x7f)
}
