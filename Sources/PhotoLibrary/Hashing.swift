// Content hashes and inode keys. SHA-256 comes from OpenSSL's libcrypto, which uses the CPU's SHA
// extensions (SHA-NI) where present: import and app writes hash every byte, and portable code
// (~200 MB/s on one core here) made hashing, not the disk, their limit.
import CCrypto

/// SHA-256 (FIPS 180-4), streaming. A reference type: it owns an OpenSSL digest context.
public final class SHA256 {
    private let ctx: OpaquePointer
    private var finished = false

    public init() {
        guard let ctx = EVP_MD_CTX_new() else { fatalError("SHA256: out of memory") }
        self.ctx = ctx
        guard EVP_DigestInit_ex(ctx, EVP_sha256(), nil) == 1 else { fatalError("SHA256: libcrypto has no SHA-256") }
    }

    deinit { EVP_MD_CTX_free(ctx) }

    public func update(_ data: UnsafeRawBufferPointer) {
        precondition(!finished, "SHA256: update after finalize")
        guard let base = data.baseAddress, data.count > 0 else { return }
        guard EVP_DigestUpdate(ctx, base, data.count) == 1 else { fatalError("SHA256: EVP_DigestUpdate failed") }
    }

    public func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The digest (32 bytes). Call once.
    public func finalize() -> [UInt8] {
        precondition(!finished, "SHA256: finalize called twice")
        finished = true
        var out = [UInt8](repeating: 0, count: 32)
        var len: UInt32 = 0
        let ok = out.withUnsafeMutableBufferPointer { EVP_DigestFinal_ex(ctx, $0.baseAddress, &len) }
        guard ok == 1, len == 32 else { fatalError("SHA256: EVP_DigestFinal_ex failed") }
        return out
    }

    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        let s = SHA256()
        s.update(bytes)
        return s.finalize()
    }
}

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
