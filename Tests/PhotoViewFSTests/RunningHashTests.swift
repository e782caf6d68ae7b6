import Foundation
import Testing
@testable import PhotoViewFS
#if canImport(Glibc)
import Glibc
#endif

/// The content hash computed behind an app's writes (RunningHash): it is the hash of the file's
/// final bytes, or nothing (the commit then hashes the file); never the hash of other bytes.
@Suite struct RunningHashTests {
    /// A temp file and a running hash of it, written through `write`/`truncate` as the mount does.
    final class Subject: @unchecked Sendable {
        let path: String
        let fd: Int32
        let hash: RunningHash

        init(initial: [UInt8] = [], worker: HashWorker = .shared) throws {
            let base = ProcessInfo.processInfo.environment["PHOTOGATE_TEST_TMP"] ?? NSTemporaryDirectory()
            path = base + "/running-hash-\(UUID().uuidString.prefix(8))"
            let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw POSIXError(.EIO) }
            if !initial.isEmpty { _ = initial.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) } }
            self.fd = fd
            hash = RunningHash(fd: fd, size: UInt64(initial.count), hasher: BytesHasher(), worker: worker)
        }

        deinit {
            hash.finish()
            close(fd)
            unlink(path)
        }

        func write(_ bytes: [UInt8], at offset: Int) {
            let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }
            precondition(n == bytes.count)
            hash.noteWrite(offset: UInt64(offset), count: n)
        }

        func truncate(_ size: Int) {
            precondition(ftruncate(fd, off_t(size)) == 0)
            hash.noteTruncate(to: UInt64(size))
        }

        var bytes: [UInt8] {
            var st = stat()
            fstat(fd, &st)
            var out = [UInt8](repeating: 0, count: Int(st.st_size))
            _ = out.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
            return out
        }

        /// The file's own hash, as the running hash would give it.
        var fileHash: String { BytesHasher.hash(bytes) }
    }

    static func noise(_ n: Int, seed: UInt64) -> [UInt8] {
        var x = seed | 1
        return (0..<n).map { _ in x ^= x << 13; x ^= x >> 7; x ^= x << 17; return UInt8(truncatingIfNeeded: x) }
    }

    /// What cp writes (front to back, 128 KiB at a time) is hashed, behind the writes and then at
    /// the commit, to the file's hash.
    @Test func writesFrontToBackGiveTheFilesHash() throws {
        let s = try Subject()
        let data = Self.noise(3 << 20 | 12345, seed: 1)
        var off = 0
        while off < data.count {
            let n = min(128 << 10, data.count - off)
            s.write(Array(data[off..<off + n]), at: off)
            off += n
        }
        #expect(s.hash.digest() == BytesHasher.hash(data))
        // Asked again (a commit refused, retried at the last release): the same answer.
        #expect(s.hash.digest() == BytesHasher.hash(data))
    }

    /// A write over bytes already hashed (here by a commit attempt that was refused: the file was
    /// not complete media yet) spoils the running hash: the commit must hash the file itself.
    @Test func aWriteOverHashedBytesSpoilsIt() throws {
        let s = try Subject()
        s.write(Self.noise(600_000, seed: 2), at: 0)
        #expect(s.hash.digest() == s.fileHash)
        s.write(Array("JFIF".utf8), at: 6)
        #expect(s.hash.digest() == nil)
        // And stays spoilt, whatever follows.
        s.write(Self.noise(1000, seed: 3), at: 600_000)
        #expect(s.hash.digest() == nil)
    }

    /// A write past the end (a hole) spoils it too: the hole's zeros were never written.
    @Test func aGapSpoilsIt() throws {
        let s = try Subject()
        s.write(Self.noise(100, seed: 4), at: 0)
        s.write(Self.noise(100, seed: 5), at: 200)
        #expect(s.hash.digest() == nil)
    }

    /// An editor's save over a copy of the current version: open(O_TRUNC) truncates to 0 before
    /// the first write, then writes front to back: hashed.
    @Test func aTruncateToZeroBeforeTheFirstWriteStartsAfresh() throws {
        let s = try Subject(initial: Self.noise(300_000, seed: 6))
        s.truncate(0)
        let data = Self.noise(400_000, seed: 7)
        s.write(Array(data[0..<200_000]), at: 0)
        s.write(Array(data[200_000...]), at: 200_000)
        #expect(s.hash.digest() == BytesHasher.hash(data))
    }

    /// An in-place edit of a copy (no truncate): the copied bytes are hashed from the file, with
    /// the written ones, as long as nothing hashed is written over.
    @Test func anEditOfACopyHashesTheCopiedBytesToo() throws {
        let s = try Subject(initial: Self.noise(300_000, seed: 8))
        s.write(Self.noise(50_000, seed: 9), at: 300_000)
        #expect(s.hash.digest() == s.fileHash)
    }

    /// A truncate below what was hashed spoils it, and so does one that grows the file: zeros the
    /// app did not write, which one call could make gigabytes of for the thread to hash.
    @Test func truncatesBelowTheHashedPartOrPastTheEndSpoilIt() throws {
        let grown = try Subject()
        grown.write(Self.noise(1000, seed: 10), at: 0)
        grown.truncate(5000)
        #expect(grown.hash.digest() == nil)

        let cut = try Subject()
        cut.write(Self.noise(300_000, seed: 11), at: 0)
        #expect(cut.hash.digest() != nil)
        cut.truncate(100)
        #expect(cut.hash.digest() == nil)
    }

    /// Random writes, truncates and commit attempts, with the background thread hashing as it
    /// goes: the answer is always the file's hash or nothing, and a file written front to back
    /// always gets its hash.
    @Test func randomWritesNeverGiveAWrongHash() throws {
        var rng = SystemRandomNumberGenerator()
        for round in 0..<30 {
            let s = try Subject()
            let sequentialOnly = round % 3 == 0
            var end = 0
            for step in 0..<40 {
                let r = Int.random(in: 0..<10, using: &rng)
                if sequentialOnly || r < 6 {
                    let n = Int.random(in: 1...(64 << 10), using: &rng)
                    s.write(Self.noise(n, seed: UInt64(round * 100 + step)), at: end)
                    end += n
                } else if r < 8 {
                    let at = Int.random(in: 0...max(0, end), using: &rng)
                    let n = Int.random(in: 1...4096, using: &rng)
                    s.write(Self.noise(n, seed: UInt64(round * 100 + step) | 1 << 40), at: at)
                    end = max(end, at + n)
                } else if r < 9 {
                    end = Int.random(in: 0...(end + 4096), using: &rng)
                    s.truncate(end)
                } else if let d = s.hash.digest() {
                    #expect(d == s.fileHash, "round \(round) step \(step)")
                }
            }
            let d = s.hash.digest()
            #expect(d == nil || d == s.fileHash, "round \(round)")
            if sequentialOnly { #expect(d == s.fileHash, "round \(round): written front to back") }
        }
    }

    /// `finish` (an unlink or a refused close drops the file, under the file's lock) stops the
    /// background thread at its next chunk instead of waiting for it to hash all that was written.
    @Test func finishDoesNotWaitForTheThreadToCatchUp() throws {
        let s = try Subject()
        let size = 2 << 30   // sparse: the thread reads zeros, ~2 s of hashing
        #expect(ftruncate(s.fd, off_t(size)) == 0)
        s.hash.noteWrite(offset: 0, count: size)
        // Once the thread is under way (it holds the hash while it works through the file).
        let deadline = Date().addingTimeInterval(60)
        while s.hash.claimedBytes == 0 && Date() < deadline { sched_yield() }
        #expect(s.hash.claimedBytes > 0)
        s.hash.finish()
        #expect(s.hash.hashedBytes < UInt64(size), "finish waited for the whole file to be hashed")
    }

    /// No thread to be had (a process limit): the first write neither hangs nor runs the thread's
    /// loop in its place (which took the worker's lock it already held: every write of the mount
    /// hung), and the commit hashes the file itself.
    @Test func withoutAThreadTheCommitHashesTheFileItself() throws {
        let worker = HashWorker(spawn: { _ in false })
        let s = try Subject(worker: worker)
        let data = Self.noise(300_000, seed: 14)
        let wrote = DispatchSemaphore(value: 0)
        let writer = Thread { s.write(data, at: 0); wrote.signal() }
        writer.start()
        try #require(wrote.wait(timeout: .now() + 60) == .success, "the write hung")
        #expect(worker.waiting == 0)
        #expect(s.hash.digest() == BytesHasher.hash(data))
    }

    /// After `finish` (the session committed or was dropped) there is no hash and no descriptor.
    @Test func finishedGivesNothing() throws {
        let s = try Subject()
        s.write(Self.noise(1000, seed: 12), at: 0)
        s.hash.finish()
        #expect(s.hash.digest() == nil)
        s.write(Self.noise(1000, seed: 13), at: 1000)
        #expect(s.hash.digest() == nil)
    }
}
