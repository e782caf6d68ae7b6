import Foundation
import PGSystem
#if canImport(Glibc)
import Glibc
#endif

// How `photogate run` starts processes: the mount of its view (`runCapturing`), and bubblewrap,
// with the signals sent to the run relayed to the sandboxed command (`spawnAndWait`).

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

/// Runs argv[0] (bubblewrap) with our stdin/stdout/stderr and default signal dispositions, in a
/// process group of its own; returns the exit status, or 128+N when the child died of signal N.
/// `handing[i]` becomes the child's descriptor 3 + i; no other descriptor reaches it.
///
/// SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to this process (a ^C at the terminal, `timeout`, a
/// supervisor stopping it) go to the command in the sandbox, which may handle them (a script's
/// trap, rsync removing its partial file); this process waits for it to end and unmounts after.
/// Sent straight to bubblewrap, a ^C ended bubblewrap, which killed the sandbox (SIGKILL: no
/// handler ran); sent to this process, a SIGTERM was ignored and the command ran on. `info`
/// (taken, closed here) is the read end of the pipe given to bubblewrap's --info-fd: it names the
/// sandbox's first process, whose process group the command is in.
func spawnAndWait(_ argv: [[UInt8]], handing: [Int32] = [], info: Int32 = -1, environment: [String: String]? = nil) throws -> Int32 {
    var infoFD = info
    defer { if infoFD >= 0 { close(infoFD) } }
    var attr = posix_spawnattr_t()
    posix_spawnattr_init(&attr)
    defer { posix_spawnattr_destroy(&attr) }
    var defaults = sigset_t()
    sigemptyset(&defaults)
    let forwarded = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]
    // One ignored when run started stays ignored for the command too (a background job of a
    // shell ignores SIGINT and SIGQUIT: ^C at the terminal is not for it).
    for sig in forwarded where pg_signal_ignored(sig) == 0 { sigaddset(&defaults, sig) }
    sigaddset(&defaults, SIGPIPE)
    var empty = sigset_t()
    sigemptyset(&empty)
    posix_spawnattr_setsigdefault(&attr, &defaults)
    posix_spawnattr_setsigmask(&attr, &empty)
    // A process group of its own: the terminal's ^C reaches this process only, which relays it.
    posix_spawnattr_setpgroup(&attr, 0)
    posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP))
    // Arguments as bytes: a path in them need not be UTF-8.
    let cargs: [UnsafeMutablePointer<CChar>?] = argv.map { a in
        let p = UnsafeMutablePointer<CChar>.allocate(capacity: a.count + 1)
        a.withUnsafeBytes { b in if let base = b.baseAddress { UnsafeMutableRawPointer(p).copyMemory(from: base, byteCount: b.count) } }
        p[a.count] = 0
        return p
    } + [nil]
    defer { cargs.forEach { $0?.deallocate() } }
    var pid: pid_t = 0
    // Caught from before the spawn (kept until relayed); else, as before, ignored here.
    let relaying = pg_relay_begin() == 0
    let old = relaying ? [] : forwarded.map { signal($0, SIG_IGN) }
    defer {
        if relaying { pg_relay_end() }
        for (sig, h) in zip(forwarded, old) { signal(sig, h) }
    }
    // Only stdin, stdout and stderr reach the child: Foundation's Process and the caller leave
    // descriptors open (a connected socket among them), which would give the sandbox a way out.
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    // Moved out of the way first (>= 100), so that placing one at 3 + i cannot overwrite another.
    let high = handing.map { fcntl($0, F_DUPFD_CLOEXEC, 100) }
    defer { for fd in high where fd >= 0 { close(fd) } }
    if high.contains(where: { $0 < 0 }) { throw CommandFailure("cannot pass the folders in: \(String(cString: strerror(errno)))", .failure) }
    for (i, fd) in high.enumerated() { posix_spawn_file_actions_adddup2(&actions, fd, Int32(3 + i)) }
    pg_spawn_closefrom(&actions, Int32(3 + handing.count))
    // The environment given, else this process's.
    let envp: [UnsafeMutablePointer<CChar>?]? = environment.map { e in e.keys.sorted().map { strdup("\($0)=\(e[$0]!)") } + [nil] }
    defer { envp?.forEach { free($0) } }
    let rc = envp.map { e in e.withUnsafeBufferPointer { posix_spawn(&pid, cargs[0]!, &actions, &attr, cargs, UnsafeMutablePointer(mutating: $0.baseAddress!)) } }
        ?? posix_spawn(&pid, cargs[0]!, &actions, &attr, cargs, environ)
    guard rc == 0 else { throw CommandFailure("cannot run \(String(decoding: argv[0], as: UTF8.self)): \(String(cString: strerror(rc)))", .failure) }
    var status: Int32 = 0
    if relaying, let relayed = relaySignals(untilEndOf: pid, info: infoFD) {
        status = relayed
    } else {
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
    }
    if relaying { infoFD = -1 }   // relaySignals closed it
    let exited = status & 0x7f == 0
    return exited ? (status >> 8) & 0xff : 128 + (status & 0x7f)
}

