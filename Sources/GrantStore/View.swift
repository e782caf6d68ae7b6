import Foundation
import GRDB
import GRDBSQLite
import PhotoLibrary

/// One visible asset in an app's view.
public struct ViewEntry: Sendable {
    public var asset: Asset
    /// The name this app sees (its own name for assets it created).
    public var name: String
    public var isOwned: Bool
    public var isPicked: Bool
    public var isSelected: Bool
    /// Location must be stripped from what this app reads (app option, or per grant).
    public var stripLocation: Bool
}

public struct ViewAlbum: Sendable {
    public var name: String
    public var isShared: Bool
    /// Row ids of the visible assets in it.
    public var members: [Int64]
}

/// Everything one app may see at one access level, computed by `ViewPolicy`.
public struct ViewSnapshot: Sendable {
    public var app: AppRecord
    public var access: AccessLevel
    public var policy: ViewPolicy
    /// The visible assets, in row id order. Stored as columns (`rows`); this array is built on
    /// each access, so a mount of a million assets never holds a million `Asset` values.
    public var entries: [ViewEntry] {
        get { rows.entries() }
        set { rows = ViewRows(newValue) }
    }
    /// The same assets as columns: what a mount reads to build its in-memory view.
    public var rows: ViewRows
    public var albums: [ViewAlbum]
    /// The change log position this snapshot reflects.
    public var changeSeq: Int64

    public init(app: AppRecord, access: AccessLevel, policy: ViewPolicy, entries: [ViewEntry], albums: [ViewAlbum], changeSeq: Int64) {
        self.init(app: app, access: access, policy: policy, rows: ViewRows(entries), albums: albums, changeSeq: changeSeq)
    }

    public init(app: AppRecord, access: AccessLevel, policy: ViewPolicy, rows: ViewRows, albums: [ViewAlbum], changeSeq: Int64) {
        self.app = app
        self.access = access
        self.policy = policy
        self.rows = rows
        self.albums = albums
        self.changeSeq = changeSeq
    }
}

/// The visible assets of a view as columns: numbers in arrays, text in one byte arena. A million
/// assets take ~200 MB as `[ViewEntry]` (four heap strings each) and ~190 bytes each here, built
/// without a single String.
public struct ViewRows: Sendable {
    /// Text fields of a row, in this order in the arena.
    public enum Field: Int, CaseIterable, Sendable {
        case id, displayName, ownerName, ownerApp, mediaKind, mediaClass, contentHash, storePath, referencePath
    }
    static let fieldCount = Field.allCases.count
    /// Where each field is in `Library.assetColumns`.
    static let textColumns: [(Field, Int32)] = [(.id, 1), (.displayName, 2), (.ownerName, 3), (.ownerApp, 4), (.mediaKind, 5),
                                                (.mediaClass, 6), (.contentHash, 11), (.storePath, 14), (.referencePath, 15)]

    /// Flag bits.
    public struct Flags: OptionSet, Sendable {
        public let rawValue: UInt16
        public init(rawValue: UInt16) { self.rawValue = rawValue }
        public static let owned = Flags(rawValue: 1 << 0)
        public static let picked = Flags(rawValue: 1 << 1)
        public static let selected = Flags(rawValue: 1 << 2)
        public static let strip = Flags(rawValue: 1 << 3)
        public static let shared = Flags(rawValue: 1 << 4)
        public static let hasLocation = Flags(rawValue: 1 << 5)
        public static let trashed = Flags(rawValue: 1 << 6)
        public static let ownerNameNull = Flags(rawValue: 1 << 8)
        public static let ownerAppNull = Flags(rawValue: 1 << 9)
        public static let storePathNull = Flags(rawValue: 1 << 10)
        public static let referencePathNull = Flags(rawValue: 1 << 11)
    }

    public private(set) var rowIDs: [Int64] = []
    public private(set) var byteSizes: [UInt64] = []
    public private(set) var captureDates: [Double] = []
    public private(set) var addedDates: [Double] = []
    var trashedDates: [Double] = []
    public private(set) var flags: [Flags] = []
    var arena: [UInt8] = []
    /// End offset in `arena` of each field of each row (row * fieldCount + field).
    var ends: [UInt32] = []
    /// View names that differ from the display name (the app's own names), by row index.
    var renamed: [Int: String] = [:]
    /// Rows whose view name is not their natural name (the app's own name for its assets, else
    /// the display name) because two natural names collided. While this is 0 a change to a few
    /// rows can be applied on its own; otherwise only a whole recomputation names them right.
    public internal(set) var unsettledNames = 0

    public var count: Int { rowIDs.count }

    public init() {}

