import FUSE
import Foundation
import GrantStore
import PhotoLibrary
import Redaction
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Where invalidations go (the FUSE session; a recorder in tests).
public protocol Invalidator: AnyObject, Sendable {
    func invalidateEntry(parent: Inode, name: [UInt8])
    func invalidateInode(_ inode: Inode, offset: Int64, length: Int64)
    func notifyDelete(parent: Inode, child: Inode, name: [UInt8])
}

extension FUSESession: Invalidator {}

enum OpenKind: Sendable {
    case asset(rowID: Int64, ino: Inode, fd: Int32, plan: RedactionPlan?)
    case session(ino: Inode)
    /// An edit of a visible asset (EditSession.swift).
    case edit(ino: Inode)
    case status(content: [UInt8])
    case changes(position: Int64)
    case request(buffer: [UInt8])
}

/// One app's view of the library as a filesystem: the FUSE adapter. It asks `ViewPolicy` (through
/// `ViewModel`) for every decision and answers from memory; the database is read only when the
/// library changes, and written only for what the app does (create, delete, albums, requests).
public final class PhotoFS: FileSystemOperations, @unchecked Sendable {
    public let library: Library
    public let appID: AppID
    public let access: AccessLevel
    let writer: StoreWriter
    let model: Mutex<ViewModel>
    /// Files this mount is writing (see WriteSession.swift for their lock order).
    let files = Mutex<[Inode: SessionFile]>([:])
    /// Bytes of files being written in this mount, and its limits (WriteSession.admitGrowth).
    let writingBytes = Mutex<UInt64>(0)
    let writeLimit: UInt64 = (UInt64(ProcessInfo.processInfo.environment["PHOTOGATE_WRITE_LIMIT_MB"] ?? "") ?? 4096) << 20
    let diskReserve: UInt64? = UInt64(ProcessInfo.processInfo.environment["PHOTOGATE_DISK_RESERVE_MB"] ?? "").map { $0 << 20 }
    /// Edits in progress, by the asset's inode (EditSession.swift).
    let edits = Mutex<[Inode: SessionFile]>([:])
    /// Inodes that stand for another asset after a rename over it (EditSession.swift).
    let aliases = Mutex<[Inode: Int64]>([:])
    /// The stored path each inode was last opened from: after an edit, the next open drops the
    /// kernel's cached pages of the old version.
    let openedPaths = Mutex<[Inode: String]>([:])
    /// Committed add-only files still known by name, oldest first.
    let committedOrder = Mutex<[Inode]>([])
    /// Folders the app made (UploadFolders.swift), and those at the top by name.
    let folders = Mutex<[Inode: UploadFolder]>([:])
    let rootFolders = Mutex<[String: Inode]>([:])
    /// Files being written in `Albums/X/`, by album and name.
    let albumSessions = Mutex<[String: [String: Inode]]>([:])
    let sessionNames = Mutex<[String: Inode]>([:])
    let handles = Mutex<[UInt64: OpenKind]>([:])
    let nextHandle = Atomic<UInt64>(1)
    let requested = Atomic<Bool>(false)
    let refreshLock = NSLock()
    let invalidatorBox = Mutex<Invalidator?>(nil)
    let redactionCache = Mutex<[Int64: RedactionResult]>([:])
    let feed: Mutex<ChangeFeed>
    /// Bytes of the assets in the view, for statfs (computed per refresh, never per request).
    let viewBytes: Atomic<UInt64>
    public let uid: UInt32
    public let gid: UInt32
    let log: @Sendable (String) -> Void
    public let passthrough: Bool
    let started = Timespec.now
    /// When a folder's listing last changed other than by this mount's own syscalls: the mtime of
    /// every folder. With cached listings, a listing the kernel finished filling just after an
    /// invalidation would keep stale names; a newer mtime makes the kernel drop it the next time
    /// it refreshes the folder's attributes (which the invalidation also forces).
    let listingsChanged = Mutex<Timespec>(.zero)

    static let longTimeout = 86_400.0

    public init(library: Library, app: AppID, access: AccessLevel, passthrough: Bool = true,
                log: @escaping @Sendable (String) -> Void = { _ in }) throws {
        self.library = library
        self.appID = app
        self.access = access
        self.log = log
        self.passthrough = passthrough
        try library.registerApp(app)
        writer = try StoreWriter(library: library, purpose: "mount")
        let snapshot = try library.view(for: app, access: access, lean: true)
        let initial = ViewModel(snapshot: snapshot, library: library)
        viewBytes = Atomic(initial.totalBytes)
        model = Mutex(initial)
        feed = Mutex(ChangeFeed(latest: try library.latestChangeToken(app)))
        uid = getuid()
        gid = getgid()
    }

    public func setInvalidator(_ i: Invalidator?) { invalidatorBox.withLock { $0 = i } }

    /// Tells `.photogate/status` the read path in effect ("passthrough" or "daemon"), as the
    /// session knows it (the kernel may refuse passthrough after the mount).
    public func setReadPath(_ provider: @escaping @Sendable () -> String) { readPathBox.withLock { $0 = provider } }
    let readPathBox = Mutex<(@Sendable () -> String)?>(nil)
    var invalidator: Invalidator? { invalidatorBox.withLock { $0 } }

    // MARK: refresh

    /// Catches the view up with the library and invalidates what changed in the kernel's caches.
    /// A change to a few assets is read and applied row by row (O(changes)); anything else
    /// (status or options, thousands of changes, colliding names) recomputes the whole view.
    /// `handled` are assets whose name changes this mount made itself through a syscall (unlink,
    /// rename): the kernel already updated its dentries for those, and notifying again would take
    /// the directory lock that syscall may still hold.
    public func refresh(handled: Set<Int64> = [], handledAlbums: Set<String> = []) {
        refreshLock.lock()
        defer { refreshLock.unlock() }
        let (seq, app, mustRebuild) = model.withLock { m in
            // Tombstones pile up under patches: compact by rebuilding once they are a quarter.
            (m.seq, m.app, m.store.deadCount > 4096 && m.store.deadCount * 4 > m.store.slotCount)
        }
        let update: ViewUpdate
        do {
            update = try library.viewUpdate(for: appID, access: access, since: seq, app: app, forceFull: mustRebuild)
        } catch {
            log("refresh failed: \(error)")
            return
        }
        if case .patch(let patch) = update {
            let applied = model.withLock { m -> (ViewModel.Diff, [String: AlbumNode], [String: AlbumNode], ViewModel, [Int64: Inode])? in
                let oldAlbums = m.albums, oldShared = m.shared
                // Inodes of the rows the patch touches, before it: a new version has a new one.
                var before: [Int64: Inode] = [:]
                for r in patch.affected { if let n = m.nodes[r] { before[r] = n.ino } }
                guard let d = m.apply(patch) else { return nil }
                return (d, oldAlbums, oldShared, m, before)
            }
            if let (diff, oldAlbums, oldShared, now, before) = applied {
                viewBytes.store(now.totalBytes, ordering: .relaxed)
                // Inodes of rows before the patch: dropped ones are in the diff, touched ones were
                // kept, the rest did not change.
                var gone: [Int64: Inode] = before
                for n in diff.removed { gone[n.rowID] = n.ino }
                settle(diff, oldPolicy: now.policy, oldAlbums: oldAlbums, oldShared: oldShared, new: now,
                       oldIno: { r in gone[r] ?? now.nodes[r]?.ino }, handled: handled, handledAlbums: handledAlbums)
                return
            }
        }
        // A whole recomputation: the update's, or a fresh one when the patch did not apply.
        let snapshot: ViewSnapshot
        if case .full(let s) = update {
            snapshot = s
        } else {
            do { snapshot = try library.view(for: appID, access: access, lean: true) } catch {
                log("refresh failed: \(error)")
                return
            }
        }
        let new = ViewModel(snapshot: snapshot, library: library)
        viewBytes.store(new.totalBytes, ordering: .relaxed)
        let old = model.withLock { m -> ViewModel in
            let o = m
            m = new
            return o
        }
        let diff = ViewModel.diff(old, new)
        settle(diff, oldPolicy: old.policy, oldAlbums: old.albums, oldShared: old.shared, new: new,
               oldIno: { old.nodes[$0]?.ino }, handled: handled, handledAlbums: handledAlbums)
    }

