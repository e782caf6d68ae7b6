import FUSE
import Foundation
import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

/// Where invalidations go (the FUSE session; a recorder in tests).
public protocol Invalidator: AnyObject, Sendable {
    func invalidateEntry(parent: Inode, name: [UInt8])
    func invalidateInode(_ inode: Inode, offset: Int64, length: Int64)
    func notifyDelete(parent: Inode, child: Inode, name: [UInt8])
    /// Waits for the READs under way to be replied to (their pages are then in the cache, where
    /// the invalidations that follow drop them).
    func quiesceReads()
    /// Blocks until everything queued has reached the kernel; returns false where it cannot wait
    /// (on a request handler thread).
    func flushNotifications() -> Bool
    /// Drops a folder's cached listing before returning, from any thread (a request handler's
    /// included), where the queued invalidation would be too late.
    func invalidateInodeNow(_ inode: Inode)
}

extension Invalidator {
    public func invalidateInodeNow(_ inode: Inode) { invalidateInode(inode, offset: 0, length: 0) }
}

extension FUSESession: Invalidator {}

extension PhotoFS {
    // MARK: refresh

    /// Catches the view up with the library and invalidates what changed in the kernel's caches.
    /// A change to a few assets is read and applied row by row (O(changes)); anything else
    /// (status or options, thousands of changes, colliding names) recomputes the whole view.
    /// `handled` are assets whose name changes this mount made itself through a syscall (unlink,
    /// rename): the kernel already updated its dentries for those, and notifying again would take
    /// the directory lock that syscall may still hold. `handledAlbums`: the same for albums (an
    /// `rmdir`); `handledNames`: names at the top this mount's own syscall removed (a sidecar's `rm`).
    ///
    /// One refresh at a time (`fetchLock`); it reads the catalog holding that lock alone, and
    /// takes `refreshLock` only to change the model and tell the kernel: `blank()` (fail closed)
    /// never waits for a statement that a server cut off may not answer for its whole timeout.
    public func refresh(handled: Set<Int64> = [], handledAlbums: Set<String> = [], handledNames: Set<String> = []) {
        fetchLock.lock()
        let (drops, rebuilt) = refreshFetching(handled: handled, handledAlbums: handledAlbums, handledNames: handledNames)
        // `.photogate/changes`: read from the catalog too, so outside refreshLock.
        pullFeed()
        // Let go of before waiting for the kernel, as refreshLock is (below).
        fetchLock.unlock()
        // The old view and the snapshot of a whole rebuild are freed by now.
        if let rebuilt { FreedMemory.giveBack(afterBuildOf: rebuilt) }
        // Outside refreshLock: the notifier may wait on a directory lock held by a syscall whose
        // handler needs refreshLock (a rename refreshes the view), so waiting for it under the lock
        // could deadlock. Pages of removed inodes are gone once the queue reached the kernel; a
        // GETATTR waiting on them (`waitForPageDrop`) may answer then. On a request handler thread
        // (a refresh after the app's own syscall: an unlink, a rename, a close that saved a new
        // version) the flush returns without waiting, and the drops are let go at once: the app removed or
        // replaced those files itself, and waiting there could wait on its own request.
        if !drops.isEmpty {
            _ = invalidator?.flushNotifications()
            pendingDrops.withLock { $0.subtract(drops) }
        }
    }

    /// Fail closed (issue 41): while the library's catalog, on a server, cannot be confirmed, the
    /// view shows nothing (a grant revoked meanwhile must not go on showing its photo). Its change
    /// position becomes -1, so the first refresh after rebuilds it whole from the catalog.
    public func blank() {
        refreshLock.lock()
        // A refresh reading the catalog now does not apply what it read (`refreshFetching`).
        blanks.add(1, ordering: .sequentiallyConsistent)
        let old = model.withLock { $0 }
        let empty = ViewSnapshot(app: old.app, access: access, policy: old.policy, rows: ViewRows(), albums: [], sidecars: [], changeSeq: -1)
        let new = ViewModel(snapshot: empty, storeRoot: library.storeRoot)
        viewBytes.store(new.totalBytes, ordering: .relaxed)
        model.withLock { $0 = new }
        let diff = ViewModel.diff(old, new)
        let drops = settle(diff, oldPolicy: old.policy, oldAlbums: old.albums, oldShared: old.shared, new: new,
                           oldIno: { old.nodes[$0]?.ino }, handled: [], handledAlbums: [])
        invalidateSidecars(old: old.sidecars, handledNames: [])
        refreshLock.unlock()
        if !drops.isEmpty {
            _ = invalidator?.flushNotifications()
            pendingDrops.withLock { $0.subtract(drops) }
        }
    }

