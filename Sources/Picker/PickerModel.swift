// Kept in one file (over ~400 lines): the picker's one state machine (selection, filter, focus, strip-location).
/// The picker's model: what it offers, what is selected, what the person is looking at, and the
/// grants to add or revoke. Pure value logic on plain values (no terminal, no database), so every
/// rule is unit-tested. The terminal front end (`PickerController`, `PickerSession`) drives it.

/// One asset as the picker shows it.
public struct PickerAsset: Sendable, Equatable {
    /// The library's row id: the key of selections and grants.
    public var key: Int64
    public var name: String
    /// Seconds since 1970 (UTC).
    public var captureDate: Double
    /// "jpeg", "heif", "mp4", ...
    public var mediaKind: String
    public var isVideo: Bool
    public var size: UInt64
    public var hasLocation: Bool
    /// In a shared album (cloud-shared): shown in the details.
    public var isShared: Bool
    /// The modes that may offer it: the caller's answer (photogate asks the library's decision,
    /// which, for one, never lets a cloud-shared asset into a limited selection). The picker
    /// decides no policy of its own.
    public var offeredIn: Set<PickerMode>
    /// Indices into the albums given with the assets.
    public var albums: [Int32]

    public init(key: Int64, name: String, captureDate: Double, mediaKind: String, isVideo: Bool, size: UInt64,
                hasLocation: Bool, isShared: Bool = false, offeredIn: Set<PickerMode> = [.selection, .deliver], albums: [Int32] = []) {
        self.key = key
        self.name = name
        self.captureDate = captureDate
        self.mediaKind = mediaKind
        self.isVideo = isVideo
        self.size = size
        self.hasLocation = hasLocation
        self.isShared = isShared
        self.offeredIn = offeredIn
        self.albums = albums
    }
}

public struct PickerAlbum: Sendable, Equatable {
    public var name: String
    public var isShared: Bool
    public init(name: String, isShared: Bool = false) {
        self.name = name
        self.isShared = isShared
    }
}

/// What confirming does with the picked assets.
public enum PickerMode: String, Sendable {
    /// Edit a limited app's selection (`presentLimitedLibraryPicker`): the current selection is
    /// pre-selected; deselecting revokes.
    case selection
    /// Hand the picked assets over as picked (PHPicker). Earlier picks stay; only what this
    /// session picked can be taken back in it.
    case deliver
}

/// PHPicker's filter.
public enum MediaFilter: String, Sendable {
    case all, images, videos
}

public struct PickerConfig: Sendable, Equatable {
    public var mode: PickerMode
    public var filter: MediaFilter
    /// At most this many assets selected at once (PHPicker's selectionLimit); nil: no limit.
    public var limit: Int?
    /// The initial state of the strip-location toggle (the Options menu).
    public var stripLocation: Bool

    public init(mode: PickerMode, filter: MediaFilter = .all, limit: Int? = nil, stripLocation: Bool = false) {
        self.mode = mode
        self.filter = filter
        self.limit = limit
        self.stripLocation = stripLocation
    }
}

/// Grants to change, by asset key: revoke first, then grant (a downgrade of strip-location is a
/// revoke followed by a grant, since granting only ever adds stripping).
public struct GrantDiff: Equatable, Sendable {
    public var revoke: [Int64]
    public var grant: [Int64]
    public var grantStripped: [Int64]

    public init(revoke: [Int64] = [], grant: [Int64] = [], grantStripped: [Int64] = []) {
        self.revoke = revoke
        self.grant = grant
        self.grantStripped = grantStripped
    }

    public var isEmpty: Bool { revoke.isEmpty && grant.isEmpty && grantStripped.isEmpty }

    /// The changes that turn grant state `from` into `to` (asset key -> strip-location).
    public static func between(_ from: [Int64: Bool], _ to: [Int64: Bool]) -> GrantDiff {
        var d = GrantDiff()
        for (k, strip) in from {
            if let t = to[k] {
                if strip && !t { d.revoke.append(k) }   // un-stripping needs a fresh grant
            } else {
                d.revoke.append(k)
            }
        }
        for (k, strip) in to {
            let f = from[k]
            if f == nil || (f == true && !strip) {
                if strip { d.grantStripped.append(k) } else { d.grant.append(k) }
            } else if strip && f == false {
                d.grantStripped.append(k)
            }
        }
        d.revoke.sort(); d.grant.sort(); d.grantStripped.sort()
        return d
    }
}