    /// After a model changed: forgets cached redactions of changed assets, tells the kernel, and
    /// feeds `.photogate/changes`.
    private func settle(_ diff: ViewModel.Diff, oldPolicy: ViewPolicy, oldAlbums: [String: AlbumNode], oldShared: [String: AlbumNode],
                        new: ViewModel, oldIno: (Int64) -> Inode?, handled: Set<Int64>, handledAlbums: Set<String>) {
        if !diff.updated.isEmpty || !diff.inserted.isEmpty {
            redactionCache.withLock { c in for n in diff.updated + diff.inserted { c[n.rowID] = nil } }
        }
        invalidate(diff, oldPolicy: oldPolicy, oldAlbums: oldAlbums, oldShared: oldShared, new: new, oldIno: oldIno,
                   handled: handled, handledAlbums: handledAlbums)
        pullFeed()
    }

    /// Appends the app's new history entries to `.photogate/changes` and wakes pollers.
    func pullFeed() {
        let since = feed.withLock { $0.latest }
        guard case .changes(let list, let latest)? = try? library.changes(appID, since: since) else { return }
        let lines = list.filter { access == .readWrite || $0.kind == .status }.map { c in
            (c.token, "\(c.token) \(c.kind.rawValue) \(c.name ?? c.detail ?? "")\n")
        }
        let wake = feed.withLock { f -> [PollHandle] in
            f.append(lines, latest: latest)
            return lines.isEmpty ? [] : f.takePollers()
        }
        for p in wake { p.notify() }
    }

    /// Tells the kernel what changed. Names that appear need nothing (a failed lookup is never
    /// cached); names that go away are deleted from the kernel's cache (which also wakes inotify
    /// watchers of the file); changed files drop their cached attributes and pages.
    func invalidate(_ diff: ViewModel.Diff, oldPolicy: ViewPolicy, oldAlbums: [String: AlbumNode], oldShared: [String: AlbumNode],
                    new: ViewModel, oldIno: (Int64) -> Inode?, handled: Set<Int64>, handledAlbums: Set<String>) {
        guard let inv = invalidator, !diff.isEmpty else { return }
        for n in diff.removed {
            // Its cached pages go first (queued before the name's deletion, so that once the name
            // is gone no page is left either): a handle opened before the revoke then reads
            // through the daemon, which refuses it, instead of from pages the kernel read ahead.
            inv.invalidateInode(n.ino, offset: 0, length: 0)
            if !handled.contains(n.rowID) {
                inv.notifyDelete(parent: FixedInode.root, child: n.ino, name: Array(n.name.utf8))
            }
        }
        for n in diff.updated {
            inv.invalidateInode(n.ino, offset: 0, length: 0)
            // A new version is a new inode under the same name: the name must be looked up again
            // (at the top and in every album listing it), and the old inode's pages dropped.
            if let o = oldIno(n.rowID), o != n.ino {
                // Until the kernel looks the name up again, a path still reaching the old inode
                // gets the current version (handles opened before keep theirs: they hold its file).
                aliases.withLock { a in
                    a[o] = n.rowID
                    if a.count > PhotoFS.keptCommittedNames { a.removeValue(forKey: a.keys.first!) }
                }
                inv.invalidateInode(o, offset: 0, length: 0)
                if !handled.contains(n.rowID) { inv.invalidateEntry(parent: FixedInode.root, name: Array(n.name.utf8)) }
                for a in Array(new.albums.values) + Array(new.shared.values) {
                    for (member, r) in a.byName where r == n.rowID {
                        inv.invalidateEntry(parent: a.ino, name: Array(member.utf8))
                    }
                }
            }
        }
        // Directory listings are cached by the kernel (FOPEN_CACHE_DIR): drop the cached listing
        // of every folder whose names changed. (This takes no directory lock, so it is safe even
        // for changes the mount's own syscalls made; the kernel drops its cache for those itself.)
        var folders: [Inode] = []
        if !diff.removed.isEmpty || !diff.inserted.isEmpty || oldPolicy.showsAlbums != new.policy.showsAlbums {
            folders.append(FixedInode.root)
        }
        if new.policy.showsAlbums {
            for (parent, olds, news) in [(FixedInode.albums, oldAlbums, new.albums), (FixedInode.shared, oldShared, new.shared)] {
                if Set(olds.keys) != Set(news.keys) { folders.append(parent) }
                for (name, a) in news where olds[name]?.listing != a.listing || olds[name]?.byName != a.byName {
                    folders.append(a.ino)
                }
            }
        }
        invalidateListings(folders)
        // An asset joining or leaving an album changes its link count.
        if new.policy.showsAlbums || oldPolicy.showsAlbums {
            var moved = Set<Int64>()
            for (olds, news) in [(oldAlbums, new.albums), (oldShared, new.shared)] {
                for name in Set(olds.keys).union(news.keys) where olds[name]?.listing != news[name]?.listing {
                    moved.formUnion(Set(olds[name]?.listing ?? []).symmetricDifference(news[name]?.listing ?? []))
                }
            }
            for r in moved { if let n = new.nodes[r] { inv.invalidateInode(n.ino, offset: 0, length: 0) } }
        }
        guard oldPolicy.showsAlbums else { return }
        if !new.policy.showsAlbums {
            inv.notifyDelete(parent: FixedInode.root, child: FixedInode.albums, name: Array("Albums".utf8))
            inv.notifyDelete(parent: FixedInode.root, child: FixedInode.shared, name: Array("Shared".utf8))
            return
        }
        for (parent, olds, news) in [(FixedInode.albums, oldAlbums, new.albums), (FixedInode.shared, oldShared, new.shared)] {
            for (name, a) in olds {
                guard let now = news[name] else {
                    if !handledAlbums.contains(name) { inv.notifyDelete(parent: parent, child: a.ino, name: Array(name.utf8)) }
                    continue
                }
                for (member, r) in a.byName where now.byName[member] != r {
                    if let ino = oldIno(r) { inv.notifyDelete(parent: a.ino, child: ino, name: Array(member.utf8)) }
                }
            }
        }
    }

