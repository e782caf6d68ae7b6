// Content hashes, used only by the library (import, app writes, verify). SHA-256 comes from OpenSSL's libcrypto, which uses the CPU's SHA
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

    /// An independent copy of the state so far (to take a digest and keep feeding this one).
    public func copy() -> SHA256 {
        precondition(!finished, "SHA256: copy after finalize")
        let c = SHA256()
        guard EVP_MD_CTX_copy_ex(c.ctx, ctx) == 1 else { fatalError("SHA256: EVP_MD_CTX_copy_ex failed") }
        return c
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
