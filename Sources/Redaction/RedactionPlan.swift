/// Where the bytes that must change live.
///
/// Served bytes = original bytes, except each patch's range is replaced by zeros (`replacement == nil`)
/// or by `replacement` (same length; e.g. a recomputed PNG CRC, or spaces over an XMP property).
/// Redaction never moves bytes: the served file has the original size and offsets, so seeking and
/// mmap keep working (as Android's MediaProvider does it).
public struct RedactionPlan: Sendable, Equatable, Codable {
    public struct Patch: Sendable, Equatable, Codable {
        public var offset: UInt64
        public var length: UInt32
        /// `nil`: the range reads as zeros. Otherwise exactly `length` bytes.
        public var replacement: [UInt8]?

        public init(offset: UInt64, length: UInt32, replacement: [UInt8]? = nil) {
            self.offset = offset
            self.length = length
            self.replacement = replacement
        }

        /// One past the last patched byte.
        @inlinable public var end: UInt64 { offset &+ UInt64(length) }
    }

    /// Sorted by offset, non-overlapping, no empty patch (normalized by `init(patches:)`).
    public private(set) var patches: [Patch]

    /// Normalizes: drops empty patches, clamps at `UInt64.max`, pads (with zeros) or cuts a replacement
    /// to its patch's length, sorts, and resolves overlaps. Where patches overlap, a zero patch wins
    /// (fail closed); among overlapping replacements the later one in `patches` wins. Touching zero
    /// patches are merged.
    public init(patches: [Patch]) {
        self.patches = RedactionPlan.normalize(patches)
    }

    public static let empty = RedactionPlan(patches: [])

    public var isEmpty: Bool { patches.isEmpty }

    /// The number of bytes the plan changes.
    public var patchedByteCount: UInt64 { patches.reduce(0) { $0 + UInt64($1.length) } }

    /// Index of the first patch whose end is past `offset` (binary search).
    @usableFromInline
    func firstPatchIndex(endingAfter offset: UInt64) -> Int {
        var lo = 0
        var hi = patches.count
        while lo < hi {
            let mid = (lo &+ hi) >> 1
            if patches[mid].end <= offset { lo = mid &+ 1 } else { hi = mid }
        }
        return lo
    }

    /// Overwrite, in `buffer` (holding file bytes starting at `fileOffset`), every patched byte that
    /// falls inside it. Binary search to the first patch, no allocation.
    public func apply(to buffer: UnsafeMutableRawBufferPointer, fileOffset: UInt64) {
        guard !patches.isEmpty, let base = buffer.baseAddress, buffer.count > 0 else { return }
        let count = UInt64(buffer.count)
        let bufferEnd = fileOffset > UInt64.max - count ? UInt64.max : fileOffset + count
        var i = firstPatchIndex(endingAfter: fileOffset)
        patches.withUnsafeBufferPointer { list in
            while i < list.count {
                let patch = list[i]
                if patch.offset >= bufferEnd { break }
                let start = max(patch.offset, fileOffset)
                let end = min(patch.end, bufferEnd)
                let n = Int(end - start)
                let destination = base + Int(start - fileOffset)
                if let replacement = patch.replacement {
                    replacement.withUnsafeBytes { source in
                        destination.copyMemory(from: source.baseAddress! + Int(start - patch.offset), byteCount: n)
                    }
                } else {
                    destination.initializeMemory(as: UInt8.self, repeating: 0, count: n)
                }
                i += 1
            }
        }
    }

    /// Whether any byte of `offset ..< offset + length` is patched (binary search).
    public func intersects(offset: UInt64, length: Int) -> Bool {
        guard length > 0, !patches.isEmpty else { return false }
        let end = offset > UInt64.max - UInt64(length) ? UInt64.max : offset + UInt64(length)
        let i = firstPatchIndex(endingAfter: offset)
        return i < patches.count && patches[i].offset < end
    }

    // MARK: Codable (decoding normalizes like init(patches:))

    private enum CodingKeys: String, CodingKey { case patches }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(patches: try container.decode([Patch].self, forKey: .patches))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(patches, forKey: .patches)
    }
}

// MARK: - Normalization

extension RedactionPlan {
    private struct Run {
        var start: UInt64
        var end: UInt64
        var bytes: [UInt8]?   // nil = zeros
    }