    // MARK: attributes

    func dirAttributes(_ ino: Inode, writable: Bool) -> Attributes {
        let changed = listingsChanged.withLock { $0 }
        let m = changed == .zero ? started : changed
        return Attributes(ino: ino, mode: FileMode.directory | (writable ? 0o755 : 0o555), nlink: 2, size: 4096,
                          uid: uid, gid: gid, atime: m, mtime: m, ctime: m)
    }

    /// Drops the kernel's cached listing (and attributes) of folders whose names changed.
    func invalidateListings(_ folders: [Inode]) {
        guard let inv = invalidator, !folders.isEmpty else { return }
        listingsChanged.withLock { t in
            let now = Timespec.now
            // Strictly newer, even within one clock tick.
            if (now.seconds, now.nanoseconds) > (t.seconds, t.nanoseconds) {
                t = now
            } else {
                t = t.nanoseconds < 999_999_999 ? Timespec(seconds: t.seconds, nanoseconds: t.nanoseconds + 1)
                                                : Timespec(seconds: t.seconds + 1)
            }
        }
        for ino in folders { inv.invalidateInode(ino, offset: 0, length: 0) }
    }

    func attributes(_ n: AssetNode) -> Attributes {
        let m = Timespec(seconds: n.mtime), c = Timespec(seconds: n.ctime)
        return Attributes(ino: n.ino, mode: FileMode.regular | 0o444, nlink: n.nlink, size: n.size, uid: uid, gid: gid,
                          atime: m, mtime: m, ctime: c)
    }

    func specialAttributes(_ ino: Inode) -> Attributes {
        let size: UInt64 = ino == FixedInode.status ? UInt64(statusContent().count)
            : ino == FixedInode.refused ? UInt64(refusedContent().count) : 0
        // `.photogate/request` is the owner's alone to write (issue 14: with allow_other, the
        // kernel checks these bits for everyone else).
        let mode: UInt32 = ino == FixedInode.request ? 0o200 : 0o444
        return Attributes(ino: ino, mode: FileMode.regular | mode, nlink: 1, size: size, uid: uid, gid: gid,
                          atime: started, mtime: started, ctime: started)
    }

    func entry(_ a: Attributes, timeout: Double = PhotoFS.longTimeout) -> Entry {
        Entry(attributes: a, entryTimeout: timeout, attrTimeout: timeout)
    }

    /// Resolves any inode to its attributes (and confirms it is still visible).
    func attributes(of ino: Inode) throws(Errno) -> (Attributes, Double) {
        switch ino {
        case FixedInode.root:
            let canCreate = model.withLock { $0.policy.canCreate }
            return (dirAttributes(ino, writable: canCreate), PhotoFS.longTimeout)
        case FixedInode.albums, FixedInode.shared:
            let (shows, canEdit) = model.withLock { ($0.policy.showsAlbums, $0.policy.canEditAlbums) }
            guard shows else { throw .noEntry }
            return (dirAttributes(ino, writable: canEdit && ino == FixedInode.albums), PhotoFS.longTimeout)
        case FixedInode.control:
            return (dirAttributes(ino, writable: false), PhotoFS.longTimeout)
        case FixedInode.status, FixedInode.changes, FixedInode.request, FixedInode.refused:
            return (specialAttributes(ino), 0)
        default:
            if let a = model.withLock({ m -> Attributes? in
                if let r = m.byIno[ino], let n = m.nodes[r] { return attributes(n) }
                if let al = m.album(ino: ino) {
                    return dirAttributes(al.ino, writable: !al.isShared && m.policy.canEditAlbums)
                }
                return nil
            }) {
                return (a, PhotoFS.longTimeout)
            }
            if let a = folderAttributes(ino) { return (a, PhotoFS.longTimeout) }
            if let n = aliasedNode(ino) {
                var a = attributes(n)
                a.ino = ino
                return (a, 0)
            }
            // A file being written: no caching, so that a refused or discarded one is gone at once.
            if let f = session(ino), let a = f.run({ () -> Attributes? in
                f.isNamed(addOnly: access == .addOnly) ? sessionAttributes(f) : nil
            }) { return (a, 0) }
            throw .noEntry
        }
    }

    // MARK: requests on access

    /// A not-determined app touching its mount records a prompt, once, unless prevent-prompt.
    func noteAccess() {
        if requested.load(ordering: .relaxed) { return }
        let (records, prevent) = model.withLock { ($0.policy.recordsRequestOnAccess, $0.app.options.preventPrompt) }
        guard records, !prevent else { return }
        if requested.exchange(true, ordering: .relaxed) { return }
        let lib = library, app = appID, kind: RequestKind = access == .readWrite ? .readWrite : .addOnly
        let log = self.log
        DispatchQueue.global().async {
            do { try lib.recordRequest(app, kind: kind) } catch { log("could not record request: \(error)") }
        }
    }

    // MARK: lookup

    public func lookup(parent: Inode, name: FileName, context: RequestContext) throws(Errno) -> Entry {
        noteAccess()
        if name.bytes.count > DisplayName.maxBytes { throw .nameTooLong }
        guard let s = name.string else { throw .noEntry }
        if let ino = try childInode(parent: parent, name: s) {
            let (a, t) = try attributes(of: ino)
            return entry(a, timeout: t)
        }
        throw .noEntry
    }

    /// The inode of a name in a directory, or nil. Throws ENOTDIR for files used as folders.
    func childInode(parent: Inode, name: String) throws(Errno) -> Inode? {
        switch parent {
        case FixedInode.root:
            if name == ".photogate" { return FixedInode.control }
            let found: Inode? = model.withLock { m -> Inode? in
                if (name == "Albums" || name == "Shared") && m.policy.showsAlbums {
                    return name == "Albums" ? FixedInode.albums : FixedInode.shared
                }
                if let r = m.byName[name] { return m.nodes[r]?.ino }
                return nil
            }
            if let found { return found }
            return sessionIno(name) ?? rootFolders.withLock { $0[name] }
        case FixedInode.albums, FixedInode.shared:
            return model.withLock { m -> Inode? in
                guard m.policy.showsAlbums else { return nil }
                return (parent == FixedInode.albums ? m.albums[name] : m.shared[name])?.ino
            }
        case FixedInode.control:
            switch name {
            case "status": return FixedInode.status
            case "changes": return FixedInode.changes
            case "request": return FixedInode.request
            case "refused": return FixedInode.refused
            default: return nil
            }
        default:
            let r: (Inode?, String?)? = model.withLock { m -> (Inode?, String?)? in
                if let al = m.album(ino: parent) {
                    if let row = al.byName[name] { return (m.nodes[row]?.ino, nil) }
                    return (nil, al.isShared ? nil : al.name)
                }
                return nil
            }
            if let (ino, album) = r {
                if let ino { return ino }
                return album.flatMap { albumSessionIno($0, name) }
            }
            if isFolder(parent) { return folderChild(parent, name) }
            if model.withLock({ $0.byIno[parent] != nil }) || files.withLock({ $0[parent] != nil }) { throw .notDirectory }
            throw .noEntry
        }
    }

