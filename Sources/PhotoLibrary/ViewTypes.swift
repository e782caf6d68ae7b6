import Foundation

// The value types of an app's view, as the library computes them and a mount holds them: plain
// data with no storage behind it (the SQL that fills them is GrantStore's).

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
    /// The app may save over it (`AppContext.editDecision` allows): its file is writable in a mount.
    public var isEditable: Bool
    /// The app reads it as a JPEG made from it (`AppContext.servesCompatible`).
    public var compatible: Bool
    /// `rm` moves it to Recently Deleted (`ViewPolicy.canDelete`).
    public var canDelete: Bool
    /// The app may rename it (`ViewPolicy.canRename`).
    public var canRename: Bool

    public init(asset: Asset, name: String, isOwned: Bool, isPicked: Bool, isSelected: Bool, stripLocation: Bool,
                isEditable: Bool = false, compatible: Bool = false, canDelete: Bool = false, canRename: Bool = false) {
        self.asset = asset
        self.name = name
        self.isOwned = isOwned
        self.isPicked = isPicked
        self.isSelected = isSelected
        self.stripLocation = stripLocation
        self.isEditable = isEditable
        self.compatible = compatible
        self.canDelete = canDelete
        self.canRename = canRename
    }
}

public struct ViewAlbum: Sendable {
    public var name: String
    public var isShared: Bool
    /// Row ids of the visible assets in it.
    public var members: [Int64]

    public init(name: String, isShared: Bool, members: [Int64]) {
        self.name = name
        self.isShared = isShared
        self.members = members
    }
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
    /// The current sidecars of the visible assets (issue 37), by row id then key.
    public var sidecars: [ViewSidecar]
    /// The change log position this snapshot reflects.
    public var changeSeq: Int64

    public init(app: AppRecord, access: AccessLevel, policy: ViewPolicy, entries: [ViewEntry], albums: [ViewAlbum],
                sidecars: [ViewSidecar] = [], changeSeq: Int64) {
        self.init(app: app, access: access, policy: policy, rows: ViewRows(entries), albums: albums, sidecars: sidecars, changeSeq: changeSeq)
    }

    public init(app: AppRecord, access: AccessLevel, policy: ViewPolicy, rows: ViewRows, albums: [ViewAlbum],
                sidecars: [ViewSidecar] = [], changeSeq: Int64) {
        self.app = app
        self.access = access
        self.policy = policy
        self.rows = rows
        self.albums = albums
        self.sidecars = sidecars
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
    package static let fieldCount = Field.allCases.count

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
        /// The app may edit it (`AppContext.editDecision`): the mount shows its file writable.
        public static let editable = Flags(rawValue: 1 << 7)
        public static let ownerNameNull = Flags(rawValue: 1 << 8)
        public static let ownerAppNull = Flags(rawValue: 1 << 9)
        public static let storePathNull = Flags(rawValue: 1 << 10)
        public static let referencePathNull = Flags(rawValue: 1 << 11)
        /// Shown as a JPEG made from it (the app's `compatible` option, a HEIF photo).
        public static let compatible = Flags(rawValue: 1 << 12)
        /// The decision's answers on the row's facts, as the library read them, for the mount to
        /// act on (`ViewPolicy.canDelete`, `canRename`): it holds no facts of its own to ask with.
        public static let deletable = Flags(rawValue: 1 << 13)
        public static let renamable = Flags(rawValue: 1 << 14)
    }

    public private(set) var rowIDs: [Int64] = []
    public private(set) var byteSizes: [UInt64] = []
    public private(set) var captureDates: [Double] = []
    public private(set) var addedDates: [Double] = []
    package var trashedDates: [Double] = []
    public private(set) var flags: [Flags] = []
    package var arena: [UInt8] = []
    /// End offset in `arena` of each field of each row (row * fieldCount + field).
    package var ends: [UInt32] = []
    /// View names that differ from the display name (the app's own names), by row index.
    package var renamed: [Int: String] = [:]
    /// Rows whose view name is not their natural name (the app's own name for its assets, else
    /// the display name) because two natural names collided. While this is 0 a change to a few
    /// rows can be applied on its own; otherwise only a whole recomputation names them right.
    public package(set) var unsettledNames = 0

    public var count: Int { rowIDs.count }

    public init() {}