public struct PickerModel: Sendable {
    public enum Scope: Equatable, Sendable {
        case all
        /// An index into `albums`.
        case album(Int)
        /// Only what is selected (for review).
        case selected
    }

    public enum ToggleResult: Equatable, Sendable {
        case selected, deselected, limitReached, nothing
    }

    public let config: PickerConfig
    /// What this mode and filter offer, in capture order (then key): the assets whose `offeredIn`
    /// holds the mode (the caller's decision) and that pass the filter.
    public let assets: [PickerAsset]
    public let albums: [PickerAlbum]
    /// Per album: indices into `assets`, in order.
    public let albumMembers: [[Int32]]
    /// The albums worth browsing: at least one asset on offer. Indices into `albums`.
    public let browsableAlbums: [Int]
    let index: SearchIndex
    /// Asset key -> index into `assets`.
    public let position: [Int64: Int32]

    /// The grants of this mode's kind (selection or picked) when the picker opened: key -> strip.
    public let before: [Int64: Bool]
    /// The grants as this picker last wrote them (continuous mode); `before` until then.
    public private(set) var applied: [Int64: Bool]
    /// Keys of a write that failed: reverting covers them too (grant and revoke are idempotent).
    private var uncertain: Set<Int64> = []

    public private(set) var selected: Set<Int64>
    public private(set) var stripLocation: Bool
    /// Keys whose wanted grant may differ from `applied` (what continuous mode writes next).
    private var dirty: Set<Int64> = []

    public private(set) var scope: Scope = .all
    public private(set) var query: String = ""
    /// Results per query prefix: typing one more character filters the last results only;
    /// deleting one goes back to results already computed.
    private var searchStack: [(needle: [UInt8], rows: [Int32])] = []
    private var scopeRows: [Int32]
    /// The list on screen: indices into `assets`, ascending (so in capture order).
    public private(set) var rows: [Int32]
    public private(set) var cursor = 0
    public private(set) var top = 0
    /// Keys examined by searches so far.
    public private(set) var searchWork = 0

    public init(assets input: [PickerAsset], albums: [PickerAlbum], grants: [Int64: Bool], config: PickerConfig) {
        self.config = config
        self.albums = albums
        var list = input.filter { a in
            if !a.offeredIn.contains(config.mode) { return false }
            switch config.filter {
            case .all: return true
            case .images: return !a.isVideo
            case .videos: return a.isVideo
            }
        }
        var sorted = true
        for i in list.indices.dropFirst() where (list[i - 1].captureDate, list[i - 1].key) > (list[i].captureDate, list[i].key) {
            sorted = false
            break
        }
        if !sorted { list.sort { ($0.captureDate, $0.key) < ($1.captureDate, $1.key) } }
        assets = list

        var lowerAlbums: [[UInt8]] = []
        for al in albums {
            var one = SearchIndex()
            one.appendLowercased(al.name)
            one.endKey()
            lowerAlbums.append(Array(one.key(0).utf8))
        }
        var members = [[Int32]](repeating: [], count: albums.count)
        var idx = SearchIndex()
        idx.reserve(keys: list.count, bytes: list.count * 40)
        for (i, a) in list.enumerated() {
            idx.appendLowercased(a.name)
            for al in a.albums where al >= 0 && Int(al) < albums.count {
                members[Int(al)].append(Int32(i))
                idx.appendSeparator()
                idx.appendBytes(lowerAlbums[Int(al)][...])
            }
            idx.appendSeparator()
            idx.appendDate(a.captureDate)
            idx.endKey()
        }
        index = idx
        var pos = [Int64: Int32](minimumCapacity: list.count)
        for (i, a) in list.enumerated() { pos[a.key] = Int32(i) }
        position = pos
        albumMembers = members
        browsableAlbums = albums.indices.filter { !members[$0].isEmpty }

        before = grants
        applied = grants
        selected = config.mode == .selection ? Set(grants.keys) : []
        stripLocation = config.stripLocation
        if config.stripLocation { dirty = selected }
        let all = (0..<list.count).map { Int32($0) }
        scopeRows = all
        rows = all
    }

    // MARK: what is on screen

    public var count: Int { rows.count }
    public var limit: Int? { config.limit }
    public var mode: PickerMode { config.mode }