    /// A file this mount created, by name: while it is being written, and, in an add-only mount
    /// (whose view shows nothing), also after it became an asset, so that tools can still set its
    /// times or rename it. In a read-write mount a committed file is the view's business alone:
    /// if the app may no longer see its own asset, the name must answer ENOENT like any other.
    func sessionIno(_ name: String) -> Inode? {
        guard let ino = sessionNames.withLock({ $0[name] }), let f = session(ino) else { return nil }
        return f.run { f.isNamed(addOnly: access == .addOnly) } ? ino : nil
    }

    public func getattr(_ inode: Inode, handle: UInt64?, context: RequestContext) throws(Errno) -> (Attributes, timeout: Double) {
        noteAccess()
        do {
            return try attributes(of: inode)
        } catch {
            // fstat (or the kernel refreshing attributes before a read) through a handle opened
            // before a revoke describes the file that handle has open, which tells the app nothing
            // it did not know; the read itself is then refused (EACCES).
            guard let handle, case .asset(_, let ino, let fd, _)? = handles.withLock({ $0[handle] }), ino == inode else { throw error }
            var st = stat()
            guard fstat(fd, &st) == 0 else { throw error }
            let m = Timespec(seconds: Int(st.st_mtim.tv_sec), nanoseconds: Int(st.st_mtim.tv_nsec))
            return (Attributes(ino: inode, mode: FileMode.regular | 0o444, nlink: 1, size: UInt64(st.st_size), uid: uid, gid: gid,
                               atime: m, mtime: m, ctime: m), 0)
        }
    }

    // MARK: directories

    public func opendir(_ inode: Inode, flags: Int32, context: RequestContext) throws(Errno) -> OpenReply {
        noteAccess()
        let (a, _) = try attributes(of: inode)
        guard a.isDirectory else { throw .notDirectory }
        // The kernel may keep listings: `invalidate` drops them when names change.
        return OpenReply(handle: 0, keepCache: true, cacheReaddir: true)
    }

    /// Assets returned per readdir call (a kernel buffer holds ~30 readdirplus entries).
    static let readdirBatch = 128

    public func readdir(_ inode: Inode, handle: UInt64, offset: Int64, plus: Bool, context: RequestContext) throws(Errno) -> [DirectoryEntry] {
        let t = PhotoFS.longTimeout
        var out: [DirectoryEntry] = []
        var index: Int64 = 0
        func add(_ name: String, _ a: Attributes) {
            index += 1
            if index > offset { out.append(DirectoryEntry(name: Array(name.utf8), attributes: a, nextOffset: index, entryTimeout: t, attrTimeout: t)) }
        }
        let own = dirAttributes(inode, writable: false)
        add(".", own)
        add("..", dirAttributes(FixedInode.root, writable: false))
        switch inode {
        case FixedInode.root:
            let (showsAlbums, canEdit) = model.withLock { m in (m.policy.showsAlbums, m.policy.canEditAlbums) }
            // `.photogate/` is reachable by path but not listed: backups (`rsync -a M/ b/`,
            // `cp -a M/. b/`, `tar c -C M .`) copy the photos, not the app's control files.
            if showsAlbums {
                add("Albums", dirAttributes(FixedInode.albums, writable: canEdit))
                add("Shared", dirAttributes(FixedInode.shared, writable: false))
            }
            // Assets: only a batch after `offset` (the wrapper asks again from the last offset), so
            // listing n assets costs O(n), not O(n^2): a call used to copy the whole listing.
            // listing[k] has index fixed + k + 1.
            let fixed = index
            let (nodes, start, total) = model.withLock { m -> ([AssetNode], Int, Int) in
                let start = Int(max(0, offset - fixed))
                guard start < m.listing.count else { return ([], start, m.listing.count) }
                let end = min(m.listing.count, start + PhotoFS.readdirBatch)
                return (m.listing[start..<end].compactMap { m.nodes[$0] }, start, m.listing.count)
            }
            index = fixed + Int64(min(start, total))
            for n in nodes {
                index += 1
                out.append(DirectoryEntry(name: Array(n.name.utf8), attributes: attributes(n), nextOffset: index, entryTimeout: t, attrTimeout: t))
            }
            if start + nodes.count < total { return out }
            // Files this mount is writing (not yet assets) are listed in a read-write mount only.
            if access == .readWrite {
                let all = files.withLock { fs in fs.values.filter { $0.album == nil } }
                let pending = all.compactMap { f in f.run { f.isWriting && !f.hidden ? (f.name, sessionAttributes(f)) : nil } }
                    .sorted { $0.0 < $1.0 }
                let shown = model.withLock { m in Set(pending.map(\.0).filter { m.byName[$0] != nil }) }
                for (name, a) in pending where !shown.contains(name) { add(name, a) }
                let made = rootFolders.withLock { $0 }.sorted { $0.key < $1.key }
                for (name, ino) in made where !shown.contains(name) {
                    if let a = folderAttributes(ino) { add(name, a) }
                }
            }
        case FixedInode.albums, FixedInode.shared:
            let list = model.withLock { m in
                (inode == FixedInode.albums ? m.albums : m.shared).values.sorted { $0.name < $1.name }
                    .map { ($0.name, dirAttributes($0.ino, writable: !$0.isShared && m.policy.canEditAlbums)) }
            }
            for (name, a) in list { add(name, a) }
        case FixedInode.control:
            add("status", specialAttributes(FixedInode.status))
            add("changes", specialAttributes(FixedInode.changes))
            add("request", specialAttributes(FixedInode.request))
            add("refused", specialAttributes(FixedInode.refused))
        default:
            if let list = folderListing(inode) {
                for (name, a) in list { add(name, a) }
                return out
            }
            // A batch after `offset`, as for the root: members[k] has index 2 + k + 1.
            let fixed = index
            guard let (members, start, total) = model.withLock({ m -> ([AssetNode], Int, Int)? in
                guard let al = m.album(ino: inode) else { return nil }
                let start = Int(max(0, offset - fixed))
                guard start < al.listing.count else { return ([], start, al.listing.count) }
                return (al.listing[start..<min(al.listing.count, start + PhotoFS.readdirBatch)].compactMap { m.nodes[$0] }, start, al.listing.count)
            }) else { throw .noEntry }
            // Offsets: members[k] is fixed + k + 1, then the files being written in the album.
            index = fixed + Int64(min(start, total))
            for n in members { add(n.name, attributes(n)) }
            if start + members.count < total { return out }
            if access == .readWrite,
               let (album, memberNames) = model.withLock({ m in m.album(ino: inode).map { ($0.name, Set($0.byName.keys)) } }) {
                let pending = albumSessions.withLock { $0[album] ?? [:] }.sorted { $0.key < $1.key }
                for (name, ino) in pending where !memberNames.contains(name) {
                    if let f = session(ino), let a = f.run({ f.isWriting && !f.hidden ? sessionAttributes(f) : nil }) { add(name, a) }
                }
            }
        }
        return out
    }

