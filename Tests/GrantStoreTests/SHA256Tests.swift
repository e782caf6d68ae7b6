import Testing
@testable import GrantStore

/// Content hashes (libcrypto): the known vectors of FIPS 180-4, and streaming equals one shot.
@Suite struct ContentHashes {
    @Test func sha256KnownVectors() {
        #expect(hexString(SHA256.hash([])) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(hexString(SHA256.hash(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(hexString(SHA256.hash(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        let million = [UInt8](repeating: 0x61, count: 1_000_000)
        #expect(hexString(SHA256.hash(million)) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test func sha256StreamingEqualsOneShot() {
        let data = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        for split in [1, 63, 64, 65, 4097] {
            let h = SHA256()
            var i = 0
            while i < data.count { let j = min(i + split, data.count); h.update(Array(data[i..<j])); i = j }
            #expect(h.finalize() == SHA256.hash(data))
        }
    }
}
