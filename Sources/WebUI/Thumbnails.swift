import Confined
import Foundation
import GrantStore
import PhotoLibrary
import PGSystem
import Redaction
import Synchronization
import Threads
#if canImport(Glibc)
import Glibc
#endif

/// Thumbnails and previews for the web app (issue 35), made by libvips (`vips thumbnail_source`,
/// HEIC through its libheif) and by ffmpeg for a video's poster frame, never carrying metadata
/// (libvips' `strip`, ffmpeg's `-map_metadata -1`: no GPS in a thumbnail). The decoders parse files
/// apps wrote, so they run in a bubblewrap sandbox with no network, no writable file, and nothing
/// of the filesystem but /usr: the original arrives as their standard input (opened with the
/// library's checked open), the JPEG leaves on standard output.
///
/// Cached inside the library (`thumbs/`, 0700; files 0600), keyed by the version's content hash,
/// so an edit or a revert shows the new version. Made on demand, what is on screen first (newest
/// request first), by as many workers as cores; `warmAll` makes the rest ahead in the background.
public final class Thumbnailer: @unchecked Sendable {
    public enum Size: String, Sendable, CaseIterable {
        case small, large
        var pixels: Int { self == .small ? 320 : 1600 }
    }

    let library: Library
    let cacheDir: String
    private struct Job {
        var asset: Asset
        var size: Size
        var done: [@Sendable (Result<[UInt8], any Error>) -> Void]
    }
    private struct State {
        var waiting: [String: Job] = [:]    // key -> job
        var order: [String] = []            // newest last: served first
        var background: [Asset] = []
        var backgroundDone = 0
        var backgroundTotal = 0
        var stopped = false
    }
    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    private var workers: [NativeThread] = []
    let sandbox: [String]

    public init(library: Library, workers count: Int = max(1, min(4, ProcessInfo.processInfo.activeProcessorCount))) throws {
        self.library = library
        cacheDir = library.paths.root + "/thumbs"
        if mkdir(cacheDir, 0o700) != 0 && errno != EEXIST {
            throw LibraryError.io("cannot make \(cacheDir): \(String(cString: strerror(errno)))")
        }
        chmod(cacheDir, 0o700)
        sandbox = Thumbnailer.sandboxPrefix()
        for i in 0..<count {
            if let t = NativeThread.spawn(name: "photogate-thumb-\(i)", { [self] in work() }) { workers.append(t) }
        }
    }

    /// bubblewrap around each decoder where it is installed (it is for `photogate run`); without
    /// it the decoders run unconfined as this user, and the server says so once.
    static func sandboxPrefix() -> [String] { Confined.sandboxPrefix() }

    public var sandboxed: Bool { !sandbox.isEmpty }

    /// What one decoder may use: a file apps wrote may be made to take gigabytes or minutes (an
    /// 8192x8192 video of 232 KB took 6.6 GB and 45 s). Address space and CPU time by prlimit
    /// around the sandbox, wall time by timeout inside it; a decoder past them is killed and the
    /// photo shows the placeholder.
    static let memoryLimit = (Int(ProcessInfo.processInfo.environment["PHOTOGATE_THUMB_MEMORY_MB"] ?? "") ?? 3072) << 20
    static let cpuSeconds = 60, wallSeconds = 90

    /// The decoder's command line, limited and sandboxed.
    func confined(_ command: [String]) -> [String] {
        let limits = access("/usr/bin/prlimit", X_OK) == 0
            ? ["/usr/bin/prlimit", "--as=\(Thumbnailer.memoryLimit)", "--cpu=\(Thumbnailer.cpuSeconds)", "--"] : []
        let timer = access("/usr/bin/timeout", X_OK) == 0 ? ["/usr/bin/timeout", "-s", "KILL", "\(Thumbnailer.wallSeconds)"] : []
        return limits + sandbox + timer + command
    }

