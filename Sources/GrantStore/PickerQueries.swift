import Foundation
import GRDB
import PhotoLibrary

/// What `photogate pick` lists, read in one transaction (one consistent snapshot): every asset
/// not in Recently Deleted with the columns the picker shows, every album, which albums each
/// asset is in, and the app's current grants. Light rows on purpose: 100,000 assets load in a
/// fraction of a second.
public struct PickerCatalog: Sendable {
    public struct Item: Sendable, Equatable {
        public var rowID: Int64
        public var id: String
        public var displayName: String
        public var mediaKind: String
        public var mediaClass: MediaClass
        public var byteSize: UInt64
        /// Seconds since 1970 (UTC).
        public var captureDate: Double
        public var hasLocation: Bool
        public var isShared: Bool
        /// The decision allows adding it to the app's selection (`AppContext.grantRefusal`).
        public var selectable: Bool
        /// The decision allows picking it for the app.
        public var pickable: Bool
    }

    public struct Album: Sendable, Equatable {
        public var id: Int64
        public var name: String
        public var isShared: Bool
    }

    /// Not trashed, in capture order.
    public var items: [Item]
    /// User albums, then shared albums, each by name.
    public var albums: [Album]
    /// Asset row id -> indices into `albums` (in `albums` order).
    public var albumsOfAsset: [Int64: [Int32]]
    /// The app's limited selection: asset row id -> strip-location.
    public var selection: [Int64: Bool]
    /// The app's picked assets: asset row id -> strip-location.
    public var picks: [Int64: Bool]
    /// The public id of every asset in `items`, `selection` or `picks` (a grant may name an
    /// asset in Recently Deleted).
    public var ids: [Int64: String]
}

extension Library {
    /// The picker's snapshot for one app. An app the library does not know yet has no grants.
    /// What may be offered is the decision's (`AppContext.grantRefusal`, the rule the library's
    /// `grant` enforces), never the picker's.
    public func pickerCatalog(for app: AppID) throws -> PickerCatalog {
        try read { db in
            let context = try Library.context(db, app, .readWrite)
            var items: [PickerCatalog.Item] = []
            var ids: [Int64: String] = [:]
            // The columns the picker shows, and each asset's facts from the one facts reader.
            typealias C = Library.AssetColumn
            let rows = try Row.fetchCursor(db, sql: FactsReader.sql(
                columns: FactsReader.columns([.id, .displayName, .mediaKind, .mediaClass, .byteSize, .captureDate]),
                filter: "a.trashed_at IS NULL", withConsent: false, order: "a.capture_date, a.rowid"), arguments: ["app": app.rawValue])
            while let r = try rows.next() {
                let facts = FactsReader.facts(r)
                var item = PickerCatalog.Item(
                    rowID: r[C.rowid.index], id: r[C.id.index], displayName: r[C.displayName.index], mediaKind: r[C.mediaKind.index],
                    mediaClass: MediaClass(rawValue: r[C.mediaClass.index]) ?? .photo, byteSize: UInt64(r[C.byteSize.index] as Int64),
                    captureDate: r[C.captureDate.index], hasLocation: facts.hasLocation, isShared: facts.isShared,
                    selectable: false, pickable: false)
                item.selectable = context.grantRefusal(facts, .selection) == nil
                item.pickable = context.grantRefusal(facts, .pick) == nil
                items.append(item)
                ids[item.rowID] = item.id
            }

            var albums: [PickerCatalog.Album] = []
            var albumIndex: [Int64: Int32] = [:]
            for r in try Row.fetchAll(db, sql: "SELECT id, name, kind FROM albums ORDER BY kind = 'shared', name") {
                albumIndex[r[0]] = Int32(albums.count)
                albums.append(PickerCatalog.Album(id: r[0], name: r[1], isShared: (r[2] as String) == "shared"))
            }
            var albumsOfAsset: [Int64: [Int32]] = [:]
            let pairs = try Row.fetchCursor(db, sql: "SELECT asset_rowid, album_id FROM album_assets")
            while let p = try pairs.next() {
                if let i = albumIndex[p[1]] { albumsOfAsset[p[0], default: []].append(i) }
            }
            for k in albumsOfAsset.keys { albumsOfAsset[k]!.sort() }

            func grants(_ table: String) throws -> [Int64: Bool] {
                var out: [Int64: Bool] = [:]
                let g = try Row.fetchCursor(db, sql: """
                    SELECT g.asset_rowid, g.strip_location, a.id FROM \(table) g JOIN assets a ON a.rowid = g.asset_rowid
                    WHERE g.app_id = ?
                    """, arguments: [app.rawValue])
                while let r = try g.next() {
                    out[r[0]] = r[1]
                    ids[r[0]] = r[2]
                }
                return out
            }
            let selection = try grants("selections")
            let picks = try grants("picks")
            return PickerCatalog(items: items, albums: albums, albumsOfAsset: albumsOfAsset,
                                 selection: selection, picks: picks, ids: ids)
        }
    }
}
