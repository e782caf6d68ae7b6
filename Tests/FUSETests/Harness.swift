import Dispatch
import FUSE
import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

/// Whether this machine can mount FUSE filesystems at all: /dev/fuse must open read-write and a
/// probe mount must succeed. The suite is disabled (skipped, with this reason) otherwise.
enum FUSEAvailability {
    static let problem: String? = {
        let problem = probe()
        if let problem { FileHandle.standardError.write(Data("FUSETests skipped: \(problem)\n".utf8)) }
        return problem
    }()

    private static func probe() -> String? {
        let fd = open("/dev/fuse", O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { return "/dev/fuse cannot be opened (\(Errno.current))" }
        close(fd)
        do {
            try withMount(ToyFS(), checkLeftovers: false) { _ in }
            return nil
        } catch let error as Errno where [EPERM, EACCES, ENODEV].contains(error.rawValue) {
            return "a probe FUSE mount was refused: \(error)"
        } catch {
            // The machine can mount; what went wrong after is a bug the tests themselves must
            // show (a skip would hide it).
            FileHandle.standardError.write(Data("FUSETests: the probe mount went wrong: \(error)\n".utf8))
            return nil
        }
    }

    static var canMount: Bool { problem == nil }
}

extension MountOptions {
    static func test(readdirplus: Bool = true, passthrough: Bool = true) -> MountOptions {
        MountOptions(fsName: "fusetests", subtype: "toy", threads: 4, passthrough: passthrough,
                     readdirplus: readdirplus)
    }
}

/// A running mount handed to a test body.
struct Mounted {
    let root: String
    let session: FUSESession
    let fs: ToyFS

    func path(_ name: String) -> String { root + "/" + name }

    /// The path of a raw (possibly non-UTF-8) name in the root directory, as C bytes with a NUL.
    func cPath(_ name: [UInt8]) -> [CChar] {
        (Array(root.utf8) + [0x2F] + name + [0]).map { CChar(bitPattern: $0) }
    }
}

struct HarnessError: Error, CustomStringConvertible {
    let description: String
}

func makeTemporaryDirectory() throws -> String {
    var template = Array("/tmp/fusetests-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw HarnessError(description: "mkdtemp: \(Errno.current)") }
    return String(cString: made)
}

/// True while `path` is a mount point in /proc/self/mounts.
func isMounted(_ path: String) -> Bool {
    guard let mounts = TestSupport.readWhole("/proc/self/mounts") else { return false }
    return mounts.split(separator: "\n").contains { line in
        let fields = line.split(separator: " ")
        return fields.count > 1 && fields[1] == path
    }
}

/// Mounts `fs` on a fresh temporary directory, serves it from a dedicated Foundation Thread
/// (not a Swift concurrency task), waits for INIT, runs `body`, and ALWAYS unmounts afterwards —
/// also when `body` throws or a check fails — then checks that `run()` returned promptly and that
/// no mount is left in /proc/self/mounts. A watchdog unmounts after `timeLimit` seconds so a
/// missing reply fails the test (the blocked syscall gets ENOTCONN) instead of hanging it.
/// Returns `run()`'s status.
@discardableResult
func withMount(_ fs: ToyFS, options: MountOptions = .test(), timeLimit: Double = 120,
               checkLeftovers: Bool = true, _ body: (Mounted) throws -> Void) throws -> Int32 {
    let dir = try makeTemporaryDirectory()
    defer { rmdir(dir) }
    let session = try FUSESession(operations: fs, options: options)
    try session.mount(at: dir)

    let finished = DispatchSemaphore(value: 0)
    let status = Mutex<Int32?>(nil)
    let thread = Thread {
        let rc = session.run()
        status.withLock { $0 = rc }
        finished.signal()
    }
    thread.name = "fuse-run"
    thread.start()

    let watchdog = DispatchWorkItem { session.unmount() }
    DispatchQueue.global().asyncAfter(deadline: .now() + timeLimit, execute: watchdog)

    var bodyError: (any Error)?
    if session.waitUntilReady(timeout: 60) {
        do { try body(Mounted(root: dir, session: session, fs: fs)) } catch { bodyError = error }
    } else {
        bodyError = HarnessError(description: "the kernel's INIT was not processed within 60 s")
    }

    watchdog.cancel()
    let unmountStart = DispatchTime.now()
    session.unmount()
    let ended = finished.wait(timeout: .now() + 60) == .success
    if !ended { umount2(dir, Int32(MNT_DETACH)) }  // never leave a dead mount behind
    let seconds = Double(DispatchTime.now().uptimeNanoseconds - unmountStart.uptimeNanoseconds) / 1e9
    if checkLeftovers {
        #expect(ended, "run() did not return within 60 s of unmount()")
        #expect(seconds < 5, "run() took \(seconds) s to return after unmount()")
        #expect(!isMounted(dir), "a mount is left at \(dir)")
    }
    let left = isMounted(dir)
    if left { umount2(dir, Int32(MNT_DETACH)) }  // reported below, and not left behind
    if let bodyError { throw bodyError }
    guard ended else { throw HarnessError(description: "run() did not return") }
    if left { throw HarnessError(description: "mount left at \(dir)") }
    return status.withLock { $0 ?? -1 }
}

// MARK: - Syscall helpers

/// Runs a syscall-like call; returns 0 on success or the errno it set.
func errnoOf(_ call: () -> Int32) -> Int32 {
    errno = 0
    return call() < 0 ? errno : 0
}

func errnoOf(_ call: () -> Int) -> Int32 {
    errno = 0
    return call() < 0 ? errno : 0
}

@discardableResult
func check(_ rc: Int32, _ what: @autoclosure () -> String) throws -> Int32 {
    if rc < 0 { throw HarnessError(description: "\(what()): \(Errno.current)") }
    return rc
}

func fileStat(_ path: String) throws -> stat {
    var st = stat()
    try check(stat(path, &st), "stat \(path)")
    return st
}

func statErrno(_ path: String) -> Int32 {
    var st = stat()
    return errnoOf { stat(path, &st) }
}

/// Reads to the end in `chunk`-sized read(2) calls into a page-aligned buffer (so a direct-I/O
/// read of 1 MiB is exactly 256 pages, one FUSE request).
func readAll(fd: Int32, chunk: Int = 1 << 20) throws -> [UInt8] {
    var out: [UInt8] = []
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: chunk, alignment: 4096)
    defer { buffer.deallocate() }
    while true {
        let n = Glibc.read(fd, buffer, chunk)
        if n < 0 { throw HarnessError(description: "read: \(Errno.current)") }
        if n == 0 { return out }
        out += UnsafeRawBufferPointer(start: buffer, count: n)
    }
}

func readFile(_ path: String, chunk: Int = 1 << 20) throws -> [UInt8] {
    let fd = try check(open(path, O_RDONLY), "open \(path)")
    defer { close(fd) }
    return try readAll(fd: fd, chunk: chunk)
}

func writeAll(fd: Int32, _ data: [UInt8], chunk: Int = 128 << 10) throws {
    var offset = 0
    while offset < data.count {
        let n = data.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, min(chunk, data.count - offset)) }
        if n < 0 { throw HarnessError(description: "write: \(Errno.current)") }
        offset += n
    }
}

