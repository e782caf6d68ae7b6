import Testing
@testable import PhotoLibrary

/// Issue 37, the decision and the names of a compatible view: an app with the `compatible`
/// option sees HEIF photos it did not create as JPEG, under their stem with `.jpg`, and may
/// never save over them.
@Suite struct CompatibleDecision {
    let heic = AssetFacts(isSelected: true, isHEIF: true)

    func context(_ compatible: Bool, editAny: Bool = false) -> AppContext {
        AppContext(access: .readWrite, status: .limited, options: AppOptions(editAny: editAny, compatible: compatible))
    }

    @Test func onlyHEIFPhotosTheAppDidNotCreateAreServedAsJPEG() {
        #expect(context(true).decide(heic).compatible)
        #expect(!context(false).decide(heic).compatible)
        #expect(!context(true).decide(AssetFacts(isSelected: true)).compatible, "a JPEG stays as it is")
        #expect(!context(true).decide(AssetFacts(isOwned: true, isHEIF: true)).compatible, "the app's own HEIC stays as it wrote it")
        #expect(!context(true).decide(AssetFacts(isHEIF: true)).compatible, "a hidden asset is nothing")
    }

    @Test func theJPEGIsNeverSavedAsAVersion() {
        // edit-any would allow an edit of the HEIC; what the app reads is not the HEIC.
        let d = context(true, editAny: true).decide(heic)
        guard case .never = d.edit else { Issue.record("edit of a compatible JPEG: \(d.edit)"); return }
        #expect(context(false, editAny: true).decide(heic).edit.isAllowed)
        // Consent asked for otherwise: never asked for a JPEG it cannot save.
        guard case .never = context(true).decide(heic).edit else { Issue.record("needs consent?"); return }
    }

    @Test func namesTakeJPGAndYieldToRealNames() {
        #expect(DisplayName.compatibleName("IMG_0001.HEIC") == "IMG_0001.jpg")
        #expect(DisplayName.compatibleName("photo") == "photo.jpg")
        let long = String(repeating: "a", count: 250) + ".heic"
        #expect(DisplayName.compatibleName(long).utf8.count <= 255)
        // A real IMG_0002.jpg keeps its name whatever its row id; the HEIC beside it moves.
        let items = [ViewNaming.Item(key: 1, displayName: "IMG_0002.HEIC", ownName: nil, compatible: true),
                     ViewNaming.Item(key: 2, displayName: "IMG_0002.jpg", ownName: nil),
                     ViewNaming.Item(key: 3, displayName: "IMG_0003.heic", ownName: nil, compatible: true),
                     ViewNaming.Item(key: 4, displayName: "IMG_0003.HEIF", ownName: nil, compatible: true)]
        let names = ViewNaming.assign(items)
        #expect(names[2] == "IMG_0002.jpg")
        #expect(names[1] == "IMG_0002-1.jpg")
        #expect(names[3] == "IMG_0003.jpg")
        #expect(names[4] == "IMG_0003-1.jpg")
    }
}