    /// The refresh under `fetchLock`: reads the catalog, then changes the model under
    /// `refreshLock` unless the view was blanked meanwhile (fail closed: what was read is then
    /// dropped, and the next refresh rebuilds the view whole). Returns the inodes it put in
    /// `pendingDrops`, and the size of the view when it rebuilt all of it.
    private func refreshFetching(handled: Set<Int64>, handledAlbums: Set<String>, handledNames: Set<String>) -> (Set<Inode>, rebuilt: Int?) {
        let generation = blanks.load(ordering: .sequentiallyConsistent)
        let (seq, app, mustRebuild) = model.withLock { m in
            // Tombstones pile up under patches: compact by rebuilding once they are a quarter.
            (m.seq, m.app, m.store.deadCount > 4096 && m.store.deadCount * 4 > m.store.slotCount)
        }
        let update: ViewUpdate
        do {
            update = try library.viewUpdate(for: appID, access: access, since: seq, app: app, forceFull: mustRebuild || seq < 0)
        } catch {
            log("refresh failed: \(error)")
            return ([], nil)
        }
        if case .patch(let patch) = update {
            refreshLock.lock()
            defer { refreshLock.unlock() }
            guard blanks.load(ordering: .sequentiallyConsistent) == generation else { return ([], nil) }
            let oldSidecars = model.withLock { $0.sidecars }
            let applied = model.withLock { m -> (ViewModel.Diff, [String: AlbumNode], [String: AlbumNode], ViewModel, [Int64: Inode])? in
                let oldAlbums = m.albums, oldShared = m.shared
                // Inodes of the rows the patch touches, before it: a new version has a new one.
                var before: [Int64: Inode] = [:]
                for r in patch.affected { if let n = m.nodes[r] { before[r] = n.ino } }
                guard let d = m.apply(patch) else { return nil }
                return (d, oldAlbums, oldShared, m, before)
            }
            if let (diff, oldAlbums, oldShared, now, before) = applied {
                defer { invalidateSidecars(old: oldSidecars, handledNames: handledNames) }
                viewBytes.store(now.totalBytes, ordering: .relaxed)
                // Inodes of rows before the patch: dropped ones are in the diff, touched ones were
                // kept, the rest did not change.
                var gone: [Int64: Inode] = before
                for n in diff.removed { gone[n.rowID] = n.ino }
                return (settle(diff, oldPolicy: now.policy, oldAlbums: oldAlbums, oldShared: oldShared, new: now,
                              oldIno: { r in gone[r] ?? now.nodes[r]?.ino }, handled: handled, handledAlbums: handledAlbums), nil)
            }
        }
        // A whole recomputation: the update's, or a fresh one when the patch did not apply (read
        // with refreshLock let go: the model stays as it was, but for a blank).
        let snapshot: ViewSnapshot
        if case .full(let s) = update {
            snapshot = s
        } else {
            do { snapshot = try library.view(for: appID, access: access, lean: true) } catch {
                log("refresh failed: \(error)")
                return ([], nil)
            }
        }
        refreshLock.lock()
        defer { refreshLock.unlock() }
        guard blanks.load(ordering: .sequentiallyConsistent) == generation else { return ([], nil) }
        let oldSidecars = model.withLock { $0.sidecars }
        defer { invalidateSidecars(old: oldSidecars, handledNames: handledNames) }
        let new = ViewModel(snapshot: snapshot, storeRoot: library.storeRoot)
        viewBytes.store(new.totalBytes, ordering: .relaxed)
        let old = model.withLock { m -> ViewModel in
            let o = m
            m = new
            return o
        }
        let diff = ViewModel.diff(old, new)
        return (settle(diff, oldPolicy: old.policy, oldAlbums: old.albums, oldShared: old.shared, new: new,
               oldIno: { old.nodes[$0]?.ino }, handled: handled, handledAlbums: handledAlbums), new.store.count)
    }

