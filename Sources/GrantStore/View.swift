import Foundation
import GRDB
import GRDBSQLite
import PhotoLibrary
import Synchronization
import Threads

extension Library {
    /// The text columns a lean view leaves out (NULL in its SQL, empty in its rows).
    static let leanLeftOut: Set<Int32> = [AssetColumn.mediaKind.rawValue, AssetColumn.mediaClass.rawValue, AssetColumn.contentHash.rawValue]

    /// Computes an app's view. The SQL only narrows the candidates; `ViewPolicy` decides.
    /// `lean`: leave out the text a mount never reads (content hash, media kind and class), which
    /// are a third of the bytes copied for a million assets.
    public func view(for id: AppID, access: AccessLevel, lean: Bool = false) throws -> ViewSnapshot {
        try view(for: id, access: access, lean: lean, halvesFrom: Library.halvedViewRows)
    }

    /// Libraries whose row ids span at least this many rows read a whole view in two halves at once.
    static let halvedViewRows: Int64 = 100_000
    /// Views read in halves so far (for tests: that the halves were taken, not the fallback).
    static let halvedViews = Atomic<Int>(0)

    /// `halvesFrom`, `beforeSecondHalf`: for tests (the threshold, nil for never; and a step run
    /// just before the second half's read begins).
    func view(for id: AppID, access: AccessLevel, lean: Bool, halvesFrom: Int64?,
              beforeSecondHalf: (@Sendable () -> Void)? = nil) throws -> ViewSnapshot {
        if let halvesFrom, let s = try viewInHalves(for: id, access: access, lean: lean, from: halvesFrom, beforeSecondHalf: beforeSecondHalf) {
            return s
        }
        return try read { db in
            let app = try Library.requireApp(db, id)
            return try Library.view(db, app: app, access: access, lean: lean)
        }
    }

    /// A whole view read as two halves of the row ids at once, on two connections: stepping a
    /// million rows is most of a mount's start, and one core did it while the other waited.
    /// The halves are two transactions, so they are one view only when both saw the same
    /// library: the same app record and the same change log position (every change a view can
    /// show is logged, which is also what running mounts rely on to catch up). Otherwise, or
    /// when a second thread cannot start, nil: the caller reads the view in one transaction.
    private func viewInHalves(for id: AppID, access: AccessLevel, lean: Bool, from: Int64,
                              beforeSecondHalf: (@Sendable () -> Void)?) throws -> ViewSnapshot? {
        let span = try read { db in try Row.fetchOne(db, sql: "SELECT (SELECT min(rowid) FROM assets), (SELECT max(rowid) FROM assets)") }
        // Row ids are any Int64 a writer chose (SQLite's own are positive): no arithmetic here
        // may overflow. `width` is hi - lo + 1 (saturated).
        guard let lo: Int64 = span?[0], let hi: Int64 = span?[1], hi >= lo else { return nil }
        let gap = UInt64(bitPattern: hi &- lo)
        let width = Int64(clamping: gap == .max ? gap : gap + 1)
        guard width >= max(from, 2) else { return nil }
        let mid = lo &+ Int64(bitPattern: gap / 2)
        typealias Half = (app: AppRecord, seq: Int64, rows: ViewRows, needsNaming: Bool)
        let second = ResultBox<Half>()
        return try read { db -> ViewSnapshot? in
            // This transaction's snapshot is taken by its first read, before the second half starts.
            let app = try Library.requireApp(db, id)
            let seq = try Library.changeSeq(db)
            guard let thread = NativeThread.spawn(name: "photogate-view", { [self] in
                beforeSecondHalf?()
                second.set(Result { try read { db in
                    let app = try Library.requireApp(db, id)
                    let seq = try Library.changeSeq(db)
                    let (rows, naming) = try Library.viewRows(db, app: app, access: access, only: nil, rowIDs: (mid + 1)...hi,
                                                              lean: lean, reserve: width / 2)
                    return (app, seq, rows, naming)
                } })
            }) else { return nil }
            let first = Result { try Library.viewRows(db, app: app, access: access, only: nil, rowIDs: lo...mid, lean: lean, reserve: width) }
            thread.join()
            let (rows, naming) = try first.get()
            let other = try second.get()
            guard other.app == app, other.seq == seq else { return nil }
            var all = rows
            all.append(contentsOf: other.rows)
            Library.halvedViews.add(1, ordering: .relaxed)
            return try Library.finishView(db, app: app, access: access, rows: all, needsNaming: naming || other.needsNaming,
                                          only: nil, withAlbums: true, seq: seq)
        }
    }

