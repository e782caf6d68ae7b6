import Foundation
import GRDB
import PhotoLibrary
import Redaction

/// What one app gets for one asset, and why: the answer of `photogate explain`.
public struct Explanation: Sendable {
    public var asset: Asset
    public var app: AppRecord
    public var access: AccessLevel
    public var facts: AssetFacts
    public var visible: Bool
    public var reason: String
    public var stripLocation: Bool
    public var stripReason: String?
    /// nil when location is not stripped for this app.
    public var redaction: RedactionResult?
    /// Whether the app may change the asset's content, and why (`ViewPolicy.editDecision`).
    public var edit: EditDecision
    /// The version the asset shows (0: the original) and how many edits it has.
    public var currentVersion: Int
    public var edits: Int
}

extension Library {
    public func explain(_ id: AppID, asset ref: String, access: AccessLevel) throws -> Explanation {
        try read { db in
            let app = try Library.requireApp(db, id)
            guard let asset = try Library.resolve(db, [ref], as: app, appFirst: true).first else { throw LibraryError.unknownAssets([ref]) }
            let sel = try Bool.fetchOne(db, sql: "SELECT strip_location FROM selections WHERE app_id = ? AND asset_rowid = ?",
                                        arguments: [id.rawValue, asset.rowID])
            let pick = try Bool.fetchOne(db, sql: "SELECT strip_location FROM picks WHERE app_id = ? AND asset_rowid = ?",
                                         arguments: [id.rawValue, asset.rowID])
            let facts = AssetFacts(isShared: asset.isShared, isTrashed: asset.isTrashed, isOwned: asset.owner == id,
                                   isSelected: sel != nil, isPicked: pick != nil)
            let status = app.status(for: access)
            let policy = ViewPolicy(access: access, status: status)
            let visible = policy.isVisible(facts)
            var why: [String] = []
            if asset.isTrashed { why.append("it is in Recently Deleted") }
            switch policy.scope {
            case .nothing: why.append("an add-only view shows nothing")
            case .everything: if !asset.isTrashed { why.append("the app is authorized for the whole library") }
            case .limited:
                if asset.isShared { why.append("it is a cloud-shared asset, which a limited app never sees") }
                if facts.isSelected { why.append("it is in the app's selection") }
                if facts.isOwned { why.append("the app created it") }
                if facts.isPicked { why.append("it was picked for the app") }
                if !facts.isSelected && !facts.isOwned && !facts.isPicked { why.append("it is not in the app's selection, not picked, not created by the app") }
            case .pickedOnly:
                why.append(facts.isPicked ? "it was picked for the app (status \(status.rawValue) shows picked assets only)"
                                          : "status \(status.rawValue) shows picked assets only, and it was not picked")
            }
            var stripWhy: [String] = []
            if app.options.stripLocation { stripWhy.append("the app's strip-location option is on") }
            if sel == true { stripWhy.append("its grant strips location") }
            if pick == true { stripWhy.append("it was picked without location") }
            let strip = !stripWhy.isEmpty
            var redaction: RedactionResult? = nil
            if strip && visible {
                if let r = try Row.fetchOne(db, sql: "SELECT redaction, redaction_refusal FROM assets WHERE rowid = ?", arguments: [asset.rowID]) {
                    if let refusal: String = r[1] { redaction = .refuse(reason: refusal) }
                    else if let blob: Data = r[0], let plan = try? RedactionPlan(serialized: [UInt8](blob)) { redaction = .plan(plan) }
                    else { redaction = .refuse(reason: "no redaction facts recorded") }
                }
            }
            let edit = try Library.editDecision(db, app: id, rowID: asset.rowID, access: access)
            let current = try Int.fetchOne(db, sql: "SELECT current_version FROM assets WHERE rowid = ?", arguments: [asset.rowID]) ?? 0
            let edits = try Int.fetchOne(db, sql: "SELECT count(*) FROM versions WHERE asset_rowid = ? AND version > 0", arguments: [asset.rowID]) ?? 0
            return Explanation(asset: asset, app: app, access: access, facts: facts, visible: visible,
                               reason: why.joined(separator: "; "), stripLocation: strip,
                               stripReason: stripWhy.isEmpty ? nil : stripWhy.joined(separator: "; "), redaction: redaction,
                               edit: edit, currentVersion: current, edits: edits)
        }
    }
}