/// Names in a directory, via opendir/readdir(3), as raw bytes ("." and ".." excluded).
func listDirectory(_ path: [CChar]) throws -> [[UInt8]] {
    guard let dir = path.withUnsafeBufferPointer({ opendir($0.baseAddress!) }) else {
        throw HarnessError(description: "opendir: \(Errno.current)")
    }
    defer { closedir(dir) }
    var names: [[UInt8]] = []
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw -> [UInt8] in
            Array(raw.prefix { $0 != 0 })
        }
        if name != [0x2E] && name != [0x2E, 0x2E] { names.append(name) }
    }
    return names
}

func listDirectory(_ path: String) throws -> [String] {
    try listDirectory(Array(path.utf8CString)).map { String(decoding: $0, as: UTF8.self) }
}

/// Runs a tool, returns (exit status, stdout). The tool's requests are served by this process.
func runTool(_ executable: String, _ arguments: [String]) throws -> (Int32, String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

/// libc functions Swift's Glibc module does not show (they sit behind _GNU_SOURCE or in
/// <sys/xattr.h>), looked up at run time.
enum LibC {
    private static func symbol<T>(_ name: String, as type: T.Type) -> T {
        guard let sym = dlsym(nil, name) else { fatalError("\(name) not found in libc") }
        return unsafeBitCast(sym, to: type)
    }
    typealias Renameat2 = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32
    typealias GetXattr = @convention(c) (UnsafePointer<CChar>, UnsafePointer<CChar>, UnsafeMutableRawPointer?, Int) -> Int
    typealias SetXattr = @convention(c) (UnsafePointer<CChar>, UnsafePointer<CChar>, UnsafeRawPointer?, Int, Int32) -> Int32
    typealias ListXattr = @convention(c) (UnsafePointer<CChar>, UnsafeMutablePointer<CChar>?, Int) -> Int

    static var renameat2: Renameat2 { symbol("renameat2", as: Renameat2.self) }
    static var getxattr: GetXattr { symbol("getxattr", as: GetXattr.self) }
    static var setxattr: SetXattr { symbol("setxattr", as: SetXattr.self) }
    static var listxattr: ListXattr { symbol("listxattr", as: ListXattr.self) }
}

/// Deterministic pseudo-random bytes.
func patternBytes(_ count: Int, seed: UInt64) -> [UInt8] {
    var x = seed | 1
    return (0..<count).map { _ in
        x ^= x << 13
        x ^= x >> 7
        x ^= x << 17
        return UInt8(truncatingIfNeeded: x)
    }
}

func monotonicSeconds() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

