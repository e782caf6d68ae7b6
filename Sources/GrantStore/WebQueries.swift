import Foundation
import GRDB
import PhotoLibrary
import PGSystem
#if canImport(Glibc)
import Glibc
#endif

// What the person's web app (issue 35) asks of the library beyond the CLI's calls: the same
// rules, read for a page.

/// An app as the web app's Apps page shows it.
public struct AppSummary: Sendable {
    public var record: AppRecord
    /// Assets in its limited selection, handed to it as picked, and made by it (not trashed).
    public var selected: Int
    public var picked: Int
    public var created: Int
}

extension Library {
    public func appSummaries() throws -> [AppSummary] {
        try read { db in
            let apps = try Row.fetchAll(db, sql: "SELECT * FROM apps ORDER BY id").map(AppRecord.init(row:))
            func counts(_ sql: String) throws -> [String: Int] {
                var out: [String: Int] = [:]
                for r in try Row.fetchAll(db, sql: sql) { out[r[0]] = r[1] }
                return out
            }
            let selected = try counts("SELECT s.app_id, count(*) FROM selections s JOIN assets a ON a.rowid = s.asset_rowid WHERE a.trashed_at IS NULL GROUP BY s.app_id")
            let picked = try counts("SELECT p.app_id, count(*) FROM picks p JOIN assets a ON a.rowid = p.asset_rowid WHERE a.trashed_at IS NULL GROUP BY p.app_id")
            let created = try counts("SELECT owner_app, count(*) FROM assets WHERE owner_app IS NOT NULL AND trashed_at IS NULL GROUP BY owner_app")
            return apps.map { a in
                AppSummary(record: a, selected: selected[a.id.rawValue] ?? 0, picked: picked[a.id.rawValue] ?? 0,
                           created: created[a.id.rawValue] ?? 0)
            }
        }
    }

    /// Opens an asset's current original for reading as every read opens one (no symbolic link on
    /// the way, a regular file, no blocking on a FIFO), and only when it still has the bytes the
    /// catalog describes: a changed `--reference` original or a damaged store file is refused, as
    /// the mounts refuse it. The caller closes the descriptor.
    public func openCurrentOriginal(_ asset: Asset) throws -> Int32 {
        let (path, reference) = try currentOriginal(rowID: asset.rowID)
        let fd = pg_open_original(path, reference ? 1 : 0)
        guard fd >= 0 else { throw LibraryError.io("cannot open the original of \(asset.displayName): \(String(cString: strerror(errno)))") }
        var st = stat()
        let outcome = fstat(fd, &st) != 0 ? (reference ? .referenceChanged : .storeDamaged)
            : OriginalCheck.check(st, inStore: !reference, size: asset.byteSize, added: Int(asset.addedDate.timeIntervalSince1970))
        guard outcome == .same else {
            Glibc.close(fd)
            throw LibraryError.io("the original of \(asset.displayName) changed or is damaged (photogate verify reports it)")
        }
        return fd
    }

    /// Every asset's current content hash by row (thumbnails are keyed by it).
    public func contentHashes() throws -> [Int64: String] {
        try read { db in
            var out: [Int64: String] = [:]
            for r in try Row.fetchAll(db, sql: "SELECT rowid, content_hash FROM assets") { out[r[0]] = r[1] }
            return out
        }
    }

    /// The apps that see an asset now, and at which level (the one decision every view uses).
    public func appsSeeing(_ asset: Asset) throws -> [(app: AppID, access: AccessLevel)] {
        var out: [(AppID, AccessLevel)] = []
        for a in try apps() {
            for level in [AccessLevel.readWrite, .addOnly] {
                if let e = try? explainFacts(a.id, asset: asset.id, access: level), e.visible { out.append((a.id, level)) }
            }
        }
        return out
    }
}

