import Foundation
import GRDB
import PhotoLibrary

extension Library {
    /// How many refusals are kept per app (the oldest go first).
    public static let refusalsKept = 100

    /// Records why a file an app wrote was refused at its close. Changes no view, so no mount is
    /// woken: the app reads `.photogate/refused` when it wants to know.
    public func recordRefusal(_ app: AppID, name: String, reason: String) throws {
        try write { db in
            try Library.ensureApp(db, app)
            try db.execute(sql: "INSERT INTO refusals (app_id, at, name, reason) VALUES (?, ?, ?, ?)",
                           arguments: [app.rawValue, Library.now(), name, String(reason.prefix(1024))])
            try db.execute(sql: """
                DELETE FROM refusals WHERE app_id = ? AND id NOT IN
                    (SELECT id FROM refusals WHERE app_id = ? ORDER BY id DESC LIMIT ?)
                """, arguments: [app.rawValue, app.rawValue, Library.refusalsKept])
        }
    }

    /// Refusals, newest last; one app's or every app's.
    public func refusals(_ app: AppID? = nil) throws -> [Refusal] {
        try read { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT id, app_id, at, name, reason FROM refusals WHERE CAST(? AS TEXT) IS NULL OR app_id = ? ORDER BY id
                """, arguments: [app?.rawValue, app?.rawValue])
            return rows.map { r in
                Refusal(id: r[0], app: AppID(r[1] as String)!, date: Date(timeIntervalSince1970: r[2]), name: r[3], reason: r[4])
            }
        }
    }
}