    static func changeSeq(_ db: Database) throws -> Int64 {
        try Library.lastChange(db)
    }

    /// `only`: compute just these rows (sorted row ids) and leave names unsettled and albums
    /// unfiltered (every member), for `viewUpdate`.
    static func view(_ db: Database, app: AppRecord, access: AccessLevel, only: [Int64]? = nil,
                     withAlbums: Bool = true, lean: Bool = false) throws -> ViewSnapshot {
        let seq = try changeSeq(db)
        var reserve: Int64 = 0
        if only == nil && Library.context(app, access).policy.scope == .everything {
            reserve = try Int64.fetchOne(db, sql: "SELECT max(rowid) FROM assets") ?? 0
        }
        let (rows, needsNaming) = try viewRows(db, app: app, access: access, only: only, rowIDs: nil, lean: lean, reserve: reserve)
        return try finishView(db, app: app, access: access, rows: rows, needsNaming: needsNaming, only: only, withAlbums: withAlbums, seq: seq)
    }

    /// The rows of a view (`rowIDs`: only those in this range), and whether some own names may
    /// need settling (`finishView`). `reserve`: room for about this many rows, when the view shows
    /// every asset.
    static func viewRows(_ db: Database, app: AppRecord, access: AccessLevel, only: [Int64]?, rowIDs range: ClosedRange<Int64>?,
                         lean: Bool, reserve: Int64) throws -> (ViewRows, needsNaming: Bool) {
        let context = Library.context(app, access)
        let policy = context.policy
        // A whole view reads the app's grants once and joins nothing per asset; a patch of a few
        // rows joins them (it would otherwise read every grant of the app for a handful of rows).
        let grants = only == nil ? try FactsReader.Grants.read(db, app: app.id) : nil
        let (sql, arguments) = viewRowsQuery(db, app: app, access: access, only: only, rowIDs: range, lean: lean)
        let statement = try only != nil && range == nil ? db.cachedStatement(sql: sql) : db.makeStatement(sql: sql)
        try statement.setArguments(arguments)
        var rows = ViewRows()
        if policy.scope == .everything && reserve > 0 && !db.isPostgres {
            // Room for every asset up front: growing the columns of a million rows by doubling
            // copied them and faulted in fresh pages over and over (a fifth of a mount's build).
            // Room never written to costs address space, not memory. 96 bytes of text a row is
            // more than a lean row's id, name and path take (~60-80). `reserve` comes from row
            // ids, which say nothing certain of the count (deleted rows leave gaps; a row id can
            // be huge), so it is bounded by the database's size: no row takes under 32 bytes
            // there, and the text read is in it.
            let file = try Int64.fetchOne(db, sql: "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()") ?? 0
            let most = Int(min(reserve, file / 32, 1 << 24))
            rows.reserve(most, textBytes: Int(min(Int64(most) * (lean ? 96 : 192), file)))
        }
        var needsNaming = false
        typealias C = Library.AssetColumn
        // A million rows make every C call per row count (~40 per row took half the read): text
        // columns read NULL as a nil pointer (its type asked only then), the left-out columns are
        // not asked at all, the row id is read once.
        let textColumns = lean ? ViewRows.textColumns.filter { !Library.leanLeftOut.contains($0.1) } : ViewRows.textColumns
        func take<Source: ColumnSource>(_ h: Source) throws {
            let rowID = h.int(C.rowid.rawValue)
            // Columns: see assetColumns (0...15), then the facts (FactsReader).
            let facts = grants.map { FactsReader.facts(h, rowID: rowID, grants: $0) } ?? FactsReader.facts(h)
            guard context.isVisible(facts) else { return }
            // A row naming a store file photogate never writes (`StorePath`: "../../etc/shadow")
            // is damaged: it is in no view, so no mount ever builds a path from it (verify
            // reports it). A few byte compares on SQLite's own copy of the text.
            if try !h.withText(C.storePath.rawValue, { p, n in p.map { StorePath.isValid(UnsafeRawBufferPointer(start: $0, count: n)) } ?? true }) {
                return
            }
            let owned = facts.isOwned, trashed = facts.isTrashed
            var f: ViewRows.Flags = []
            if owned { f.insert(.owned) }
            if facts.isPicked { f.insert(.picked) }
            if facts.isSelected { f.insert(.selected) }
            if context.stripsLocation(facts) { f.insert(.strip) }
            // The mount shows the file writable exactly where an open for writing would save.
            if context.editDecision(facts).isAllowed { f.insert(.editable) }
            // What `rm` and `mv` of it may do, decided here on the facts the mount has not got.
            if policy.canDelete(facts) { f.insert(.deletable) }
            if policy.canRename(facts) { f.insert(.renamable) }
            // Shown as a JPEG under another name than its display name: names to settle.
            if context.servesCompatible(facts) { f.insert(.compatible); needsNaming = true }
            if facts.isShared { f.insert(.shared) }
            if facts.hasLocation { f.insert(.hasLocation) }
            if trashed { f.insert(.trashed) }
            // The text columns in Field order (left-out ones empty).
            var next = 0
            for field in ViewRows.Field.allCases {
                guard next < textColumns.count, textColumns[next].0 == field else { rows.appendText(nil, 0); continue }
                let column = textColumns[next].1
                next += 1
                if try h.withText(column, { p, n in
                    guard let p else { return false }
                    rows.appendText(p, n)
                    return true
                }) { continue }
                switch field {
                case .ownerName: f.insert(.ownerNameNull)
                case .ownerApp: f.insert(.ownerAppNull)
                case .storePath: f.insert(.storePathNull)
                case .referencePath: f.insert(.referencePathNull)
                default: break
                }
                rows.appendText(nil, 0)
            }
            if owned && !f.contains(.ownerNameNull) { needsNaming = true }
            rows.appendNumbers(rowID: rowID,
                               size: UInt64(bitPattern: h.int(C.byteSize.rawValue)),
                               capture: h.double(C.captureDate.rawValue), added: h.double(C.addedAt.rawValue),
                               trashed: trashed ? h.double(C.trashedAt.rawValue) : 0, flags: f)
        }
        if db.isPostgres {
            for row in try Row.fetchAll(statement) { try take(RowColumns(row: row)) }
        } else {
            let connection = db.sqliteConnection
            try FactsReader.each(db, statement) { try take(SQLiteColumns(h: $0, connection: connection)) }
        }
        return (rows, needsNaming)
    }

