// The terminal front end, written on termios and ANSI escapes (no curses): raw mode on the
// alternate screen, key input with poll(2), signals through a self-pipe, and redraws of the
// lines that changed only (cheap over SSH). The terminal is restored on every way out: confirm,
// cancel, an error, SIGINT/SIGTERM/SIGHUP, and even exit() (atexit).
#if canImport(Glibc)
import Glibc
#endif

/// The saved terminal state, for the atexit hook (a C function pointer cannot capture).
nonisolated(unsafe) private var savedTerminal: (input: Int32, output: Int32, state: termios)?
nonisolated(unsafe) private var atExitRegistered = false
nonisolated(unsafe) private var signalPipeWrite: Int32 = -1

private let leaveSequence = "\u{1B}[0m\u{1B}[?7h\u{1B}[?25h\u{1B}[?1049l"

private func restoreSavedTerminal() {
    guard var s = savedTerminal else { return }
    savedTerminal = nil
    _ = leaveSequence.withCString { Glibc.write(s.output, $0, strlen($0)) }
    _ = tcsetattr(s.input, TCSADRAIN, &s.state)
}

/// The actions that were in place before the crash handler, by signal number (preallocated:
/// a signal handler must not allocate).
nonisolated(unsafe) private let crashPrevious = UnsafeMutablePointer<sigaction>.allocate(capacity: 65)
nonisolated(unsafe) private var crashHandlerInstalled = false
private let crashSignals: [Int32] = [SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGFPE, SIGABRT]

/// A crash (a Swift runtime trap is SIGILL or SIGTRAP) must not leave the terminal raw and on
/// the alternate screen: restore it, put back the previous handler (Swift's backtracer), and
/// let that one handle the signal (a fault re-executes; abort is raised again).
private func onCrash(_ sig: Int32) {
    if var s = savedTerminal {
        savedTerminal = nil
        _ = leaveSequence.withCString { Glibc.write(s.output, $0, strlen($0)) }
        _ = tcsetattr(s.input, TCSADRAIN, &s.state)
    }
    sigaction(sig, crashPrevious + Int(sig), nil)
    if sig == SIGABRT { raise(sig) }
}

private func installCrashHandler() {
    guard !crashHandlerInstalled else { return }
    crashHandlerInstalled = true
    for sig in crashSignals {
        var sa = sigaction()
        sa.__sigaction_handler.sa_handler = { onCrash($0) }
        sigemptyset(&sa.sa_mask)
        sa.sa_flags = Int32(SA_NODEFER)
        sigaction(sig, &sa, crashPrevious + Int(sig))
    }
}

private func onSignal(_ sig: Int32) {
    let saved = errno
    var b = UInt8(truncatingIfNeeded: sig)
    _ = Glibc.write(signalPipeWrite, &b, 1)
    errno = saved
}

public struct TerminalError: Error, CustomStringConvertible {
    public var description: String
}

public final class Terminal {
    public let input: Int32
    public let output: Int32
    private var saved = termios()
    private var active = false

    public init(input: Int32 = STDIN_FILENO, output: Int32 = STDOUT_FILENO) {
        self.input = input
        self.output = output
    }

    /// Both standard input and standard output are a terminal.
    public static func isInteractive(input: Int32 = STDIN_FILENO, output: Int32 = STDOUT_FILENO) -> Bool {
        isatty(input) == 1 && isatty(output) == 1
    }

    /// Raw input (no echo, no line editing, bytes as typed; ^C and ^Z still send signals), the
    /// alternate screen, no cursor, no auto-wrap.
    public func enter() throws {
        var t = termios()
        guard tcgetattr(input, &t) == 0 else {
            throw TerminalError(description: "cannot read the terminal's settings: \(String(cString: strerror(errno)))")
        }
        saved = t
        savedTerminal = (input, output, t)
        if !atExitRegistered {
            atExitRegistered = true
            atexit { restoreSavedTerminal() }
        }
        _ = leaveSequence.utf8.count   // initialized now, never first in a signal handler
        installCrashHandler()
        var raw = t
        raw.c_iflag &= ~tcflag_t(BRKINT | ICRNL | INPCK | ISTRIP | IXON)
        raw.c_lflag &= ~tcflag_t(ECHO | ICANON | IEXTEN)
        raw.c_cflag |= tcflag_t(CS8)
        withUnsafeMutableBytes(of: &raw.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        guard tcsetattr(input, TCSADRAIN, &raw) == 0 else {
            savedTerminal = nil
            throw TerminalError(description: "cannot set the terminal to raw mode: \(String(cString: strerror(errno)))")
        }
        active = true
        write("\u{1B}[?1049h\u{1B}[?25l\u{1B}[?7l\u{1B}[H\u{1B}[2J")
    }

    /// Back to the settings and screen the picker found. Idempotent.
    public func leave() {
        guard active else { return }
        active = false
        write(leaveSequence)
        _ = tcsetattr(input, TCSADRAIN, &saved)
        savedTerminal = nil
    }

    /// Rows and columns (24x80 if the terminal does not say).
    public func size() -> (rows: Int, cols: Int) {
        var ws = winsize()
        if ioctl(output, UInt(TIOCGWINSZ), &ws) == 0, ws.ws_row > 0, ws.ws_col > 0 {
            return (Int(ws.ws_row), Int(ws.ws_col))
        }
        return (24, 80)
    }

    public func write(_ s: String) {
        var bytes = Array(s.utf8)
        var off = 0
        bytes.withUnsafeMutableBytes { b in
            while off < b.count {
                let n = Glibc.write(output, b.baseAddress! + off, b.count - off)
                if n > 0 { off += n; continue }
                if n < 0 && (errno == EINTR || errno == EAGAIN) {
                    if errno == EAGAIN { var p = pollfd(fd: output, events: Int16(POLLOUT), revents: 0); _ = poll(&p, 1, 100) }
                    continue
                }
                return   // the terminal is gone
            }
        }
    }
}

/// Signals delivered as bytes on a pipe, so the event loop handles them between keys (a signal
/// handler may do almost nothing safely).
final class SignalPipe {
    let readFD: Int32
    let writeFD: Int32
    private var previous: [Int32: sigaction] = [:]

