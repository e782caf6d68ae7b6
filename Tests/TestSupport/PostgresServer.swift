import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A real PostgreSQL 15 (Debian's postgresql-15) for one test: initdb into a fresh folder in
/// /tmp, run as the unprivileged `postgres` user when the tests run as root (initdb refuses
/// root), listening only on a Unix socket in that folder (listen_addresses=''), trust
/// authentication, one database made. `url` names it for PGURL.
///
/// The server never outlives the test: `stop()` (or deinit, when the test lets go of the server,
/// passing or failing) shuts it down and removes the folder; the postmaster is started with a
/// parent-death signal (setpriv --pdeathsig) from a thread that lives as long as the test
/// process, so a test process that crashes or is killed takes its servers with it; and a server
/// folder whose test process is gone is swept (server killed, folder removed) by the next one.
///
///     @Suite(.enabled(if: PostgresServer.available, PostgresServer.skipReason)) ...
///     let server = try PostgresServer()
///     let url = server.url                    // postgresql:///photogate?host=/tmp/...&user=postgres
public final class PostgresServer: @unchecked Sendable {
    public static let binDir = "/usr/lib/postgresql/15/bin"
    static let setpriv = "/usr/bin/setpriv"

    /// Why the PostgreSQL tests skip, when `available` is false.
    public static let skipReason = "needs PostgreSQL 15 from Debian's packages (\(binDir)/initdb, postgres, psql; scripts/setup installs postgresql with PHOTOGATE_SETUP_TEST=1), setpriv, and as root a 'postgres' user"

    /// Whether a server can be started here (the binaries, setpriv, and a user to run it as).
    public static let available: Bool = {
        let fm = FileManager.default
        for tool in ["initdb", "postgres", "psql"] where !fm.isExecutableFile(atPath: "\(binDir)/\(tool)") {
            print("PostgresServer: SKIPPED — \(binDir)/\(tool) is missing (apt-get install postgresql)")
            return false
        }
        guard fm.isExecutableFile(atPath: setpriv) else {
            print("PostgresServer: SKIPPED — \(setpriv) is missing (util-linux)")
            return false
        }
        if getuid() == 0 && getpwnam("postgres") == nil {
            print("PostgresServer: SKIPPED — running as root and there is no 'postgres' user to run the server as")
            return false
        }
        return true
    }()

    /// The folder of this server: its socket, data/ and postgres.log.
    public let dir: String
    public let dataDir: String
    public let database: String
    public let superuser = "postgres"
    private let runAs: String?          // the user the server runs as, when we are root
    private let lock = NSLock()
    private var process: Process?
    private var removed = false

    /// The URL of the database, over the Unix socket, as the superuser.
    public var url: String { url(applicationName: nil) }

    public func url(database db: String? = nil, applicationName: String?) -> String {
        var s = "postgresql:///\(db ?? database)?host=\(dir)&user=\(superuser)"
        if let applicationName { s += "&application_name=\(applicationName)" }
        return s
    }

    /// Starts a new server with an empty database named `database`.
    public init(database: String = "photogate") throws {
        guard Self.available else { throw Failure("PostgreSQL 15 is not installed here: \(Self.skipReason)") }
        Self.sweepOrphans()
        self.database = database
        runAs = getuid() == 0 ? "postgres" : nil
        var template = Array("/tmp/photogate-pg.XXXXXX".utf8CString)
        guard let p = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw Failure("mkdtemp in /tmp failed: errno \(errno)")
        }
        dir = String(cString: p)
        dataDir = dir + "/data"
        do {
            try "\(getpid())\n".write(toFile: dir + "/owner.pid", atomically: true, encoding: .utf8)
            chmod(dir, 0o755)
            if let runAs, let pw = getpwnam(runAs) {
                guard chown(dir, pw.pointee.pw_uid, pw.pointee.pw_gid) == 0 else { throw Failure("chown \(dir) to \(runAs): errno \(errno)") }
            }
            let initdb = try TestSupport.run(Self.setpriv, asUser() + ["--", "\(Self.binDir)/initdb", "-D", dataDir, "-U", superuser,
                                                                       "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync", "--no-instructions"],
                                             cwd: dir)
            guard initdb.status == 0 else { throw Failure("initdb failed (\(initdb.status)): \(initdb.stderr)\(initdb.stdout)") }
            try start()
            _ = try psql("CREATE DATABASE \"\(database)\"", database: "postgres")
        } catch {
            stop()
            removeFolder()
            throw error
        }
    }

    deinit {
        stop()
        removeFolder()
    }

    private func asUser(pdeathsig: Bool = false) -> [String] {
        var a: [String] = []
        if let runAs { a += ["--reuid=\(runAs)", "--regid=\(runAs)", "--init-groups"] }
        if pdeathsig { a += ["--pdeathsig=KILL"] }
        return a
    }

    /// Starts the server on the existing data folder and waits until it accepts connections.
    public func start() throws {
        lock.lock()
        defer { lock.unlock() }
        guard process == nil else { return }
        let log = dir + "/postgres.log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        if let runAs, let pw = getpwnam(runAs) { chown(log, pw.pointee.pw_uid, pw.pointee.pw_gid) }
        let args = asUser(pdeathsig: true) + ["--", "\(Self.binDir)/postgres", "-D", dataDir,
            "-c", "listen_addresses=", "-c", "unix_socket_directories=\(dir)", "-c", "fsync=off",
            "-c", "full_page_writes=off", "-c", "shared_buffers=32MB", "-c", "max_connections=50",
            "-c", "log_line_prefix=%m [%p] %q%a ", "-c", "log_connections=off"]
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.setpriv)
        p.arguments = args
        p.currentDirectoryURL = URL(fileURLWithPath: dir)
        p.standardInput = FileHandle.nullDevice
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        handle.seekToEndOfFile()
        p.standardOutput = handle
        p.standardError = handle
        try SpawnerThread.shared.run { try p.run() }
        try? handle.close()
        process = p
        // Ready when postmaster.pid's 8th line says so (what pg_ctl -w waits for).
        let deadline = Date().addingTimeInterval(60)
        while true {
            if !p.isRunning {
                process = nil
                throw Failure("postgres exited (\(p.terminationStatus)) while starting: \(logTail())")
            }
            if let pidFile = TestSupport.readWhole(dataDir + "/postmaster.pid") {
                let lines = pidFile.split(separator: "\n", omittingEmptySubsequences: false)
                if lines.count >= 8, lines[7].trimmingCharacters(in: .whitespaces) == "ready" { return }
            }
            if Date() > deadline { throw Failure("postgres did not get ready within 60 s: \(logTail())") }
            usleep(5_000)
        }
    }

    /// Shuts the server down (fast: sessions are ended with 57P01) and waits for it; safe to call
    /// more than once. The data folder stays, for `start()`.
    public func stop() {
        lock.lock()
        defer { lock.unlock() }
        guard let p = process else { return }
        process = nil
        for (sig, seconds) in [(SIGINT, 30.0), (SIGQUIT, 10.0), (SIGKILL, 30.0)] {
            if !p.isRunning { break }
            kill(p.processIdentifier, sig)
            let deadline = Date().addingTimeInterval(seconds)
            while p.isRunning && Date() < deadline { usleep(2_000) }
        }
    }

    /// Stops the server as a crash would (SIGQUIT: no shutdown checkpoint); `start()` recovers.
    public func crash() {
        lock.lock()
        let p = process
        lock.unlock()
        if let p, p.isRunning { kill(p.processIdentifier, SIGQUIT) }
        stop()
    }

    public func restart() throws {
        stop()
        try start()
    }

    public var isRunning: Bool {
        lock.lock()
        defer { lock.unlock() }
        return process?.isRunning ?? false
    }

    /// The postmaster's pid, while running.
    public var pid: pid_t? {
        lock.lock()
        defer { lock.unlock() }
        return process.map { $0.processIdentifier }
    }

    /// Ends the client sessions whose application_name is `applicationName` (pg_terminate_backend,
    /// waiting up to 10 s for each to be gone); the number ended.
    @discardableResult
    public func terminateBackends(applicationName: String) throws -> Int {
        try terminateBackends(where: "application_name = \(Self.literal(applicationName))")
    }

    /// Ends the client sessions whose current (or last) query contains `text`.
    @discardableResult
    public func terminateBackends(queryContaining text: String) throws -> Int {
        try terminateBackends(where: "strpos(query, \(Self.literal(text))) > 0")
    }

    private func terminateBackends(where condition: String) throws -> Int {
        let out = try psql("""
            SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 10000)) FROM pg_stat_activity
            WHERE pid <> pg_backend_pid() AND backend_type = 'client backend' AND \(condition)
            """, database: "postgres")
        guard let n = Int(out.trimmingCharacters(in: .whitespacesAndNewlines)) else { throw Failure("psql said: \(out)") }
        return n
    }

    /// Runs SQL with psql as the superuser (unaligned, tuples only); its output, or an error with psql's.
    @discardableResult
    public func psql(_ sql: String, database db: String? = nil) throws -> String {
        let o = try TestSupport.run("\(Self.binDir)/psql", ["-X", "-q", "-w", "-tA", "-v", "ON_ERROR_STOP=1", "-h", dir, "-U", superuser,
                                                             "-d", db ?? database, "-c", sql])
        guard o.status == 0 else { throw Failure("psql failed (\(o.status)): \(o.stderr)") }
        return o.stdout
    }

    public static func literal(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "''") + "'" }

    /// The end of the server's log, for failure messages.
    public func logTail(_ bytes: Int = 2000) -> String {
        let s = TestSupport.readWhole(dir + "/postgres.log") ?? ""
        return String(s.suffix(bytes))
    }

    private func removeFolder() {
        lock.lock()
        defer { lock.unlock() }
        guard !removed else { return }
        removed = true
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// Servers left by test processes that are gone (which their parent-death signal should
    /// already have ended): killed, and their folders removed.
    static func sweepOrphans() {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/tmp") else { return }
        for name in names where name.hasPrefix("photogate-pg.") {
            let d = "/tmp/" + name
            guard let owner = TestSupport.readWhole(d + "/owner.pid").flatMap({ Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }),
                  kill(owner, 0) != 0 && errno == ESRCH else { continue }
            if let pidFile = TestSupport.readWhole(d + "/data/postmaster.pid"),
               let pm = pidFile.split(separator: "\n").first.flatMap({ Int32($0) }),
               (TestSupport.readWhole("/proc/\(pm)/cmdline") ?? "").contains("postgres") {
                kill(pm, SIGKILL)
            }
            try? FileManager.default.removeItem(atPath: d)
        }
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        init(_ d: String) { description = d }
    }
}

