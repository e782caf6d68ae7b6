import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Shared helpers for photogate's tests: temp folders, processes, generated media.
public enum TestSupport {
    /// A file read until end of file. Files under /proc report size 0 and Foundation's
    /// `String(contentsOfFile:)` returns only their first ~4 KB: with a few dozen mounts on the
    /// machine, later mounts were missing from /proc/mounts and fixtures failed to unmount them.
    public static func readWhole(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = [], chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 { if errno == EINTR { continue }; return nil }
            if n == 0 { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(contentsOf: chunk[0..<n])
        }
    }

    public static let packageRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()

    /// The built `photogate` binary.
    public static var photogateBinary: String {
        if let b = ProcessInfo.processInfo.environment["PHOTOGATE_BIN"], FileManager.default.isExecutableFile(atPath: b) { return b }
        return packageRoot + "/.build/debug/photogate"
    }

    /// The suite's run on a PostgreSQL catalog (issue 41): scripts/test runs the suites a second
    /// time with `PHOTOGATE_TEST_PG` naming the socket folder of a server it started for the run
    /// (trust, user postgres). Nil on the SQLite run.
    public static let testCatalogServer: String? = {
        let v = ProcessInfo.processInfo.environment["PHOTOGATE_TEST_PG"] ?? ""
        return v.isEmpty ? nil : v
    }()

    /// On the PostgreSQL run, a test about what only SQLite has (its log, its file) is skipped,
    /// and says so: `try TestSupport.requireSQLiteCatalog("why")` first thing in such a test.
    public static var onPostgres: Bool { testCatalogServer != nil }

    /// The folder a library's originals are in: its store/, or, for a library whose catalog is
    /// on a server, the store/ of the shared folder its catalog.conf names.
    public static func storeFolder(of library: String) -> String {
        if let text = try? String(contentsOfFile: library + "/catalog.conf", encoding: .utf8),
           let line = text.split(separator: "\n").first(where: { $0.hasPrefix("shared=") }) {
            return String(line.dropFirst("shared=".count)) + "/store"
        }
        return library + "/store"
    }

    /// The folder a library's store/, tmp/ and lost+found/ are in: the library's, or the shared
    /// folder a linked library's catalog.conf names.
    public static func sharedFolder(of library: String) -> String {
        String(storeFolder(of: library).dropLast("/store".count))
    }