    func cachePath(_ asset: Asset, _ size: Size) -> String {
        let hash = asset.contentHash.split(separator: ":").last.map(String.init) ?? asset.id
        return "\(cacheDir)/\(hash.prefix(2))/\(hash)-\(size.rawValue).jpg"
    }

    /// The thumbnail of the asset's current version: from the cache, or made now (before the
    /// background's).
    public func image(_ asset: Asset, _ size: Size) async throws -> [UInt8] {
        let path = cachePath(asset, size)
        if let bytes = Thumbnailer.readFile(path) { return bytes }
        return try await withCheckedThrowingContinuation { (c: CheckedContinuation<[UInt8], any Error>) in
            enqueue(asset, size) { c.resume(with: $0) }
        }
    }

    private func enqueue(_ asset: Asset, _ size: Size, _ done: @escaping @Sendable (Result<[UInt8], any Error>) -> Void) {
        let key = cachePath(asset, size)
        state.withLock { s in
            if var j = s.waiting[key] {
                j.done.append(done)
                s.waiting[key] = j
                s.order.removeAll { $0 == key }
            } else {
                s.waiting[key] = Job(asset: asset, size: size, done: [done])
            }
            s.order.append(key)
        }
        wake.signal()
    }

    /// Makes every missing small thumbnail in the background, newest first, after what is asked.
    public func warmAll(_ assets: [Asset]) {
        state.withLock { s in
            s.background = assets.reversed()   // popped from the end: newest first
            s.backgroundTotal = assets.count
            s.backgroundDone = 0
        }
        for _ in workers { wake.signal() }
    }

    /// Background progress: made (or found cached) so far, of how many.
    public var progress: (done: Int, total: Int) { state.withLock { ($0.backgroundDone, $0.backgroundTotal) } }

    /// No more work. Decoders running now are not waited for: they die with this process
    /// (bubblewrap's --die-with-parent), or by their time limit.
    public func stop() {
        state.withLock { $0.stopped = true }
        for _ in workers { wake.signal() }
    }

    /// Photos are decoded in batches (up to `batchSize` in one decoder process: a process per
    /// photo spent most of its time starting libvips); videos one by one.
    static let batchSize = 16

    private func work() {
        while true {
            enum Next { case jobs([Job]), warm([Asset]), idle, stop }
            let next: Next = state.withLock { s in
                if s.stopped { return .stop }
                if let key = s.order.popLast(), let first = s.waiting.removeValue(forKey: key) {
                    var jobs = [first]
                    // Photos of the same size asked meanwhile go with it (newest asked first).
                    if first.asset.mediaClass != .video {
                        while jobs.count < Thumbnailer.batchSize, let i = s.order.lastIndex(where: { k in
                            s.waiting[k].map { $0.size == first.size && $0.asset.mediaClass != .video } ?? false
                        }) {
                            let k = s.order.remove(at: i)
                            if let j = s.waiting.removeValue(forKey: k) { jobs.append(j) }
                        }
                    }
                    return .jobs(jobs)
                }
                var warm: [Asset] = []
                while warm.count < Thumbnailer.batchSize, let a = s.background.popLast() {
                    if s.waiting[cachePath(a, .small)] != nil { s.backgroundDone += 1; continue }   // asked for: made as a job
                    warm.append(a)
                }
                return warm.isEmpty ? .idle : .warm(warm)
            }
            switch next {
            case .stop: return
            case .idle: wake.wait()
            case .jobs(let jobs):
                let results = make(jobs.map { ($0.asset, $0.size) })
                for (j, r) in zip(jobs, results) { for d in j.done { d(r) } }
            case .warm(let assets):
                let missing = assets.filter { access(cachePath($0, .small), R_OK) != 0 && access(cachePath($0, .small) + ".failed", F_OK) != 0 }
                var photos: [(Asset, Size)] = []
                for a in missing {
                    if a.mediaClass == .video { _ = make([(a, .small)]) } else { photos.append((a, .small)) }
                }
                if !photos.isEmpty { _ = make(photos) }
                state.withLock { $0.backgroundDone += assets.count }
            }
        }
    }