    static func normalize(_ input: [Patch]) -> [Patch] {
        // Clean each patch.
        var zeros: [(UInt64, UInt64)] = []
        var replacements: [(start: UInt64, bytes: [UInt8], order: Int)] = []
        var alreadyNormal = true
        var previousEnd: UInt64 = 0
        for (order, p) in input.enumerated() {
            var length = UInt64(p.length)
            if p.offset > UInt64.max - length { length = UInt64.max - p.offset; alreadyNormal = false }
            if length == 0 { alreadyNormal = false; continue }
            if p.offset < previousEnd || (order > 0 && p.offset == previousEnd && p.replacement == nil
                                         && input[order - 1].replacement == nil) {
                alreadyNormal = false
            }
            previousEnd = p.offset + length
            if var r = p.replacement {
                if r.count != Int(length) {
                    alreadyNormal = false
                    if r.count > Int(length) { r.removeLast(r.count - Int(length)) }
                    else { r.append(contentsOf: repeatElement(0, count: Int(length) - r.count)) }
                }
                replacements.append((p.offset, r, order))
            } else {
                zeros.append((p.offset, p.offset + length))
            }
        }
        if alreadyNormal && UInt64(input.count) == UInt64(zeros.count + replacements.count) { return input }

        // Zero coverage: sorted, merged (touching ranges too).
        zeros.sort { $0.0 < $1.0 }
        var zeroRuns: [(UInt64, UInt64)] = []
        for z in zeros {
            if let last = zeroRuns.last, z.0 <= last.1 {
                zeroRuns[zeroRuns.count - 1].1 = max(last.1, z.1)
            } else {
                zeroRuns.append(z)
            }
        }

        // Replacements: paint overlapping ones in input order onto their cluster's span.
        replacements.sort { ($0.start, $0.order) < ($1.start, $1.order) }
        var replacementRuns: [Run] = []
        var k = 0
        while k < replacements.count {
            var clusterEnd = replacements[k].start + UInt64(replacements[k].bytes.count)
            var j = k + 1
            while j < replacements.count, replacements[j].start < clusterEnd {
                clusterEnd = max(clusterEnd, replacements[j].start + UInt64(replacements[j].bytes.count))
                j += 1
            }
            let clusterStart = replacements[k].start
            if j == k + 1 {
                replacementRuns.append(Run(start: clusterStart, end: clusterEnd, bytes: replacements[k].bytes))
            } else {
                var buffer = [UInt8](repeating: 0, count: Int(clusterEnd - clusterStart))
                for member in replacements[k..<j].sorted(by: { $0.order < $1.order }) {
                    let at = Int(member.start - clusterStart)
                    buffer.replaceSubrange(at..<(at + member.bytes.count), with: member.bytes)
                }
                replacementRuns.append(Run(start: clusterStart, end: clusterEnd, bytes: buffer))
            }
            k = j
        }

        // Subtract zero coverage from the replacement runs (zero wins), then interleave.
        var runs: [Run] = zeroRuns.map { Run(start: $0.0, end: $0.1, bytes: nil) }
        var zi = 0
        for run in replacementRuns {
            var cursor = run.start
            while zi < zeroRuns.count, zeroRuns[zi].1 <= cursor { zi += 1 }
            var z = zi
            while cursor < run.end {
                if z < zeroRuns.count, zeroRuns[z].0 < run.end {
                    let (zs, ze) = zeroRuns[z]
                    if zs > cursor {
                        let a = Int(cursor - run.start), b = Int(zs - run.start)
                        runs.append(Run(start: cursor, end: zs, bytes: Array(run.bytes![a..<b])))
                    }
                    cursor = max(cursor, ze)
                    if ze <= run.end { z += 1 } else { break }
                } else {
                    let a = Int(cursor - run.start)
                    runs.append(Run(start: cursor, end: run.end, bytes: a == 0 ? run.bytes : Array(run.bytes![a...])))
                    cursor = run.end
                }
            }
        }
        runs.sort { $0.start < $1.start }

        var out: [Patch] = []
        out.reserveCapacity(runs.count)
        for run in runs {
            var start = run.start
            if let bytes = run.bytes {
                // Replacement runs come from real arrays: never longer than UInt32.max in practice, but split anyway.
                var from = 0
                while start < run.end {
                    let n = min(run.end - start, UInt64(UInt32.max))
                    out.append(Patch(offset: start, length: UInt32(n), replacement: Array(bytes[from..<(from + Int(n))])))
                    start += n
                    from += Int(n)
                }
            } else {
                while start < run.end {
                    let n = min(run.end - start, UInt64(UInt32.max))
                    out.append(Patch(offset: start, length: UInt32(n), replacement: nil))
                    start += n
                }
            }
        }
        return out
    }
}