    /// The URL of a linked library's catalog (nil for an SQLite one).
    public static func catalogURL(of library: String) -> String? {
        guard let text = try? String(contentsOfFile: library + "/catalog.conf", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix("catalog=") }) else { return nil }
        return String(line.dropFirst("catalog=".count))
    }

    /// Runs one SQL statement on a library's catalog behind photogate's back (a test that moves a
    /// date into the past, say): python's sqlite3 on an SQLite catalog, psql on a server's.
    public static func catalogSQL(library: String, _ statement: String) throws -> Output {
        if let url = catalogURL(of: library) {
            return try run("/usr/bin/psql", [url, "-Atq", "-v", "ON_ERROR_STOP=1", "-c", statement])
        }
        return try run("python3", ["-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute(sys.argv[2]); c.commit(); c.close()",
                                   library + "/photogate.sqlite", statement])
    }

    /// A fresh database on the run's server, and its URL (nil on the SQLite run).
    public static func newTestCatalog() throws -> String? {
        guard let dir = testCatalogServer else { return nil }
        var bytes = [UInt8](repeating: 0, count: 8)
        for i in bytes.indices { bytes[i] = UInt8.random(in: 0...255) }
        let name = "t" + bytes.map { String(format: "%02x", $0) }.joined()
        let o = try run("/usr/bin/psql", ["-h", dir, "-U", "postgres", "-d", "postgres", "-Atq", "-c", "CREATE DATABASE \(name)"])
        guard o.status == 0 else {
            throw NSError(domain: "TestSupport", code: Int(o.status), userInfo: [NSLocalizedDescriptionKey: "CREATE DATABASE \(name) failed: \(o.stderr)"])
        }
        return "postgresql:///\(name)?host=\(dir)&user=postgres"
    }

    /// `photogate init`'s arguments for a new library at `root` beyond its folder: on the
    /// PostgreSQL run, a database of its own and a shared folder beside it.
    public static func initArguments(for root: String) throws -> [String] {
        guard let url = try newTestCatalog() else { return [] }
        return ["--catalog", url, "--store", root + ".shared"]
    }

    public static func tempDir(_ label: String = "t") -> String {
        let base = ProcessInfo.processInfo.environment["PHOTOGATE_TEST_TMP"] ?? "/tmp"
        var template = Array("\(base)/photogate-\(label).XXXXXX".utf8CString)
        let p = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(p != nil, "mkdtemp failed")
        return String(cString: p!)
    }

    public static func remove(_ path: String) { try? FileManager.default.removeItem(atPath: path) }

    /// The state folder of every program the tests run (unless the caller names one): photogate's
    /// mount daemons note their library there (`mounts --all`), not in the home of whoever runs
    /// the tests.
    public static let stateHome: String = tempDir("state")

    /// A folder in /tmp that another local user can reach (0755; the tests' temp folders are 0700
    /// all the way down), for what a second user must see: a library's own modes, mount points.
    public static func publicTempDir(_ label: String) throws -> String {
        var template = Array("/tmp/photogate-\(label).XXXXXX".utf8CString)
        guard let p = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw NSError(domain: "TestSupport", code: Int(errno), userInfo: [NSLocalizedDescriptionKey: "mkdtemp in /tmp failed"])
        }
        let dir = String(cString: p)
        chmod(dir, 0o755)
        return dir
    }

    /// A tmpfs of `size` (mount's syntax, e.g. "3m") on a fresh temp folder, for full-disk tests;
    /// nil (after printing why the test skips) when not root. Undo with `removeTmpfs`.
    public static func smallTmpfs(_ label: String, size: String) throws -> String? {
        guard getuid() == 0 else {
            print("\(label): SKIPPED — needs root to mount a small tmpfs")
            return nil
        }
        let base = tempDir(label)
        guard try run("mount", ["-t", "tmpfs", "-o", "size=\(size)", "tmpfs", base]).status == 0 else {
            remove(base)
            throw NSError(domain: "TestSupport", code: 1, userInfo: [NSLocalizedDescriptionKey: "could not mount a tmpfs on \(base)"])
        }
        return base
    }

    /// The second local user the tests that act as someone else use (made once with useradd);
    /// nil (after printing why the test skips) when that cannot be done here.
    public static let otherUser = "photogate-test"
    public static func secondUser(_ test: String) throws -> String? {
        guard getuid() == 0 else {
            print("\(test): SKIPPED — needs root to add a second local user (useradd) and run commands as it (runuser)")
            return nil
        }
        guard which("useradd"), which("runuser") else {
            print("\(test): SKIPPED — useradd or runuser is missing")
            return nil
        }
        if try run("id", ["-u", otherUser]).status != 0 {
            let o = try run("useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", otherUser])
            if o.status != 0 && o.status != 9 {   // 9: it exists (a test running alongside added it)
                throw NSError(domain: "TestSupport", code: Int(o.status), userInfo: [NSLocalizedDescriptionKey: "useradd: \(o.stderr)"])
            }
        }
        return otherUser
    }

    public static func removeTmpfs(_ path: String) {
        umount2(path, Int32(MNT_DETACH))
        remove(path)
    }

    public struct Output: Sendable {
        public var status: Int32
        public var stdout: String
        public var stderr: String
    }

    /// Runs a program to completion.
    @discardableResult
    public static func run(_ program: String, _ args: [String], stdin: String? = nil,
                           environment: [String: String] = [:], cwd: String? = nil) throws -> Output {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: program.hasPrefix("/") ? program : "/usr/bin/env")
        p.arguments = program.hasPrefix("/") ? args : [program] + args
        var env = ProcessInfo.processInfo.environment
        if env["XDG_STATE_HOME"] == nil { env["XDG_STATE_HOME"] = stateHome }
        for (k, v) in environment { env[k] = v }
        p.environment = env
        if let cwd { p.currentDirectoryURL = URL(fileURLWithPath: cwd) }
        let outPipe = Pipe(), errPipe = Pipe(), inPipe = Pipe()
        p.standardOutput = outPipe
        p.standardError = errPipe
        p.standardInput = inPipe
        try p.run()
        if let stdin { inPipe.fileHandleForWriting.write(Data(stdin.utf8)) }
        try inPipe.fileHandleForWriting.close()
        // Read both pipes concurrently so a chatty child never blocks.
        let errData = LockedData()
        let t = Thread { errData.set(errPipe.fileHandleForReading.readDataToEndOfFile()) }
        t.start()
        let out = outPipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return Output(status: p.terminationStatus, stdout: String(decoding: out, as: UTF8.self),
                      stderr: String(decoding: errData.value, as: UTF8.self))
    }

    /// Data handed over by another thread; `value` waits until it is set.
    final class LockedData: @unchecked Sendable {
        private let cond = NSCondition()
        private var data = Data()
        private var finished = false
        func set(_ d: Data) { cond.lock(); data = d; finished = true; cond.broadcast(); cond.unlock() }
        var value: Data {
            cond.lock()
            defer { cond.unlock() }
            while !finished { cond.wait() }
            return data
        }
    }

    public static func which(_ tool: String) -> Bool {
        (try? run("sh", ["-c", "command -v \(tool)"]).status) == 0
    }
}

/// Real media made with ImageMagick, exiftool and ffmpeg (scripts/test installs them). Bases are
/// made once per process; variants get a unique JPEG comment so each has its own content.
public enum TestMedia {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var cache: [String: [UInt8]] = [:]
    private static let dir = TestSupport.tempDir("media")

