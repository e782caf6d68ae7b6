import Foundation
import Testing
import TestSupport
import CSysShims
#if canImport(Glibc)
import Glibc
#endif

/// Mount tests need /dev/fuse (and the right to mount). Where it is missing they are skipped,
/// and say so.
let fuseAvailable: Bool = {
    if access("/dev/fuse", R_OK | W_OK) != 0 {
        print("MountTests: SKIPPED — /dev/fuse is missing or not accessible; FUSE mount tests cannot run here")
        return false
    }
    return true
}()

/// A library with photos, plus any number of mounts; everything is unmounted and removed when
/// the fixture goes away, even when a test fails.
final class MountFixture {
    let dir: String
    let library: String
    private var mounts: [String] = []
    /// More environment for every command (and the daemons they start).
    var extraEnvironment: [String: String] = [:]
    /// The daemons note their library in the fixture's own state folder (`mounts --all`), not in
    /// the home of whoever runs the tests.
    var env: [String: String] {
        ["XDG_STATE_HOME": dir + "/state"].merging(extraEnvironment) { _, b in b }.merging(["PHOTOGATE_LIBRARY": library]) { _, b in b }
    }

    init(libraryName: String = "library") throws {
        dir = TestSupport.tempDir("mnt")
        library = dir + "/" + libraryName
        try pg(["init"] + TestSupport.initArguments(for: library))
    }

    deinit {
        for m in mounts.reversed() { forceUnmount(m) }
        let leftovers = mounts.filter(isMounted)
        if !leftovers.isEmpty { Issue.record("mounts left behind: \(leftovers)") }
        TestSupport.remove(dir)
    }

    func forceUnmount(_ m: String) {
        // Only mounts a failed test left behind get here; they may be hung, so never touch them
        // with a path lookup: abort the connection, then detach.
        FUSECleanup.abortAndDetach(m)
    }

    @discardableResult
    func pg(_ args: String..., stdin: String? = nil) throws -> TestSupport.Output {
        try pg(args, stdin: stdin)
    }

    @discardableResult
    func pg(_ args: [String], stdin: String? = nil) throws -> TestSupport.Output {
        let o = try TestSupport.run(TestSupport.photogateBinary, args, stdin: stdin, environment: env)
        if o.status != 0 { throw FixtureError("photogate \(args.joined(separator: " ")) -> \(o.status): \(o.stderr)") }
        return o
    }

    func pgStatus(_ args: String...) throws -> TestSupport.Output {
        try TestSupport.run(TestSupport.photogateBinary, args, environment: env)
    }

    /// Imports unique JPEGs under these names; returns the source folder.
    @discardableResult
    func importPhotos(_ names: [String], gps: Bool = false, extra: [String] = []) throws -> String {
        let src = dir + "/src-\(UUID().uuidString.prefix(6))"
        try FileManager.default.createDirectory(atPath: src, withIntermediateDirectories: true)
        for n in names { try TestMedia.write(TestMedia.jpeg(tag: n + UUID().uuidString, gps: gps), to: src + "/" + n) }
        let o = try TestSupport.run(TestSupport.photogateBinary, ["import", src] + extra, environment: env)
        if o.status != 0 { throw FixtureError("import: \(o.stderr)") }
        return src
    }

    /// Imports one JPEG padded past 256 KiB (more than a first read's readahead); returns the
    /// original's path.
    @discardableResult
    func importPadded(_ name: String) throws -> String {
        let src = dir + "/padded-\(UUID().uuidString.prefix(6))"
        try FileManager.default.createDirectory(atPath: src, withIntermediateDirectories: true)
        try TestMedia.write(try TestMedia.jpeg(tag: name) + [UInt8](repeating: 0x5a, count: 256 << 10), to: src + "/" + name)
        try pg("import", src)
        return src + "/" + name
    }

    /// Mounts an app's view and returns the mount point.
    func mount(_ app: String, access: String = "read-write", extra: [String] = [], at path: String? = nil) throws -> String {
        let mp = path ?? dir + "/mnt-\(app)-\(access)-\(mounts.count)"
        try FileManager.default.createDirectory(atPath: mp, withIntermediateDirectories: true)
        if !mounts.contains(where: { $0.utf8.elementsEqual(mp.utf8) }) { mounts.append(mp) }
        let o = try TestSupport.run(TestSupport.photogateBinary, ["mount", app, mp, "--access", access] + extra, environment: env)
        if o.status != 0 { throw FixtureError("mount: \(o.status) \(o.stderr)") }
        #expect(isMounted(mp))
        return mp
    }

