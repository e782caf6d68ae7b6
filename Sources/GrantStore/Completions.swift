import Foundation
import GRDB
import PGSystem
#if canImport(Glibc)
import Glibc
#endif

/// What a shell completes on the command line (`photogate grant <TAB>`, issue 38): names read
/// from a library for a person at a prompt, at every key press. So: one read-only query on one
/// read-only connection, and nothing else. Unlike `Library.open`, nothing is migrated, tightened,
/// checkpointed or purged, and neither the catalog nor its log changes (SQLite's shared index, and
/// an empty log or index where none is, are any reader's); anything unusual (no library, another
/// user's, a catalog file replaced under running mounts or lost after a crash, a busy or damaged
/// database) completes nothing, silently.
public enum CompletionSource: Sendable {
    case apps
    /// Display names of the assets not in Recently Deleted, and their ids once a prefix is typed.
    case assets
    /// The same, of the assets in Recently Deleted (`restore`, `trash --delete`).
    case trashedAssets
    /// Album names: every album, user albums only, or shared albums only.
    case albums, userAlbums, sharedAlbums
}

/// One completion: a name, and for an asset its id (which the command line takes as well).
public struct CompletionCandidate: Sendable, Hashable {
    public let name: String
    public let id: String?
}

extension Library {
    /// The names of `source` in the library at `paths` that start with `prefix`, sorted; for
    /// assets, with their ids, and the assets whose id starts with `prefix` (a non-empty one).
    /// The names are as the catalog holds them: what a shell or a terminal may be shown is the
    /// caller's to decide (an app names its files as it likes).
    public static func completions(_ source: CompletionSource, prefix: String, at paths: LibraryPaths) -> [CompletionCandidate] {
        guard paths.exists else { return [] }
        do {
            try LibraryOwnership.check(paths)
            // A log or shared index removed or replaced under running processes, or a log lost
            // after a crash: never opened beside them, nor made anew (`Library.open` says why).
            // Otherwise a missing log or index is made empty by SQLite, as by any reader.
            try CatalogFiles.checkNotOrphaned(paths)
            try CatalogFiles.checkLogNotLost(paths, accept: false)
            var configuration = Configuration()
            configuration.readonly = true
            configuration.busyMode = .timeout(2)
            configuration.prepareDatabase { db in
                // As every photogate connection: the log is never removed at close.
                if let connection = db.sqliteConnection { _ = pg_sqlite_keep_wal(UnsafeMutableRawPointer(connection)) }
            }
            // Prefix ranges on the unique indexes: `x >= p AND x < p || U+10FFFF` (UTF-8 sorts
            // as code points do), so a library of any size is a few index pages.
            let range = { (column: String) in "\(column) >= (SELECT v FROM p) AND \(column) < (SELECT v FROM p) || '\u{10FFFF}'" }
            let sql: String
            switch source {
            case .apps:
                sql = "WITH p(v) AS (SELECT CAST(? AS TEXT)) SELECT id, NULL FROM apps WHERE \(range("id")) ORDER BY id"
            case .assets, .trashedAssets:
                let trashed = source == .trashedAssets ? "trashed_at IS NOT NULL" : "trashed_at IS NULL"
                // Ids (16 hex digits) only once something is typed: a list of names, not twice as long.
                sql = "WITH p(v) AS (SELECT CAST(? AS TEXT)) SELECT display_name, id FROM assets WHERE \(range("display_name")) AND \(trashed)"
                    + (prefix.isEmpty ? "" : " UNION SELECT id, id FROM assets WHERE \(range("id")) AND \(trashed)")
                    + " ORDER BY 1"
            case .albums, .userAlbums, .sharedAlbums:
                let kind = source == .userAlbums ? " AND kind = 'user'" : source == .sharedAlbums ? " AND kind = 'shared'" : ""
                sql = "WITH p(v) AS (SELECT CAST(? AS TEXT)) SELECT DISTINCT name, NULL FROM albums WHERE \(range("name"))\(kind) ORDER BY name"
            }
            if paths.link != nil {
                // A catalog on a server: read as any command reads it.
                let library = try Library.open(at: paths)
                return try library.read { db in
                    try Row.fetchAll(db, sql: sql, arguments: [prefix]).map { CompletionCandidate(name: $0[0], id: $0[1]) }
                }
            }
            let queue = try DatabaseQueue(path: paths.database, configuration: configuration)
            defer { try? queue.close() }
            return try queue.read { db in
                try Row.fetchAll(Database(sqlite: db), sql: sql, arguments: [prefix]).map { CompletionCandidate(name: $0[0], id: $0[1]) }
            }
        } catch {
            return []
        }
    }
}