    init(_ entries: [ViewEntry]) {
        reserve(entries.count)
        for e in entries {
            let a = e.asset
            var f: Flags = []
            if e.isOwned { f.insert(.owned) }
            if e.isPicked { f.insert(.picked) }
            if e.isSelected { f.insert(.selected) }
            if e.stripLocation { f.insert(.strip) }
            if a.isShared { f.insert(.shared) }
            if a.hasLocation { f.insert(.hasLocation) }
            if a.trashedDate != nil { f.insert(.trashed) }
            if a.ownerName == nil { f.insert(.ownerNameNull) }
            if a.owner == nil { f.insert(.ownerAppNull) }
            if a.storePath == nil { f.insert(.storePathNull) }
            if a.referencePath == nil { f.insert(.referencePathNull) }
            for s in [a.id, a.displayName, a.ownerName ?? "", a.owner?.rawValue ?? "", a.mediaKind, a.mediaClass.rawValue,
                      a.contentHash, a.storePath ?? "", a.referencePath ?? ""] {
                appendText(s)
            }
            if e.name != a.displayName { renamed[rowIDs.count] = e.name }
            appendNumbers(rowID: a.rowID, size: a.byteSize, capture: a.captureDate.timeIntervalSince1970,
                          added: a.addedDate.timeIntervalSince1970, trashed: a.trashedDate?.timeIntervalSince1970 ?? 0, flags: f)
        }
    }

    mutating func reserve(_ n: Int) {
        rowIDs.reserveCapacity(n); byteSizes.reserveCapacity(n); captureDates.reserveCapacity(n)
        addedDates.reserveCapacity(n); trashedDates.reserveCapacity(n); flags.reserveCapacity(n)
        ends.reserveCapacity(n * ViewRows.fieldCount)
    }

    mutating func appendText(_ s: String) {
        var s = s
        s.withUTF8 { arena.append(contentsOf: $0) }
        ends.append(UInt32(arena.count))
    }

    mutating func appendText(_ p: UnsafePointer<UInt8>?, _ n: Int) {
        if let p, n > 0 { arena.append(contentsOf: UnsafeBufferPointer(start: p, count: n)) }
        ends.append(UInt32(arena.count))
    }

    mutating func appendNumbers(rowID: Int64, size: UInt64, capture: Double, added: Double, trashed: Double, flags f: Flags) {
        rowIDs.append(rowID)
        byteSizes.append(size)
        captureDates.append(capture)
        addedDates.append(added)
        trashedDates.append(trashed)
        flags.append(f)
    }

    /// Calls `body` with the bytes of one field of row `i`.
    public func withBytes<T>(_ field: Field, _ i: Int, _ body: (UnsafeBufferPointer<UInt8>) throws -> T) rethrows -> T {
        let k = i * ViewRows.fieldCount + field.rawValue
        let start = k == 0 ? 0 : Int(ends[k - 1]), end = Int(ends[k])
        return try arena.withUnsafeBufferPointer { try body(UnsafeBufferPointer(rebasing: $0[start..<end])) }
    }

    public func text(_ field: Field, _ i: Int) -> String? {
        let f = flags[i]
        switch field {
        case .ownerName where f.contains(.ownerNameNull), .ownerApp where f.contains(.ownerAppNull),
             .storePath where f.contains(.storePathNull), .referencePath where f.contains(.referencePathNull):
            return nil
        default:
            return withBytes(field, i) { String(decoding: $0, as: UTF8.self) }
        }
    }

    /// The name the app sees for row `i`, when it is not the display name.
    public func ownViewName(_ i: Int) -> String? { renamed[i] }

    /// The name the app gave row `i`, when it created it and named it.
    public func ownName(_ i: Int) -> String? {
        flags[i].contains(.owned) && !flags[i].contains(.ownerNameNull) ? text(.ownerName, i) : nil
    }

    /// The name row `i` has before clashes are settled (`ViewNaming.natural`): what a patch
    /// carries, and what a view shows while no name is unsettled.
    public func naturalName(_ i: Int) -> String {
        ViewNaming.natural(displayName: text(.displayName, i)!, ownName: ownName(i))
    }

    /// The name the app sees for row `i` in a whole view (not a patch).
    public func viewName(_ i: Int) -> String { renamed[i] ?? text(.displayName, i)! }

    public func asset(_ i: Int) -> Asset {
        Asset(rowID: rowIDs[i], id: text(.id, i)!, displayName: text(.displayName, i)!, ownerName: text(.ownerName, i),
              owner: text(.ownerApp, i).flatMap(AppID.init), mediaKind: text(.mediaKind, i)!,
              mediaClass: MediaClass(rawValue: text(.mediaClass, i)!) ?? .photo, byteSize: byteSizes[i],
              captureDate: Date(timeIntervalSince1970: captureDates[i]), addedDate: Date(timeIntervalSince1970: addedDates[i]),
              hasLocation: flags[i].contains(.hasLocation), contentHash: text(.contentHash, i)!,
              isShared: flags[i].contains(.shared),
              trashedDate: flags[i].contains(.trashed) ? Date(timeIntervalSince1970: trashedDates[i]) : nil,
              storePath: text(.storePath, i), referencePath: text(.referencePath, i))
    }

