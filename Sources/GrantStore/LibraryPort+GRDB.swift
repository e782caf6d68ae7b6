import Foundation
// GrantStore's API speaks the domain's types (AppRecord, ViewSnapshot, AppChange... moved there
// for the port): a client of the library gets them with it, as before.
@_exported import PhotoLibrary
import Redaction

// The library as a mount's port (`LibraryPort`): each requirement calls the library's own
// operation, and library errors become the port's (`PortError`) here, once.

extension Library: LibraryLocations {
    public var storeRoot: String { paths.store }
    public var runDir: String { paths.run }
    public var cacheRoot: String { paths.cache }
}

/// `LibraryPort` on a GRDB library. A separate type rather than a conformance of `Library`, whose
/// own methods of the same names take more options and return more.
public final class LibraryStorePort: LibraryPort {
    public let library: Library

    /// For a catalog on a server: its doorbell and heartbeat (issue 41).
    let follower: CatalogFollower?

    public init(_ library: Library) {
        self.library = library
        follower = library.followCatalog()
    }

    public var catalogIsRemote: Bool { follower != nil }
    public var failsClosed: Bool { follower.map { $0.unconfirmedFor > CatalogFollower.failClosedAfter } ?? false }

    public var storeRoot: String { library.paths.store }
    public var runDir: String { library.paths.run }
    public var cacheRoot: String { library.paths.cache }

    public func registerApp(_ id: AppID) throws { _ = try port { try library.registerApp(id) } }

    public func view(for id: AppID, access: AccessLevel, lean: Bool) throws -> ViewSnapshot {
        try port { try library.view(for: id, access: access, lean: lean) }
    }

    public func viewUpdate(for id: AppID, access: AccessLevel, since: Int64, app: AppRecord, forceFull: Bool) throws -> ViewUpdate {
        try port { try library.viewUpdate(for: id, access: access, since: since, app: app, forceFull: forceFull) }
    }

    public func lastChange() throws -> Int64 { try port { try library.lastChange() } }
    public func keepCommitsSafe() { library.rescueIfLogGone() }
    public func changes(_ app: AppID, since: Int64) throws -> HistoryAnswer { try port { try library.changes(app, since: since) } }
    public func latestChangeToken(_ app: AppID) throws -> Int64 { try port { try library.latestChangeToken(app) } }
    public func redaction(rowID: Int64, path: String) throws -> RedactionResult {
        try port { try library.redaction(rowID: rowID, path: path) }
    }

    public func recordRequest(_ app: AppID, kind: RequestKind, reason: String) throws {
        let (_, isNew) = try port { try library.recordRequest(app, kind: kind, reason: reason) }
        // The person hears of a new request at once (issue 35), not only from `photogate requests`.
        if isNew { RequestNotifier.announce(app: app, kind: kind, reason: reason, runDir: library.paths.run) }
    }

    public func recordEditRequest(app: AppID, rowID: Int64) throws {
        let isNew = try port { try library.recordEditRequest(app: app, rowID: rowID) }
        if isNew { RequestNotifier.announce(app: app, kind: .edit, reason: "", runDir: library.paths.run) }
    }

    public func recordRefusal(_ app: AppID, name: String, reason: String) throws {
        try port { try library.recordRefusal(app, name: name, reason: reason) }
    }

    public func refusals(_ app: AppID) throws -> [Refusal] { try port { try library.refusals(app) } }

    public func bytesAdded(by app: AppID, since: Double) throws -> UInt64 {
        try port { try library.bytesAdded(by: app, since: since) }
    }

    public func recordAccess(_ app: AppID, _ batch: [AccessTally], prune: Bool) throws -> Bool {
        try port { try library.recordAccess(app, batch, prune: prune) }
    }

    public func editDecision(app: AppID, rowID: Int64, access: AccessLevel) throws -> EditDecision {
        try port { try library.editDecision(app: app, rowID: rowID, access: access) }
    }

    public func createAlbum(_ name: String) throws { _ = try port { try library.createAlbum(name) } }

    public func deleteAlbum(_ name: String, onlyIfEmpty: Bool) throws {
        do { try library.deleteAlbum(name, onlyIfEmpty: onlyIfEmpty) } catch LibraryError.conflict(let m) where onlyIfEmpty {
            throw PortError.notEmpty(m)
        } catch { throw LibraryStorePort.portError(error) }
    }

    public func addToAlbum(_ album: String, assetIDs: [String]) throws { _ = try port { try library.addToAlbum(album, assetIDs) } }

    public func removeFromAlbum(_ album: String, assetIDs: [String]) throws {
        _ = try port { try library.removeFromAlbum(album, assetIDs) }
    }

    public func moveToTrash(rowIDs: [Int64], by app: AppID) throws { try port { try library.moveToTrash(rowIDs: rowIDs, by: app) } }

    public func renameOwnAsset(rowID: Int64, app: AppID, access: AccessLevel, to name: String) throws {
        try port { try library.renameOwnAsset(rowID: rowID, app: app, access: access, to: name) }
    }

    public func setOwnFileDate(rowID: Int64, app: AppID, access: AccessLevel, to date: Date) throws -> Bool {
        try port { try library.setOwnFileDate(rowID: rowID, app: app, access: access, to: date) }
    }

