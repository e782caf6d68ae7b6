import Foundation
import GRDB
import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

// Compatible files (issue 37): an app with the `compatible` option reads HEIF photos as JPEG. The
// option is a column of `apps`; the JPEGs are the mount's (PhotoViewFS/Compatible/), cached in the
// library (`CompatibleCache`), and go with the photo when it is deleted for good.

extension Schema {
    /// v12: `apps.compatible`, the app's `compatible` option (off for every app so far), and an
    /// index of the HEIF assets: the names an app with the option sees (`renamedInView`) are
    /// settled over all of them, at every change its history records.
    static func registerV12Compatible(_ m: inout DatabaseMigrator) {
        m.registerMigration("v12-compatible") { g in let db = Database(sqlite: g)
            try db.execute(sql: """
                ALTER TABLE apps ADD COLUMN compatible INTEGER NOT NULL DEFAULT 0 CHECK (compatible IN (0,1));
                CREATE INDEX assets_heif ON assets(media_kind) WHERE media_kind = 'heif';
                """)
        }
    }
}

extension Library {
    /// Removes the compatible JPEGs made of these assets (every version and variant, and the
    /// marks of failed conversions): a photo deleted for good leaves no copy of its pixels.
    func removeCompatibleFiles(of assetIDs: [String]) {
        for id in assetIDs where CompatibleCache.isSafe(assetID: id) {
            let folder = CompatibleCache.folder(paths.cache, assetID: id)
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { continue }
            for name in names where CompatibleCache.belongs(name, toAsset: id) { unlink(folder + "/" + name) }
        }
    }
}
