import Foundation

/// One photo or video of the library, as the catalog records it.
public struct Asset: Equatable, Sendable {
    public var rowID: Int64
    /// The stable public id (16 hex digits).
    public var id: String
    /// Unique within the library.
    public var displayName: String
    /// The name the creating app gave it; that app keeps seeing this name.
    public var ownerName: String?
    public var owner: AppID?
    public var mediaKind: String
    public var mediaClass: MediaClass
    public var byteSize: UInt64
    public var captureDate: Date
    public var addedDate: Date
    public var hasLocation: Bool
    /// "sha256:<hex>"
    public var contentHash: String
    public var isShared: Bool
    public var trashedDate: Date?
    /// Where the original lives: relative to the store, or an absolute path for referenced files.
    public var storePath: String?
    public var referencePath: String?

    public init(rowID: Int64, id: String, displayName: String, ownerName: String? = nil, owner: AppID? = nil,
                mediaKind: String, mediaClass: MediaClass, byteSize: UInt64, captureDate: Date, addedDate: Date,
                hasLocation: Bool, contentHash: String, isShared: Bool = false, trashedDate: Date? = nil,
                storePath: String? = nil, referencePath: String? = nil) {
        self.rowID = rowID
        self.id = id
        self.displayName = displayName
        self.ownerName = ownerName
        self.owner = owner
        self.mediaKind = mediaKind
        self.mediaClass = mediaClass
        self.byteSize = byteSize
        self.captureDate = captureDate
        self.addedDate = addedDate
        self.hasLocation = hasLocation
        self.contentHash = contentHash
        self.isShared = isShared
        self.trashedDate = trashedDate
        self.storePath = storePath
        self.referencePath = referencePath
    }

    public var isTrashed: Bool { trashedDate != nil }
}

/// Per-view names: an app sees its own assets under the names it gave them, every other asset
/// under its library display name, and any clash inside one view is settled by a suffix on the
/// asset that is not the app's own. A hidden asset never changes what the app sees: names are
/// computed from visible assets only.
public enum ViewNaming {
    public struct Item: Sendable {
        public var key: Int64
        public var displayName: String
        public var ownName: String?   // set only for the viewing app's own assets
        /// The view shows it as a JPEG (`AppContext.servesCompatible`; never one of the app's own).
        public var compatible: Bool
        public init(key: Int64, displayName: String, ownName: String?, compatible: Bool = false) {
            self.key = key
            self.displayName = displayName
            self.ownName = ownName
            self.compatible = compatible
        }

        var natural: String { ViewNaming.natural(displayName: displayName, ownName: ownName, compatible: compatible) }
    }

    /// The name an asset has in a view before clashes are settled: the app's own name for an
    /// asset it created (when it gave one), else the library's display name, with `.jpg` for
    /// its stem where the view shows it as a JPEG (`DisplayName.compatibleName`).
    @inline(__always)
    public static func natural(displayName: String, ownName: String?, compatible: Bool = false) -> String {
        if let ownName { return ownName }
        return compatible ? DisplayName.compatibleName(displayName) : displayName
    }

    /// Assigns a unique name to every item: the one place the name an app sees is decided (the
    /// mount, `assets --app`, `explain`, the history and name resolution read its answer). Items
    /// are the app's visible assets in row id order. Deterministic for the same input order.
    public static func assign(_ items: [Item], reserved: Set<String> = DisplayName.reserved) -> [Int64: String] {
        var tried: Set<String>? = nil
        return assign(items, reserved: reserved, tried: &tried)
    }

    /// The same, and (when `tried` is not nil) collects every name it considered: an item whose
    /// natural name is not among them keeps it whatever else the view holds, which lets a caller
    /// name a few assets of a big view exactly without the rest (`Library.renamedInView`).
    public static func assign(_ items: [Item], reserved: Set<String> = DisplayName.reserved,
                              tried: inout Set<String>?) -> [Int64: String] {
        var taken = reserved
        taken.reserveCapacity(items.count + reserved.count)
        var result = [Int64: String](minimumCapacity: items.count)
        var pending: [Item] = [], converted: [Item] = []
        for item in items {
            tried?.insert(item.natural)
            if let own = item.ownName, !taken.contains(own) {
                taken.insert(own)
                result[item.key] = own
            } else if item.compatible {
                converted.append(item)
            } else {
                pending.append(item)
            }
        }
        // Photos shown as JPEG name themselves last: a real `IMG_0001.jpg` keeps its name whether
        // the app's compatible option is on or off, and `IMG_0001.HEIC` beside it becomes
        // `IMG_0001-1.jpg`.
        for item in pending + converted {
            let name = DisplayName.unique(item.natural) { tried?.insert($0); return taken.contains($0) }
            taken.insert(name)
            result[item.key] = name
        }
        return result
    }
}