    /// Unmounts `mp`. A child that another test running in parallel spawned (posix_spawn copies
    /// every descriptor not marked close-on-exec) may still hold a copy of a file this test has
    /// just closed: then photogate rightly answers busy. The fixture waits for such descendants of
    /// this test process (not photogate; a grandchild too: initdb's `sh` and bootstrap `postgres`
    /// inherit the copy initdb got) to exit, on their pidfds, at most 30 s, says so, and tries
    /// again. Any other holder, this test process above all, fails the test, named.
    func unmount(_ mp: String) throws {
        var o = try pgStatus("unmount", mp)
        var waits = 0
        while o.status != 0 {
            let holders = processesHolding(mp)
            let tolerated = !holders.isEmpty && holders.allSatisfy { descendsFromThisProcess($0.parent) && !$0.what.hasPrefix("photogate") }
            guard o.status == 68, tolerated, waits < 3, holders.allSatisfy({ waitForExit($0.pid, seconds: 30) }) else {
                throw FixtureError("photogate unmount \(mp) -> \(o.status): \(o.stderr)held by: \(holders.map { "\($0.pid) \($0.what)" })")
            }
            print("unmount \(mp): busy while a child of the test process held a copy of a descriptor: \(holders.map { "\($0.pid) \($0.what)" }); it has exited, trying again")
            waits += 1
            o = try pgStatus("unmount", mp)
        }
        #expect(!isMounted(mp))
    }

    func assetsJSON(_ extra: String...) throws -> [[String: Any]] {
        let o = try TestSupport.run(TestSupport.photogateBinary, ["assets", "--json"] + extra, environment: env)
        return (try JSONSerialization.jsonObject(with: Data(o.stdout.utf8)) as? [[String: Any]]) ?? []
    }
}

struct FixtureError: Error, CustomStringConvertible {
    var description: String
    init(_ s: String) { description = s }
}

/// The processes with a descriptor, working folder or root inside `mp`, from /proc, with their
/// parent's pid.
func processesHolding(_ mp: String) -> [(pid: pid_t, parent: pid_t, what: String)] {
    var out: [(pid: pid_t, parent: pid_t, what: String)] = []
    func inside(_ link: String) -> Bool { link == mp || link.hasPrefix(mp + "/") }
    for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
        guard let pid = pid_t(entry) else { continue }
        let comm = (TestSupport.readWhole("/proc/\(pid)/comm") ?? "?").trimmingCharacters(in: .whitespacesAndNewlines)
        // /proc/PID/stat: "pid (comm) state ppid ...", comm may hold spaces and parentheses.
        let stat = TestSupport.readWhole("/proc/\(pid)/stat") ?? ""
        let parent = stat.range(of: ")", options: .backwards).map { pid_t(stat[$0.upperBound...].split(separator: " ").dropFirst().first ?? "") ?? 0 } ?? 0
        var links = ["cwd", "root"].map { "/proc/\(pid)/" + $0 }
        for fd in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? [] { links.append("/proc/\(pid)/fd/" + fd) }
        for l in links {
            if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: l), inside(target) {
                out.append((pid, parent, "\(comm) \(l) -> \(target)"))
            }
        }
    }
    return out
}

/// Whether `parent` is this test process or one of its descendants, by /proc's parent links.
func descendsFromThisProcess(_ parent: pid_t) -> Bool {
    var p = parent, steps = 0
    while p > 1, steps < 64 {
        if p == getpid() { return true }
        let stat = TestSupport.readWhole("/proc/\(p)/stat") ?? ""
        guard let close = stat.range(of: ")", options: .backwards),
              let up = pid_t(stat[close.upperBound...].split(separator: " ").dropFirst().first ?? "") else { return false }
        p = up
        steps += 1
    }
    return false
}

/// Waits on a pidfd until `pid` has exited (true), or `seconds` pass (false). A pid already gone
/// counts as exited.
func waitForExit(_ pid: pid_t, seconds: Int32) -> Bool {
    let fd = cs_pidfd_open(pid)
    if fd < 0 { return errno == ESRCH }
    defer { close(fd) }
    var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    var r: Int32
    repeat { r = poll(&p, 1, seconds * 1000) } while r < 0 && errno == EINTR
    return r == 1
}

func isMounted(_ path: String) -> Bool {
    guard let text = TestSupport.readWhole("/proc/mounts") else { return false }
    // Byte for byte: String's == would take `cafe` + U+0301 for `café`, another folder.
    return text.split(separator: "\n").contains { $0.split(separator: " ").dropFirst().first?.utf8.elementsEqual(path.utf8) ?? false }
}

func listing(_ dir: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0 != ".photogate" }.sorted()
}

/// errno of a syscall that should fail (0 if it succeeded).
func errnoOf(_ body: () -> Int32) -> Int32 {
    errno = 0
    let r = body()
    return r < 0 ? errno : 0
}

func statErrno(_ path: String) -> Int32 { errnoOf { var st = stat(); return stat(path, &st) } }

func openErrno(_ path: String, _ flags: Int32, _ mode: mode_t = 0o644) -> Int32 {
    errnoOf {
        let fd = open(path, flags, mode)
        if fd >= 0 { close(fd) }
        return fd
    }
}

/// The whole file, or nil. Opened close-on-exec: Foundation's `contents(atPath:)` opens without
/// O_CLOEXEC, so a child another test spawned meanwhile (suites run in parallel in one process)
/// kept a descriptor in this test's mount, whose unmount then failed as busy.
func readAll(_ path: String) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var out: [UInt8] = []
    var buf = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 { if errno == EINTR { continue }; return nil }
        if n == 0 { return out }
        out += buf[0..<n]
    }
}

func inode(_ path: String) -> UInt64? {
    var st = stat()
    return stat(path, &st) == 0 ? UInt64(st.st_ino) : nil
}