    private static func cached(_ key: String, _ make: (String) throws -> Void) throws -> [UInt8] {
        lock.lock()
        defer { lock.unlock() }
        if let c = cache[key] { return c }
        let path = dir + "/" + key
        try make(path)
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        cache[key] = bytes
        return bytes
    }

    static func check(_ o: TestSupport.Output, _ what: String) throws {
        if o.status != 0 { throw NSError(domain: "TestMedia", code: Int(o.status), userInfo: [NSLocalizedDescriptionKey: "\(what) failed: \(o.stderr)"]) }
    }

    /// A JPEG with EXIF DateTimeOriginal 2024:07:14 10:31:00, with or without a GPS position.
    public static func jpegBase(gps: Bool) throws -> [UInt8] {
        try cached(gps ? "base-gps.jpg" : "base.jpg") { path in
            try check(TestSupport.run("convert", ["-size", "64x48", "xc:steelblue", "-quality", "80", path]), "convert")
            var args = ["-overwrite_original", "-q", "-DateTimeOriginal=2024:07:14 10:31:00", "-Make=photogate-test"]
            if gps {
                args += ["-GPSLatitude=43.2965", "-GPSLatitudeRef=N", "-GPSLongitude=5.3698", "-GPSLongitudeRef=E",
                         "-GPSAltitude=12", "-GPSAltitudeRef=0"]
            }
            try check(TestSupport.run("exiftool", args + [path]), "exiftool")
        }
    }

    /// A unique JPEG: the base with a COM segment holding `tag` right after SOI.
    public static func jpeg(tag: String, gps: Bool = false) throws -> [UInt8] {
        let base = try jpegBase(gps: gps)
        let text = Array(tag.utf8)
        let len = text.count + 2
        return [0xFF, 0xD8, 0xFF, 0xFE, UInt8(len >> 8), UInt8(len & 0xff)] + text + base[2...]
    }

    public static func png() throws -> [UInt8] {
        try cached("base.png") { path in
            try check(TestSupport.run("convert", ["-size", "32x32", "xc:orange", path]), "convert")
        }
    }

    public static func mp4() throws -> [UInt8] {
        try cached("base.mp4") { path in
            try check(TestSupport.run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=duration=1:size=64x48:rate=5",
                                                 "-pix_fmt", "yuv420p", "-metadata", "creation_time=2023-05-06T07:08:09Z", path]), "ffmpeg")
        }
    }

    @discardableResult
    public static func write(_ bytes: [UInt8], to path: String) throws -> String {
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }
}

/// Last-resort cleanup of FUSE mounts a failed test left behind, including hung ones: abort the
/// connection through fusectl (which fails every waiting request), then detach the mount.
public enum FUSECleanup {
    public static func isMounted(_ path: String) -> Bool {
        guard let text = TestSupport.readWhole("/proc/mounts") else { return false }
        return text.split(separator: "\n").contains { $0.split(separator: " ").dropFirst().first.map(String.init) == path }
    }

    public static func abortAndDetach(_ path: String) {
        guard isMounted(path) else { return }
        if let info = TestSupport.readWhole("/proc/self/mountinfo") {
            for line in info.split(separator: "\n") {
                let f = line.split(separator: " ")
                guard f.count > 4, String(f[4]) == path, let dev = f[2].split(separator: ":").last else { continue }
                if access("/sys/fs/fuse/connections", F_OK) != 0 || ((try? FileManager.default.contentsOfDirectory(atPath: "/sys/fs/fuse/connections"))?.isEmpty ?? true) {
                    _ = try? TestSupport.run("mount", ["-t", "fusectl", "none", "/sys/fs/fuse/connections"])
                }
                let abort = "/sys/fs/fuse/connections/\(dev)/abort"
                if let fh = FileHandle(forWritingAtPath: abort) { fh.write(Data("1".utf8)); try? fh.close() }
            }
        }
        _ = try? TestSupport.run("fusermount3", ["-u", "-z", path])
        if isMounted(path) { umount2(path, Int32(MNT_DETACH)) }
    }
}

/// Deterministic random numbers (SplitMix64), so a failing randomized test is reproducible from
/// its seed.
public struct SplitMix: RandomNumberGenerator {
    public var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Waits until a condition holds, for changes that land asynchronously (another process, the
/// kernel's RELEASE after close(2), a daemon's refresh): polls every `every` microseconds on the
/// monotonic clock. The deadline only bounds a hang (a loaded machine can take seconds);
/// success returns at once. The one condition wait of every test target.
public func eventually(_ timeout: Double = 60, every: UInt32 = 10_000, _ cond: () -> Bool) -> Bool {
    func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
    let end = now() + timeout
    while now() < end {
        if cond() { return true }
        usleep(every)
    }
    return cond()
}
