// Content hashes and inode keys. Written by hand to keep dependencies lean: swift-crypto would
// add a minute to every clean build on 2 cores for two small functions.

/// SHA-256 (FIPS 180-4), streaming.
public struct SHA256: Sendable {
    private var h: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) =
        (0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19)
    private var buffer = [UInt8](repeating: 0, count: 64)
    private var buffered = 0
    private var length: UInt64 = 0

    public init() {}

    private static let k: [UInt32] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
    ]

    public mutating func update(_ data: UnsafeRawBufferPointer) {
        guard var p = data.baseAddress else { return }
        var n = data.count
        length &+= UInt64(n)
        if buffered > 0 {
            let take = min(64 - buffered, n)
            buffer.withUnsafeMutableBytes { b in
                (b.baseAddress! + buffered).copyMemory(from: p, byteCount: take)
            }
            buffered += take; p += take; n -= take
            if buffered == 64 {
                buffer.withUnsafeBytes { compress($0.baseAddress!) }
                buffered = 0
            }
        }
        while n >= 64 {
            compress(p)
            p += 64; n -= 64
        }
        if n > 0 {
            buffer.withUnsafeMutableBytes { b in b.baseAddress!.copyMemory(from: p, byteCount: n) }
            buffered = n
        }
    }

    public mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    public mutating func finalize() -> [UInt8] {
        let bitLength = length &* 8
        var pad: [UInt8] = [0x80]
        let padLen = (buffered < 56 ? 56 - buffered : 120 - buffered) - 1
        pad += [UInt8](repeating: 0, count: padLen)
        for i in (0..<8).reversed() { pad.append(UInt8(truncatingIfNeeded: bitLength >> (UInt64(i) * 8))) }
        let saved = length
        update(pad)
        length = saved
        var out = [UInt8]()
        out.reserveCapacity(32)
        for w in [h.0, h.1, h.2, h.3, h.4, h.5, h.6, h.7] {
            out += [UInt8(w >> 24), UInt8((w >> 16) & 0xff), UInt8((w >> 8) & 0xff), UInt8(w & 0xff)]
        }
        return out
    }

    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        var s = SHA256()
        s.update(bytes)
        return s.finalize()
    }


    private mutating func compress(_ block: UnsafeRawPointer) {
        var w = (UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0),
                 UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0))
        withUnsafeMutableBytes(of: &w) { wb in
            let words = wb.bindMemory(to: UInt32.self)
            for i in 0..<16 {
                words[i] = UInt32(bigEndian: block.loadUnaligned(fromByteOffset: i * 4, as: UInt32.self))
            }
        }
        var a = h.0, b = h.1, c = h.2, d = h.3, e = h.4, f = h.5, g = h.6, hh = h.7
        withUnsafeMutableBytes(of: &w) { wb in
            let m = wb.bindMemory(to: UInt32.self)
            SHA256.k.withUnsafeBufferPointer { k in
                for i in 0..<64 {
                    let wi: UInt32
                    if i < 16 {
                        wi = m[i]
                    } else {
                        let w15 = m[(i - 15) & 15], w2 = m[(i - 2) & 15]
                        let s0 = rotr(w15, 7) ^ rotr(w15, 18) ^ (w15 >> 3)
                        let s1 = rotr(w2, 17) ^ rotr(w2, 19) ^ (w2 >> 10)
                        wi = m[i & 15] &+ s0 &+ m[(i - 7) & 15] &+ s1
                        m[i & 15] = wi
                    }
                    let S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)
                    let ch = (e & f) ^ (~e & g)
                    let t1 = hh &+ S1 &+ ch &+ k[i] &+ wi
                    let S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)
                    let maj = (a & b) ^ (a & c) ^ (b & c)
                    let t2 = S0 &+ maj
                    hh = g; g = f; f = e; e = d &+ t1; d = c; c = b; b = a; a = t1 &+ t2
                }
            }
        }
        h.0 &+= a; h.1 &+= b; h.2 &+= c; h.3 &+= d; h.4 &+= e; h.5 &+= f; h.6 &+= g; h.7 &+= hh
    }
}

@inline(__always) func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }

public func hexString(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out = [UInt8]()
    out.reserveCapacity(bytes.count * 2)
    for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 15)]) }
    return String(decoding: out, as: UTF8.self)
}

/// SipHash-2-4: a keyed 64-bit hash. Inode numbers are SipHash(app secret, asset id), so they are
/// stable for an app across remounts, differ between apps, and tell an app nothing about the
/// library (not its size, not the order of imports).
public struct SipHash24: Sendable {
    public static func hash(key: (UInt64, UInt64), _ data: [UInt8]) -> UInt64 {
        var v0: UInt64 = 0x736f6d6570736575 ^ key.0
        var v1: UInt64 = 0x646f72616e646f6d ^ key.1
        var v2: UInt64 = 0x6c7967656e657261 ^ key.0
        var v3: UInt64 = 0x7465646279746573 ^ key.1
        @inline(__always) func round() {
            v0 &+= v1; v1 = (v1 << 13) | (v1 >> 51); v1 ^= v0; v0 = (v0 << 32) | (v0 >> 32)
            v2 &+= v3; v3 = (v3 << 16) | (v3 >> 48); v3 ^= v2
            v0 &+= v3; v3 = (v3 << 21) | (v3 >> 43); v3 ^= v0
            v2 &+= v1; v1 = (v1 << 17) | (v1 >> 47); v1 ^= v2; v2 = (v2 << 32) | (v2 >> 32)
        }
        let n = data.count
        var i = 0
        while i + 8 <= n {
            var m: UInt64 = 0
            for j in 0..<8 { m |= UInt64(data[i + j]) << (8 * UInt64(j)) }
            v3 ^= m; round(); round(); v0 ^= m
            i += 8
        }
        var last = UInt64(n & 0xff) << 56
        var j: UInt64 = 0
        while i < n { last |= UInt64(data[i]) << (8 * j); i += 1; j += 1 }
        v3 ^= last; round(); round(); v0 ^= last
        v2 ^= 0xff
        round(); round(); round(); round()
        return v0 ^ v1 ^ v2 ^ v3
    }
}
