import Foundation

// Records the library hands out about apps, their history and their files: plain values, read
// from the store by GrantStore and used through `LibraryPort` by a mount.

public struct AppRecord: Equatable, Sendable {
    public var id: AppID
    public var readWrite: AuthorizationStatus
    public var addOnly: AuthorizationStatus
    public var options: AppOptions
    /// 16 random bytes: the key of this app's inode numbers.
    public var secret: [UInt8]
    public var createdAt: Date

    public func status(for access: AccessLevel) -> AuthorizationStatus {
        access == .readWrite ? readWrite : addOnly
    }

    public var inodeKey: (UInt64, UInt64) {
        var a: UInt64 = 0, b: UInt64 = 0
        for i in 0..<8 { a |= UInt64(secret[i]) << (8 * UInt64(i)); b |= UInt64(secret[8 + i]) << (8 * UInt64(i)) }
        return (a, b)
    }

    public init(id: AppID, readWrite: AuthorizationStatus, addOnly: AuthorizationStatus, options: AppOptions,
                secret: [UInt8], createdAt: Date) {
        self.id = id
        self.readWrite = readWrite
        self.addOnly = addOnly
        self.options = options
        self.secret = secret
        self.createdAt = createdAt
    }
}

public enum AppChangeKind: String, Sendable, Codable { case inserted, removed, updated, status }

/// One entry of an app's persistent change history.
public struct AppChange: Equatable, Sendable {
    /// Counts this app's entries only (1, 2, 3...): it says nothing about other apps' activity.
    public var token: Int64
    public var kind: AppChangeKind
    public var name: String?
    public var assetID: String?
    public var detail: String?
    public var date: Date

    public init(token: Int64, kind: AppChangeKind, name: String?, assetID: String?, detail: String?, date: Date) {
        self.token = token
        self.kind = kind
        self.name = name
        self.assetID = assetID
        self.detail = detail
        self.date = date
    }
}

public enum HistoryAnswer: Equatable, Sendable {
    case changes([AppChange], latest: Int64)
    /// The token is older than the retained history: refetch everything.
    case expired(oldestValid: Int64)
}

/// A file an app wrote that did not become an asset (or an edit that did not become a version).
public struct Refusal: Sendable, Equatable {
    public var id: Int64
    public var app: AppID
    public var date: Date
    public var name: String
    public var reason: String

    public init(id: Int64, app: AppID, date: Date, name: String, reason: String) {
        self.id = id
        self.app = app
        self.date = date
        self.name = name
        self.reason = reason
    }
}

/// The asset an app's file became, and whether it was one the app already had.
public struct AppFileCommit: Sendable {
    public var asset: Asset
    public var reused: Bool

    public init(asset: Asset, reused: Bool) {
        self.asset = asset
        self.reused = reused
    }
}

/// Which existing asset of the same app a committed file may turn out to be.
public enum ReuseRule: Sendable, Equatable {
    /// Same content under the same name (read-write mounts: the name is what the app sees).
    case sameName
    /// Same content under any name (add-only mounts show no names).
    case anyName
    case never
}

/// What an app did to an asset through its mount, as the access report keeps it (issue 36): the
/// app read it, made it, saved a new version of it, deleted it, or was refused it.
public enum AccessKind: Int, Sendable, CaseIterable, CustomStringConvertible {
    case read = 0, created = 1, edited = 2, deleted = 3, refused = 4

    public var description: String {
        switch self {
        case .read: "read"
        case .created: "created"
        case .edited: "edited"
        case .deleted: "deleted"
        case .refused: "refused"
        }
    }

    public init?(name: String) {
        guard let k = AccessKind.allCases.first(where: { $0.description == name }) else { return nil }
        self = k
    }
}

/// Accesses of one kind by one app to one asset within one period (a UTC day), as a mount hands
/// them to the library in a batch: the first and the last (seconds since 1970), and how many.
public struct AccessTally: Sendable, Equatable {
    public var rowID: Int64
    public var kind: AccessKind
    public var day: Int64
    public var first: Int64
    public var last: Int64
    public var count: Int64

    public init(rowID: Int64, kind: AccessKind, day: Int64, first: Int64, last: Int64, count: Int64) {
        self.rowID = rowID
        self.kind = kind
        self.day = day
        self.first = first
        self.last = last
        self.count = count
    }
}