/// A thread that lives as long as the process, which spawns the processes that must die with it:
/// a parent-death signal is sent when the *thread* that made the child ends, and the tests run
/// on pool threads that come and go.
final class SpawnerThread: @unchecked Sendable {
    static let shared = SpawnerThread()
    private let cond = NSCondition()
    private var jobs: [() -> Void] = []

    private init() {
        let t = Thread { [unowned self] in
            while true {
                cond.lock()
                while jobs.isEmpty { cond.wait() }
                let job = jobs.removeFirst()
                cond.unlock()
                job()
            }
        }
        t.name = "pg-spawner"
        t.start()
    }

    private final class Outcome: @unchecked Sendable {
        let cond = NSCondition()
        var finished = false
        var failure: (any Error)?
    }

    /// Runs `body` on the spawner thread and waits for it.
    func run(_ body: @escaping () throws -> Void) throws {
        let outcome = Outcome()
        cond.lock()
        jobs.append {
            var failure: (any Error)?
            do { try body() } catch { failure = error }
            outcome.cond.lock()
            outcome.failure = failure
            outcome.finished = true
            outcome.cond.signal()
            outcome.cond.unlock()
        }
        cond.signal()
        cond.unlock()
        outcome.cond.lock()
        while !outcome.finished { outcome.cond.wait() }
        outcome.cond.unlock()
        if let failure = outcome.failure { throw failure }
    }
}
