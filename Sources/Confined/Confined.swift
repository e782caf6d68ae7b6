import PGSystem
#if canImport(Glibc)
import Glibc
#endif

/// Decoders of files apps wrote (libvips, libheif, ffmpeg) run confined: in bubblewrap with no
/// network and nothing of the filesystem but /usr (the input arrives as an inherited descriptor,
/// the output leaves through one or through a private folder bound in), limited in address space
/// and CPU time (prlimit) and wall time (timeout, inside the sandbox). A hostile file can then take
/// neither the caller's secrets nor its memory or time: the decoder is killed and the caller says
/// so. The web app's thumbnails (WebUI/Thumbnails.swift) and the mount's compatible JPEGs
/// (PhotoViewFS/Compatible/) both start their decoders here.
public enum Confined {
    /// bubblewrap's arguments up to and including `--`, or none where it is not installed (the
    /// decoder then runs unconfined as this user, and the caller says so).
    /// `binds`: (outside, inside) folders bound writable into the sandbox.
    public static func sandboxPrefix(binds: [(String, String)] = []) -> [String] {
        let candidates: [String] = ["/usr/bin/bwrap", "/bin/bwrap"]
        guard let bwrap = candidates.first(where: { access($0, X_OK) == 0 }) else { return [] }
        var args = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
                    "--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
                    "--setenv", "HOME", "/tmp", "--setenv", "PATH", "/usr/bin"]
        let links: [String] = ["lib", "lib64", "bin", "sbin"]
        for link in links {
            var st = stat()
            if lstat("/" + link, &st) == 0, st.st_mode & S_IFMT == S_IFLNK { args += ["--symlink", "usr/" + link, "/" + link] }
        }
        let loader: [String] = ["/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives"]
        for file in loader where access(file, R_OK) == 0 {
            args += ["--ro-bind", file, file]
        }
        for (outside, inside) in binds { args += ["--bind", outside, inside] }
        return args + ["--"]
    }

    /// prlimit's arguments (address space, CPU seconds), or none where it is not installed.
    public static func limits(memoryBytes: Int, cpuSeconds: Int) -> [String] {
        access("/usr/bin/prlimit", X_OK) == 0 ? ["/usr/bin/prlimit", "--as=\(memoryBytes)", "--cpu=\(cpuSeconds)", "--"] : []
    }

    /// timeout's arguments (killed after `seconds`), or none where it is not installed.
    public static func timer(seconds: Int) -> [String] {
        access("/usr/bin/timeout", X_OK) == 0 ? ["/usr/bin/timeout", "-s", "KILL", "\(seconds)"] : []
    }

    /// A decoder's whole command line: limits around the sandbox, the timer inside it.
    public static func command(_ argv: [String], memoryBytes: Int, cpuSeconds: Int, wallSeconds: Int,
                               binds: [(String, String)] = []) -> [String] {
        limits(memoryBytes: memoryBytes, cpuSeconds: cpuSeconds) + sandboxPrefix(binds: binds) + timer(seconds: wallSeconds) + argv
    }

    /// Runs a command with these descriptors as its standard input and output (stderr to
    /// /dev/null), waits, and returns its exit status (128 + the signal that killed it; -1: it
    /// could not start). `extra`: descriptors the command gets as 3, 4, ...
    public static func spawn(_ argv: [String], stdin: Int32, stdout: Int32, extra: [Int32] = []) -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if stdin >= 0 { posix_spawn_file_actions_adddup2(&actions, stdin, 0) } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        if stdout >= 0 { posix_spawn_file_actions_adddup2(&actions, stdout, 1) } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        // The originals at 3, 4, ... (dup2 clears close-on-exec on the copies). A descriptor
        // already numbered below its target could be overwritten first: they are first moved
        // above every one of them and every target (what is there in the child is the child's).
        let high = max((extra.max() ?? 2) + 1, Int32(3 + extra.count))
        for (i, fd) in extra.enumerated() { posix_spawn_file_actions_adddup2(&actions, fd, high + Int32(i)) }
        for i in extra.indices { posix_spawn_file_actions_adddup2(&actions, high + Int32(i), 3 + Int32(i)) }
        for i in extra.indices { posix_spawn_file_actions_addclose(&actions, high + Int32(i)) }
        // Nothing else of the caller's reaches the decoder (a descriptor opened without
        // close-on-exec by a library: the catalog, a mount's /dev/fuse).
        _ = pg_spawn_closefrom(&actions, 3 + Int32(extra.count))
        var cargs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        defer { for p in cargs { free(p) } }
        let env: [UnsafeMutablePointer<CChar>?] = [strdup("PATH=/usr/bin:/bin"), strdup("LC_ALL=C"), nil]
        defer { for p in env { free(p) } }
        var pid = pid_t()
        guard posix_spawn(&pid, argv[0], &actions, nil, &cargs, env) == 0 else { return -1 }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }
}
