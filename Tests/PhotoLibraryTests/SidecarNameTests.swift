import Testing
@testable import PhotoLibrary

/// Issue 37: which names are sidecars, which photo each belongs with, and which names are refused
/// at create (Sidecars.swift): the rules a mount asks, as a table.
@Suite struct SidecarNames {
    @Test func sidecarNamesAndTheirPhotos() {
        #expect(Sidecars.parse("photo.jpg.xmp")! == ("photo.jpg", ".xmp"))
        #expect(Sidecars.parse("IMG_0001.XMP")! == ("IMG_0001", ".XMP"))
        #expect(Sidecars.parse("out.jpg.pp3")! == ("out.jpg", ".pp3"))
        #expect(Sidecars.parse("IMG_1.jpg") == nil && Sidecars.parse(".xmp") == nil && Sidecars.parse("xmp") == nil)
        let view: [String: Int64] = ["photo.jpg": 1, "IMG_0001.JPG": 2, "IMG_0001.CR2": 3, "MVI_7.JPG": 4, "MVI_7.MOV": 5]
        func photo(_ n: String) -> (Int64, SidecarForm)? { Sidecars.photo(for: n) { view[$0] }.map { ($0.rowID, $0.form) } }
        #expect(photo("photo.jpg.xmp")! == (1, .appended))
        #expect(photo("photo.xmp")! == (1, .replaced))   // photo.jpg is photo.<ext>
        // Among photos sharing a stem: the raw file for an XMP, the video for a THM.
        #expect(photo("IMG_0001.XMP")! == (3, .replaced))
        #expect(photo("MVI_7.THM")! == (5, .replaced))
        #expect(photo("MVI_7.AAE")! == (4, .replaced))
        #expect(photo("nothing.xmp") == nil)
        #expect(Sidecars.matches(sidecar: "IMG_0001.XMP", photo: "IMG_0001.JPG")! == (.replaced, ".XMP"))
        #expect(Sidecars.matches(sidecar: "a.jpg.xmp", photo: "a.jpg")! == (.appended, ".xmp"))
        #expect(Sidecars.matches(sidecar: "a.xmp", photo: "a.txt") == nil)
    }

    @Test func namesFollowThePhotoInEachView() {
        let a = SidecarKey(rowID: 1, form: .appended, ext: ".xmp"), b = SidecarKey(rowID: 1, form: .replaced, ext: ".XMP")
        let c = SidecarKey(rowID: 2, form: .replaced, ext: ".XMP")
        let names = ["IMG_1-1.JPG", "IMG_1.CR2"]
        let assigned = Sidecars.assignNames([a, b, c], photoName: { names[Int($0) - 1] }, taken: { names.contains($0) })
        #expect(assigned[a] == "IMG_1-1.JPG.xmp" && assigned[b] == "IMG_1-1.XMP" && assigned[c] == "IMG_1.XMP")
        // Two photos sharing a stem, each with its IMG_1.XMP: the first keeps the name.
        let same = Sidecars.assignNames([b, c], photoName: { ["IMG_1.JPG", "IMG_1.CR2"][Int($0) - 1] }, taken: { _ in false })
        #expect(same[b] == "IMG_1.XMP" && same[c] == nil)
    }

    @Test func namesThatSayNotMediaAreRefusedAtCreate() {
        for n in ["notes.txt", "README.TXT", "x.pdf", "meta.json", ".notes.txt.a1B2c3", "CANONMSC.CTG"] {
            #expect(Sidecars.refusal(forNewName: n) != nil, "\(n)")
        }
        for n in ["IMG_1.JPG", "photo.jpg.xmp", ".IMG_1.JPG.a1B2c3", "photo.jpg.part", "untitled", "a.tmp", "x_exiftool_tmp"] {
            #expect(Sidecars.refusal(forNewName: n) == nil, "\(n)")
        }
        #expect(Sidecars.tempTarget(".IMG_1.XMP.a1B2c3") == "IMG_1.XMP")
        #expect(Sidecars.tempTarget("photo.jpg.xmp_exiftool_tmp") == "photo.jpg.xmp")
        #expect(Sidecars.tempTarget("IMG_1.XMP") == nil && Sidecars.tempTarget(".IMG_1.XMP.toolong") == nil)
    }
}