    // MARK: files

    func newHandle(_ kind: OpenKind) -> UInt64 {
        let h = nextHandle.add(1, ordering: .relaxed).oldValue
        handles.withLock { $0[h] = kind }
        return h
    }

    func redaction(for n: AssetNode) -> RedactionResult {
        if let r = redactionCache.withLock({ $0[n.rowID] }) { return r }
        let r: RedactionResult
        do {
            r = try library.redaction(rowID: n.rowID)
        } catch {
            r = .refuse(reason: "redaction facts unavailable: \(error)")
        }
        redactionCache.withLock { $0[n.rowID] = r }
        return r
    }

    public func open(_ inode: Inode, flags: Int32, context: RequestContext) throws(Errno) -> OpenReply {
        noteAccess()
        let accmode = flags & O_ACCMODE
        let wantsWrite = accmode == O_WRONLY || accmode == O_RDWR || (flags & O_TRUNC) != 0
        switch inode {
        case FixedInode.status:
            if wantsWrite { throw .accessDenied }
            return OpenReply(handle: newHandle(.status(content: statusContent())), directIO: true)
        case FixedInode.refused:
            if wantsWrite { throw .accessDenied }
            return OpenReply(handle: newHandle(.status(content: refusedContent())), directIO: true)
        case FixedInode.changes:
            if wantsWrite { throw .accessDenied }
            let position = feed.withLock { $0.latest }
            return OpenReply(handle: newHandle(.changes(position: position)), directIO: true, nonSeekable: true)
        case FixedInode.request:
            if accmode != O_WRONLY { throw .accessDenied }
            return OpenReply(handle: newHandle(.request(buffer: [])), directIO: true)
        case FixedInode.root, FixedInode.albums, FixedInode.shared, FixedInode.control:
            throw .isDirectory
        default: break
        }
        if let node = model.withLock({ m in m.byIno[inode].flatMap { m.nodes[$0] } }) ?? aliasedNode(inode) {
            // Writing makes a new version, where the app may edit (originals are never modified).
            if wantsWrite { return try openEdit(node, flags: flags, context: context) }
            var plan: RedactionPlan? = nil
            if node.strip {
                switch redaction(for: node) {
                case .plan(let p): plan = p.isEmpty ? nil : p
                case .refuse(let why):
                    log("refused \(node.name) to \(appID): strip-location is on and its metadata cannot be parsed with confidence (\(why))")
                    throw .accessDenied
                }
            }
            // Within the descriptors the daemon may spend on one app's opens (FDBudget): the excess
            // open fails with EMFILE, every other file keeps working.
            let fd = try FDBudget.mount.opening { Glibc.open(node.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) }
            guard fd >= 0 else {
                let e = errno
                log("cannot open original of \(node.name): \(String(cString: strerror(e)))")
                if e == EMFILE || e == ENFILE { throw Errno(e) }
                throw .io
            }
            // An original indexed in place (import --reference) may have changed since: serve only
            // the bytes the catalog (and the redaction plan) describe.
            if !node.path.hasPrefix(library.paths.store + "/") {
                var st = stat()
                let changed = fstat(fd, &st) != 0 || UInt64(st.st_size) != node.size || Int(st.st_mtim.tv_sec) > node.ctime + 1
                if changed {
                    FDBudget.mount.close(fd)
                    log("refused \(node.name) to \(appID): its original at \(node.path) changed after it was imported (photogate verify reports it)")
                    throw .accessDenied
                }
            }
            let h = newHandle(.asset(rowID: node.rowID, ino: node.ino, fd: fd, plan: plan))
            // The app's own files in a read-write mount are read through the daemon: the app may
            // always edit them, and the kernel refuses to mix passthrough and daemon I/O on one
            // inode (rsync --inplace reads a file while it writes it: EIO otherwise).
            let usePassthrough = passthrough && plan == nil && !(access == .readWrite && node.owned)
            // Keep the kernel's cached pages unless they are of another version of this file.
            let same = openedPaths.withLock { p -> Bool in
                let prev = p.updateValue(node.path, forKey: inode)
                return prev == nil || prev == node.path
            }
            // A read needs no FLUSH at its close (flush does nothing for it): one round trip fewer.
            return OpenReply(handle: h, keepCache: same, passthroughFD: usePassthrough ? fd : nil, noFlush: true)
        }
        // A file this mount created.
        return try openSession(inode, flags: flags, context: context)
    }

    /// Is this asset (by row id and inode) still visible? Revoked handles fail their next read.
    func stillVisible(rowID: Int64, ino: Inode) -> Bool {
        model.withLock { m in m.nodes[rowID]?.ino == ino }
    }

    public func read(_ inode: Inode, handle: UInt64, offset: Int64, size: Int) throws(Errno) -> ReadReply {
        guard let kind = handles.withLock({ $0[handle] }) else { throw .badFile }
        switch kind {
        case .asset(let rowID, let ino, let fd, let plan):
            guard stillVisible(rowID: rowID, ino: ino) else { throw .accessDenied }
            guard let plan else { return .file(fd: fd, offset: offset, count: size) }
            var buf = [UInt8](repeating: 0, count: size)
            let n = buf.withUnsafeMutableBytes { b in pread(fd, b.baseAddress, size, off_t(offset)) }
            if n < 0 { throw Errno(errno) }
            buf.removeLast(size - n)
            buf.withUnsafeMutableBytes { b in plan.apply(to: b, fileOffset: UInt64(offset)) }
            return .bytes(buf)
        case .status(let content):
            return .bytes(slice(content, offset, size))
        case .changes(let position):
            let (bytes, next) = feed.withLock { $0.read(after: position, max: size) }
            handles.withLock { $0[handle] = .changes(position: next) }
            return .bytes(bytes)
        case .session(let ino):
            return try readSession(ino, offset: offset, size: size)
        case .edit(let ino):
            return try readSession(ino, edit: true, offset: offset, size: size)
        case .request:
            throw .badFile
        }
    }

    func slice(_ c: [UInt8], _ offset: Int64, _ size: Int) -> [UInt8] {
        let start = min(Int(offset), c.count)
        return Array(c[start..<min(start + size, c.count)])
    }

