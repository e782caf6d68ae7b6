import Confined
import FUSE
import Foundation
import PhotoLibrary
import Redaction
import Synchronization
import Threads
#if canImport(Glibc)
import Glibc
#endif

/// The JPEGs of compatible views (issue 37; PhotoKit's `.compatible` representation, iOS's
/// "Transfer to Mac or PC: Automatic"): an app with the `compatible` option reads each HEIF photo
/// it did not create as a JPEG, which this type makes with libvips (`vips thumbnail_source`, HEIC
/// through its libheif) and keeps in the library's cache (`CompatibleCache`).
///
/// - Its size is what the kernel is told (`stat`, and `cp` or `rsync` compare it with what they
///   read), so the JPEG is made before its size is first reported: at the lookup or GETATTR that
///   asks it (the request waits), and then read from the cache. A JPEG encoder's output size
///   cannot be computed without encoding. A listing does not make them (its entries of JPEGs
///   not made yet carry no cache time, so a `stat` asks again).
/// - Upright and in sRGB: libheif applies the HEIF transforms (`irot`, `imir`), which are what
///   says how a HEIF is turned (its EXIF orientation is informative only, and libvips drops it:
///   the JPEG's says 1, so no viewer turns the pixels twice); the embedded profile (Display P3 on
///   iPhones) is converted to sRGB, which the JPEG carries. The EXIF (capture date, camera) is carried over; XMP is not
///   (libvips 8.14 does not carry a HEIF's XMP). Quality 90, no resizing.
/// - Strip-location: the app's JPEG is another file (`-nogps`), its location zeroed by the same
///   planner as every redacted read (Redaction), checked before it is kept; a JPEG whose
///   location cannot be found with confidence is not served.
/// - The decoder parses a file apps may have written: it runs confined (`Confined`: bubblewrap,
///   prlimit, timeout), two at a time per daemon, each on a thread of its own, never holding a
///   lock of the mount. A request for a JPEG not made yet waits for it (bounded by the decoder's
///   time limit and the requests ahead of it, at most the mount's FUSE threads); requests for
///   anything else go on, on the mount's other threads. Two requests for the same JPEG wait for
///   one conversion.
/// - A version the decoder fails on (not an image it can read, or past its limits) is remembered
///   (`.failed` beside where its JPEG would be) and not tried again: its file shows 0 bytes and
///   opening it fails with EIO.
/// - Made atomically (a temp file, synced, renamed into place); the cache is bounded
///   (`PHOTOGATE_COMPATIBLE_CACHE_MB`, default 4096): past it, the least recently used JPEGs go,
///   and are made again, identical, when asked.
final class CompatibleFiles: @unchecked Sendable {
    let cacheRoot: String
    let log: @Sendable (String) -> Void

    /// One conversion in flight, with the requests waiting for it.
    final class Job: @unchecked Sendable {
        let condition = NSCondition()
        var result: Result<UInt64, Errno>?
    }
    private let jobs = Mutex<[String: Job]>([:])
    /// Conversions running now, and how many may (a decoder takes a core).
    private let running = NSCondition()
    private var runningCount = 0
    let maxRunning = max(1, min(2, ProcessInfo.processInfo.activeProcessorCount))
    /// When the cache was last checked against its bound (monotonic seconds).
    private let lastPrune = Mutex<Double>(-1_000)

    static let memoryLimit = (Int(ProcessInfo.processInfo.environment["PHOTOGATE_THUMB_MEMORY_MB"] ?? "") ?? 3072) << 20
    static let cpuSeconds = 60, wallSeconds = 90
    static let cacheLimit = (UInt64(ProcessInfo.processInfo.environment["PHOTOGATE_COMPATIBLE_CACHE_MB"] ?? "") ?? 4096) << 20

    init(cacheRoot: String, log: @escaping @Sendable (String) -> Void) {
        self.cacheRoot = cacheRoot
        self.log = log
    }

    /// Where one version's JPEG is: its folder and its path.
    struct Place: Sendable {
        let folder: String
        let path: String
        var failed: String { path + ".failed" }
    }

