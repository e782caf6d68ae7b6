import Foundation
import FUSE
import PhotoLibrary
import Redaction
@testable import PhotoViewFS
#if canImport(Glibc)
import Glibc
#endif

/// An in-memory library behind `LibraryPort`: apps, assets (their bytes in real files, so that
/// opens work), selections, albums and a change feed. Views are computed with `ViewPolicy`, as
/// the real library does; a change touches rows, so a mount catches up with a patch of those
/// rows unless the app's record changed (then the whole view).
final class FakeLibrary: LibraryPort, @unchecked Sendable {
    let root: String
    let storeRoot: String
    let runDir: String
    let tmpDir: String
    private let lock = NSLock()
    private var apps: [AppID: AppRecord] = [:]
    private(set) var assets: [Int64: Asset] = [:]
    private var selections: [AppID: Set<Int64>] = [:]
    /// Assets whose location an app's view strips.
    private var stripped: [AppID: Set<Int64>] = [:]
    private(set) var albums: [String: [Int64]] = [:]
    /// The change log: seq -> touched row id (nil: albums).
    private var log: [(seq: Int64, rowID: Int64?)] = []
    private var seq: Int64 = 0
    private var nextRow: Int64 = 1
    private(set) var requests: [(AppID, RequestKind, String)] = []
    private(set) var editRequests: [Int64] = []
    private(set) var refusalList: [Refusal] = []
    private(set) var commits: [(name: String, bytes: [UInt8])] = []
    /// The content hash each commit of an app file was given (nil: none; the library hashes).
    var commitHashes: [(name: String, hash: String?)] = []

    init() throws {
        let base = ProcessInfo.processInfo.environment["PHOTOGATE_TEST_TMP"] ?? NSTemporaryDirectory()
        root = base + "/fake-library-\(UUID().uuidString.prefix(8))"
        storeRoot = root + "/store"
        runDir = root + "/run"
        tmpDir = root + "/tmp"
        for d in [storeRoot, runDir, tmpDir] { try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true) }
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    private func change(_ rowID: Int64?) {
        seq += 1
        log.append((seq, rowID))
    }

    // MARK: what a test sets up

    func setApp(_ id: AppID, readWrite: AuthorizationStatus = .authorized, addOnly: AuthorizationStatus = .authorized) {
        locked {
            let secret = Array(id.rawValue.utf8.prefix(16)) + [UInt8](repeating: 7, count: max(0, 16 - id.rawValue.utf8.count))
            apps[id] = AppRecord(id: id, readWrite: readWrite, addOnly: addOnly, options: AppOptions(),
                                 secret: secret, createdAt: Date(timeIntervalSince1970: 0))
            change(nil)
        }
    }

    @discardableResult
    func addAsset(_ name: String, bytes: [UInt8] = Array("photo bytes".utf8), owner: AppID? = nil,
                  captured: Double = 1_700_000_000) throws -> Int64 {
        try locked {
            let row = nextRow
            nextRow += 1
            let id = String(format: "%016llx", UInt64(row) * 0x9E37_79B9)
            let rel = "\(id.prefix(2))/\(id).jpg"
            try FileManager.default.createDirectory(atPath: storeRoot + "/" + id.prefix(2), withIntermediateDirectories: true)
            guard FileManager.default.createFile(atPath: storeRoot + "/" + rel, contents: Data(bytes)) else { throw PortError.invalid(rel) }
            assets[row] = Asset(rowID: row, id: id, displayName: name, ownerName: owner == nil ? nil : name, owner: owner,
                                mediaKind: "jpeg", mediaClass: .photo, byteSize: UInt64(bytes.count),
                                captureDate: Date(timeIntervalSince1970: captured), addedDate: Date(timeIntervalSince1970: captured),
                                hasLocation: false, contentHash: id, storePath: rel)
            change(row)
            return row
        }
    }

    func select(_ app: AppID, _ row: Int64) { locked { selections[app, default: []].insert(row); change(row) } }
    func deselect(_ app: AppID, _ row: Int64) { locked { selections[app]?.remove(row); change(row) } }

    /// Strip-location on or off for one asset in one app's view.
    func setStrip(_ app: AppID, _ row: Int64, _ on: Bool) {
        locked {
            if on { stripped[app, default: []].insert(row) } else { stripped[app]?.remove(row) }
            change(row)
        }
    }