    /// The statement of `viewRows` and its arguments (its plan is held by a test: a patch reads
    /// its rows by id, whatever the app's grants).
    static func viewRowsQuery(_ db: Database, app: AppRecord, access: AccessLevel, only: [Int64]?, rowIDs range: ClosedRange<Int64>?,
                              lean: Bool) -> (sql: String, arguments: StatementArguments) {
        let policy = Library.context(app, access).policy
        let leftOut: Set<String> = lean ? Set(Library.leanLeftOut.map { Library.AssetColumn(rawValue: $0)!.name }) : []
        let cols = assetColumns.split(separator: ",").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
            .map { leftOut.contains($0) ? "NULL" : "a." + $0 }.joined(separator: ", ")
        // A whole view: only the assets that can be visible at all (`ViewPolicy.candidates`); a
        // patch: its rows by id, trashed ones left out (below). `isVisible` decides.
        var candidates = FactsReader.condition(policy.candidates)
        var arguments: StatementArguments = ["app": app.id.rawValue]
        if let only {
            // A patch of these rows: the ids drive the loop, one lookup each. The pre-filter of
            // the app's ties (`candidates`: it may let in more, never fewer; `isVisible` decides)
            // is left out, unless it lets in nothing: with it, SQLite stepped every asset the app
            // is tied to, once per change. The ids are bound as one JSON array, not written into
            // the text, so the statement is prepared once per connection (preparing it, through
            // GRDB's authorizer, was ~12% of a viewer mount's CPU while photos were added).
            if policy.candidates.ties?.isEmpty != true {
                candidates = FactsReader.condition(ViewPolicy.Candidates(untrashed: policy.candidates.untrashed, ties: nil))
            }
            if only.isEmpty {
                candidates += " AND 1 = 0"
            } else {
                candidates += " AND a.rowid IN (\(Library.boundList(db, "only")))"
                arguments += ["only": Library.rowIDsJSON(only)]
            }
        }
        if let range { candidates += " AND a.rowid BETWEEN \(range.lowerBound) AND \(range.upperBound)" }
        // The one facts reader, stepped with the SQLite C API straight into columns: no Row, no
        // String per value (a mount of a million assets reads them all). A patch joins the app's
        // grants; a whole view reads them apart (`viewRows`).
        let sql = only != nil ? FactsReader.sql(columns: cols, filter: candidates) : FactsReader.sqlUnjoined(columns: cols, filter: candidates)
        return (sql, arguments)
    }

