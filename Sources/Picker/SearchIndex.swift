#if canImport(Glibc)
import Glibc
#endif

/// The lowercased search key of every asset (name, album names, capture date), in one contiguous
/// buffer built once. A search scans only the keys of its candidates, with memchr/memcmp, and
/// counts how many keys it examined so tests can bound the work in operations, not in time.
public struct SearchIndex: Sendable {
    private var bytes: [UInt8] = []
    /// Key i is bytes[offsets[i] ..< offsets[i + 1]].
    private var offsets: [Int] = [0]

    public init() {}

    public var count: Int { offsets.count - 1 }

    /// Appends to the key being built (ends with `endKey()`).
    public mutating func appendLowercased(_ s: String) {
        let start = bytes.count
        bytes.append(contentsOf: s.utf8)
        // ASCII (almost every file name) is lowercased in place, without a new String.
        let ascii = bytes.withUnsafeMutableBufferPointer { b -> Bool in
            for i in start..<b.count {
                let c = b[i]
                if c >= 0x80 { return false }
                if c >= 0x41 && c <= 0x5a { b[i] = c | 0x20 }
            }
            return true
        }
        if !ascii {
            bytes.removeSubrange(start...)
            bytes.append(contentsOf: s.lowercased().utf8)
        }
    }

    public mutating func appendSeparator() { bytes.append(0x0a) }

    public mutating func appendBytes(_ b: ArraySlice<UInt8>) { bytes.append(contentsOf: b) }

    public mutating func appendDate(_ t: Double) { UTCDate.append(t, to: &bytes) }

    public mutating func endKey() { offsets.append(bytes.count) }

    public mutating func reserve(keys: Int, bytes n: Int) {
        offsets.reserveCapacity(keys + 1)
        bytes.reserveCapacity(n)
    }

    /// The query as the index compares it.
    public static func needle(_ query: String) -> [UInt8] { Array(query.lowercased().utf8) }

    public func key(_ i: Int) -> String { String(decoding: bytes[offsets[i]..<offsets[i + 1]], as: UTF8.self) }

    public func matches(_ i: Int, _ needle: [UInt8]) -> Bool {
        var n = 0
        return filter([Int32(i)], needle, examined: &n).count == 1
    }

    /// The candidates (indices, in order) whose key contains `needle`. Adds the number of keys
    /// examined (one per candidate) to `examined`.
    public func filter(_ candidates: [Int32], _ needle: [UInt8], examined: inout Int) -> [Int32] {
        examined += candidates.count
        if needle.isEmpty { return candidates }
        var out: [Int32] = []
        bytes.withUnsafeBufferPointer { b in
            needle.withUnsafeBufferPointer { n in
                offsets.withUnsafeBufferPointer { off in
                    guard let base = b.baseAddress, let nb = n.baseAddress else { return }
                    let first = Int32(n[0])
                    let len = n.count
                    for c in candidates {
                        let s = off[Int(c)], e = off[Int(c) + 1]
                        if e - s < len { continue }
                        var p = UnsafeRawPointer(base + s)
                        let lastStart = UnsafeRawPointer(base + (e - len))
                        while p <= lastStart {
                            guard let q = memchr(p, first, lastStart - p + 1) else { break }
                            if memcmp(q, nb, len) == 0 { out.append(c); break }
                            p = UnsafeRawPointer(q) + 1
                        }
                    }
                }
            }
        }
        return out
    }
}