    public func asset(atRow r: Int) -> PickerAsset? {
        r >= 0 && r < rows.count ? assets[Int(rows[r])] : nil
    }

    public var current: PickerAsset? { asset(atRow: cursor) }

    public func isSelected(_ a: PickerAsset) -> Bool { selected.contains(a.key) }

    /// Granted (in this mode's kind) as far as this picker knows.
    public func isGranted(_ a: PickerAsset) -> Bool { applied[a.key] != nil }

    /// The search key of a row (lowercased name, albums and date), for tests and debugging.
    public func searchKey(ofAssetAt i: Int) -> String { index.key(i) }

    /// The rows to draw for a list `height` rows high: only these are formatted.
    public func visibleRows(height: Int) -> Range<Int> {
        let lo = min(top, rows.count)
        return lo..<min(rows.count, lo + max(0, height))
    }

    public var allInViewSelected: Bool {
        !rows.isEmpty && rows.allSatisfy { selected.contains(assets[Int($0)].key) }
    }

    // MARK: cursor and scrolling

    public mutating func moveCursor(by delta: Int, height: Int) {
        moveCursor(to: cursor + delta, height: height)
    }

    public mutating func moveCursor(to row: Int, height: Int) {
        cursor = rows.isEmpty ? 0 : max(0, min(rows.count - 1, row))
        scrollIntoView(height: height)
    }

    /// Page down: the cursor and the window move by one screen, as in `less`.
    public mutating func page(_ pages: Int, height: Int) {
        let h = max(1, height)
        let maxTop = max(0, rows.count - h)
        top = max(0, min(maxTop, top + pages * h))
        moveCursor(to: cursor + pages * h, height: h)
    }

    /// Keeps the cursor on screen and the window inside the list (also after a resize).
    public mutating func scrollIntoView(height: Int) {
        let h = max(1, height)
        if rows.isEmpty { cursor = 0; top = 0; return }
        cursor = max(0, min(rows.count - 1, cursor))
        if cursor < top { top = cursor }
        if cursor >= top + h { top = cursor - h + 1 }
        top = max(0, min(top, max(0, rows.count - h)))
    }

