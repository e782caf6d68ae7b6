#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Limits that keep a scan bounded on any input.
enum Limits {
    /// Largest metadata block read into memory (EXIF, XMP, a HEIF `meta` child, a PNG text chunk...).
    static let maxBlock = 16 << 20
    /// Largest inflated size of compressed metadata.
    static let maxInflated = 16 << 20
    /// Read operations and bytes copied per scan.
    static let maxReads = 4_000_000
    static let maxBytesRead: UInt64 = 256 << 20
    /// IFDs followed in one TIFF structure (pages of a TIFF file included), GPS IFDs zeroed,
    /// IFD entries read in all, and embedded blocks (XMP, IPTC...) scanned.
    static let maxIFDs = 4096
    static let maxGPSIFDs = 64
    static let maxIFDEntries = 1_000_000
    static let maxEmbeddedBlocks = 64
    /// Boxes visited in one ISO-BMFF file, and their nesting depth.
    static let maxBoxes = 500_000
    static let maxDepth = 24
    /// Chunks or segments visited in one PNG/WebP/JPEG/GIF file.
    static let maxChunks = 2_000_000
}

/// Random access to the bytes being scanned: a file descriptor read with `pread`, or an array.
/// Counts the work: past `Limits.maxReads` / `Limits.maxBytesRead` every read fails with `.malformed`.
final class ByteSource {
    let size: UInt64
    private let memory: [UInt8]?
    private let fd: Int32
    /// Where offset 0 of this source lies in the underlying file or array (a window, see `window`).
    private let base: UInt64
    private var readsLeft = Limits.maxReads
    private var bytesLeft = Limits.maxBytesRead

    // One cached block for the many small header reads of a file scan.
    private static let blockSize = 64 << 10
    private var blockOffset: UInt64 = .max
    private var block: [UInt8] = []

    init(bytes: [UInt8]) {
        memory = bytes
        fd = -1
        base = 0
        size = UInt64(bytes.count)
    }

    init(fd: Int32, size: UInt64) {
        memory = nil
        self.fd = fd
        base = 0
        self.size = size
    }

    private init(memory: [UInt8]?, fd: Int32, base: UInt64, size: UInt64) {
        self.memory = memory
        self.fd = fd
        self.base = base
        self.size = size
    }

    /// The bytes `offset ..< offset + length` of this source as a source of their own (offset 0 is
    /// `offset` here), e.g. a movie appended to a JPEG, whose own offsets count from its start.
    /// The window has its own work budget. Nil if the range is not inside this source.
    func window(_ offset: UInt64, _ length: UInt64) -> ByteSource? {
        guard offset <= size, length <= size - offset else { return nil }
        return ByteSource(memory: memory, fd: fd, base: base + offset, size: length)
    }

    private func charge(_ count: Int) throws(ScanError) {
        readsLeft -= 1
        if readsLeft < 0 || UInt64(count) > bytesLeft { throw .malformed("work limit exceeded") }
        bytesLeft -= UInt64(count)
    }

    /// Exactly `count` bytes at `offset`, or `.truncated` if they are not all in the file.
    func read(_ offset: UInt64, _ count: Int) throws(ScanError) -> [UInt8] {
        guard count >= 0, offset <= size, UInt64(count) <= size - offset else {
            throw .truncated("read of \(count) bytes at \(offset) past the end (\(size))")
        }
        if count == 0 { return [] }
        try charge(count)
        let offset = base + offset   // from here on: offsets in the underlying file or array
        if let memory {
            let start = Int(offset)
            return Array(memory[start..<(start + count)])
        }
        if count <= ByteSource.blockSize / 4 {
            if blockOffset == .max || offset < blockOffset || offset + UInt64(count) > blockOffset + UInt64(block.count) {
                let start = max(base, offset & ~UInt64(4095))
                let n = Int(min(UInt64(ByteSource.blockSize), base + size - start))
                block = try preadFully(start, n)
                blockOffset = start
            }
            let at = Int(offset - blockOffset)
            return Array(block[at..<(at + count)])
        }
        return try preadFully(offset, count)
    }

    /// Up to `count` bytes at `offset` (fewer at the end of the file).
    func readAvailable(_ offset: UInt64, _ count: Int) throws(ScanError) -> [UInt8] {
        guard offset < size else { return [] }
        return try read(offset, Int(min(UInt64(count), size - offset)))
    }