    /// The place of a node's JPEG: the stored file's id is the version (each version is a file of
    /// its own); an original imported in place is refused once it changes, so its path (with its
    /// size and import time) names its one version.
    func place(_ n: AssetNode) -> Place? {
        guard CompatibleCache.isSafe(assetID: n.assetID) else { return nil }
        var version: String
        let base = n.path.split(separator: "/").last.map(String.init) ?? ""
        let fileID = base.split(separator: ".").first.map(String.init) ?? ""
        if n.inStore && fileID.count == 16 && fileID.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }) {
            version = fileID
        } else {
            // FNV-1a: stable across processes and runs (Hasher is seeded per process).
            var h: UInt64 = 0xcbf2_9ce4_8422_2325
            for b in Array(n.path.utf8) + Array("\0\(n.size)\0\(n.ctime)".utf8) { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01b3 }
            version = "r" + String(h, radix: 16)
        }
        let folder = CompatibleCache.folder(cacheRoot, assetID: n.assetID)
        return Place(folder: folder, path: folder + "/" + CompatibleCache.fileName(assetID: n.assetID, version: version, stripped: n.strip))
    }

    /// The JPEG's size when it is made already (nil: not made, or failed). Answers from the cache
    /// only: a listing asks this.
    func sizeIfMade(_ n: AssetNode) -> UInt64? {
        guard let p = place(n) else { return nil }
        var st = stat()
        guard lstat(p.path, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_size > 0 else { return nil }
        return UInt64(st.st_size)
    }

    /// Whether this version failed to convert before (and is not tried again).
    func failedBefore(_ n: AssetNode) -> Bool {
        guard let p = place(n) else { return true }
        return access(p.failed, F_OK) == 0
    }

    /// The node's JPEG: its path and size, made now if needed (the caller waits). `open` opens
    /// the original (the mount's checked open), asked only when a conversion starts; the job
    /// closes it. EIO for a version that cannot be converted.
    func jpeg(_ n: AssetNode, open: () throws(Errno) -> Int32) throws(Errno) -> (path: String, size: UInt64) {
        guard let p = place(n) else { throw .io }
        if let size = sizeIfMade(n) {
            touch(p.path)
            return (p.path, size)
        }
        if access(p.failed, F_OK) == 0 { throw .io }
        let job: Job
        if let existing = jobs.withLock({ $0[p.path] }) {
            job = existing
        } else {
            let fd = try open()
            let (mine, isNew) = jobs.withLock { j -> (Job, Bool) in
                if let other = j[p.path] { return (other, false) }
                let made = Job()
                j[p.path] = made
                return (made, true)
            }
            job = mine
            if isNew {
                let size = n.size
                NativeThread.detached(name: "photogate-jpeg") { [self] in
                    let result = convert(fd, size: size, to: p, name: n.name)
                    FDBudget.mount.close(fd)
                    job.condition.lock()
                    job.result = result
                    job.condition.broadcast()
                    job.condition.unlock()
                    jobs.withLock { j in if j[p.path] === job { j[p.path] = nil } }
                }
            } else {
                FDBudget.mount.close(fd)
            }
        }
        job.condition.lock()
        while job.result == nil { job.condition.wait() }
        let result = job.result!
        job.condition.unlock()
        return (p.path, try result.get())
    }

    /// Makes one JPEG: the decoder (confined) writes a temp file beside the final one, which is
    /// checked (a complete JPEG; its location zeroed for a stripped variant), synced and renamed
    /// into place. A failure of the decoder is remembered; a failure of this side (no space, no
    /// decoder installed) is not.
    private func convert(_ source: Int32, size: UInt64, to p: Place, name: String) -> Result<UInt64, Errno> {
        running.lock()
        while runningCount >= maxRunning { running.wait() }
        runningCount += 1
        running.unlock()
        defer {
            running.lock()
            runningCount -= 1
            running.signal()
            running.unlock()
        }
        for dir in [cacheRoot, CompatibleCache.root(cacheRoot), p.folder] where mkdir(dir, 0o700) != 0 && errno != EEXIST {
            log("compatible: cannot make \(dir): \(String(cString: strerror(errno)))")
            return .failure(.io)
        }
        let temp = p.folder + "/.tmp-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        let out = Glibc.open(temp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard out >= 0 else {
            let e = errno
            log("compatible: cannot write in \(p.folder): \(String(cString: strerror(e)))")
            return .failure(.system(e))
        }
        var keep = false
        defer {
            Glibc.close(out)
            if !keep { unlink(temp) }
        }
        lseek(source, 0, SEEK_SET)
        // thumbnail_source with a box no photo reaches and `--size down`: decoded at full size,
        // upright, converted to sRGB, saved as a JPEG with its EXIF.
        let command = Confined.command(["/usr/bin/vips", "thumbnail_source", "[descriptor=0]", ".jpg[Q=90]", "100000",
                                        "--height", "100000", "--size", "down", "--export-profile", "srgb"],
                                       memoryBytes: CompatibleFiles.memoryLimit, cpuSeconds: CompatibleFiles.cpuSeconds,
                                       wallSeconds: CompatibleFiles.wallSeconds)
        let status = Confined.spawn(command, stdin: source, stdout: out)
        var st = stat()
        guard status == 0, fstat(out, &st) == 0, st.st_size > 0 else {
            // -1: it could not start; 126/127: no decoder to run. Not the photo's fault.
            if status == -1 || status == 126 || status == 127 {
                log("compatible: cannot run the decoder for \(name) (exit \(status)); is libvips-tools installed?")
                return .failure(.io)
            }
            log("compatible: \(name) could not be converted to JPEG (decoder exit \(status)); it is not tried again")
            rememberFailure(p)
            return .failure(.io)
        }
        let length = UInt64(st.st_size)
        // The decoder's output is checked as any file an app hands over: a complete JPEG.
        let scan: MediaScan
        do { scan = try MediaScanner.scan(fd: out, size: length) } catch {
            log("compatible: the JPEG made of \(name) is not one (\(error)); it is not served")
            rememberFailure(p)
            return .failure(.io)
        }
        guard scan.kind == .jpeg else {
            log("compatible: the JPEG made of \(name) is \(scan.kind.rawValue); it is not served")
            rememberFailure(p)
            return .failure(.io)
        }
        if p.path.hasSuffix("-nogps.jpg") {
            switch scan.redaction {
            case .plan(let plan) where !plan.isEmpty:
                guard zero(out, length: length, plan) else {
                    log("compatible: cannot remove the location of the JPEG of \(name)")
                    return .failure(.io)
                }
            case .plan: break
            case .refuse(let why):
                log("compatible: the JPEG of \(name) is not served with strip-location: its metadata cannot be parsed with confidence (\(why))")
                rememberFailure(p)
                return .failure(.io)
            }
        }
        guard fsync(out) == 0, rename(temp, p.path) == 0 else {
            log("compatible: cannot keep the JPEG of \(name): \(String(cString: strerror(errno)))")
            return .failure(.io)
        }
        keep = true
        prune()
        return .success(length)
    }

    /// Applies a redaction plan to a whole file in place.
    private func zero(_ fd: Int32, length: UInt64, _ plan: RedactionPlan) -> Bool {
        guard length < 1 << 31 else { return false }
        var bytes = [UInt8](repeating: 0, count: Int(length))
        let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard n == Int(length) else { return false }
        bytes.withUnsafeMutableBytes { plan.apply(to: $0, fileOffset: 0) }
        let w = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        return w == Int(length)
    }

    private func rememberFailure(_ p: Place) {
        let fd = Glibc.open(p.failed, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        if fd >= 0 { Glibc.close(fd) }
    }

    /// Marks a JPEG used (its modification time, at most once an hour), for the eviction's order.
    private func touch(_ path: String) {
        var st = stat()
        guard stat(path, &st) == 0, time(nil) - st.st_mtim.tv_sec > 3600 else { return }
        utimensat(AT_FDCWD, path, nil, 0)
    }

    /// Keeps the cache within its bound, checked at most once a minute after a new JPEG: the
    /// least recently used go first (a file open in a mount stays readable through its
    /// descriptor; the next open makes it again). Temp files of a daemon that died go too.
    private func prune() {
        let now = Double(DispatchTime.now().uptimeNanoseconds) / 1e9
        let due = lastPrune.withLock { last -> Bool in
            if now - last < 60 { return false }
            last = now
            return true
        }
        guard due else { return }
        let root = CompatibleCache.root(cacheRoot)
        guard let folders = try? FileManager.default.contentsOfDirectory(atPath: root) else { return }
        var files: [(path: String, size: UInt64, used: Int)] = []
        var total: UInt64 = 0
        for folder in folders {
            let dir = root + "/" + folder
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: dir) else { continue }
            for name in names {
                let path = dir + "/" + name
                var st = stat()
                guard lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { continue }
                if name.hasPrefix(".tmp-") {
                    if time(nil) - st.st_mtim.tv_sec > 3 * 3600 { unlink(path) }
                    continue
                }
                guard name.hasSuffix(".jpg") else { continue }
                files.append((path, UInt64(st.st_size), st.st_mtim.tv_sec))
                total += UInt64(st.st_size)
            }
        }
        guard total > CompatibleFiles.cacheLimit else { return }
        for f in files.sorted(by: { $0.used < $1.used }) where total > CompatibleFiles.cacheLimit / 4 * 3 {
            if unlink(f.path) == 0 { total -= f.size }
        }
        log("compatible: the cache was over \(CompatibleFiles.cacheLimit >> 20) MB; the least recently used JPEGs went")
    }
}