// MARK: - Serialization

extension RedactionPlan {
    /// Why `init(serialized:)` rejected its input.
    public struct DecodingError: Error, Sendable, Equatable, CustomStringConvertible {
        public var reason: String
        public init(_ reason: String) { self.reason = reason }
        public var description: String { "invalid redaction plan: \(reason)" }
    }

    static let magic: [UInt8] = Array("PGRP".utf8)
    static let formatVersion: UInt8 = 1

    /// Compact, versioned binary form:
    /// `"PGRP"`, version (1), flags (0), patch count (LEB128), then per patch: gap from the previous
    /// patch's end (LEB128), length (LEB128), kind (0 zeros, 1 replacement) and the replacement bytes;
    /// then a CRC-32 (little-endian) of everything before it.
    public func serialized() -> [UInt8] {
        var out = RedactionPlan.magic
        out.append(RedactionPlan.formatVersion)
        out.append(0)
        appendLEB128(&out, UInt64(patches.count))
        var previousEnd: UInt64 = 0
        for p in patches {
            appendLEB128(&out, p.offset - previousEnd)
            appendLEB128(&out, UInt64(p.length))
            if let r = p.replacement {
                out.append(1)
                out.append(contentsOf: r)
            } else {
                out.append(0)
            }
            previousEnd = p.end
        }
        let crc = CRC32.checksum(out)
        out.append(contentsOf: [UInt8(crc & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 24)])
        return out
    }

    /// Parses `serialized()` output; rejects anything else (bad magic, version, CRC, bounds, trailing bytes).
    public init(serialized bytes: [UInt8]) throws {
        guard bytes.count >= 4 + 2 + 1 + 4 else { throw DecodingError("too short") }
        guard Array(bytes[0..<4]) == RedactionPlan.magic else { throw DecodingError("bad magic") }
        guard bytes[4] == RedactionPlan.formatVersion else { throw DecodingError("unsupported version \(bytes[4])") }
        guard bytes[5] == 0 else { throw DecodingError("unknown flags") }
        let bodyEnd = bytes.count - 4
        let stored = UInt32(bytes[bodyEnd]) | UInt32(bytes[bodyEnd + 1]) << 8 | UInt32(bytes[bodyEnd + 2]) << 16
            | UInt32(bytes[bodyEnd + 3]) << 24
        guard CRC32.checksum(bytes[0..<bodyEnd]) == stored else { throw DecodingError("checksum mismatch") }
        var i = 6
        func leb() throws -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                guard i < bodyEnd else { throw DecodingError("truncated number") }
                let b = bytes[i]
                i += 1
                guard shift < 64, !(shift == 63 && b & 0x7E != 0) else { throw DecodingError("number overflow") }
                value |= UInt64(b & 0x7F) << shift
                if b & 0x80 == 0 { return value }
                shift += 7
            }
        }
        let count = try leb()
        guard count <= UInt64(bodyEnd - i) / 3 else { throw DecodingError("patch count past the end") }
        var list: [Patch] = []
        list.reserveCapacity(Int(count))
        var previousEnd: UInt64 = 0
        for _ in 0..<count {
            let gap = try leb()
            let length = try leb()
            guard length > 0, length <= UInt64(UInt32.max) else { throw DecodingError("bad patch length") }
            guard gap <= UInt64.max - previousEnd else { throw DecodingError("offset overflow") }
            let offset = previousEnd + gap
            guard length <= UInt64.max - offset else { throw DecodingError("offset overflow") }
            guard i < bodyEnd else { throw DecodingError("truncated patch") }
            let kind = bytes[i]
            i += 1
            switch kind {
            case 0:
                list.append(Patch(offset: offset, length: UInt32(length)))
            case 1:
                guard length <= UInt64(bodyEnd - i) else { throw DecodingError("replacement past the end") }
                list.append(Patch(offset: offset, length: UInt32(length), replacement: Array(bytes[i..<(i + Int(length))])))
                i += Int(length)
            default:
                throw DecodingError("unknown patch kind \(kind)")
            }
            previousEnd = offset + length
        }
        guard i == bodyEnd else { throw DecodingError("trailing bytes") }
        self.init(patches: list)
    }
}

private func appendLEB128(_ out: inout [UInt8], _ value: UInt64) {
    var v = value
    repeat {
        var b = UInt8(v & 0x7F)
        v >>= 7
        if v != 0 { b |= 0x80 }
        out.append(b)
    } while v != 0
}