    /// Makes (or finds) thumbnails: photos of one size in one decoder process, each original its
    /// own descriptor, each thumbnail written into a private folder and moved into the cache
    /// once complete and non-empty; a video by ffmpeg alone. One result per item, in order.
    func make(_ items: [(Asset, Size)]) -> [Result<[UInt8], any Error>] {
        if items.count == 1 || items.contains(where: { $0.0.mediaClass == .video }) {
            return items.map { a, size in Result { try make(a, size) } }
        }
        var results = [Result<[UInt8], any Error>](repeating: .failure(LibraryError.io("not made")), count: items.count)
        var opened: [(index: Int, fd: Int32)] = []
        defer { for o in opened { close(o.fd) } }
        for (i, (asset, size)) in items.enumerated() {
            if let bytes = Thumbnailer.readFile(cachePath(asset, size)) { results[i] = .success(bytes); continue }
            if access(cachePath(asset, size) + ".failed", F_OK) == 0 { results[i] = .failure(LibraryError.badInput("no thumbnail (it failed before)")); continue }
            do { opened.append((i, Thumbnailer.decodable(try library.openCurrentOriginal(asset), asset))) } catch { results[i] = .failure(error) }
        }
        guard !opened.isEmpty else { return results }
        let out = cacheDir + "/.batch-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        guard mkdir(out, 0o700) == 0 else { return results }
        defer { try? FileManager.default.removeItem(atPath: out) }
        let px = items[0].1.pixels
        // Inside the sandbox the folder is /out; without one, the folder itself.
        let target = sandbox.isEmpty ? out : "/out"
        let inputs = opened.indices.map { "/proc/self/fd/\(3 + $0)" }
        let limits = access("/usr/bin/prlimit", X_OK) == 0
            ? ["/usr/bin/prlimit", "--as=\(Thumbnailer.memoryLimit)", "--cpu=\(Thumbnailer.cpuSeconds)", "--"] : []
        let timer = access("/usr/bin/timeout", X_OK) == 0 ? ["/usr/bin/timeout", "-s", "KILL", "\(Thumbnailer.wallSeconds)"] : []
        let command = limits + (sandbox.isEmpty ? [] : Array(sandbox.dropLast()) + ["--bind", out, "/out", "--"]) + timer
            + ["/usr/bin/vipsthumbnail"] + inputs + ["--size", "\(px)x\(px)>", "-o", "\(target)/%s.jpg[Q=82,strip]"]
        _ = Thumbnailer.spawn(command, stdin: -1, stdout: -1, extra: opened.map(\.fd))
        for (n, o) in opened.enumerated() {
            let (asset, size) = items[o.index]
            let made = "\(out)/\(3 + n).jpg"
            let path = cachePath(asset, size)
            let dir = String(path[..<path.lastIndex(of: "/")!])
            if mkdir(dir, 0o700) != 0 && errno != EEXIST { results[o.index] = .failure(LibraryError.io("cannot make \(dir)")); continue }
            if Thumbnailer.readFile(made) != nil, rename(made, path) == 0, let bytes = Thumbnailer.readFile(path) {
                results[o.index] = .success(bytes)
            } else {
                // One file that kills the decoder (past its limits) must not cost the others of
                // its batch their thumbnails: each missing one is tried alone, and only a file
                // that fails alone is remembered as failed.
                results[o.index] = Result { try make(asset, size) }
            }
        }
        return results
    }

