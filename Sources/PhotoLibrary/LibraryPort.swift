import Foundation
import Redaction

/// Where a library keeps what a running mount needs on disk.
public protocol LibraryLocations: Sendable {
    /// The store of originals (`<library>/store`): statfs reports this disk, and originals inside
    /// it are the library's own (outside it, `import --reference` originals).
    var storeRoot: String { get }
    /// The run folder (`<library>/run`): its bell file is rung after every committed change, and
    /// running mounts register there.
    var runDir: String { get }
    /// The library's private cache (`<library>/cache`): the JPEGs of `compatible` views
    /// (`CompatibleCache`).
    var cacheRoot: String { get }
}

extension LibraryLocations {
    /// Beside the run folder, in the library's own folder.
    public var cacheRoot: String {
        guard let slash = runDir.lastIndex(of: "/") else { return "cache" }
        return String(runDir[..<slash]) + "/cache"
    }
}

/// Everything a mount asks of the library: the port between the FUSE adapter (PhotoViewFS) and
/// the store (GrantStore implements it on its database). Like MediaProvider's daemon asking its
/// provider, the adapter never sees SQL, and tests drive it through an in-memory port.
///
/// Failures: implementations throw `PortError` for the outcomes a mount tells apart (no space,
/// an existing album, a refused file...), anything else for a plain failure.
public protocol LibraryPort: AnyObject, LibraryLocations {
    /// Registers an app on its first mount (a no-op afterwards).
    func registerApp(_ id: AppID) throws

    // MARK: the view

    /// Everything the app may see at this access level. `lean`: leave out the text a mount never
    /// reads (content hash, media kind and class).
    func view(for id: AppID, access: AccessLevel, lean: Bool) throws -> ViewSnapshot
    /// Catches a view computed for `app` (the record as it was then) up from change log position
    /// `since`: a patch of the rows that changed, or a whole (lean) snapshot.
    func viewUpdate(for id: AppID, access: AccessLevel, since: Int64, app: AppRecord, forceFull: Bool) throws -> ViewUpdate
    /// The position of the newest change to the library, by anyone.
    func lastChange() throws -> Int64
    /// Called every few seconds by a running mount: when a file the catalog's commits live in was
    /// removed under this process, put what it committed where it is safe (GrantStore: checkpoint
    /// the write-ahead log it still holds into the database).
    func keepCommitsSafe()
    /// Whether the library's catalog is on a server (issue 41): the mount then looks at
    /// `failsClosed` every second.
    var catalogIsRemote: Bool { get }
    /// True while a catalog on a server has gone unconfirmed (not reached) for longer than its
    /// fail-closed delay: a running mount then shows nothing, and rebuilds its view once it is
    /// reached again. Always false for a local catalog.
    var failsClosed: Bool { get }
    /// The app's own history after `since` (what `.photogate/changes` shows).
    func changes(_ app: AppID, since: Int64) throws -> HistoryAnswer
    /// The newest entry of the app's history.
    func latestChangeToken(_ app: AppID) throws -> Int64
    /// How to serve an asset with its location removed: the facts of the version whose original
    /// is at `path`. Throws when the row's current version is another one (the view is behind
    /// the library for a moment): its plan would be another file's.
    func redaction(rowID: Int64, path: String) throws -> RedactionResult

    // MARK: what the app asks for and what it was refused

    /// Records a request; throws `PortError.tooManyRequests` when the app has as many pending of
    /// the kind as it may.
    func recordRequest(_ app: AppID, kind: RequestKind, reason: String) throws
    /// Records that the app asked to edit an asset.
    func recordEditRequest(app: AppID, rowID: Int64) throws
    func recordRefusal(_ app: AppID, name: String, reason: String) throws
    func refusals(_ app: AppID) throws -> [Refusal]
    /// Adds a batch of the access report's tallies for the app (what it read, made, edited,
    /// deleted or was refused); wakes no mount. Returns whether the library records at all
    /// (the person may turn it off). `prune`: drop what is past the report's retention too.
    func recordAccess(_ app: AppID, _ batch: [AccessTally], prune: Bool) throws -> Bool
    /// Bytes (apparent sizes) the app added since this time: its new assets and the versions it
    /// saved. A mount bounds what one app may add in a day.
    func bytesAdded(by app: AppID, since: Double) throws -> UInt64

    // MARK: changes an app makes through its mount

