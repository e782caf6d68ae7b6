import Testing
@testable import PhotoLibrary

/// Who may edit what (issue 15), as a truth table over every status, access level, asset facts,
/// consent and edit-any: own -> allowed; consent or edit-any -> allowed; otherwise needs consent;
/// add-only, hidden, trashed and shared -> never.
@Suite struct EditPolicyTruthTable {
    enum Verdict: Equatable { case allowed, needsConsent, never }

    static func verdict(_ d: EditDecision) -> Verdict {
        switch d {
        case .allowed: return .allowed
        case .needsConsent: return .needsConsent
        case .never: return .never
        }
    }

    static func expected(_ p: ViewPolicy, _ f: AssetFacts, consent: Bool, editAny: Bool) -> Verdict {
        if p.access == .addOnly || !p.isVisible(f) || f.isShared { return .never }
        if f.isOwned || consent || editAny { return .allowed }
        return .needsConsent
    }

    @Test(arguments: AccessLevel.allCases, AuthorizationStatus.allCases)
    func table(access: AccessLevel, status: AuthorizationStatus) {
        let p = ViewPolicy(access: access, status: status)
        for f in PolicyTruthTable.allFacts {
            for consent in [false, true] {
                for editAny in [false, true] {
                    let d = p.editDecision(f, consented: consent, editAny: editAny)
                    #expect(Self.verdict(d) == Self.expected(p, f, consent: consent, editAny: editAny),
                            "\(access) \(status) \(f) consent=\(consent) editAny=\(editAny): \(d)")
                    #expect(!d.reason.isEmpty)
                    #expect(d.isAllowed == (Self.verdict(d) == .allowed))
                }
            }
        }
    }

    @Test func reasonsNameTheRule() {
        let limited = ViewPolicy(access: .readWrite, status: .limited)
        #expect(limited.editDecision(AssetFacts(isOwned: true), consented: false, editAny: false) == .allowed(reason: "the app created it"))
        #expect(limited.editDecision(AssetFacts(isSelected: true), consented: true, editAny: false).reason.contains("grant --edit"))
        #expect(limited.editDecision(AssetFacts(isSelected: true), consented: false, editAny: true).reason.contains("edit-any"))
        #expect(limited.editDecision(AssetFacts(isSelected: true), consented: false, editAny: false).label == "needs-consent")
        let addOnly = ViewPolicy(access: .addOnly, status: .authorized)
        #expect(addOnly.editDecision(AssetFacts(isOwned: true), consented: true, editAny: true).label == "never")
        let authorized = ViewPolicy(access: .readWrite, status: .authorized)
        #expect(authorized.editDecision(AssetFacts(isShared: true), consented: true, editAny: true).reason.contains("cloud-shared"))
    }
}