    init() throws {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw TerminalError(description: "pipe failed: \(String(cString: strerror(errno)))") }
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        }
        readFD = fds[0]
        writeFD = fds[1]
        signalPipeWrite = writeFD
    }

    func install(_ signals: [Int32]) {
        for sig in signals {
            var sa = sigaction()
            sa.__sigaction_handler.sa_handler = { onSignal($0) }
            sigemptyset(&sa.sa_mask)
            sa.sa_flags = 0
            var old = sigaction()
            sigaction(sig, &sa, &old)
            if previous[sig] == nil { previous[sig] = old }
        }
        // A parent may have blocked them (as the test harness or a shell script might).
        var set = sigset_t()
        sigemptyset(&set)
        for sig in signals { sigaddset(&set, sig) }
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
    }

    /// Puts one signal back to its default action (to stop on SIGTSTP).
    func setDefault(_ sig: Int32) {
        var sa = sigaction()
        sa.__sigaction_handler.sa_handler = SIG_DFL
        sigemptyset(&sa.sa_mask)
        sigaction(sig, &sa, nil)
    }

    func restore() {
        for (sig, var old) in previous { sigaction(sig, &old, nil) }
        previous = [:]
    }

    func drain() -> [Int32] {
        var out: [Int32] = []
        var buf = [UInt8](repeating: 0, count: 64)
        while true {
            let n = read(readFD, &buf, buf.count)
            if n <= 0 { break }
            out += buf[0..<n].map { Int32($0) }
        }
        return out
    }

    deinit {
        restore()
        if signalPipeWrite == writeFD { signalPipeWrite = -1 }
        close(readFD)
        close(writeFD)
    }
}

/// How a picker session ended.
public enum PickerOutcome: Equatable, Sendable {
    case confirmed
    case cancelled
    /// SIGINT, SIGTERM, SIGHUP or SIGQUIT; SIGHUP also when the terminal went away.
    case signalled(Int32)
}

/// What the session needs from the outside world.
public struct PickerHooks {
    /// Writes grant changes (continuous mode, after each change).
    public var apply: (GrantDiff) throws -> Void
    /// The details panel for an asset (given the model as it stands): a title and lines.
    public var details: (PickerAsset, PickerModel) -> (title: String, lines: [String])
    /// Opens the asset in a desktop viewer and returns a message, or nil when there is none.
    public var openExternally: ((PickerAsset) -> String?)?

    public init(apply: @escaping (GrantDiff) throws -> Void,
                details: @escaping (PickerAsset, PickerModel) -> (title: String, lines: [String]),
                openExternally: ((PickerAsset) -> String?)? = nil) {
        self.apply = apply
        self.details = details
        self.openExternally = openExternally
    }
}