    /// Whether (and why) the app may write a new version of an asset.
    func editDecision(app: AppID, rowID: Int64, access: AccessLevel) throws -> EditDecision
    /// Throws `PortError.exists` for an album of that name, `PortError.invalid` for a bad name.
    func createAlbum(_ name: String) throws
    /// Throws `PortError.notEmpty` when `onlyIfEmpty` and the album has members.
    func deleteAlbum(_ name: String, onlyIfEmpty: Bool) throws
    func addToAlbum(_ album: String, assetIDs: [String]) throws
    func removeFromAlbum(_ album: String, assetIDs: [String]) throws
    func moveToTrash(rowIDs: [Int64], by app: AppID) throws
    /// The app renames an asset it created, through its mount at `access`. The library asks the
    /// one decision (`AssetDecision.canRename`) in the transaction that renames: `PortError.denied`
    /// when the app may not (so no path of the mount renames past the policy).
    func renameOwnAsset(rowID: Int64, app: AppID, access: AccessLevel, to name: String) throws
    /// A file time the app set on an asset it created, after its close: its capture date when
    /// its content has none of its own (as for a time set while writing). `PortError.denied`
    /// when the app may not (the one decision's `canRename`). Whether the capture date changed.
    func setOwnFileDate(rowID: Int64, app: AppID, access: AccessLevel, to date: Date) throws -> Bool
    /// The app takes back its own asset that it sent to Recently Deleted itself (a save that
    /// deletes the file first). `PortError.denied` otherwise.
    func restoreOwnAsset(rowID: Int64, app: AppID) throws
    /// The app's own asset became another asset's new version (a save by rename): it goes away.
    func dissolveOwnAsset(rowID: Int64, app: AppID) throws
    /// A complete temp file becomes the asset's new current version (`PortError.refused` when it
    /// is not media; nothing changes then and the temp stays the caller's). `contentHash`, when
    /// given, is asked once the file is found to be media: the file's hash as the library writes
    /// it (`AppFileWriter.newContentHasher`), computed by the caller while the file was written,
    /// or nil, and then (as without it) the library hashes the file. `alwaysNew`: a version even
    /// when the content is the current version's (an app that does not read the stored bytes
    /// must not learn whether its file equals them).
    /// `basedOn`: the original's path of the version the edit was made from (the one the view
    /// showed); when another version became current meanwhile (another app's save the view has
    /// not seen yet), the commit is refused (`PortError.denied`): its bytes would undo that save.
    /// `dailyLimit`: asked in the transaction that adds the version, as `AppFileWriter.commitAppFile`
    /// asks it (`PortError.overDailyLimit`; a save of the current content, adding nothing unless
    /// `alwaysNew`, is not refused).
    func commitVersion(rowID: Int64, app: AppID, tempPath: String, fd: Int32,
                       contentHash: (() -> String?)?, alwaysNew: Bool, basedOn: String?,
                       dailyLimit: DailyLimit?) throws -> (asset: Asset, changed: Bool)
    /// Whether the file a temp holds is in the catalog already, as a new asset (a new file's temp
    /// is named after its asset's id), a version or a sidecar version (named after their file
    /// id): a commit that reached a catalog's server but whose answer did not (the connection cut
    /// while it committed: issue 41). Such a file is saved (an edit's `commitVersion` then moves
    /// it into the store), what the app added counts it already, and the temp may be the only
    /// copy of a file the catalog names.
    func isCommitted(tempPath: String) throws -> Bool
    /// A folder of temp files for a mount's writes (held until the process exits).
    func appFileWriter(purpose: String) throws -> any AppFileWriter

    // MARK: sidecars (issue 37)

    /// Whether (and why) the app may write a sidecar of an asset: its edit decision
    /// (`ViewPolicy.sidecarDecision`).
    func sidecarDecision(app: AppID, rowID: Int64, access: AccessLevel) throws -> EditDecision
    /// A complete temp file becomes the current content of the sidecar `key` (a new version of
    /// it); false when it already had this content (the temp is removed). `PortError.refused` over
    /// `Sidecars.maxSize`, `PortError.denied` when the app may not edit the photo (asked in the
    /// commit). `dailyLimit`, `alwaysNew`: as for `commitVersion` (an app shown the sidecar
    /// redacted must not learn whether its file equals the stored one: not from "unchanged", nor
    /// from the daily limit asked only when it is not). On a throw the temp stays the caller's.
    func commitSidecar(_ key: SidecarKey, app: AppID, access: AccessLevel, tempPath: String, fd: Int32,
                       contentHash: (() -> String?)?, dailyLimit: DailyLimit?, alwaysNew: Bool) throws -> Bool
    /// Removes the sidecar `key` (its versions stay). `PortError.denied` as for `commitSidecar`.
    func removeSidecar(_ key: SidecarKey, app: AppID, access: AccessLevel) throws
}