    public func write(_ inode: Inode, handle: UInt64, offset: Int64, data: UnsafeRawBufferPointer, context: RequestContext) throws(Errno) -> Int {
        guard let kind = handles.withLock({ $0[handle] }) else { throw .badFile }
        switch kind {
        case .session(let ino):
            return try writeSession(ino, handle: handle, offset: offset, data: data)
        case .edit(let ino):
            return try writeSession(ino, edit: true, handle: handle, offset: offset, data: data)
        case .request(var buffer):
            if buffer.count + data.count > 4096 { throw .invalid }
            buffer.append(contentsOf: data)
            let b = buffer
            handles.withLock { $0[handle] = .request(buffer: b) }
            return data.count
        default:
            throw .badFile
        }
    }

    public func flush(_ inode: Inode, handle: UInt64, context: RequestContext) throws(Errno) {
        guard let kind = handles.withLock({ $0[handle] }) else { return }
        switch kind {
        case .session(let ino):
            try flushSession(ino, handle: handle, context: context)
        case .edit(let ino):
            try flushSession(ino, edit: true, handle: handle, context: context)
        case .request(let buffer):
            if !buffer.isEmpty {
                handles.withLock { $0[handle] = .request(buffer: []) }
                try submitRequest(buffer)
            }
        default: return
        }
    }

    public func release(_ inode: Inode, handle: UInt64, flags: Int32) {
        guard let kind = handles.withLock({ $0.removeValue(forKey: handle) }) else { return }
        switch kind {
        case .asset(_, _, let fd, _):
            FDBudget.mount.close(fd)
        case .session(let ino):
            releaseSession(ino, handle: handle)
        case .edit(let ino):
            releaseSession(ino, edit: true, handle: handle)
        case .request(let buffer):
            if !buffer.isEmpty { try? submitRequest(buffer) }
        case .changes:
            // Its poll handle goes with it (fuse_pollhandle_destroy when the last reference drops).
            _ = feed.withLock { $0.removePoller(for: handle) }
        default: return
        }
    }

    public func fsync(_ inode: Inode, handle: UInt64, dataOnly: Bool) throws(Errno) {
        switch handles.withLock({ $0[handle] }) {
        case .session(let ino)?: try fsyncSession(ino)
        case .edit(let ino)?: try fsyncSession(ino, edit: true)
        default: return
        }
    }

    /// Removes an uncommitted session file and its temp data (unlink of a file being written).
    func discard(_ f: SessionFile) {
        let unused: Bool = f.run { discardLocked(f); return f.handles.isEmpty }
        if unused { files.withLock { fs in if fs[f.ino] === f { fs[f.ino] = nil } } }
    }

    // MARK: creating

    func validName(_ name: FileName) throws(Errno) -> String {
        switch DisplayName.validate(name.bytes) {
        case .success(let s): return s
        case .failure(.tooLong): throw .nameTooLong
        // A reserved name reaches here only where the view does not show it (where it does, the
        // kernel answers from its own lookup): not a name a file may take (README: EINVAL).
        case .failure(.reserved): throw .invalid
        case .failure: throw .invalid
        }
    }

    public func create(parent: Inode, name: FileName, mode: UInt32, flags: Int32, context: RequestContext) throws(Errno) -> (Entry, OpenReply) {
        noteAccess()
        let s = try validName(name)
        if isFolder(parent) {
            guard canMakeFolders else { throw .accessDenied }
            if folderChild(parent, s) != nil { throw .exists }
            return try openNewSession(try newSession(name: s, album: nil, folder: parent), context: context)
        }
        let album: String? = try model.withLock { m throws(Errno) -> String? in
            guard m.policy.canCreate else { throw .accessDenied }
            switch parent {
            case FixedInode.root:
                if m.byName[s] != nil { throw .exists }
                return nil
            default:
                guard m.policy.canEditAlbums, let al = m.album(ino: parent), !al.isShared else { throw .accessDenied }
                if al.byName[s] != nil { throw .exists }
                return al.name
            }
        }
        if parent == FixedInode.root, sessionIno(s) != nil || rootFolders.withLock({ $0[s] != nil }) { throw .exists }
        if let album, albumSessionIno(album, s) != nil { throw .exists }
        return try openNewSession(try newSession(name: s, album: album), context: context)
    }

    /// The reply to create: the new file open for writing, never cached by the kernel (a file
    /// being written may be refused or discarded at its close).
    func openNewSession(_ f: SessionFile, context: RequestContext) throws(Errno) -> (Entry, OpenReply) {
        let h = nextHandle.add(1, ordering: .relaxed).oldValue
        let opener = PhotoFS.process(of: context.pid)
        f.run { f.handles[h] = false; f.openers[h] = opener }
        handles.withLock { $0[h] = .session(ino: f.ino) }
        return (entry(f.run { sessionAttributes(f) }, timeout: 0), OpenReply(handle: h, directIO: true))
    }

    public func setattr(_ inode: Inode, _ changes: SetAttributes, handle: UInt64?, context: RequestContext) throws(Errno) -> (Attributes, timeout: Double) {
        if let a = try setSessionAttributes(inode, changes, handle: handle) { return (a, 0) }
        let (a, t) = try attributes(of: inode)
        if changes.isEmpty { return (a, t) }
        // `echo read-write > .photogate/request` truncates first: accept that, and nothing else.
        if inode == FixedInode.request, changes.size == 0, changes.mode == nil, changes.uid == nil, changes.gid == nil {
            return (a, t)
        }
        // Times and modes on folders and on the app's own files are accepted without effect:
        // `cp -a`, `rsync -a` and `tar x` set them on every folder they write into and on every
        // file after writing it; refusing would only make them fail. Contents never change here.
        let sameOwner = (changes.uid == nil || changes.uid == uid) && (changes.gid == nil || changes.gid == gid)
        if changes.size == nil, sameOwner, inode != FixedInode.control {
            if a.isDirectory { return (a, t) }
            let own = session(inode) != nil || model.withLock { m in m.byIno[inode].flatMap { m.nodes[$0] }?.owned ?? false }
            if own { return (a, t) }
        }
        throw .accessDenied   // originals, other apps' and the person's files, and control files do not change
    }

    public func mkdir(parent: Inode, name: FileName, mode: UInt32, context: RequestContext) throws(Errno) -> Entry {
        noteAccess()
        // The top's reserved names: `Albums`/`Shared` where the view shows them, and `.photogate`,
        // exist; elsewhere no folder may take them (DESIGN: no Albums/ for limited apps, EACCES).
        if parent == FixedInode.root, let raw = name.string, DisplayName.reserved.contains(raw) {
            if raw == ".photogate" || model.withLock({ $0.policy.showsAlbums }) { throw .exists }
            throw .accessDenied
        }
        let s = try validName(name)
        // Outside Albums/: an upload folder (UploadFolders.swift).
        if parent == FixedInode.root || isFolder(parent) { return try makeFolder(parent: parent, name: s) }
        let allowed = model.withLock { $0.policy.canEditAlbums }
        guard parent == FixedInode.albums, allowed else { throw .accessDenied }
        if model.withLock({ $0.albums[s] }) != nil { throw .exists }
        do { try library.createAlbum(s) } catch {
            if case .albumExists = error as? LibraryError { throw .exists }
            throw .invalid
        }
        refresh()
        guard let al = model.withLock({ $0.albums[s] }) else { throw .io }
        return entry(dirAttributes(al.ino, writable: true))
    }

