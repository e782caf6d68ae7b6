import Foundation
import GRDB
import PhotoLibrary
import Redaction

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

    public var visible: Bool { decision.visible }
    public var reason: String { decision.reason }
    public var stripLocation: Bool { decision.stripLocation }
    public var stripReason: String? { decision.stripReason }
    /// Whether the app may change the asset's content, and why (`ViewPolicy.editDecision`).
    public var edit: EditDecision { decision.edit }
}

extension Library {
    public func explain(_ id: AppID, asset ref: String, access: AccessLevel) throws -> Explanation {
        try read { db in
            let app = try Library.requireApp(db, id)
            guard let asset = try Library.resolve(db, [ref], as: app, appFirst: true).first else { throw LibraryError.unknownAssets([ref]) }
            guard let facts = try Library.facts(db, app: id, rowID: asset.rowID) else { throw LibraryError.unknownAssets([ref]) }
            let decision = Library.context(app, access).decide(facts)
            var name = asset.displayName
            if decision.visible, let renamed = try Library.renamedInView(db, app: app, access: access)?[asset.rowID] { name = renamed }
            var redaction: RedactionResult? = nil
            if decision.stripLocation && decision.visible {
                if let r = try Row.fetchOne(db, sql: "SELECT redaction, redaction_refusal FROM assets WHERE rowid = ?", arguments: [asset.rowID]) {
                    if let refusal: String = r[1] { redaction = .refuse(reason: refusal) }
                    else if let blob: Data = r[0], let plan = try? RedactionPlan(serialized: [UInt8](blob)) { redaction = .plan(plan) }
                    else { redaction = .refuse(reason: "no redaction facts recorded") }
                }
            }
            let current = try Int.fetchOne(db, sql: "SELECT current_version FROM assets WHERE rowid = ?", arguments: [asset.rowID]) ?? 0
            let edits = try Int.fetchOne(db, sql: "SELECT count(*) FROM versions WHERE asset_rowid = ? AND version > 0", arguments: [asset.rowID]) ?? 0
            return Explanation(asset: asset, app: app, access: access, facts: facts, decision: decision, name: name,
                               redaction: redaction, currentVersion: current, edits: edits)
        }
    }
}