    /// A new version of an asset: new bytes in a new store file (so a new inode in a view).
    func saveNewVersion(_ row: Int64, bytes: [UInt8]) throws {
        try locked {
            guard let a = assets[row] else { throw PortError.invalid("no asset \(row)") }
            let fileID = String(format: "%016llx", UInt64(nextRow) * 0x7F4A_7C15 + UInt64(row))
            nextRow += 1
            let rel = "\(fileID.prefix(2))/\(fileID).jpg"
            try FileManager.default.createDirectory(atPath: storeRoot + "/" + fileID.prefix(2), withIntermediateDirectories: true)
            guard FileManager.default.createFile(atPath: storeRoot + "/" + rel, contents: Data(bytes)) else { throw PortError.invalid(rel) }
            assets[row] = Asset(rowID: row, id: a.id, displayName: a.displayName, ownerName: a.ownerName, owner: a.owner,
                                mediaKind: a.mediaKind, mediaClass: a.mediaClass, byteSize: UInt64(bytes.count),
                                captureDate: a.captureDate, addedDate: a.addedDate, hasLocation: a.hasLocation,
                                contentHash: fileID, storePath: rel)
            change(row)
        }
    }

    func asset(named name: String) -> Asset? { locked { assets.values.first { $0.displayName == name } } }

    // MARK: LibraryPort

    func registerApp(_ id: AppID) throws {
        if locked({ apps[id] }) == nil { setApp(id, readWrite: .notDetermined, addOnly: .notDetermined) }
    }

    private func facts(_ a: Asset, _ app: AppID) -> AssetFacts {
        AssetFacts(isShared: a.isShared, isTrashed: a.trashedDate != nil, isOwned: a.owner == app,
                   isSelected: selections[app]?.contains(a.rowID) ?? false, isPicked: false)
    }

    private func entries(_ app: AppRecord, _ policy: ViewPolicy, rows: [Int64]) -> [ViewEntry] {
        let context = AppContext(access: policy.access, status: policy.status, options: app.options)
        return rows.sorted().compactMap { r in
            guard let a = assets[r] else { return nil }
            let f = facts(a, app.id)
            guard policy.isVisible(f) else { return nil }
            let owned = a.owner == app.id
            return ViewEntry(asset: a, name: owned ? (a.ownerName ?? a.displayName) : a.displayName, isOwned: owned,
                             isPicked: false, isSelected: selections[app.id]?.contains(r) ?? false,
                             stripLocation: stripped[app.id]?.contains(r) ?? false,
                             isEditable: context.editDecision(f).isAllowed,
                             canDelete: policy.canDelete(f), canRename: policy.canRename(f))
        }
    }

    private func snapshot(_ id: AppID, _ access: AccessLevel) throws -> ViewSnapshot {
        guard let app = apps[id] else { throw PortError.invalid("unknown app \(id)") }
        let policy = ViewPolicy(access: access, status: app.status(for: access))
        let list = entries(app, policy, rows: Array(assets.keys))
        let visible = Set(list.map(\.asset.rowID))
        let al = policy.showsAlbums
            ? albums.sorted { $0.key < $1.key }.map { ViewAlbum(name: $0.key, isShared: false, members: $0.value.filter(visible.contains)) }
            : []
        return ViewSnapshot(app: app, access: access, policy: policy, entries: list, albums: al, changeSeq: seq)
    }

    func view(for id: AppID, access: AccessLevel, lean: Bool) throws -> ViewSnapshot { try locked { try snapshot(id, access) } }

    func viewUpdate(for id: AppID, access: AccessLevel, since: Int64, app: AppRecord, forceFull: Bool) throws -> ViewUpdate {
        try locked {
            guard let now = apps[id] else { throw PortError.invalid("unknown app \(id)") }
            if forceFull || now != app { return .full(try snapshot(id, access)) }
            let touched = log.filter { $0.seq > since }
            let affected = Set(touched.compactMap(\.rowID)).sorted()
            let policy = ViewPolicy(access: access, status: now.status(for: access))
            let members = Set(albums.values.joined())
            let albumsChanged = policy.showsAlbums && touched.contains { t in t.rowID.map(members.contains) ?? true }
            let all = albums.sorted { $0.key < $1.key }.map { ViewAlbum(name: $0.key, isShared: false, members: $0.value) }
            return .patch(ViewPatch(affected: affected, rows: ViewRows(entries(now, policy, rows: affected)),
                                    albums: albumsChanged ? all : nil, changeSeq: seq))
        }
    }