    /// Moves to the first asset captured at or after `date` (seconds since 1970, UTC), or the
    /// last one if none is. Returns false when the list is empty.
    @discardableResult
    public mutating func jump(toDate date: Double, height: Int) -> Bool {
        guard !rows.isEmpty else { return false }
        var lo = 0, hi = rows.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if assets[Int(rows[mid])].captureDate < date { lo = mid + 1 } else { hi = mid }
        }
        moveCursor(to: min(lo, rows.count - 1), height: height)
        return true
    }

    // MARK: scope and search

    public mutating func setScope(_ s: Scope) {
        switch s {
        case .all: scopeRows = (0..<assets.count).map { Int32($0) }
        case .album(let i): scopeRows = i >= 0 && i < albumMembers.count ? albumMembers[i] : []
        case .selected:
            scopeRows = []
            for i in assets.indices where selected.contains(assets[i].key) { scopeRows.append(Int32(i)) }
        }
        scope = s
        query = ""
        searchStack = []
        rows = scopeRows
        cursor = 0
        top = 0
    }

    /// Shows only the rows whose name, album or capture date contains `q` (case-insensitive).
    /// Incremental: a query that extends the previous one filters its results only; going back
    /// to a shorter query reuses its results.
    public mutating func setQuery(_ q: String) {
        let needle = SearchIndex.needle(q)
        query = q
        if needle.isEmpty {
            searchStack = []
            rows = scopeRows
        } else {
            while let last = searchStack.last, !needle.starts(with: last.needle) { searchStack.removeLast() }
            if let last = searchStack.last, last.needle == needle {
                rows = last.rows
            } else {
                let base = searchStack.last?.rows ?? scopeRows
                let found = index.filter(base, needle, examined: &searchWork)
                searchStack.append((needle, found))
                rows = found
            }
        }
        cursor = 0
        top = 0
    }

    // MARK: selection

    public var selectedCount: Int { selected.count }

    public var atLimit: Bool {
        if let l = config.limit { return selected.count >= l }
        return false
    }

    @discardableResult
    public mutating func toggle(_ a: PickerAsset) -> ToggleResult {
        if selected.contains(a.key) {
            selected.remove(a.key)
            dirty.insert(a.key)
            return .deselected
        }
        if atLimit { return .limitReached }
        selected.insert(a.key)
        dirty.insert(a.key)
        return .selected
    }

    @discardableResult
    public mutating func toggleCurrent() -> ToggleResult {
        guard let a = current else { return .nothing }
        return toggle(a)
    }

    /// Selects every row in view (in list order) until the limit is reached.
    public mutating func selectAllInView() -> (added: Int, limited: Bool) {
        var added = 0
        for r in rows {
            let k = assets[Int(r)].key
            if selected.contains(k) { continue }
            if atLimit { return (added, true) }
            selected.insert(k)
            dirty.insert(k)
            added += 1
        }
        return (added, false)
    }

    @discardableResult
    public mutating func deselectAllInView() -> Int {
        var removed = 0
        for r in rows {
            let k = assets[Int(r)].key
            if selected.remove(k) != nil { dirty.insert(k); removed += 1 }
        }
        return removed
    }

    /// The Options menu's strip-location, for the picked assets.
    public mutating func setStripLocation(_ on: Bool) {
        guard on != stripLocation else { return }
        stripLocation = on
        dirty.formUnion(selected)
    }

    // MARK: grants

    /// The grant state confirming should leave (key -> strip-location). Selection mode: exactly
    /// the selection. Deliver mode: earlier picks plus this session's. Strip-location on strips
    /// every selected asset on offer (not a pre-selected one the filter hides); off never
    /// un-strips an existing grant.
    public func target() -> [Int64: Bool] {
        var t: [Int64: Bool] = [:]
        t.reserveCapacity(selected.count + applied.count)
        for k in selected { t[k] = wanted(k) }
        for k in applied.keys where t[k] == nil { if let w = wanted(k) { t[k] = w } }
        return t
    }

    /// The wanted grant of one asset: nil for none, else its strip-location.
    func wanted(_ k: Int64) -> Bool? {
        if selected.contains(k) { return (stripLocation && position[k] != nil) || (applied[k] ?? false) }
        if config.mode == .deliver, before[k] != nil { return applied[k] ?? before[k] }
        return nil
    }

    /// What is still to write to reach `target()`.
    public func pendingDiff() -> GrantDiff { GrantDiff.between(applied, target()) }

    /// What is still to write for the assets changed since the last write: the same as
    /// `pendingDiff()` after `markApplied`, at the cost of the changes only (continuous mode
    /// writes after every key, and a full diff over 100,000 selected assets is not free).
    public func changedDiff() -> GrantDiff {
        var from: [Int64: Bool] = [:], to: [Int64: Bool] = [:]
        for k in dirty {
            if let a = applied[k] { from[k] = a }
            if let w = wanted(k) { to[k] = w }
        }
        return GrantDiff.between(from, to)
    }

    /// What restores the grants as they were when the picker opened (cancel in continuous mode).
    public func revertDiff() -> GrantDiff {
        var current = applied
        for k in uncertain where current[k] == nil && before[k] == nil { current[k] = false }
        var d = GrantDiff.between(current, before)
        // A key whose write failed may hold anything: re-grant what was granted before.
        for k in uncertain {
            if let s = before[k], !d.grant.contains(k), !d.grantStripped.contains(k) {
                if s { d.grantStripped.append(k) } else { d.grant.append(k) }
            }
        }
        d.grant.sort(); d.grantStripped.sort()
        return d
    }

    /// Records that `diff` was written (continuous mode).
    public mutating func markApplied(_ diff: GrantDiff) {
        for k in diff.revoke { applied[k] = nil }
        for k in diff.grant { applied[k] = applied[k] ?? false }
        for k in diff.grantStripped { applied[k] = true }
        for k in diff.revoke + diff.grant + diff.grantStripped { uncertain.remove(k) }
        dirty.removeAll()
    }

    /// Records that writing `diff` failed part way: those keys are in an unknown state.
    public mutating func markFailed(_ diff: GrantDiff) {
        for k in diff.revoke + diff.grant + diff.grantStripped { uncertain.insert(k) }
    }

    public var hasUncertainWrites: Bool { !uncertain.isEmpty }

    /// Whether this picker wrote anything (so cancelling must revert).
    public var hasAppliedChanges: Bool { applied != before || !uncertain.isEmpty }
}