/// What bubblewrap writes to its --info-fd once the sandbox exists: a JSON object whose
/// "child-pid" is the sandbox's first process (bubblewrap 0.8 adds the namespaces' ids after it,
/// in later writes; the object is whole once its closing brace is there).
struct BubblewrapInfo: Decodable {
    let childPID: Int32

    enum CodingKeys: String, CodingKey {
        case childPID = "child-pid"
    }

    /// The sandbox's first process, once what bubblewrap wrote so far is the whole object and
    /// names one (a pid above 1); else nil.
    static func sandboxPID(_ written: [UInt8]) -> pid_t? {
        guard let info = try? JSONDecoder().decode(BubblewrapInfo.self, from: Data(written)), info.childPID > 1 else { return nil }
        return info.childPID
    }
}

/// Waits for `pid` (bubblewrap, spawned in a process group of its own after `pg_relay_begin`),
/// relaying each signal caught meanwhile to the process group of the sandbox's first process
/// (`BubblewrapInfo`, read from `info`, which is closed here), or to bubblewrap itself before
/// that. Returns waitpid's status; nil when it cannot wait so (no pidfd), and the caller waits
/// plainly. The signals are caught in C (PGSystem's pg_relay_*: a handler must be
/// async-signal-safe, and it only writes the signal's number to a pipe); this reads that pipe.
func relaySignals(untilEndOf pid: pid_t, info: Int32) -> Int32? {
    // Without a pidfd the caller waits plainly, and `info` stays open: bubblewrap's write to it
    // must find a reader (with none it would die of SIGPIPE).
    let pidfd = pg_pidfd_open(pid)
    guard pidfd >= 0 else { return nil }
    defer { close(pidfd) }
    var infoFD = info
    defer { if infoFD >= 0 { close(infoFD) } }
    let caught = pg_relay_fd()
    // At most 4 KiB of it (bubblewrap's is about 200 bytes): past that it is not read any more.
    let infoLimit = 4095
    var written: [UInt8] = []
    var sandbox: pid_t = 0
    var buf = [UInt8](repeating: 0, count: 4096)
    while true {
        var fds = [pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0), pollfd(fd: caught, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: infoFD, events: Int16(POLLIN), revents: 0)]
        let n = poll(&fds, infoFD >= 0 ? 3 : 2, -1)
        if n < 0 {
            if errno == EINTR { continue }
            return nil
        }
        // The sandbox's process group first, so that a signal read in the same round goes to it.
        if infoFD >= 0 && fds[2].revents != 0 {
            let room = infoLimit - written.count
            let r = room > 0 ? read(infoFD, &buf, room) : 0
            if r > 0 {
                written += buf[0..<r]
                if sandbox == 0 { sandbox = BubblewrapInfo.sandboxPID(written) ?? 0 }
            } else if r == 0 || (errno != EINTR && errno != EAGAIN) {
                close(infoFD)
                infoFD = -1
            }
        }
        if fds[1].revents & Int16(POLLIN) != 0 {
            let r = read(caught, &buf, 64)
            for sig in buf.prefix(max(r, 0)) {
                // bubblewrap's pid 1 in the sandbox leads the process group (and session) the
                // command runs in; as a namespace's init it ignores these signals itself. Before
                // the sandbox exists, bubblewrap itself gets the signal (and ends, and the sandbox
                // with it).
                kill(sandbox != 0 ? -sandbox : pid, Int32(sig))
            }
        }
        if fds[0].revents != 0 {
            var status: Int32 = 0
            var w: pid_t
            repeat { w = waitpid(pid, &status, 0) } while w == -1 && errno == EINTR
            return w == pid ? status : nil
        }
    }
}
