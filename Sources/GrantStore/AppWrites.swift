import Foundation
import GRDB
import PhotoLibrary
import Redaction

extension Library {
    /// The stored redaction facts of an asset (computed once, at import or commit).
    public func redaction(rowID: Int64) throws -> RedactionResult {
        try read { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT redaction, redaction_refusal FROM assets WHERE rowid = ?", arguments: [rowID]) else {
                throw LibraryError.unknownAssets([String(rowID)])
            }
            if let why: String = row[1] { return .refuse(reason: why) }
            guard let blob: Data = row[0] else { return .refuse(reason: "no redaction facts recorded") }
            do {
                return .plan(try RedactionPlan(serialized: [UInt8](blob)))
            } catch {
                return .refuse(reason: "stored redaction facts are unreadable")
            }
        }
    }

    /// An app renames an asset it created: it keeps seeing the name it chose; the library's
    /// display name follows when free, else gets a suffix.
    public func renameOwnAsset(rowID: Int64, app: AppID, to name: String) throws {
        try write { db in
            guard let owner = try String.fetchOne(db, sql: "SELECT owner_app FROM assets WHERE rowid = ?", arguments: [rowID]),
                  owner == app.rawValue else {
                throw LibraryError.conflict("only the app that created an asset may rename it")
            }
            let taken = try db.cachedStatement(sql: "SELECT 1 FROM assets WHERE display_name = ? AND rowid <> ?")
            let display = DisplayName.unique(DisplayName.sanitize(Array(name.utf8))) { c in
                (try? Bool.fetchOne(taken, arguments: [c, rowID])) != nil
            }
            try ViewDelta.tracking(db, [rowID], updated: [rowID]) {
                try db.execute(sql: "UPDATE assets SET owner_name = ?, display_name = ? WHERE rowid = ?", arguments: [name, display, rowID])
            }
            try Library.record(db, "rename", app: app.rawValue, asset: rowID)
        }
    }
}