    public func restoreOwnAsset(rowID: Int64, app: AppID) throws { try port { try library.restoreOwnAsset(rowID: rowID, app: app) } }

    public func dissolveOwnAsset(rowID: Int64, app: AppID) throws { try port { try library.dissolveOwnAsset(rowID: rowID, app: app) } }


    public func commitVersion(rowID: Int64, app: AppID, tempPath: String, fd: Int32,
                              contentHash: (() -> String?)?, alwaysNew: Bool, basedOn: String?,
                              dailyLimit: DailyLimit?) throws -> (asset: Asset, changed: Bool) {
        // A mount's save: the app must still be allowed to edit the photo when the version commits.
        try port { try library.commitVersion(rowID: rowID, app: app, tempPath: tempPath, fd: fd, knownHash: contentHash, alwaysNew: alwaysNew,
                                             requireConsent: true, basedOn: basedOn, dailyLimit: dailyLimit) }
    }

    public func isCommitted(tempPath: String) throws -> Bool {
        let id = String((tempPath as NSString).lastPathComponent.prefix { $0 != "." })
        guard Library.isFileID(id) else { return false }
        return try port {
            try library.read { db in
                try Bool.fetchOne(db, sql: """
                    SELECT 1 FROM assets WHERE id = ? UNION ALL SELECT 1 FROM versions WHERE file_id = ?
                    UNION ALL SELECT 1 FROM sidecars WHERE file_id = ? LIMIT 1
                    """, arguments: [id, id, id]) != nil
            }
        }
    }

    public func sidecarDecision(app: AppID, rowID: Int64, access: AccessLevel) throws -> EditDecision {
        try port { try library.read { db in try Library.sidecarDecision(db, app: app, rowID: rowID, access: access) } }
    }

    public func commitSidecar(_ key: SidecarKey, app: AppID, access: AccessLevel, tempPath: String, fd: Int32,
                              contentHash: (() -> String?)?, dailyLimit: DailyLimit?, alwaysNew: Bool) throws -> Bool {
        try port { try library.commitSidecar(key, app: app, access: access, tempPath: tempPath, fd: fd, knownHash: contentHash,
                                             dailyLimit: dailyLimit, alwaysNew: alwaysNew) }
    }

    public func removeSidecar(_ key: SidecarKey, app: AppID, access: AccessLevel) throws {
        _ = try port { try library.removeSidecar(key, app: app, access: access) }
    }

    public func appFileWriter(purpose: String) throws -> any AppFileWriter {
        try port { try StoreWriter(library: library, purpose: purpose) }
    }

    /// The port's error for a library error (others pass unchanged).
    static func portError(_ error: Error) -> Error {
        switch error as? LibraryError {
        case .noSpace(let m)?: return PortError.noSpace(m)
        case .albumExists(let m)?: return PortError.exists("an album named '\(m)' already exists")
        case .tooManyRequests?: return PortError.tooManyRequests("\(error)")
        case .badInput(let m)?: return PortError.refused(m)
        case .invalid(let m)?: return PortError.invalid(m)
        case .conflict(let m)?: return PortError.denied(m)
        case .notDurable(let m)?: return PortError.notDurable(m)
        default: return error
        }
    }
}

/// Runs a library call, its errors as the port's.
@inline(__always)
private func port<T>(_ body: () throws -> T) throws -> T {
    do { return try body() } catch { throw LibraryStorePort.portError(error) }
}

extension StoreWriter: AppFileWriter {
    public func makeTempFile() throws -> (id: String, path: String, fd: Int32) {
        try port { try makeTemp(extension: "part") }
    }

    public func newTempPath() -> String { tmpDir + "/\(StoreWriter.randomID()).part" }

    public func commitAppFile(tempPath: String, fd: Int32, id: String, app: AppID, name: String, album: String?,
                              reuse: ReuseRule, contentHash: (() -> String?)?, dailyLimit: DailyLimit?) throws -> AppFileCommit {
        try port {
            try commitAppFile(tempPath: tempPath, fd: fd, id: id, app: app, name: name, album: album, reuseSameContent: reuse,
                              knownHash: contentHash, dailyLimit: dailyLimit)
        }
    }

    public func newContentHasher() -> any ContentHasher { SHA256() }
    // markReady, markVersionReady, clearReady and shutDown are StoreWriter's own.
}

extension SHA256: ContentHasher {
    public func hashSoFar() -> String { "sha256:" + hexString(copy().finalize()) }
}

extension ViewRows {
    /// Where each text field is in `Library.assetColumns`.
    typealias C = Library.AssetColumn
    static let textColumns: [(Field, Int32)] = [
        (.id, C.id.rawValue), (.displayName, C.displayName.rawValue), (.ownerName, C.ownerName.rawValue),
        (.ownerApp, C.ownerApp.rawValue), (.mediaKind, C.mediaKind.rawValue), (.mediaClass, C.mediaClass.rawValue),
        (.contentHash, C.contentHash.rawValue), (.storePath, C.storePath.rawValue), (.referencePath, C.referencePath.rawValue)]
}