    package init(_ entries: [ViewEntry]) {
        reserve(entries.count)
        for e in entries {
            let a = e.asset
            var f: Flags = []
            if e.isOwned { f.insert(.owned) }
            if e.isPicked { f.insert(.picked) }
            if e.isSelected { f.insert(.selected) }
            if e.stripLocation { f.insert(.strip) }
            if e.isEditable { f.insert(.editable) }
            if a.isShared { f.insert(.shared) }
            if a.hasLocation { f.insert(.hasLocation) }
            if a.trashedDate != nil { f.insert(.trashed) }
            if e.compatible { f.insert(.compatible) }
            if e.canDelete { f.insert(.deletable) }
            if e.canRename { f.insert(.renamable) }
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

    /// Room for `n` rows and `textBytes` bytes of text.
    package mutating func reserve(_ n: Int, textBytes: Int = 0) {
        rowIDs.reserveCapacity(n); byteSizes.reserveCapacity(n); captureDates.reserveCapacity(n)
        addedDates.reserveCapacity(n); trashedDates.reserveCapacity(n); flags.reserveCapacity(n)
        ends.reserveCapacity(n * ViewRows.fieldCount)
        arena.reserveCapacity(textBytes)
    }

    package mutating func appendText(_ s: String) {
        var s = s
        s.withUTF8 { arena.append(contentsOf: $0) }
        ends.append(UInt32(arena.count))
    }

    package mutating func appendText(_ p: UnsafePointer<UInt8>?, _ n: Int) {
        if let p, n > 0 { arena.append(contentsOf: UnsafeBufferPointer(start: p, count: n)) }
        ends.append(UInt32(arena.count))
    }

    package mutating func appendNumbers(rowID: Int64, size: UInt64, capture: Double, added: Double, trashed: Double, flags f: Flags) {
        rowIDs.append(rowID)
        byteSizes.append(size)
        captureDates.append(capture)
        addedDates.append(added)
        trashedDates.append(trashed)
        flags.append(f)
    }

    /// Appends the rows of `other` (a view read in parts).
    package mutating func append(contentsOf other: ViewRows) {
        let base = UInt32(arena.count), rowBase = count
        arena.append(contentsOf: other.arena)
        let from = ends.count
        ends.append(contentsOf: other.ends)
        ends.withUnsafeMutableBufferPointer { e in for k in from..<e.count { e[k] += base } }
        rowIDs.append(contentsOf: other.rowIDs); byteSizes.append(contentsOf: other.byteSizes)
        captureDates.append(contentsOf: other.captureDates); addedDates.append(contentsOf: other.addedDates)
        trashedDates.append(contentsOf: other.trashedDates); flags.append(contentsOf: other.flags)
        for (i, name) in other.renamed { renamed[rowBase + i] = name }
        unsettledNames += other.unsettledNames
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
        ViewNaming.natural(displayName: text(.displayName, i)!, ownName: ownName(i), compatible: flags[i].contains(.compatible))
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
                         isSelected: f.contains(.selected), stripLocation: f.contains(.strip), isEditable: f.contains(.editable),
                         compatible: f.contains(.compatible), canDelete: f.contains(.deletable), canRename: f.contains(.renamable))
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

/// What a running mount must do to catch up with the library.
public enum ViewUpdate: Sendable {
    /// Recompute everything, from this snapshot (lean: see `Library.view(for:access:lean:)`)
    /// (the app's status or options changed, too many changes, a gap in
    /// the change log, or a change this code does not know how to apply row by row).
    case full(ViewSnapshot)
    /// Only these rows may have changed.
    case patch(ViewPatch)
}

public struct ViewPatch: Sendable {
    /// Row ids (sorted) the changes touched: each may have appeared, gone, or changed.
    public var affected: [Int64]
    /// The visible rows among `affected`, as the view would show them (names not settled: each
    /// row carries its display name and, for the app's own assets, its own name).
    public var rows: ViewRows
    /// Every album with all its members (not filtered by visibility), when the view shows albums
    /// and they may have changed; nil when they did not.
    public var albums: [ViewAlbum]?
    /// The current sidecars of the visible rows among `affected` (those of the other affected
    /// rows are gone from the view).
    public var sidecars: [ViewSidecar]
    /// The change log position this patch brings the view to.
    public var changeSeq: Int64

    public init(affected: [Int64], rows: ViewRows, albums: [ViewAlbum]?, sidecars: [ViewSidecar] = [], changeSeq: Int64) {
        self.affected = affected
        self.rows = rows
        self.albums = albums
        self.sidecars = sidecars
        self.changeSeq = changeSeq
    }
}
