import PGSystem
import Foundation
import PhotoLibrary
import Threads
#if canImport(Glibc)
import Glibc
#endif

/// The content hash of a file being written, computed behind its writes on another thread, so
/// that the close which commits it does not read and hash the whole file again: that hash was
/// the largest part of a close (SHA-256 of a 3 MB photo, ~2.5 ms here, in a ~6.5 ms commit), and
/// the app waits for the close.
///
/// The hash is of the temp file's bytes, read back from it (from the page cache) in order, up to
/// `extent`: the end of the bytes written front to back so far. A write or truncate that could
/// change a byte already hashed (or being hashed) makes the running hash invalid, and the commit
/// then hashes the whole file as before; so do a gap, a truncate that grows the file and a failed
/// write. What `cp`, `rsync`, `tar` and an editor's save (O_TRUNC, then front to back) write is
/// hashed here.
///
/// Locking: `hashing` guards the hasher, `hashed` and `fd`; `state` guards the rest and is held
/// only briefly (a write takes it, never `hashing`). Order: the session's lock, then `hashing`,
/// then `state`. The background thread never takes a session's lock.
final class RunningHash: @unchecked Sendable {
    /// How much the background thread reads and hashes at a time.
    static let chunk = 256 << 10

    private let hashing = NSLock()
    private let hasher: any ContentHasher
    /// Bytes [0, hashed) are in the hasher.
    private var hashed: UInt64 = 0
    /// Its own descriptor of the temp file (the session's is closed at the commit, under the
    /// session's lock, which the background thread does not hold).
    private var fd: Int32

    private let state = NSLock()
    /// Bytes [0, frontier) are hashed or being read to be hashed: a write below it spoils the hash.
    private var frontier: UInt64 = 0
    /// Bytes [0, extent) are the file (written, or copied in before the first write).
    private var extent: UInt64
    private var valid: Bool
    /// On the background thread's queue (or being hashed there).
    private var queued = false

    private let worker: HashWorker

    /// `fd`: the session's temp file, holding `size` bytes now (an edit starts from a copy).
    init(fd: Int32, size: UInt64, hasher: any ContentHasher, worker: HashWorker = .shared) {
        self.fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)
        self.hasher = hasher
        self.worker = worker
        extent = size
        valid = self.fd >= 0
    }

    deinit { if fd >= 0 { Glibc.close(fd) } }

    /// How much is hashed, and how much is hashed or being read to be hashed (for tests).
    var hashedBytes: UInt64 { hashing.withLock { hashed } }
    var claimedBytes: UInt64 { state.withLock { frontier } }

    /// After `count` bytes were written at `offset` (the write has completed).
    func noteWrite(offset: UInt64, count: Int) {
        let wake: Bool = state.withLock {
            guard valid else { return false }
            guard offset >= frontier, offset <= extent else { valid = false; return false }
            extent = max(extent, offset + UInt64(count))
            guard !queued else { return false }
            queued = true
            return true
        }
        if wake { worker.enqueue(self) }
    }

    /// After the file was truncated to `size`. Cut below what is hashed, or grown (zeros the app
    /// did not write: one call would otherwise have this thread hash gigabytes of them), the
    /// running hash is dropped.
    func noteTruncate(to size: UInt64) {
        state.withLock {
            if size < frontier || size > extent { valid = false } else { extent = size }
        }
    }

    /// A write failed part-way: what is in the file is not known.
    func invalidate() { state.withLock { valid = false } }

    /// The file's content hash, when every byte of it went through the running hash in order;
    /// nil otherwise (the caller hashes the file). For the session's commit, once the file is
    /// found to be media (the library calls it after its scan): no write runs meanwhile. The
    /// part not hashed yet is hashed here, on the caller's thread.
    func digest() -> String? {
        hashing.lock()
        defer { hashing.unlock() }
        var st = stat()
        guard fd >= 0, fstat(fd, &st) == 0 else { return nil }
        let size = UInt64(st.st_size)
        guard state.withLock({ valid && extent == size }) else { return nil }
        if hashed < size {
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: RunningHash.chunk, alignment: 64)
            defer { buffer.deallocate() }
            while hashed < size {
                guard step(buffer) else { return nil }
            }
        }
        return hasher.hashSoFar()
    }

    /// The session is over (committed, discarded, or given another temp file): no more hashing.
    func finish() {
        // First, so that the background thread stops at its next chunk rather than catching up.
        state.withLock { valid = false }
        hashing.lock()
        defer { hashing.unlock() }
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }

    /// On the background thread: hashes what has been written since, until it catches up.
    func catchUp(_ buffer: UnsafeMutableRawBufferPointer) {
        hashing.lock()
        defer { hashing.unlock() }
        while step(buffer) {}
    }

    /// Reads and hashes the next chunk up to `extent`; false when there is none (or the hash is
    /// spoilt). Holding `hashing`.
    private func step(_ buffer: UnsafeMutableRawBufferPointer) -> Bool {
        let next: (start: UInt64, end: UInt64)? = state.withLock {
            guard valid, fd >= 0, frontier < extent else { queued = false; return nil }
            let start = frontier
            frontier = min(extent, start + UInt64(min(buffer.count, RunningHash.chunk)))
            return (start, frontier)
        }
        guard let (start, end) = next else { return false }
        precondition(start == hashed)
        let want = Int(end - start)
        var got = 0
        while got < want {
            let n = pread(fd, buffer.baseAddress! + got, want - got, off_t(start) + off_t(got))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { invalidate(); return false }   // an error, or the file is shorter
            got += n
        }
        hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<want]))
        hashed = end
        // The commit fsyncs the file: start writing these bytes to the disk now, while the app
        // writes the rest, so that its close waits for the tail only.
        _ = pg_start_writeback_range(fd, Int64(start), Int64(want))
        return true
    }
}

/// The one thread of the process that hashes files behind their writes (RunningHash). Idle, it
/// waits; the commit of a file finishes its hash itself if this thread has not caught up.
final class HashWorker: @unchecked Sendable {
    static let shared = HashWorker()

    private let condition = NSCondition()
    private var queue: [RunningHash] = []
    private var started = false
    /// Starts the thread with the given body; false when no thread could be made.
    private let spawn: (@escaping @Sendable () -> Void) -> Bool

    init(spawn: @escaping (@escaping @Sendable () -> Void) -> Bool = { body in
        guard let thread = NativeThread.spawn(name: "photogate-hash", body) else { return false }
        thread.detach()
        return true
    }) {
        self.spawn = spawn
    }

    /// Hashes waiting for the thread (for tests).
    var waiting: Int { condition.withLock { queue.count } }

    func enqueue(_ hash: RunningHash) {
        let start: Bool = condition.withLock {
            queue.append(hash)
            defer { started = true }
            condition.signal()
            return !started
        }
        guard start else { return }
        if !spawn({ [self] in loop() }) {
            // No thread to be had (a process or memory limit): each commit hashes its file itself,
            // as the queued ones will; the next file's first write tries again.
            condition.withLock {
                started = false
                queue.removeAll()
            }
        }
    }

    private func loop() {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: RunningHash.chunk, alignment: 64)
        while true {
            condition.lock()
            while queue.isEmpty { condition.wait() }
            let next = queue.removeFirst()
            condition.unlock()
            next.catchUp(buffer)
        }
    }
}