    /// After a model changed: forgets cached redactions of changed assets, tells the kernel, and
    /// feeds `.photogate/changes`.
    private func settle(_ diff: ViewModel.Diff, oldPolicy: ViewPolicy, oldAlbums: [String: AlbumNode], oldShared: [String: AlbumNode],
                        new: ViewModel, oldIno: (Int64) -> Inode?, handled: Set<Int64>, handledAlbums: Set<String>) -> Set<Inode> {
        if !diff.updated.isEmpty || !diff.removed.isEmpty {
            redactionCache.withLock { c in for n in diff.updated + diff.removed { c[n.ino] = nil } }
        }
        let drops = invalidate(diff, oldPolicy: oldPolicy, oldAlbums: oldAlbums, oldShared: oldShared, new: new, oldIno: oldIno,
                               handled: handled, handledAlbums: handledAlbums)
        // A no-open mount's kernel keeps `.photogate/status` pages: read(2) finds them old by their
        // mtime (specialAttributes), but mmap and sendfile do not ask. Dropped at every change.
        if noOpen, let inv = invalidator {
            inv.invalidateInode(FixedInode.status, offset: 0, length: 0)
            inv.invalidateInode(FixedInode.refused, offset: 0, length: 0)
        }
        return drops
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
    /// watchers of the file); changed files drop their cached attributes and pages. Returns the
    /// removed inodes it put in `pendingDrops`, for the caller to settle outside `refreshLock`.
    @discardableResult
    func invalidate(_ diff: ViewModel.Diff, oldPolicy: ViewPolicy, oldAlbums: [String: AlbumNode], oldShared: [String: AlbumNode],
                    new: ViewModel, oldIno: (Int64) -> Inode?, handled: Set<Int64>, handledAlbums: Set<String>) -> Set<Inode> {
        guard let inv = invalidator, !diff.isEmpty else { return [] }
        // A READ answered just before the new view was published may still be putting its pages
        // in the kernel's cache: wait for it, or those pages would outlive the invalidation below.
        if !diff.removed.isEmpty { inv.quiesceReads() }
        // A visible asset with a new inode for a new version is in both lists: its old inode is
        // removed, its new one inserted. Until the kernel has dropped every name of the old inode
        // (an album's entry, or the name itself before the notifications below arrive), a path
        // still reaching it gets the current version, not ENOENT: a close that returned 0 was a
        // save, and the file is there. (Handles opened before keep their version where reads are
        // passthrough; the daemon refuses theirs.) Not when only strip-location changed: the plain
        // and the redacted view never share an inode, or cached plain pages could be read as the
        // redacted file. Only the newest `keptCommittedNames` are kept (AliasTable).
        var reinserted: [Int64: AssetNode] = [:]
        for n in diff.inserted { reinserted[n.rowID] = n }
        // Rows still visible under a new inode (a new version; strip-location turned on or off).
        let newInode = diff.removed.filter { o in reinserted[o.rowID].map { $0.ino != o.ino } ?? false }
        let renewed = newInode.filter { o in reinserted[o.rowID]!.strip == o.strip }
        if !renewed.isEmpty {
            aliases.withLock { a in
                for o in renewed.suffix(PhotoFS.keptCommittedNames) { a.insert(o.ino, row: o.rowID) }
            }
        }
        let drops = Set(diff.removed.map(\.ino))
        if !drops.isEmpty { pendingDrops.withLock { $0.formUnion(drops) } }
        for n in diff.removed {
            // Its cached pages go first (queued before the name's deletion, so that once the name
            // is gone no page is left either): a handle opened before the revoke then reads
            // through the daemon, which refuses it, instead of from pages the kernel read ahead.
            inv.invalidateInode(n.ino, offset: 0, length: 0)
            if !handled.contains(n.rowID) {
                inv.notifyDelete(parent: FixedInode.root, child: n.ino, name: Array(n.name.utf8))
            }
        }
        // Album entries of an asset with a new inode are looked up again too (they name the old
        // inode; the album's listing, by row, did not change, so nothing else drops them): one
        // pass over the albums' members, whatever the number of such assets.
        if !newInode.isEmpty {
            let rows = Set(newInode.map(\.rowID))
            for a in Array(new.albums.values) + Array(new.shared.values) {
                for (member, r) in a.byName where rows.contains(r) {
                    inv.invalidateEntry(parent: a.ino, name: Array(member.utf8))
                }
            }
            // And so are the names of those files in the folders the app made (UploadFolders.swift):
            // they too named the old inode, and an `open(O_TRUNC)` by such a name truncated through
            // it (the kernel sends that truncate without a handle), found no edit under the old
            // inode, and failed: a file in a folder could be edited once (issue 37).
            let named: [(Inode, String)] = folders.withLock { fs in
                var out: [(Inode, String)] = []
                for (ino, folder) in fs {
                    for (name, child) in folder.children {
                        if case .asset(let r) = child, rows.contains(r) { out.append((ino, name)) }
                    }
                }
                return out
            }
            for (folder, name) in named { inv.invalidateEntry(parent: folder, name: Array(name.utf8)) }
        }
        for n in diff.updated {
            inv.invalidateInode(n.ino, offset: 0, length: 0)
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
        guard oldPolicy.showsAlbums else { return drops }
        if !new.policy.showsAlbums {
            inv.notifyDelete(parent: FixedInode.root, child: FixedInode.albums, name: Array("Albums".utf8))
            inv.notifyDelete(parent: FixedInode.root, child: FixedInode.shared, name: Array("Shared".utf8))
            return drops
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
        return drops
    }

    /// Tells the kernel which sidecars changed (issue 37): a name gone or on another inode (a new
    /// version, its photo renamed, revoked or with location stripped now) is deleted from its
    /// caches, here and in the albums and upload folders that list it; the listings that gain or
    /// lose one are dropped.
    func invalidateSidecars(old: [SidecarKey: SidecarNode], handledNames: Set<String>) {
        guard let inv = invalidator else { return }
        let (new, albums) = model.withLock { m in (m.sidecars, Array(m.albums.values) + Array(m.shared.values)) }
        if old.isEmpty && new.isEmpty { return }
        var listings = false
        var moved: [SidecarKey: SidecarNode] = [:]
        for (k, o) in old {
            let n = new[k]
            if let n, n.ino == o.ino, n.name == o.name {
                if n != o { inv.invalidateInode(o.ino, offset: 0, length: 0) }
                continue
            }
            moved[k] = o
            listings = true
            inv.invalidateInode(o.ino, offset: 0, length: 0)
            if !handledNames.contains(o.name) { inv.notifyDelete(parent: FixedInode.root, child: o.ino, name: Array(o.name.utf8)) }
        }
        for (k, n) in new where old[k]?.ino != n.ino || old[k]?.name != n.name { listings = true; moved[k] = moved[k] ?? n }
        guard listings else { return }
        var folders: [Inode] = [FixedInode.root]
        let rows = Set(moved.keys.map(\.rowID))
        for a in albums where !rows.isDisjoint(with: a.listing) {
            folders.append(a.ino)
            for (k, o) in moved where old[k] != nil && a.listing.contains(k.rowID) {
                inv.invalidateEntry(parent: a.ino, name: Array(o.name.utf8))
            }
        }
        let named: [(Inode, String)] = self.folders.withLock { fs in
            var out: [(Inode, String)] = []
            for (ino, folder) in fs {
                for (name, child) in folder.children {
                    if case .sidecar(let k) = child, moved[k] != nil { out.append((ino, name)) }
                }
            }
            return out
        }
        for (folder, name) in named { inv.invalidateEntry(parent: folder, name: Array(name.utf8)) }
        invalidateListings(folders)
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
        // Dropped now, not queued: a listing gains names without a syscall on that folder (a
        // file written in an upload folder or an album appears at the top too), and the queued
        // drop reached the kernel after the writer's close returned, so an `ls` right after it
        // missed the file under load. Dropping a folder's cached pages takes no directory lock,
        // so it is safe from any thread, a request handler's included.
        for ino in folders { inv.invalidateInodeNow(ino) }
    }
}