    public func rmdir(parent: Inode, name: FileName, context: RequestContext) throws(Errno) {
        guard let s = name.string else { throw .noEntry }
        if isFolder(parent) || (parent == FixedInode.root && rootFolders.withLock({ $0[s] != nil })) {
            return try removeFolder(parent: parent, name: s)
        }
        let (canEdit, exists) = model.withLock { ($0.policy.canEditAlbums, $0.albums[s] != nil) }
        guard parent == FixedInode.albums, canEdit else {
            if try childInode(parent: parent, name: s) == nil { throw .noEntry }
            throw .accessDenied
        }
        guard exists else { throw .noEntry }
        // A file being written into the album would lose its membership: not empty yet.
        let writing = albumSessions.withLock { $0[s]?.values.map { $0 } ?? [] }
        if writing.contains(where: { ino in session(ino).map { f in f.run { f.isWriting } } ?? false }) { throw .notEmpty }
        do { try library.deleteAlbum(s, onlyIfEmpty: true) } catch {
            if case .conflict = error as? LibraryError { throw .notEmpty }
            throw .io
        }
        refresh(handledAlbums: [s])
    }

    public func unlink(parent: Inode, name: FileName, context: RequestContext) throws(Errno) {
        guard let s = name.string else { throw .noEntry }
        if isFolder(parent) { return try unlinkInFolder(parent, s) }
        if let album = model.withLock({ $0.album(ino: parent).map(\.name) }), let ino = albumSessionIno(album, s),
           model.withLock({ $0.albums[album]?.byName[s] == nil }), let f = session(ino) {
            discard(f)
            return
        }
        if parent == FixedInode.root, let ino = sessionIno(s), let f = session(ino) {
            // Under the file's lock, so that no commit starts or is half done in between: either
            // the file being written is dropped, or the asset it became goes to the trash.
            enum Outcome { case dropped(unused: Bool), committed(Int64), view }
            let outcome: Outcome = f.run {
                switch f.state {
                case .writing:
                    if model.withLock({ $0.byName[s] != nil }) { return .view }
                    discardLocked(f)
                    return .dropped(unused: f.handles.isEmpty)
                case .committed(let r): return .committed(r)
                case .discarded: return .view
                }
            }
            switch outcome {
            case .dropped(let unused):
                if unused { files.withLock { fs in if fs[ino] === f { fs[ino] = nil } } }
                return
            case .committed(let rowID):
                if forgetCommittedName(ino) { return }
                let canDelete = model.withLock { $0.policy.canDelete(AssetFacts(isOwned: true)) }
                guard canDelete else { throw .accessDenied }
                do { try library.moveToTrash(rowIDs: [rowID], by: appID) } catch { throw .io }
                forgetCommitted(ino)
                files.withLock { fs in if fs[ino] === f { fs[ino] = nil } }
                sessionNames.withLock { n in if n[s] == ino { n[s] = nil } }
                refresh(handled: [rowID])
                return
            case .view: break
            }
        }
        let target: Result<(Int64, String?), Errno> = model.withLock { m in
            switch parent {
            case FixedInode.root:
                guard let r = m.byName[s], let n = m.nodes[r] else { return .failure(.noEntry) }
                return m.policy.canDelete(m.facts(n)) ? .success((r, nil)) : .failure(.accessDenied)
            default:
                guard let al = m.album(ino: parent) else {
                    return .failure(parent == FixedInode.control || FixedInode.all.contains(parent) ? (s.isEmpty ? .noEntry : .accessDenied) : .noEntry)
                }
                guard let r = al.byName[s] else { return .failure(.noEntry) }
                return (!al.isShared && m.policy.canEditAlbums) ? .success((r, al.name)) : .failure(.accessDenied)
            }
        }
        if parent == FixedInode.control || parent == FixedInode.albums || parent == FixedInode.shared {
            if try childInode(parent: parent, name: s) == nil { throw .noEntry }
            throw .accessDenied
        }
        let (rowID, album) = try target.get()
        do {
            if let album {
                let id = model.withLock { $0.nodes[rowID]?.assetID } ?? ""
                try library.removeFromAlbum(album, [id])
            } else {
                try library.moveToTrash(rowIDs: [rowID], by: appID)
            }
        } catch {
            log("unlink \(s) failed: \(error)")
            throw .io
        }
        refresh(handled: album == nil ? [rowID] : [])
    }

    public func rename(parent: Inode, name: FileName, newParent: Inode, newName: FileName, flags: RenameFlags, context: RequestContext) throws(Errno) {
        guard let s = name.string else { throw .noEntry }
        guard try childInode(parent: parent, name: s) != nil else { throw .noEntry }
        let t = try validName(newName)
        // mv of a visible asset into Albums/X/ (authorized): it joins the album.
        if parent == FixedInode.root, newParent != parent, s == t,
           let row = model.withLock({ $0.byName[s] }), model.withLock({ $0.album(ino: newParent) != nil }) {
            return try addToAlbum(rowID: row, albumIno: newParent, name: s)
        }
        guard parent == newParent else { throw .crossDevice }
        if isFolder(parent) { return try renameInFolder(parent, s, t, flags: flags) }
        guard parent == FixedInode.root, !flags.contains(.exchange) else { throw .accessDenied }
        // Over a visible asset: the saved file becomes its new version where the app may edit it
        // (an editor's temp-then-rename save); originals are never replaced.
        if let (targetRow, target) = model.withLock({ m in m.byName[t].flatMap { r in m.nodes[r].map { (r, $0) } } }) {
            if flags.contains(.noReplace) { throw .exists }
            guard let sourceRow = model.withLock({ $0.byName[s] }), sourceRow != targetRow,
                  let sourceIno = try childInode(parent: parent, name: s) else { throw .accessDenied }
            if try renameOver(sourceRow: sourceRow, sourceIno: sourceIno, target: target) { return }
            throw .accessDenied
        }
        if let other = sessionIno(t), other != sessionIno(s) {
            if flags.contains(.noReplace) { throw .exists }
            if !forgetCommittedName(other) { throw .accessDenied }
        }
        // A file created through this mount (pending or just committed).
        if let ino = sessionIno(s), let f = session(ino) {
            // Under the file's lock, so that a commit in flight finishes first.
            let renamed: Result<Int64?, Errno>? = f.run {
                let viewRow = model.withLock { $0.byName[s] }
                if viewRow != nil && viewRow != f.committedRowID { return nil }   // the name is the view's
                if let r = f.committedRowID {
                    do { try library.renameOwnAsset(rowID: r, app: appID, to: t) } catch { return .failure(.io) }
                } else if !f.isWriting {
                    return .failure(.noEntry)
                }
                f.name = t
                sessionNames.withLock { n in if n[s] == ino { n[s] = nil }; n[t] = ino }
                return .success(f.committedRowID)
            }
            if let renamed {
                let r = try renamed.get()
                refresh(handled: r.map { [$0] } ?? [])
                return
            }
        }
        let row: Int64 = try model.withLock { m throws(Errno) -> Int64 in
            guard let r = m.byName[s], let n = m.nodes[r] else { throw .noEntry }
            guard m.policy.canRename(m.facts(n)) else { throw .accessDenied }
            return r
        }
        do { try library.renameOwnAsset(rowID: row, app: appID, to: t) } catch { throw .io }
        refresh(handled: [row])
    }


