import Testing
@testable import PhotoLibrary

/// The README's "What a mount shows" table, as an exhaustive truth table:
/// status x access level x ownership x shared x picked x selected x trashed.
@Suite struct PolicyTruthTable {
    static let bools = [false, true]

    static func expectedVisible(_ access: AccessLevel, _ status: AuthorizationStatus, _ f: AssetFacts) -> Bool {
        if f.isTrashed { return false }
        if access == .addOnly { return false }
        switch status {
        case .authorized: return true
        case .limited: return !f.isShared && (f.isSelected || f.isOwned || f.isPicked)
        case .denied, .restricted, .notDetermined: return f.isPicked
        }
    }

    static var allFacts: [AssetFacts] {
        var out: [AssetFacts] = []
        for s in bools { for t in bools { for o in bools { for sel in bools { for p in bools {
            out.append(AssetFacts(isShared: s, isTrashed: t, isOwned: o, isSelected: sel, isPicked: p))
        } } } } }
        return out
    }

    @Test(arguments: AccessLevel.allCases, AuthorizationStatus.allCases)
    func visibility(access: AccessLevel, status: AuthorizationStatus) {
        let policy = ViewPolicy(access: access, status: status)
        for f in Self.allFacts {
            #expect(policy.isVisible(f) == Self.expectedVisible(access, status, f), "\(access) \(status) \(f)")
        }
    }

    @Test(arguments: AccessLevel.allCases, AuthorizationStatus.allCases)
    func writes(access: AccessLevel, status: AuthorizationStatus) {
        let p = ViewPolicy(access: access, status: status)
        let expectCreate: Bool = access == .readWrite ? (status == .authorized || status == .limited) : status == .authorized
        #expect(p.canCreate == expectCreate)
        #expect(p.showsAlbums == (access == .readWrite && status == .authorized))
        #expect(p.canEditAlbums == p.showsAlbums)
        for f in Self.allFacts {
            let visible = Self.expectedVisible(access, status, f)
            let expectDelete: Bool
            if !visible || f.isShared || access == .addOnly { expectDelete = false }
            else if status == .authorized { expectDelete = true }
            else if status == .limited { expectDelete = f.isOwned }
            else { expectDelete = false }
            #expect(p.canDelete(f) == expectDelete, "\(access) \(status) \(f)")
            // An add-only app renames the files it wrote (rsync's temp name), though it sees none.
            #expect(p.canRename(f) == ((visible || access == .addOnly) && !f.isTrashed && f.isOwned && expectCreate), "\(access) \(status) \(f)")
        }
    }

    /// The view build's pre-filter (`candidates`) admits every asset the rule shows, whatever
    /// the other facts (the SQL it becomes is held to the same over random catalogs:
    /// `GrantStoreTests.ViewPreFilter`).
    @Test(arguments: AccessLevel.allCases, AuthorizationStatus.allCases)
    func candidatesAdmitEveryVisibleAsset(access: AccessLevel, status: AuthorizationStatus) {
        let p = ViewPolicy(access: access, status: status)
        for f in Self.allFacts where p.isVisible(f) {
            #expect(p.candidates.admits(f), "\(access) \(status) \(f)")
        }
    }

    @Test func limitedNeverShowsSharedEvenWhenGranted() {
        let p = ViewPolicy(access: .readWrite, status: .limited)
        #expect(!p.isVisible(AssetFacts(isShared: true, isSelected: true)))
        #expect(!p.isVisible(AssetFacts(isShared: true, isOwned: true, isPicked: true)))
        #expect(p.isVisible(AssetFacts(isSelected: true)))
    }

    @Test func addOnlyShowsNothingEvenOwnAssets() {
        let p = ViewPolicy(access: .addOnly, status: .authorized)
        #expect(!p.isVisible(AssetFacts(isOwned: true, isSelected: true, isPicked: true)))
        #expect(p.canCreate)
        #expect(!ViewPolicy(access: .addOnly, status: .denied).canCreate)
    }

    @Test func limitedIsReadWriteOnly() {
        #expect(AuthorizationStatus.limited.isValid(for: .readWrite))
        #expect(!AuthorizationStatus.limited.isValid(for: .addOnly))
        for s in AuthorizationStatus.allCases where s != .limited { #expect(s.isValid(for: .addOnly)) }
    }
}

@Suite struct AppIDRules {
    @Test(arguments: ["org.example.Editor", "com.a", "a.b.c-d_e", "X1.y2"])
    func valid(_ s: String) { #expect(AppID(s) != nil) }

    @Test(arguments: ["", "editor", ".org.x", "org..x", "org.x.", "1org.x", "org.-x", "org.ex ample", "org/x.y",
                      "org.x\u{0}", "örg.x", String(repeating: "a.", count: 70) + "a", "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q"])
    func invalid(_ s: String) { #expect(AppID(s) == nil, "\(s)") }

    @Test func ruleExplains() {
        #expect(AppID.rule.contains("reverse-DNS"))
        #expect(AppID.rule.contains("org.example.Editor"))
    }
}
