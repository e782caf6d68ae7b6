import Testing
@testable import PhotoLibrary

@Suite struct Names {
    @Test func alternativesAreDeterministic() {
        #expect(DisplayName.alternative("IMG_0001.jpg", 1) == "IMG_0001-1.jpg")
        #expect(DisplayName.alternative("IMG_0001.jpg", 12) == "IMG_0001-12.jpg")
        #expect(DisplayName.alternative("README", 2) == "README-2")
        #expect(DisplayName.alternative(".hidden", 1) == ".hidden-1")
        let taken: Set = ["a.jpg", "a-1.jpg"]
        #expect(DisplayName.unique("a.jpg") { taken.contains($0) } == "a-2.jpg")
    }

    @Test func alternativesStayWithin255Bytes() {
        let long = String(repeating: "é", count: 127) + ".jpeg"   // 254 + 5 bytes
        let alt = DisplayName.alternative(DisplayName.sanitize(Array(long.utf8)), 99)
        #expect(alt.utf8.count <= 255)
        #expect(alt.hasSuffix("-99.jpeg"))
    }

    @Test func sanitizeMakesAnyBytesUsable() {
        #expect(DisplayName.sanitize([0x66, 0xff, 0x2e, 0x6a]) == "f\u{FFFD}.j")
        #expect(DisplayName.sanitize(Array("a/b".utf8)) == "a_b")
        #expect(DisplayName.sanitize(Array("..".utf8)) == "untitled")
        #expect(DisplayName.sanitize(Array("Albums".utf8)) == "_Albums")
        #expect(DisplayName.sanitize(Array("tab\there".utf8)) == "tab_here")
    }

    @Test func validateNamesFromMounts() {
        #expect(DisplayName.validate(Array("ok.jpg".utf8)) == .success("ok.jpg"))
        #expect(DisplayName.validate([]) == .failure(.empty))
        #expect(DisplayName.validate([UInt8](repeating: 0x61, count: 256)) == .failure(.tooLong))
        #expect(DisplayName.validate([0x61, 0xff]) == .failure(.notUTF8))
        #expect(DisplayName.validate(Array(".photogate".utf8)) == .failure(.reserved))
        #expect(DisplayName.validate(Array("..".utf8)) == .failure(.reserved))
    }

    /// Issue 14: names reach terminals and scripts; none may hold a control or bidi character.
    static let unsafe: [String] = ["\u{1B}", "\n", "\t", "\r", "\u{7F}", "\u{80}", "\u{9B}", "\u{9F}", "\u{061C}",
                                   "\u{200E}", "\u{200F}", "\u{202A}", "\u{202E}", "\u{2066}", "\u{2069}",
                                   "\u{2028}", "\u{2029}"]

    @Test func validateRefusesControlAndBidiCharacters() {
        for c in Names.unsafe {
            let name = "a" + c + "b.jpg"
            #expect(DisplayName.validate(Array(name.utf8)) == .failure(.invalidCharacter), "\(c.unicodeScalars.first!.value)")
        }
        #expect(DisplayName.validate(Array("été \u{00A0}ok.jpg".utf8)) == .success("été \u{00A0}ok.jpg"))
    }

    @Test func sanitizeReplacesControlAndBidiCharacters() {
        for c in Names.unsafe {
            #expect(DisplayName.sanitize(Array(("a" + c + "b.jpg").utf8)) == "a_b.jpg", "\(c.unicodeScalars.first!.value)")
        }
    }

    @Test func viewNamingPrefersOwnNamesAndNeverLeaksHiddenOnes() {
        // The app created "beach.jpg" (library name "beach-1.jpg" because a hidden asset has "beach.jpg").
        let own = ViewNaming.Item(key: 1, displayName: "beach-1.jpg", ownName: "beach.jpg")
        #expect(ViewNaming.assign([own]) == [1: "beach.jpg"])
        // Later the other "beach.jpg" is granted: the app keeps its own name, the other gets a suffix.
        let granted = ViewNaming.Item(key: 2, displayName: "beach.jpg", ownName: nil)
        let names = ViewNaming.assign([granted, own])
        #expect(names[1] == "beach.jpg")
        #expect(names[2] != "beach.jpg")
        #expect(Set(names.values).count == 2)
    }
}

@Suite struct Hashes {
    @Test func sipHashReferenceVectors() {
        let key: (UInt64, UInt64) = (0x0706050403020100, 0x0f0e0d0c0b0a0908)
        #expect(SipHash24.hash(key: key, []) == 0x726fdb47dd0e0e31)
        #expect(SipHash24.hash(key: key, Array(0..<15)) == 0xa129ca6149be45e5)
        #expect(SipHash24.hash(key: key, Array(0..<8)) == 0x93f5f5799a932462)
    }
}