    public func statfs(_ inode: Inode) throws(Errno) -> StatFS {
        var st = statvfs()
        guard statvfs(library.paths.store, &st) == 0 else { return StatFS() }
        // Report free space as it is, but "used" as only what this view shows: the disk's other
        // contents (hidden assets among them) are none of the app's business.
        let bsize = UInt64(st.f_frsize)
        let visibleBytes = viewBytes.load(ordering: .relaxed)
        let avail = UInt64(st.f_bavail)
        let used = (visibleBytes + bsize - 1) / bsize
        return StatFS(blockSize: bsize, blocks: avail + used, blocksFree: avail, blocksAvailable: avail,
                      files: UInt64(model.withLock { $0.nodes.count }) + 1_000_000, filesFree: 1_000_000, nameMax: 255)
    }

    public func access(_ inode: Inode, mask: Int32, context: RequestContext) throws(Errno) {
        let (a, _) = try attributes(of: inode)
        if mask & W_OK != 0 && a.mode & 0o200 == 0 { throw .accessDenied }
    }

    public func poll(_ inode: Inode, handle: UInt64, pollHandle: PollHandle?) throws(Errno) -> Int16 {
        guard let kind = handles.withLock({ $0[handle] }) else { throw .badFile }
        switch kind {
        case .changes(let position):
            return feed.withLock { f -> Int16 in
                if f.hasEntries(after: position) { return Int16(POLLIN | POLLRDNORM) }
                // One waiter per open file: a newer handle replaces (and frees) the older one.
                if let p = pollHandle { f.addPoller(p, for: handle) }
                return 0
            }
        case .request:
            return Int16(POLLOUT | POLLWRNORM)
        default:
            return Int16(POLLIN | POLLRDNORM)
        }
    }

    // MARK: .photogate

    func statusContent() -> [UInt8] {
        let (app, policy) = model.withLock { ($0.app, $0.policy) }
        let obj: [String: Any] = [
            "app": app.id.rawValue,
            "access": access.rawValue,
            "status": policy.status.rawValue,
            "readWrite": app.readWrite.rawValue,
            "addOnly": app.addOnly.rawValue,
            "options": ["stripLocation": app.options.stripLocation, "preventPrompt": app.options.preventPrompt,
                        "editAny": app.options.editAny],
            "readPath": readPathBox.withLock { $0?() } ?? (passthrough ? "passthrough" : "daemon"),
        ]
        let data = (try? JSONSerialization.data(withJSONObject: obj, options: [.sortedKeys, .prettyPrinted])) ?? Data()
        return [UInt8](data) + [0x0a]
    }

    /// `.photogate/refused`: the app's files refused at their close, oldest first, one a line:
    /// date (ISO 8601 UTC), tab, the name it wrote, tab, why.
    func refusedContent() -> [UInt8] {
        guard let list = try? library.refusals(appID) else { return [] }
        let f = ISO8601DateFormatter()
        return Array(list.map { "\(f.string(from: $0.date))\t\($0.name)\t\($0.reason)\n" }.joined().utf8)
    }

    /// Records a refused file where the app and the person can read why.
    func noteRefusal(_ name: String, _ why: String) {
        do { try library.recordRefusal(appID, name: name, reason: why) } catch { log("could not record the refusal of \(name): \(error)") }
    }

    /// `.photogate/request`: "read-write", "add-only" or "picker", then an optional reason line.
    func submitRequest(_ bytes: [UInt8]) throws(Errno) {
        guard let text = String(validating: bytes, as: UTF8.self) else { throw .invalid }
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        while lines.last == "" { lines.removeLast() }
        // An edit request names an asset: the mount records one when the app opens it for writing.
        guard let first = lines.first, let kind = RequestKind(rawValue: first), kind != .edit, lines.count <= 2 else { throw .invalid }
        let reason = lines.count == 2 ? lines[1] : ""
        if DisplayName.containsUnsafe(reason) { throw .invalid }
        do { try library.recordRequest(appID, kind: kind, reason: reason) } catch {
            // Too many pending of this kind (issue 14): EBUSY until the person answers them.
            if case .tooManyRequests = error as? LibraryError { throw .busy }
            log("could not record request: \(error)")
            throw .io
        }
    }
}

/// The live feed behind `.photogate/changes`: recent history lines plus the poll handles of
/// sleeping readers, at most one per open file (issue 14: one app polling and closing 5,000
/// times kept 5,000 libfuse handles until the next change).
struct ChangeFeed: @unchecked Sendable {
    var latest: Int64
    var lines: [(token: Int64, text: String)] = []
    /// The newest poll handle of each open file, by file handle. The kernel hands one per poll
    /// that will sleep; all of one file's wake the same waiters, so the newest is enough.
    var pollers: [UInt64: PollHandle] = [:]
    static let keep = 4096

    init(latest: Int64) { self.latest = latest }

    mutating func append(_ new: [(Int64, String)], latest l: Int64) {
        lines.append(contentsOf: new.map { (token: $0.0, text: $0.1) })
        if lines.count > ChangeFeed.keep { lines.removeFirst(lines.count - ChangeFeed.keep) }
        latest = max(latest, l)
    }

    /// Keeps `p` as the file's waiter; the handle it replaces is dropped (and so destroyed).
    mutating func addPoller(_ p: PollHandle, for handle: UInt64) { pollers[handle] = p }

    /// Drops the file's waiter (at release).
    mutating func removePoller(for handle: UInt64) -> PollHandle? { pollers.removeValue(forKey: handle) }

    mutating func takePollers() -> [PollHandle] {
        let p = Array(pollers.values)
        pollers = [:]
        return p
    }

    func hasEntries(after position: Int64) -> Bool { (lines.last?.token ?? 0) > position }

    /// Whole lines after `position`, at most `max` bytes (at least one line if any).
    func read(after position: Int64, max: Int) -> ([UInt8], Int64) {
        var out: [UInt8] = []
        var next = position
        for l in lines where l.token > position {
            let b = Array(l.text.utf8)
            if !out.isEmpty && out.count + b.count > max { break }
            out += b.prefix(max)
            next = l.token
        }
        return (out, next)
    }
}