extension LibraryPort {
    public var catalogIsRemote: Bool { false }
    public var failsClosed: Bool { false }
    public func isCommitted(tempPath: String) throws -> Bool { false }
    public func sidecarDecision(app: AppID, rowID: Int64, access: AccessLevel) throws -> EditDecision {
        .never(reason: "this library keeps no sidecars")
    }
    public func commitSidecar(_ key: SidecarKey, app: AppID, access: AccessLevel, tempPath: String, fd: Int32,
                              contentHash: (() -> String?)?, dailyLimit: DailyLimit?, alwaysNew: Bool) throws -> Bool {
        throw PortError.denied("this library keeps no sidecars")
    }
    public func removeSidecar(_ key: SidecarKey, app: AppID, access: AccessLevel) throws {
        throw PortError.denied("this library keeps no sidecars")
    }
}

/// Temp files of one process and their commits into the library.
public protocol AppFileWriter: Sendable {
    /// A new temp file, for an asset id chosen now.
    func makeTempFile() throws -> (id: String, path: String, fd: Int32)
    /// A fresh, unused path in the temp folder (for a link of a stored file).
    func newTempPath() -> String
    /// A complete, fsynced temp file becomes an asset of `app` (`PortError.refused` with the
    /// reason when it is not complete media; `PortError.noSpace`). `contentHash`: as for
    /// `LibraryPort.commitVersion`. `dailyLimit`: what the app may have added since a time,
    /// asked in the transaction that adds the file (`PortError.overDailyLimit`; a file that turns
    /// out to be an asset the app has, adding nothing, is not refused).
    func commitAppFile(tempPath: String, fd: Int32, id: String, app: AppID, name: String, album: String?,
                       reuse: ReuseRule, contentHash: (() -> String?)?, dailyLimit: DailyLimit?) throws -> AppFileCommit
    /// The library's content hash, to be fed a file's bytes in order while it is written.
    func newContentHasher() -> any ContentHasher
    /// Marks a durable temp file complete, so that recovery commits it after a crash.
    func markReady(tempPath: String, fd: Int32, app: AppID, name: String, album: String?) throws
    func markVersionReady(tempPath: String, fd: Int32, app: AppID, rowID: Int64) throws
    func clearReady(tempPath: String)
    /// No more writes (the mount is gone): this process's temp folder is settled now, as a dead
    /// process's would be at the next start.
    func shutDown()
}

/// The library's content hash of a file ("sha256:<hex>"), fed its bytes in order: a mount hashes
/// what an app writes as it arrives, so that the close does not read the whole file again.
public protocol ContentHasher: AnyObject {
    func update(_ bytes: UnsafeRawBufferPointer)
    /// The hash of the bytes fed so far, as the catalog records it; feeding may go on after.
    func hashSoFar() -> String
}

/// What an app may add in a day (the mount's PHOTOGATE_DAILY_LIMIT_MB): `bytes` since `since`
/// (seconds since 1970), as `LibraryPort.bytesAdded` counts them.
public struct DailyLimit: Sendable, Equatable {
    public var bytes: UInt64
    public var since: Double
    public init(bytes: UInt64, since: Double) { self.bytes = bytes; self.since = since }
}

/// The outcomes of a library call that a mount answers differently; anything else is a failure.
public enum PortError: Error, Equatable, Sendable, CustomStringConvertible {
    case noSpace(String)
    case exists(String)
    case notEmpty(String)
    case tooManyRequests(String)
    /// A file the library will not take (not complete media): the reason, for the app.
    case refused(String)
    /// A name or value the library does not accept.
    case invalid(String)
    /// A rule of the library forbids it.
    case denied(String)
    /// The catalog cannot make the change durable (its write-ahead log was removed or replaced
    /// under the process): nothing may be told it is saved.
    case notDurable(String)
    /// The file (of `size` bytes) would take the app past its `DailyLimit`: what it added since
    /// the limit's time.
    case overDailyLimit(added: UInt64, size: UInt64)

    public var description: String {
        switch self {
        case .overDailyLimit(let added, let size):
            return "the app added \(added >> 20) MiB since the daily limit's start; \(size >> 20) MiB more is past its limit"
        case .noSpace(let m): return "no space left on device: \(m)"
        case .exists(let m), .notEmpty(let m), .tooManyRequests(let m), .refused(let m), .invalid(let m), .denied(let m), .notDurable(let m):
            return m
        }
    }
}