    func lastChange() throws -> Int64 { locked { seq } }
    func keepCommitsSafe() {}
    func changes(_ app: AppID, since: Int64) throws -> HistoryAnswer { .changes([], latest: since) }
    func latestChangeToken(_ app: AppID) throws -> Int64 { 0 }
    func redaction(rowID: Int64, path: String) throws -> RedactionResult { .refuse(reason: "the fake library does not redact") }

    func recordRequest(_ app: AppID, kind: RequestKind, reason: String) throws { locked { requests.append((app, kind, reason)) } }
    func recordEditRequest(app: AppID, rowID: Int64) throws { locked { editRequests.append(rowID) } }

    func recordRefusal(_ app: AppID, name: String, reason: String) throws {
        locked { refusalList.append(Refusal(id: Int64(refusalList.count + 1), app: app, date: Date(), name: name, reason: reason)) }
    }

    func refusals(_ app: AppID) throws -> [Refusal] { locked { refusalList.filter { $0.app == app } } }

    /// The access report's batches, as a mount handed them.
    var accessBatches: [(app: AppID, tallies: [AccessTally])] = []
    /// What `bytesAdded` answers (what the app added in the period).
    var addedBytes: UInt64 = 0
    /// Added to `addedBytes` where a commit asks the daily limit: what other closes took between
    /// a close's own checks and its commit's transaction.
    var addedByTheCommit: UInt64 = 0
    /// Set: every commit of a new file or a version fails before it asks anything (a busy database).
    var failCommits: Bool {
        get { locked { failingCommits } }
        set { locked { failingCommits = newValue } }
    }
    private var failingCommits = false
    /// The names of the files kept durable and marked to be committed later (`markReady`).
    var markedReady: [String] = []
    /// The rows of the edits kept durable and marked to be committed later (`markVersionReady`).
    var markedVersionsReady: [Int64] = []
    func bytesAdded(by app: AppID, since: Double) throws -> UInt64 { locked { addedBytes } }

    /// Set: recordAccess fails (a locked or failing database).
    var failAccess: Bool {
        get { locked { failingAccess } }
        set { locked { failingAccess = newValue } }
    }
    private var failingAccess = false
    /// Runs while a failing recordAccess holds its batch (before it throws).
    var whileAccessFails: (@Sendable () -> Void)?
    /// Runs in every recordAccess with a batch, before it is written.
    var beforeAccessWrite: (@Sendable () -> Void)?
    func recordAccess(_ app: AppID, _ batch: [AccessTally], prune: Bool) throws -> Bool {
        if !batch.isEmpty, let hook = locked({ beforeAccessWrite }) { hook() }
        if failAccess, let hook = locked({ whileAccessFails }) { hook() }
        try locked {
            if failingAccess { throw PortError.denied("the database is failing (test)") }
            if !batch.isEmpty { accessBatches.append((app, batch)) }
        }
        return true
    }

    func editDecision(app: AppID, rowID: Int64, access: AccessLevel) throws -> EditDecision {
        try locked {
            guard let a = assets[rowID], let rec = apps[app] else { throw PortError.invalid("unknown asset") }
            return ViewPolicy(access: access, status: rec.status(for: access)).editDecision(facts(a, app), consented: false, editAny: false)
        }
    }

    func createAlbum(_ name: String) throws {
        try locked {
            if albums[name] != nil { throw PortError.exists("an album named '\(name)' already exists") }
            albums[name] = []
            change(nil)
        }
    }

    func deleteAlbum(_ name: String, onlyIfEmpty: Bool) throws {
        try locked {
            guard let members = albums[name] else { throw PortError.invalid("unknown album") }
            if onlyIfEmpty && !members.isEmpty { throw PortError.notEmpty("album '\(name)' is not empty") }
            albums[name] = nil
            change(nil)
        }
    }

    func addToAlbum(_ album: String, assetIDs: [String]) throws {
        locked {
            for id in assetIDs { if let a = assets.values.first(where: { $0.id == id }) { albums[album, default: []].append(a.rowID) } }
            change(nil)
        }
    }