    public func entry(_ i: Int) -> ViewEntry {
        let a = asset(i), f = flags[i]
        return ViewEntry(asset: a, name: renamed[i] ?? a.displayName, isOwned: f.contains(.owned), isPicked: f.contains(.picked),
                         isSelected: f.contains(.selected), stripLocation: f.contains(.strip))
    }

    public func entries() -> [ViewEntry] { (0..<count).map(entry) }

    /// The index of a row id (rows are in row id order), or nil.
    public func index(ofRowID r: Int64) -> Int? {
        var lo = 0, hi = rowIDs.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if rowIDs[mid] < r { lo = mid + 1 } else { hi = mid }
        }
        return lo < rowIDs.count && rowIDs[lo] == r ? lo : nil
    }
}

extension Library {
    /// Computes an app's view. The SQL only narrows the candidates; `ViewPolicy` decides.
    /// `lean`: leave out the text a mount never reads (content hash, media kind and class), which
    /// are a third of the bytes copied for a million assets.
    public func view(for id: AppID, access: AccessLevel, lean: Bool = false) throws -> ViewSnapshot {
        try read { db in
            let app = try Library.requireApp(db, id)
            return try Library.view(db, app: app, access: access, lean: lean)
        }
    }

    /// `only`: compute just these rows (sorted row ids) and leave names unsettled and albums
    /// unfiltered (every member), for `viewUpdate`.
    static func view(_ db: Database, app: AppRecord, access: AccessLevel, only: [Int64]? = nil,
                     withAlbums: Bool = true, lean: Bool = false) throws -> ViewSnapshot {
        let context = Library.context(app, access)
        let policy = context.policy
        let seq = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'changes'") ?? 0
        let leftOut: Set<String> = lean ? ["media_kind", "media_class", "content_hash"] : []
        let cols = assetColumns.split(separator: ",").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
            .map { leftOut.contains($0) ? "NULL" : "a." + $0 }.joined(separator: ", ")
        var candidates: String
        switch policy.scope {
        case .everything: candidates = "a.trashed_at IS NULL"
        case .limited:
            candidates = """
                a.trashed_at IS NULL AND a.rowid IN (SELECT asset_rowid FROM selections WHERE app_id = :app
                UNION SELECT asset_rowid FROM picks WHERE app_id = :app UNION SELECT rowid FROM assets WHERE owner_app = :app)
                """
        case .pickedOnly: candidates = "a.trashed_at IS NULL AND a.rowid IN (SELECT asset_rowid FROM picks WHERE app_id = :app)"
        case .nothing: candidates = "0"
        }
        if let only {
            candidates += only.isEmpty ? " AND 0" : " AND a.rowid IN (\(only.map(String.init).joined(separator: ",")))"
        }
        // The one facts reader, stepped with the SQLite C API straight into columns: no Row, no
        // String per value (a mount of a million assets reads them all).
        let statement = try db.makeStatement(sql: FactsReader.sql(columns: cols, filter: candidates, withConsent: false))
        try statement.setArguments(["app": app.id.rawValue])
        var rows = ViewRows()
        var needsNaming = false
        try FactsReader.each(db, statement) { h in
            func isNull(_ c: Int32) -> Bool { sqlite3_column_type(h, c) == SQLITE_NULL }
            // Columns: see assetColumns (0...15), then the facts (FactsReader).
            let facts = FactsReader.facts(h)
            guard context.isVisible(facts) else { return }
            let owned = facts.isOwned, picked = facts.isPicked, selected = facts.isSelected
            let shared = facts.isShared, trashed = facts.isTrashed
            let strip = context.stripsLocation(facts)
            var f: ViewRows.Flags = []
            if owned { f.insert(.owned) }
            if picked { f.insert(.picked) }
            if selected { f.insert(.selected) }
            if strip { f.insert(.strip) }
            if shared { f.insert(.shared) }
            if facts.hasLocation { f.insert(.hasLocation) }
            if trashed { f.insert(.trashed) }
            // The text columns in Field order.
            for (field, column) in ViewRows.textColumns {
                if isNull(column) {
                    switch field {
                    case .ownerName: f.insert(.ownerNameNull)
                    case .ownerApp: f.insert(.ownerAppNull)
                    case .storePath: f.insert(.storePathNull)
                    case .referencePath: f.insert(.referencePathNull)
                    default: break
                    }
                    rows.appendText(nil, 0)
                } else {
                    let p = sqlite3_column_text(h, column)   // before _bytes, as SQLite asks
                    rows.appendText(p, Int(sqlite3_column_bytes(h, column)))
                }
            }
            if owned && !isNull(3) { needsNaming = true }
            rows.appendNumbers(rowID: sqlite3_column_int64(h, 0), size: UInt64(bitPattern: sqlite3_column_int64(h, 7)),
                               capture: sqlite3_column_double(h, 8), added: sqlite3_column_double(h, 9),
                               trashed: trashed ? sqlite3_column_double(h, 13) : 0, flags: f)
        }
        if needsNaming && only == nil {
            let items = (0..<rows.count).map { i in
                ViewNaming.Item(key: Int64(i), displayName: rows.text(.displayName, i)!, ownName: rows.ownName(i))
            }
            let names = ViewNaming.assign(items)
            for item in items where names[item.key] != nil && names[item.key] != item.displayName {
                rows.renamed[Int(item.key)] = names[item.key]
            }
            rows.unsettledNames = items.count { names[$0.key] != ($0.ownName ?? $0.displayName) }
        }
        // display names are unique and never reserved: without own names there is nothing to settle
        var albums: [ViewAlbum] = []
        if policy.showsAlbums && withAlbums {
            let albumRows = try Row.fetchAll(db, sql: "SELECT id, name, kind FROM albums ORDER BY kind, name")
            var members: [Int64: [Int64]] = [:]
            let pairs = try Row.fetchCursor(db, sql: "SELECT album_id, asset_rowid FROM album_assets ORDER BY album_id, asset_rowid")
            while let p = try pairs.next() {
                let asset: Int64 = p[1]
                if only != nil || rows.index(ofRowID: asset) != nil { members[p[0], default: []].append(asset) }
            }
            for r in albumRows {
                albums.append(ViewAlbum(name: r[1], isShared: (r[2] as String) == "shared", members: members[r[0]] ?? []))
            }
        }
        return ViewSnapshot(app: app, access: access, policy: policy, rows: rows, albums: albums, changeSeq: seq)
    }
}