public enum PickerSession {
    /// Runs the picker on the terminal until the person confirms or cancels (or a signal ends
    /// it). The terminal is restored before this returns or throws.
    public static func run(_ c: inout PickerController, header: PickerHeader, hooks: PickerHooks,
                           terminal: Terminal = Terminal()) throws -> PickerOutcome {
        let signals = try SignalPipe()
        signals.install([SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH, SIGTSTP, SIGCONT])
        defer { signals.restore() }
        try terminal.enter()
        defer { terminal.leave() }

        var decoder = KeyDecoder()
        var last: [String] = []
        var full = true
        var size = terminal.size()
        var buf = [UInt8](repeating: 0, count: 4096)
        while true {
            c.resize(listHeight: Renderer.listHeight(rows: size.rows))
            let frame = Renderer.frame(c, header: header, width: size.cols, height: size.rows)
            draw(frame, &last, full: full, terminal)
            full = false

            var fds = [pollfd(fd: terminal.input, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: signals.readFD, events: Int16(POLLIN), revents: 0)]
            // A lone ESC is Escape once 30 ms pass without the rest of a sequence.
            let r = poll(&fds, 2, decoder.hasPending ? 30 : -1)
            if r < 0 {
                if errno == EINTR { continue }
                throw TerminalError(description: "poll failed: \(String(cString: strerror(errno)))")
            }
            var keys: [Key] = []
            if r == 0 { keys = decoder.flush() }
            if fds[1].revents & Int16(POLLIN) != 0 {
                for sig in signals.drain() {
                    switch sig {
                    case SIGWINCH, SIGCONT:
                        size = terminal.size()
                        full = true
                    case SIGTSTP:
                        // ^Z: give the shell its terminal back, stop, and take it again on fg.
                        terminal.leave()
                        signals.setDefault(SIGTSTP)
                        raise(SIGTSTP)
                        signals.install([SIGTSTP])
                        try terminal.enter()
                        size = terminal.size()
                        full = true
                    default:
                        return .signalled(sig)
                    }
                }
            }
            if fds[0].revents & Int16(POLLIN) != 0 {
                let n = read(terminal.input, &buf, buf.count)
                if n > 0 {
                    keys += decoder.feed(Array(buf[0..<n]))
                } else if n == 0 || (errno != EINTR && errno != EAGAIN) {
                    return .signalled(SIGHUP)
                }
            } else if fds[0].revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0 {
                return .signalled(SIGHUP)
            }
            for key in keys {
                switch c.handle(key) {
                case .none: break
                case .redraw:
                    size = terminal.size()
                    full = true
                case .confirm: return .confirmed
                case .cancel: return .cancelled
                case .apply:
                    let pending = c.model.changedDiff()
                    let n = pending.revoke.count + pending.grant.count + pending.grantStripped.count
                    if n >= 1000 {
                        // A big write takes a moment: say so before the screen stops answering.
                        let said = c.message
                        c.message = "writing \(n) changes..."
                        draw(Renderer.frame(c, header: header, width: size.cols, height: size.rows), &last, full: false, terminal)
                        c.message = said
                    }
                    applyChanges(&c, hooks, pending)
                case .preview(let a):
                    if let open = hooks.openExternally, let msg = open(a) {
                        c.message = msg
                    } else {
                        let d = hooks.details(a, c.model)
                        c.showInfo(title: d.title, lines: d.lines)
                    }
                }
            }
        }
    }

    /// Continuous mode: writes what changed since the last write.
    static func applyChanges(_ c: inout PickerController, _ hooks: PickerHooks, _ d: GrantDiff) {
        guard !d.isEmpty else { return }
        do {
            try hooks.apply(d)
            c.model.markApplied(d)
        } catch {
            c.model.markFailed(d)
            c.message = "not applied (will retry): \(error)"
        }
    }

    static func draw(_ frame: [String], _ last: inout [String], full: Bool, _ t: Terminal) {
        var out = full ? "\u{1B}[0m\u{1B}[H\u{1B}[2J" : ""
        for (i, line) in frame.enumerated() where full || i >= last.count || last[i] != line {
            // Erase first: erasing after a full-width line would also erase its last column.
            out += "\u{1B}[\(i + 1);1H\u{1B}[2K" + line + "\u{1B}[0m"
        }
        if !out.isEmpty { t.write(out) }
        last = frame
    }
}

/// The desktop's viewer (`xdg-open`), where there is a desktop.
public enum ExternalViewer {
    /// The path of xdg-open when $DISPLAY or $WAYLAND_DISPLAY is set and xdg-open is on $PATH.
    public static func available() -> String? {
        func env(_ k: String) -> String? { getenv(k).map { String(cString: $0) } }
        guard !(env("DISPLAY") ?? "").isEmpty || !(env("WAYLAND_DISPLAY") ?? "").isEmpty else { return nil }
        for dir in (env("PATH") ?? "/usr/bin:/bin").split(separator: ":") {
            let p = String(dir) + "/xdg-open"
            if access(p, X_OK) == 0 { return p }
        }
        return nil
    }

    /// Starts the viewer detached from the picker's terminal (its own session, output to
    /// /dev/null) and returns at once.
    @discardableResult
    public static func open(_ path: String, with tool: String) -> Bool {
        let args = ["sh", "-c", "\"$0\" \"$1\" </dev/null >/dev/null 2>&1 &", tool, path]
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        posix_spawnattr_setflags(&attr, Int16(0x80))   // POSIX_SPAWN_SETSID
        var pid: pid_t = 0
        let cargs = args.map { strdup($0) } + [nil]
        defer { cargs.forEach { free($0) } }
        guard posix_spawn(&pid, "/bin/sh", nil, &attr, cargs, environ) == 0 else { return false }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return status == 0
    }
}