extension Library {
    /// Deletes assets in Recently Deleted for good (the person's choice, from the web app's
    /// Recently Deleted or `photogate trash --delete`): their rows, versions, album places and
    /// grants go, and their store files (every version's) once no other asset or version names
    /// them. Referenced originals (`import --reference`) are the person's own files elsewhere and
    /// are never touched. Refuses (changing nothing) when any is not in Recently Deleted. Views
    /// change in nothing (a trashed asset is in none); the row numbers are never given again.
    @discardableResult
    public func deleteForGood(_ refs: [String]) throws -> [Asset] {
        try deleteForGood(detail: "by the person") { db in
            let assets = try Library.resolve(db, refs)
            let live = assets.filter { !$0.isTrashed }
            if !live.isEmpty {
                throw LibraryError.conflict("not in Recently Deleted: \(live.map { "'\($0.displayName)'" }.joined(separator: ", ")) (photogate delete moves it there first); nothing was deleted")
            }
            return assets
        }
    }

    /// Deletes for good the assets `select` picks in the transaction (all in Recently Deleted), each
    /// recorded in the change log as `purge` with its id, name and `detail` (who or why).
    func deleteForGood(detail: String, _ select: (Database) throws -> [Asset]) throws -> [Asset] {
        var thumbs: [String] = []
        let (assets, files): ([Asset], [String]) = try write { db in
            let assets = try select(db)
            precondition(assets.allSatisfy(\.isTrashed), "only assets in Recently Deleted are deleted for good")
            guard !assets.isEmpty else { return ([], []) }
            let rows = assets.map(\.rowID)
            var hashes = Set(assets.map(\.contentHash))
            for r in rows {
                for h in try String.fetchAll(db, sql: "SELECT content_hash FROM versions WHERE asset_rowid = ?", arguments: [r]) { hashes.insert(h) }
            }
            var paths = Set<String>()
            for r in rows {
                for p in try String.fetchAll(db, sql: "SELECT store_path FROM versions WHERE asset_rowid = ? AND store_path IS NOT NULL", arguments: [r]) { paths.insert(p) }
                if let p = try String.fetchOne(db, sql: "SELECT store_path FROM assets WHERE rowid = ?", arguments: [r]) { paths.insert(p) }
                // Its sidecars' files (each version's own, never another asset's) go with it.
                for p in try String.fetchAll(db, sql: "SELECT store_path FROM sidecars WHERE asset_rowid = ? AND store_path IS NOT NULL", arguments: [r]) { paths.insert(p) }
            }
            for a in assets {
                try db.execute(sql: "DELETE FROM assets WHERE rowid = ?", arguments: [a.rowID])   // versions, consents, places cascade
                try Library.record(db, .purge, asset: a.rowID, detail: "\(a.id) \(a.displayName): \(detail)")
            }
            // A store file another asset or version still names stays.
            let orphaned = try paths.filter { p in
                try Bool.fetchOne(db, sql: "WITH p(v) AS (SELECT CAST(? AS TEXT)) SELECT CASE WHEN EXISTS (SELECT 1 FROM assets WHERE store_path = (SELECT v FROM p)) OR EXISTS (SELECT 1 FROM versions WHERE store_path = (SELECT v FROM p)) OR EXISTS (SELECT 1 FROM sidecars WHERE store_path = (SELECT v FROM p)) THEN 1 ELSE 0 END", arguments: [p]) != true
            }
            // Their thumbnails go too (`thumbs/<hh>/<hash>-<size>.jpg`, the web app's cache), unless
            // another asset or version has the same bytes.
            let unused = try hashes.filter { h in
                try Bool.fetchOne(db, sql: "WITH p(v) AS (SELECT CAST(? AS TEXT)) SELECT CASE WHEN EXISTS (SELECT 1 FROM assets WHERE content_hash = (SELECT v FROM p)) OR EXISTS (SELECT 1 FROM versions WHERE content_hash = (SELECT v FROM p)) THEN 1 ELSE 0 END", arguments: [h]) != true
            }
            thumbs = unused.compactMap { $0.split(separator: ":").last.map(String.init) }.filter { $0.allSatisfy(\.isHexDigit) && $0.count >= 2 }
            return (assets, orphaned.filter(StorePath.isValid))
        }
        for rel in files { unlink(paths.store + "/" + rel) }
        removeCompatibleFiles(of: assets.map(\.id))
        for h in thumbs {
            for name in ["small.jpg", "large.jpg", "small.jpg.failed", "large.jpg.failed"] {
                unlink("\(paths.root)/thumbs/\(h.prefix(2))/\(h)-\(name)")
            }
        }
        return assets
    }
}
