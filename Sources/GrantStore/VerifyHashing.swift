import Dispatch
import PGSystem
import Foundation
import GRDB
import PhotoLibrary
import Synchronization
import Threads
#if canImport(Glibc)
import Glibc
#endif

/// Hashing the store for `verify`: a pool of threads, one buffer each.
struct HashJob: Sendable {
    var path: String
    var expectedSize: UInt64?
    /// A referenced original (opened as every reader opens one: `pg_open_original`).
    var reference: Bool
}

struct HashResult: Sendable {
    /// "sha256:<hex>"; nil when the file could not be read, or its size already differs.
    var hash: String?
    var size: UInt64 = 0
    var mode: mode_t = 0
    var error: Int32 = 0

    func mismatch(_ a: Verifier.CatalogEntry) -> String {
        if error != 0 { return "cannot read it: \(String(cString: strerror(error)))" }
        if size != a.size { return "\(size) bytes where the catalog says \(a.size)" }
        return "its bytes hash to \(hash ?? "?") where the catalog says \(a.hash)"
    }
}

/// Hashes files on worker threads; results in the jobs' order.
final class HashPool: @unchecked Sendable {
    let jobs: [HashJob]
    let results: UnsafeMutableBufferPointer<HashResult>
    let next = Atomic<Int>(0)
    let done = Atomic<Int>(0)
    let bytes = Atomic<UInt64>(0)

    init(_ jobs: [HashJob]) {
        self.jobs = jobs
        results = .allocate(capacity: jobs.count)
        results.initialize(repeating: HashResult())
    }

    deinit {
        _ = results.deinitialize()
        results.deallocate()
    }

    static func run(_ jobs: [HashJob], threads: Int, progress: (VerifyProgress) -> Void) -> [HashResult] {
        let pool = HashPool(jobs)
        let total = jobs.reduce(UInt64(0)) { $0 + ($1.expectedSize ?? 0) }
        let n = max(1, min(threads, jobs.count))
        // Each worker signals once when it runs out of jobs; progress is reported every 100 ms
        // until all have. A worker that could not be started is run here instead.
        let finished = DispatchSemaphore(value: 0)
        var workers: [NativeThread] = []
        for _ in 0..<n {
            if let t = NativeThread.spawn(name: "photogate-verify", { pool.work(); finished.signal() }) {
                workers.append(t)
            }
        }
        if workers.isEmpty { pool.work() }
        var left = workers.count
        while left > 0 {
            if finished.wait(timeout: .now() + .milliseconds(100)) == .success {
                left -= 1
                continue
            }
            progress(VerifyProgress(filesDone: pool.done.load(ordering: .relaxed), filesTotal: jobs.count,
                                    bytesDone: pool.bytes.load(ordering: .relaxed), bytesTotal: total))
        }
        for t in workers { t.join() }
        progress(VerifyProgress(filesDone: jobs.count, filesTotal: jobs.count, bytesDone: pool.bytes.load(ordering: .relaxed), bytesTotal: total))
        return Array(pool.results)
    }

    func work() {
        let buf = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { buf.deallocate() }
        while true {
            let i = next.add(1, ordering: .relaxed).oldValue
            if i >= jobs.count { return }
            let r = HashPool.hash(jobs[i].path, expectedSize: jobs[i].expectedSize, reference: jobs[i].reference, buffer: buf)
            results[i] = r
            if r.hash != nil { bytes.add(r.size, ordering: .relaxed) }
            done.add(1, ordering: .relaxed)
        }
    }

    static func hash(_ path: String, expectedSize: UInt64?, reference: Bool) -> HashResult {
        let buf = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { buf.deallocate() }
        return hash(path, expectedSize: expectedSize, reference: reference, buffer: buf)
    }

    /// SHA-256 of a regular file (libcrypto, with the CPU's SHA extensions); the size first, so a
    /// file of the wrong size is not read at all.
    static func hash(_ path: String, expectedSize: UInt64?, reference: Bool, buffer buf: UnsafeMutableRawBufferPointer) -> HashResult {
        let fd = pg_open_original(path, reference ? 1 : 0)
        guard fd >= 0 else { return HashResult(hash: nil, error: errno) }
        defer { Glibc.close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return HashResult(hash: nil, error: errno) }
        var r = HashResult(hash: nil, size: UInt64(st.st_size), mode: st.st_mode & 0o7777)
        guard (st.st_mode & S_IFMT) == S_IFREG else { r.error = EISDIR; return r }
        if let e = expectedSize, e != r.size { return r }
        let h = SHA256()
        var off: off_t = 0
        while true {
            let n = pread(fd, buf.baseAddress, buf.count, off)
            if n < 0 { if errno == EINTR { continue }; r.error = errno; return r }
            if n == 0 { break }
            h.update(UnsafeRawBufferPointer(rebasing: buf[0..<n]))
            off += off_t(n)
        }
        r.size = UInt64(off)
        r.hash = "sha256:" + hexString(h.finalize())
        return r
    }
}