extension Library {
    /// The names an app sees at `access` where they differ from display names (its own files'
    /// names, and clashes settled by a suffix), by row id: the names of the view build, which
    /// assigns them with `ViewNaming.assign` over the visible set (computed here over the assets a
    /// clash involves, with the same function). nil when every visible asset is seen under its
    /// display name: when none of the app's own files is named otherwise (display names are
    /// unique and never reserved, so nothing can clash), checked through the index of app-owned
    /// assets.
    static func renamedInView(_ db: Database, app: AppRecord, access: AccessLevel) throws -> [Int64: String]? {
        guard try hasRenamedOwnFiles(db, app) else { return nil }
        // Exactly what `ViewNaming.assign` gives over the whole visible set, over the few assets
        // that take part in a clash: the app's own files, and every visible asset whose display
        // name the assignment considered, until no new one turns up. Any other visible asset keeps
        // its display name, which no name considered equals (a few rows, not the library).
        let context = Library.context(app, access)
        var members: [Int64: ViewNaming.Item] = [:]
        func add(_ filter: String, _ arguments: StatementArguments) throws -> Bool {
            var added = false
            for (asset, facts) in try Library.facts(db, app: app.id, filter: filter, arguments: arguments)
            where members[asset.rowID] == nil && context.isVisible(facts) {
                members[asset.rowID] = ViewNaming.Item(key: asset.rowID, displayName: asset.displayName,
                                                       ownName: facts.isOwned ? asset.ownerName : nil)
                added = true
            }
            return added
        }
        _ = try add("a.owner_app = :app AND a.trashed_at IS NULL", [:])
        var queried = Set<String>()
        while true {
            var tried: Set<String>? = []
            let names = ViewNaming.assign(members.values.sorted { $0.key < $1.key }, tried: &tried)
            let new = tried!.subtracting(queried)
            queried.formUnion(new)
            let json = String(decoding: try JSONSerialization.data(withJSONObject: Array(new)), as: UTF8.self)
            let grew = try !new.isEmpty && add("a.display_name IN (SELECT value FROM json_each(:names))", ["names": json])
            if !grew { return names.filter { $0.value != members[$0.key]!.displayName } }
        }
    }

    /// Whether some of the app's own files have names other than their display names.
    static func hasRenamedOwnFiles(_ db: Database, _ app: AppRecord) throws -> Bool {
        try Bool.fetchOne(db, sql: """
            SELECT EXISTS (SELECT 1 FROM assets INDEXED BY assets_by_owner
                           WHERE owner_app = ? AND owner_name IS NOT NULL AND owner_name <> display_name AND trashed_at IS NULL)
            """, arguments: [app.id.rawValue]) ?? false
    }
}