    /// Makes (or finds) one thumbnail: the decoder in its sandbox, its output into a temp file
    /// beside the final one, renamed into place once complete and non-empty.
    func make(_ asset: Asset, _ size: Size) throws -> [UInt8] {
        let path = cachePath(asset, size)
        if let bytes = Thumbnailer.readFile(path) { return bytes }
        if access(path + ".failed", F_OK) == 0 { throw LibraryError.badInput("no thumbnail for \(asset.displayName) (it failed before)") }
        let dir = String(path[..<path.lastIndex(of: "/")!])
        if mkdir(dir, 0o700) != 0 && errno != EEXIST { throw LibraryError.io("cannot make \(dir)") }
        let fd = Thumbnailer.decodable(try library.openCurrentOriginal(asset), asset)
        defer { close(fd) }
        let temp = dir + "/.tmp-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        let out = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard out >= 0 else { throw LibraryError.io("cannot write a thumbnail in \(dir)") }
        defer { unlink(temp) }
        let px = size.pixels
        let command: [String]
        if asset.mediaClass == .video {
            command = ["/usr/bin/ffmpeg", "-nostdin", "-loglevel", "error", "-i", "file:/dev/stdin", "-frames:v", "1",
                       "-vf", "scale=\(px):\(px):force_original_aspect_ratio=decrease,thumbnail=30", "-map_metadata", "-1",
                       "-f", "mjpeg", "-q:v", "4", "pipe:1"]
        } else {
            command = ["/usr/bin/vips", "thumbnail_source", "[descriptor=0]", ".jpg[Q=82,strip]", "\(px)", "--height", "\(px)",
                       "--size", "down"]
        }
        let status = Thumbnailer.spawn(confined(command), stdin: fd, stdout: out)
        var st = stat()
        let ok = status == 0 && fstat(out, &st) == 0 && st.st_size > 0
        close(out)
        guard ok else {
            Thumbnailer.rememberFailure(path)
            throw LibraryError.badInput("no thumbnail for \(asset.displayName) (\(asset.mediaKind)): the decoder exited \(status)")
        }
        guard rename(temp, path) == 0, let bytes = Thumbnailer.readFile(path) else {
            throw LibraryError.io("cannot keep the thumbnail of \(asset.displayName)")
        }
        return bytes
    }

    static let raws: Set<String> = ["dng", "cr2", "nef", "arw", "orf", "rw2", "cr3"]

    /// What the decoder reads for an original: the original itself, or for a camera raw its
    /// largest embedded JPEG preview (libvips decodes few raws), copied into an in-memory file.
    /// Takes the descriptor; returns the one to use.
    static func decodable(_ fd: Int32, _ asset: Asset) -> Int32 {
        guard raws.contains(asset.mediaKind), let (offset, length) = RawPreview.locate(fd: fd, size: asset.byteSize),
              length <= 64 << 20 else { return fd }
        let mem = pg_memfd("photogate-raw-preview")
        guard mem >= 0 else { return fd }
        var copied: UInt64 = 0
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while copied < length {
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, min($0.count, Int(length - copied)), off_t(offset + copied)) }
            guard n > 0, buffer.withUnsafeBytes({ write(mem, $0.baseAddress, n) }) == n else { close(mem); return fd }
            copied += UInt64(n)
        }
        close(fd)
        lseek(mem, 0, SEEK_SET)
        return mem
    }

    /// Runs a command with these descriptors as its standard input and output (stderr to
    /// /dev/null), waits, and returns its exit status (-1: it could not start).
    static func spawn(_ argv: [String], stdin: Int32, stdout: Int32, extra: [Int32] = []) -> Int32 {
        Confined.spawn(argv, stdin: stdin, stdout: stdout, extra: extra)
    }

    /// A version that could not be thumbnailed is not tried again (by content hash: a new
    /// version is tried).
    static func rememberFailure(_ path: String) {
        let dir = String(path[..<path.lastIndex(of: "/")!])
        mkdir(dir, 0o700)
        let fd = open(path + ".failed", O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        if fd >= 0 { close(fd) }
    }

    static func readFile(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_size > 0, st.st_size < 64 << 20 else { return nil }
        var out = [UInt8](repeating: 0, count: Int(st.st_size))
        var got = 0
        while got < out.count {
            let n = out.withUnsafeMutableBytes { read(fd, $0.baseAddress! + got, $0.count - got) }
            if n <= 0 { return nil }
            got += n
        }
        return out
    }
}
