import Testing
@testable import PhotoLibrary

/// `AppContext.decide`, the one decision (issue 17), against the truth table of `ViewPolicy`
/// and the reasons `explain` prints, for every combination of facts, statuses and options.
@Suite struct DecisionTable {
    static let bools = [false, true]

    static var allFacts: [AssetFacts] {
        var out: [AssetFacts] = []
        for s in bools { for t in bools { for o in bools { for sel in bools { for p in bools {
            for ss in bools { for ps in bools { for c in bools { for g in bools {
                out.append(AssetFacts(isShared: s, isTrashed: t, isOwned: o, isSelected: sel, isPicked: p,
                                      selectionStripsLocation: ss, pickStripsLocation: ps, editConsent: c, hasLocation: g))
            } } } }
        } } } } }
        return out
    }

    static var allOptions: [AppOptions] {
        bools.flatMap { strip in bools.map { any in AppOptions(stripLocation: strip, editAny: any) } }
    }

    @Test(arguments: AccessLevel.allCases, AuthorizationStatus.allCases)
    func decideIsThePolicy(access: AccessLevel, status: AuthorizationStatus) {
        for options in Self.allOptions {
            let c = AppContext(access: access, status: status, options: options)
            let p = ViewPolicy(access: access, status: status)
            for f in Self.allFacts {
                let d = c.decide(f)
                #expect(d.visible == p.isVisible(f) && d.visible == c.isVisible(f), "\(access) \(status) \(f)")
                #expect(d.visible == PolicyTruthTable.expectedVisible(access, status, f))
                #expect(d.canDelete == p.canDelete(f) && d.canRename == p.canRename(f))
                #expect(d.edit == p.editDecision(f, consented: f.editConsent, editAny: options.editAny))
                // Strip-location: the app's option, or the grant that shows the asset.
                let strip = options.stripLocation || (f.isSelected && f.selectionStripsLocation) || (f.isPicked && f.pickStripsLocation)
                #expect(d.stripLocation == strip && c.stripsLocation(f) == strip)
                #expect((d.stripReason != nil) == strip)
                #expect(d.removesLocation(f) == (d.visible && strip && f.hasLocation))
                #expect(!d.reasons.isEmpty)
            }
        }
    }

    @Test func reasonsSayWhy() {
        let limited = AppContext(access: .readWrite, status: .limited)
        #expect(limited.decide(AssetFacts(isShared: true, isSelected: true)).reason
            == "it is a cloud-shared asset, which a limited app never sees; it is in the app's selection")
        #expect(limited.decide(AssetFacts(isOwned: true, isPicked: true)).reason == "the app created it; it was picked for the app")
        #expect(limited.decide(AssetFacts()).reason == "it is not in the app's selection, not picked, not created by the app")
        let denied = AppContext(access: .readWrite, status: .denied)
        #expect(denied.decide(AssetFacts()).reason == "status denied shows picked assets only, and it was not picked")
        #expect(AppContext(access: .addOnly, status: .authorized).decide(AssetFacts()).reason == "an add-only view shows nothing")
        let all = AppContext(access: .readWrite, status: .authorized, options: AppOptions(stripLocation: true))
        #expect(all.decide(AssetFacts(isTrashed: true)).reason == "it is in Recently Deleted")
        let d = all.decide(AssetFacts(isSelected: true, isPicked: true, selectionStripsLocation: true, pickStripsLocation: true))
        #expect(d.stripReason == "the app's strip-location option is on; its grant strips location; it was picked without location")
        // A stripping grant that does not show the asset strips nothing.
        #expect(!AppContext(access: .readWrite, status: .authorized).decide(AssetFacts(selectionStripsLocation: true)).stripLocation)
    }

    @Test(arguments: AuthorizationStatus.allCases)
    func grantsThatCouldNeverShowAreRefused(status: AuthorizationStatus) {
        let c = AppContext(access: .readWrite, status: status)
        for f in DecisionTable.allFacts {
            #expect((c.grantRefusal(f, .selection) != nil) == f.isShared)
            #expect((c.grantRefusal(f, .pick) != nil) == (f.isShared && status == .limited))
            // What may be granted shows once the app is limited (a selection) or always (a pick),
            // unless trashed: the refusal is exactly "it could never show".
            if c.grantRefusal(f, .selection) == nil {
                var g = f; g.isTrashed = false; g.isSelected = true
                #expect(AppContext(access: .readWrite, status: .limited).isVisible(g))
            }
        }
    }

    @Test func naturalNamesAreOwnNamesElseDisplayNames() {
        #expect(ViewNaming.natural(displayName: "a-1.jpg", ownName: "a.jpg") == "a.jpg")
        #expect(ViewNaming.natural(displayName: "a.jpg", ownName: nil) == "a.jpg")
        let names = ViewNaming.assign([ViewNaming.Item(key: 1, displayName: "a.jpg", ownName: nil),
                                       ViewNaming.Item(key: 2, displayName: "a-1.jpg", ownName: "a.jpg")])
        #expect(names == [2: "a.jpg", 1: "a-1.jpg"])
    }
}