    func removeFromAlbum(_ album: String, assetIDs: [String]) throws {
        locked {
            let rows = Set(assets.values.filter { assetIDs.contains($0.id) }.map(\.rowID))
            albums[album]?.removeAll { rows.contains($0) }
            change(nil)
        }
    }

    func moveToTrash(rowIDs: [Int64], by app: AppID) throws {
        locked { for r in rowIDs { assets[r]?.trashedDate = Date(); change(r) } }
    }

    func renameOwnAsset(rowID: Int64, app: AppID, access: AccessLevel, to name: String) throws {
        try locked {
            guard let a = assets[rowID], a.owner == app else { throw PortError.denied("only the app that created an asset may rename it") }
            guard let rec = apps[app], AppContext(access: access, status: rec.status(for: access)).decide(facts(a, app)).canRename else {
                throw PortError.denied("the app may not rename it")
            }
            assets[rowID]?.ownerName = name
            assets[rowID]?.displayName = name
            change(rowID)
        }
    }

    func setOwnFileDate(rowID: Int64, app: AppID, access: AccessLevel, to date: Date) throws -> Bool {
        try locked {
            guard let a = assets[rowID], a.owner == app else { throw PortError.denied("only the app that created an asset sets its file time") }
            guard a.captureDate != date else { return false }
            assets[rowID]?.captureDate = date
            change(rowID)
            return true
        }
    }

    func restoreOwnAsset(rowID: Int64, app: AppID) throws {
        try locked {
            guard let a = assets[rowID], a.owner == app, a.trashedDate != nil else { throw PortError.denied("not the app's own asset in Recently Deleted") }
            assets[rowID]?.trashedDate = nil
            change(rowID)
        }
    }

    func dissolveOwnAsset(rowID: Int64, app: AppID) throws {
        if dissolveFails { throw PortError.denied("the database is busy") }
        locked { assets[rowID] = nil; change(rowID) }
    }


    /// Set: a version commits, and its file stays where it is, as when the move into the store
    /// failed after the row committed (recovery's to move). Unset: versions are refused.
    var versionsCommit = false
    /// Set: dissolving an app's own asset fails (the database is busy).
    var dissolveFails = false
    /// The temp file of each committed version.
    private(set) var versionFiles: [String] = []
    /// Set: a version commits, then its answer is lost (the commit throws).
    var commitsLoseTheirAnswer = false
    /// The temps whose commit went through (`isCommitted`).
    private(set) var committedTemps: Set<String> = []
    func isCommitted(tempPath: String) throws -> Bool { locked { committedTemps.contains(tempPath) } }

    /// The daily limit, as the library's commit asks it in its transaction (nil: not asked).
    func askDailyLimit(_ limit: DailyLimit?, app: AppID, fd: Int32) throws {
        guard let limit else { return }
        var st = stat()
        let size = fstat(fd, &st) == 0 ? UInt64(max(0, st.st_size)) : 0
        let added = try bytesAdded(by: app, since: limit.since) + locked { addedByTheCommit }
        if added + size > limit.bytes { throw PortError.overDailyLimit(added: added, size: size) }
    }
    /// The `basedOn` of each commitVersion: the path of the version the edit was made from.
    private(set) var versionBases: [String?] = []

    func commitVersion(rowID: Int64, app: AppID, tempPath: String, fd: Int32, contentHash: (() -> String?)?,
                       alwaysNew: Bool, basedOn: String?, dailyLimit: DailyLimit?) throws -> (asset: Asset, changed: Bool) {
        guard versionsCommit else { throw PortError.denied("the fake library keeps no versions") }
        if failCommits { throw FakeBusy() }
        if locked({ commitsLoseTheirAnswer }) {
            // Committed, the answer lost (a server's connection cut at COMMIT): it counts now.
            var st = stat()
            let size = fstat(fd, &st) == 0 ? UInt64(max(0, st.st_size)) : 0
            locked {
                versionFiles.append(tempPath)
                committedTemps.insert(tempPath)
                addedBytes += size
            }
            throw FakeBusy()
        }
        try askDailyLimit(dailyLimit, app: app, fd: fd)
        return locked {
            versionFiles.append(tempPath)
            versionBases.append(basedOn)
            return (assets[rowID]!, true)
        }
    }

    func appFileWriter(purpose: String) throws -> any AppFileWriter { FakeWriter(library: self) }

