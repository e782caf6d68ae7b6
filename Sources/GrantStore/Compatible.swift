import Foundation
import GRDB
import PhotoLibrary

// Compatible files (issue 37): an app with the `compatible` option reads HEIF photos as JPEG. The
// option is a column of `apps`.

extension Schema {
    /// v12: `apps.compatible`, the app's `compatible` option (off for every app so far), and an
    /// index of the HEIF assets: the names an app with the option sees (`renamedInView`) are
    /// settled over all of them, at every change its history records.
    static func registerV12Compatible(_ m: inout DatabaseMigrator) {
        m.registerMigration("v12-compatible") { db in
            try db.execute(sql: """
                ALTER TABLE apps ADD COLUMN compatible INTEGER NOT NULL DEFAULT 0 CHECK (compatible IN (0,1));
                CREATE INDEX assets_heif ON assets(media_kind) WHERE media_kind = 'heif';
                """)
        }
    }
}
