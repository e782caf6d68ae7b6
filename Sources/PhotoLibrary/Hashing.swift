// Inode keys: a keyed hash in pure Swift (content hashes are GrantStore/SHA256.swift).

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