    /// A committed file becomes an asset owned by `app`, named as the app named it.
    func commit(tempPath: String, app: AppID, name: String, album: String?) throws -> AppFileCommit {
        guard let data = FileManager.default.contents(atPath: tempPath), !data.isEmpty else { throw PortError.refused("empty file") }
        let row = try addAsset(name, bytes: [UInt8](data), owner: app)
        unlink(tempPath)
        locked {
            commits.append((name, [UInt8](data)))
            if let album { albums[album, default: []].append(row); change(nil) }
        }
        return AppFileCommit(asset: locked { assets[row]! }, reused: false)
    }
}

final class FakeWriter: AppFileWriter, @unchecked Sendable {
    let library: FakeLibrary
    private let counter = NSLock()
    private var next = 0

    init(library: FakeLibrary) { self.library = library }

    func newTempPath() -> String {
        counter.lock()
        defer { counter.unlock() }
        next += 1
        return library.tmpDir + "/\(getpid())-\(next).part"
    }

    func makeTempFile() throws -> (id: String, path: String, fd: Int32) {
        let path = newTempPath()
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw PortError.noSpace(path) }
        return (String(path.split(separator: "/").last!.dropLast(5)), path, fd)
    }

    func commitAppFile(tempPath: String, fd: Int32, id: String, app: AppID, name: String, album: String?,
                       reuse: ReuseRule, contentHash: (() -> String?)?, dailyLimit: DailyLimit?) throws -> AppFileCommit {
        // As the library's transaction: one that fails (busy) asks nothing; else the daily limit.
        if library.failCommits { throw FakeBusy() }
        try library.askDailyLimit(dailyLimit, app: app, fd: fd)
        let hash = contentHash.flatMap { $0() }
        let c = try library.commit(tempPath: tempPath, app: app, name: name, album: album)
        library.locked { library.commitHashes.append((name, hash)) }
        return c
    }

    func newContentHasher() -> any ContentHasher { BytesHasher() }

    func markReady(tempPath: String, fd: Int32, app: AppID, name: String, album: String?) throws {
        library.locked { library.markedReady.append(name) }
    }
    func markVersionReady(tempPath: String, fd: Int32, app: AppID, rowID: Int64) throws {
        library.locked { library.markedVersionsReady.append(rowID) }
    }
    func clearReady(tempPath: String) {}
    func shutDown() {}
}

/// A cheap stand-in for the library's hash (FNV-1a, 64 bits, and the length): a function of the
/// bytes fed, in order, which is all a running hash's tests need to compare.
final class BytesHasher: ContentHasher {
    private var state: UInt64 = 0xcbf29ce484222325
    private var count = 0
    func update(_ b: UnsafeRawBufferPointer) {
        var h = state
        for byte in b { h = (h ^ UInt64(byte)) &* 0x100000001b3 }
        state = h
        count += b.count
    }
    func hashSoFar() -> String { "fnv:\(String(state, radix: 16)):\(count)" }
    static func hash(_ bytes: [UInt8]) -> String {
        let h = BytesHasher()
        bytes.withUnsafeBytes { h.update($0) }
        return h.hashSoFar()
    }
}

/// Records what a mount tells the kernel.
final class RecordingInvalidator: Invalidator, @unchecked Sendable {
    enum Call: Equatable {
        case entry(parent: Inode, name: String)
        case inode(Inode)
        case delete(parent: Inode, child: Inode, name: String)
        case quiesceReads
    }
    private let lock = NSLock()
    private var list: [Call] = []

    var calls: [Call] {
        lock.lock()
        defer { lock.unlock() }
        return list
    }

    func clear() {
        lock.lock()
        list = []
        lock.unlock()
    }

    private func add(_ c: Call) {
        lock.lock()
        list.append(c)
        lock.unlock()
    }

    func invalidateEntry(parent: Inode, name: [UInt8]) { add(.entry(parent: parent, name: String(decoding: name, as: UTF8.self))) }
    func invalidateInode(_ inode: Inode, offset: Int64, length: Int64) { add(.inode(inode)) }
    func notifyDelete(parent: Inode, child: Inode, name: [UInt8]) {
        add(.delete(parent: parent, child: child, name: String(decoding: name, as: UTF8.self)))
    }
    func quiesceReads() { add(.quiesceReads) }
    func flushNotifications() -> Bool { true }
}

/// A failure that is not one of the port's: the database busy or failing.
struct FakeBusy: Error {}