    /// A view from its rows: own names settled (unless `only`), albums, the change log position.
    static func finishView(_ db: Database, app: AppRecord, access: AccessLevel, rows: ViewRows, needsNaming: Bool,
                           only: [Int64]?, withAlbums: Bool, seq: Int64) throws -> ViewSnapshot {
        var rows = rows
        let policy = Library.context(app, access).policy
        if needsNaming && only == nil {
            let items = (0..<rows.count).map { i in
                ViewNaming.Item(key: Int64(i), displayName: rows.text(.displayName, i)!, ownName: rows.ownName(i),
                                compatible: rows.flags[i].contains(.compatible))
            }
            let names = ViewNaming.assign(items)
            for item in items where names[item.key] != nil && names[item.key] != item.displayName {
                rows.renamed[Int(item.key)] = names[item.key]
            }
            rows.unsettledNames = items.count { names[$0.key] != rows.naturalName(Int($0.key)) }
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
        // Sidecars (issue 37) of the visible rows: few, so read whole and kept where the row is.
        let sidecars = policy.scope == .nothing ? [] : try currentSidecars(db, rowIDs: only).filter { rows.index(ofRowID: $0.key.rowID) != nil }
        return ViewSnapshot(app: app, access: access, policy: policy, rows: rows, albums: albums, sidecars: sidecars, changeSeq: seq)
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
    /// An app with the `compatible` option sees its HEIF photos under `.jpg` names: those are
    /// renamed too, and every one of them takes part (any may clash).
    static func renamedInView(_ db: Database, app: AppRecord, access: AccessLevel) throws -> [Int64: String]? {
        let compatible = app.options.compatible && Library.context(app, access).policy.scope != .nothing
        guard try compatible || hasRenamedOwnFiles(db, app) else { return nil }
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
                                                       ownName: facts.isOwned ? asset.ownerName : nil,
                                                       compatible: context.servesCompatible(facts))
                added = true
            }
            return added
        }
        _ = try add("a.owner_app = :app AND a.trashed_at IS NULL", [:])
        if compatible { _ = try add("a.media_kind = 'heif' AND a.trashed_at IS NULL", [:]) }
        var queried = Set<String>()
        while true {
            var tried: Set<String>? = []
            let names = ViewNaming.assign(members.values.sorted { $0.key < $1.key }, tried: &tried)
            let new = tried!.subtracting(queried)
            queried.formUnion(new)
            let json = String(decoding: try JSONSerialization.data(withJSONObject: Array(new)), as: UTF8.self)
            let grew = try !new.isEmpty && add("a.display_name IN (\(Library.boundList(db, "names", of: .text)))", ["names": json])
            if !grew { return names.filter { $0.value != members[$0.key]!.displayName } }
        }
    }

    /// Whether some of the app's own files have names other than their display names.
    static func hasRenamedOwnFiles(_ db: Database, _ app: AppRecord) throws -> Bool {
        try Bool.fetchOne(db.cachedStatement(sql: """
            SELECT CASE WHEN EXISTS (SELECT 1 FROM assets
                           WHERE owner_app = ? AND owner_name IS NOT NULL AND owner_name <> display_name AND trashed_at IS NULL) THEN 1 ELSE 0 END
            """), arguments: [app.id.rawValue]) ?? false
    }
}

extension Library {
    enum BoundListKind { case rowIDs, text }

    /// A subquery giving the values bound as one JSON array under `name` (`rowIDsJSON` for row
    /// ids), for `x IN (...)`: the statement's text does not change with the values, so it can be
    /// cached.
    static func boundList(_ db: Database, _ name: String, of kind: BoundListKind = .rowIDs) -> String {
        guard db.isPostgres else { return "SELECT value FROM json_each(:\(name))" }
        let elements = "json_array_elements_text(CAST(:\(name) AS json))"
        return kind == .rowIDs ? "SELECT CAST(\(elements) AS BIGINT)" : "SELECT \(elements)"
    }

    static func rowIDsJSON(_ ids: [Int64]) -> String {
        "[" + ids.map(String.init).joined(separator: ",") + "]"
    }
}

/// A result handed from one thread to another (the second half of a view).
final class ResultBox<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var result: Result<T, any Error>?

    func set(_ r: Result<T, any Error>) { lock.withLock { result = r } }

    /// The result; call after the thread that sets it has been joined.
    func get() throws -> T {
        guard let r = lock.withLock({ result }) else { throw LibraryError.io("a view's second half gave no result") }
        return try r.get()
    }
}