    /// One byte (no allocation on the memory path).
    func byte(_ offset: UInt64) throws(ScanError) -> UInt8 {
        guard offset < size else { throw .truncated("read at \(offset) past the end (\(size))") }
        if let memory {
            readsLeft -= 1
            if readsLeft < 0 { throw .malformed("work limit exceeded") }
            return memory[Int(base + offset)]
        }
        return try read(offset, 1)[0]
    }

    private func preadFully(_ offset: UInt64, _ count: Int) throws(ScanError) -> [UInt8] {
        var failure: ScanError?
        let result = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            var done = 0
            while done < count {
                let n = pread(fd, buffer.baseAddress! + done, count - done, off_t(offset) + off_t(done))
                if n > 0 {
                    done += n
                } else if n == 0 {
                    failure = .truncated("file ended at \(offset + UInt64(done)) (expected \(size) bytes)")
                    break
                } else if errno != EINTR {
                    failure = .io(errno)
                    break
                }
            }
            if failure != nil {
                buffer.baseAddress!.initialize(repeating: 0, count: count)
            }
            initialized = count
        }
        if let failure { throw failure }
        return result
    }
}

// MARK: - Byte helpers

extension Array where Element == UInt8 {
    @inline(__always) func be16(_ i: Int) -> UInt16 { UInt16(self[i]) << 8 | UInt16(self[i + 1]) }
    @inline(__always) func be32(_ i: Int) -> UInt32 {
        UInt32(self[i]) << 24 | UInt32(self[i + 1]) << 16 | UInt32(self[i + 2]) << 8 | UInt32(self[i + 3])
    }
    @inline(__always) func be64(_ i: Int) -> UInt64 { UInt64(be32(i)) << 32 | UInt64(be32(i + 4)) }
    @inline(__always) func le16(_ i: Int) -> UInt16 { UInt16(self[i]) | UInt16(self[i + 1]) << 8 }
    @inline(__always) func le32(_ i: Int) -> UInt32 {
        UInt32(self[i]) | UInt32(self[i + 1]) << 8 | UInt32(self[i + 2]) << 16 | UInt32(self[i + 3]) << 24
    }
    func fourCC(_ i: Int) -> FourCC { FourCC(self[i], self[i + 1], self[i + 2], self[i + 3]) }

    /// Whether `prefix` occurs at `offset`.
    func has(_ prefix: [UInt8], at offset: Int = 0) -> Bool {
        guard offset >= 0, offset <= count, prefix.count <= count - offset else { return false }
        for k in 0..<prefix.count where self[offset + k] != prefix[k] { return false }
        return true
    }

    /// First index of `needle` at or after `from`.
    func firstIndex(of needle: [UInt8], from: Int = 0) -> Int? {
        guard let first = needle.first, needle.count <= count else { return nil }
        var i = Swift.max(0, from)
        let last = count - needle.count
        while i <= last {
            if self[i] == first && has(needle, at: i) { return i }
            i += 1
        }
        return nil
    }
}

/// Maps a logical byte stream (an item or a block made of several file extents) back to file offsets.
struct ExtentMap {
    struct Extent {
        var logical: UInt64
        var file: UInt64
        var length: UInt64
    }
    private(set) var extents: [Extent] = []
    private(set) var length: UInt64 = 0

    init() {}

    init(file: UInt64, length: UInt64) {
        append(file: file, length: length)
    }

    mutating func append(file: UInt64, length: UInt64) {
        guard length > 0 else { return }
        extents.append(Extent(logical: self.length, file: file, length: length))
        self.length += length
    }

    /// The map of `offset ..< offset + length` of this stream (clamped).
    func slice(_ offset: UInt64, _ length: UInt64) -> ExtentMap {
        var out = ExtentMap()
        for (file, n) in fileRanges(offset, length) { out.append(file: file, length: n) }
        return out
    }

    /// File ranges (offset, length) covering logical `offset ..< offset + length` (clamped to the stream).
    func fileRanges(_ offset: UInt64, _ length: UInt64) -> [(UInt64, UInt64)] {
        guard offset < self.length else { return [] }
        let end = offset + Swift.min(length, self.length - offset)
        var out: [(UInt64, UInt64)] = []
        for e in extents where e.logical < end && e.logical + e.length > offset {
            let s = Swift.max(offset, e.logical)
            let t = Swift.min(end, e.logical + e.length)
            out.append((e.file + (s - e.logical), t - s))
        }
        return out
    }
}
