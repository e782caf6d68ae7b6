import Foundation
import GRDB
import PhotoLibrary
import Redaction
import PGSystem
#if canImport(Glibc)
import Glibc
#endif

/// What one app gets for one asset, and why: the answer of `photogate explain`. Every verdict
/// in it is `AppContext.decide`'s, from the facts of the one reader, and the name is the view's.
public struct Explanation: Sendable {
    public var asset: Asset
    public var app: AppRecord
    public var access: AccessLevel
    public var facts: AssetFacts
    public var decision: AssetDecision
    /// The name the app sees the asset under, when it is visible (the view's name: its own name,
    /// or a clash settled by a suffix); its display name otherwise.
    public var name: String
    /// nil when location is not stripped for this app.
    public var redaction: RedactionResult?
    /// The version the asset shows (0: the original) and how many edits it has.
    public var currentVersion: Int
    public var edits: Int
    /// What opening the original for the app finds (`OriginalCheck`, as a mount's open asks),
    /// when it is visible; nil when hidden, or when the original cannot be opened (`openError`).
    public var original: OriginalCheck.Outcome?
    public var openError: String?
    /// The set grants the asset is selected through, when it is not granted directly
    /// ("set 1 (album 'Summer')"): named in the reason.
    public var grantedThrough: [String] = []
    /// The asset's current sidecars (issue 37) under the names the app sees them by, when the
    /// asset is visible: each shows where the photo shows, and is written with the photo's edit
    /// decision (`sidecarEdit`).
    public var sidecars: [(name: String, sidecar: ViewSidecar)] = []
    /// Whether the app may write the asset's sidecars (`ViewPolicy.sidecarDecision`).
    public var sidecarEdit: EditDecision = .never(reason: "")

    public var visible: Bool { decision.visible }
    public var reason: String {
        guard facts.isSelected, !grantedThrough.isEmpty else { return decision.reason }
        return decision.reason.replacingOccurrences(of: "it is in the app's selection",
                                                    with: "it is in the app's selection through its grant of \(grantedThrough.joined(separator: " and "))")
    }
    public var stripLocation: Bool { decision.stripLocation }
    public var stripReason: String? { decision.stripReason }
    /// Whether the app may change the asset's content, and why (`ViewPolicy.editDecision`).
    public var edit: EditDecision { decision.edit }
}

extension Library {
    /// The mount's answers, through the mount's own calls: the redaction is `redaction(rowID:)`
    /// (which rescans what an older scanner described), and the original is opened and checked
    /// as a mount's open does it (`OriginalCheck`).
    public func explain(_ id: AppID, asset ref: String, access: AccessLevel) throws -> Explanation {
        var e = try explainFacts(id, asset: ref, access: access)
        guard e.visible else { return e }
        if e.stripLocation { e.redaction = (try? redaction(rowID: e.asset.rowID)) ?? .refuse(reason: "redaction facts unavailable") }
        let (path, reference) = try currentOriginal(rowID: e.asset.rowID)
        let fd = pg_open_original(path, reference ? 1 : 0)
        if fd < 0 {
            e.openError = String(cString: strerror(errno))
        } else {
            var st = stat()
            e.original = fstat(fd, &st) != 0 ? (reference ? .referenceChanged : .storeDamaged)
                : OriginalCheck.check(st, inStore: !reference, size: e.asset.byteSize, added: Int(e.asset.addedDate.timeIntervalSince1970))
            Glibc.close(fd)
        }
        return e
    }

    func explainFacts(_ id: AppID, asset ref: String, access: AccessLevel) throws -> Explanation {
        try read { db in
            let app = try Library.requireApp(db, id)
            guard let asset = try Library.resolve(db, [ref], as: app, appFirst: true).first else { throw LibraryError.unknownAssets([ref]) }
            guard let facts = try Library.facts(db, app: id, rowID: asset.rowID) else { throw LibraryError.unknownAssets([ref]) }
            let decision = Library.context(app, access).decide(facts)
            var name = asset.displayName
            if decision.visible, let renamed = try Library.renamedInView(db, app: app, access: access)?[asset.rowID] { name = renamed }
            let current = try Int.fetchOne(db, sql: "SELECT current_version FROM assets WHERE rowid = ?", arguments: [asset.rowID]) ?? 0
            let edits = try Int.fetchOne(db, sql: "SELECT count(*) FROM versions WHERE asset_rowid = ? AND version > 0", arguments: [asset.rowID]) ?? 0
            var e = Explanation(asset: asset, app: app, access: access, facts: facts, decision: decision, name: name,
                                redaction: nil, currentVersion: current, edits: edits, original: nil, openError: nil)
            let context = Library.context(app, access)
            e.sidecarEdit = context.policy.sidecarDecision(facts, consented: facts.editConsent, editAny: context.options.editAny)
            if decision.visible {
                e.sidecars = try Library.currentSidecars(db, rowIDs: [asset.rowID]).map { ($0.key.name(besidePhoto: name), $0) }
            }
            if facts.isSelected, try Int64.fetchOne(db, sql: "SELECT direct FROM selections WHERE app_id = ? AND asset_rowid = ?",
                                                    arguments: [id.rawValue, asset.rowID]) == 0 {
                e.grantedThrough = try Library.setsCovering(db, app: id.rawValue, rowID: asset.rowID)
            }
            return e
        }
    }
}
