import FUSE
import Foundation
import PhotoLibrary
import Redaction
#if canImport(Glibc)
import Glibc
#endif

extension PhotoFS {
    // MARK: files

    func newHandle(_ open: any OpenHandle) -> UInt64 {
        let h = nextHandle.add(1, ordering: .relaxed).oldValue
        handles.withLock { $0[h] = open }
        return h
    }

    /// The redaction of this node's version, cached by inode (a new version or strip state is a
    /// new inode, so a plan fetched for an older one, even stored late, never serves a newer).
    /// The library answers for the original at `n.path` only: while the view is a moment behind
    /// a new version, the read or open is refused and nothing is cached.
    func redaction(for n: AssetNode) -> RedactionResult {
        if let r = redactionCache.withLock({ $0[n.ino] }) { return r }
        let r: RedactionResult
        do {
            r = try library.redaction(rowID: n.rowID, path: n.path)
        } catch {
            return .refuse(reason: "redaction facts unavailable: \(error)")
        }
        redactionCache.withLock { $0[n.ino] = r }
        return r
    }

    public func open(_ inode: Inode, flags: Int32, context: RequestContext) throws(Errno) -> OpenReply {
        noteAccess()
        // No-open: ENOSYS makes the kernel treat this open as done and send no OPEN again, for
        // any file of the mount. What each read may get is decided per read (readWithoutHandle).
        if noOpen {
            if opensAnswered.add(1, ordering: .relaxed).oldValue == 0 {
                log("no-open mount: the kernel opens files from now on (OPEN answered ENOSYS)")
            }
            throw .noSys
        }
        let accmode = flags & O_ACCMODE
        let wantsWrite = accmode == O_WRONLY || accmode == O_RDWR || (flags & O_TRUNC) != 0
        let resolved = resolve(inode)
        switch resolved {
        case .controlFile(FixedInode.status)?:
            if wantsWrite { throw .accessDenied }
            return OpenReply(handle: newHandle(SnapshotHandle(statusContent())), directIO: true)
        case .controlFile(FixedInode.refused)?:
            if wantsWrite { throw .accessDenied }
            return OpenReply(handle: newHandle(SnapshotHandle(refusedContent())), directIO: true)
        case .controlFile(FixedInode.changes)?:
            if wantsWrite { throw .accessDenied }
            let position = feed.withLock { $0.latest }
            return OpenReply(handle: newHandle(ChangesHandle(position: position)), directIO: true, nonSeekable: true)
        case .controlFile(FixedInode.request)?:
            if accmode != O_WRONLY { throw .accessDenied }
            return OpenReply(handle: newHandle(RequestHandle(opener: PhotoFS.process(of: context.pid))), directIO: true)
        case .root?, .control?, .albumsFolder?:
            throw .isDirectory
        case nil where inode == FixedInode.albums || inode == FixedInode.shared:
            throw .isDirectory
        case nil:
            // An inode this view no longer has. The kernel may still reach it by a cached name
            // until the notification deleting that name arrives (they are queued; a change of
            // a thousand files takes a while): strip-location turned on gives every file a new
            // inode under the same name, and a new version too where no alias stands in.
            // ENOENT would then be final for a file that is there; ESTALE makes the kernel look
            // the name up again and retry the open, reaching the file the name is now, or
            // ENOENT if the name is gone too. Every unknown inode answers the same, whether it
            // was revoked, replaced or never was, so the errno says nothing of what was there.
            throw .stale
        default: break
        }
        let asset: (node: AssetNode, aliased: Bool)? = switch resolved {
        case .asset(let n)?: (n, false)
        case .aliased(let n)?: (n, true)
        default: nil
        }
        if let (node, aliased) = asset {
            // Writing makes a new version, where the app may edit (originals are never modified).
            if wantsWrite { return try openEdit(node, flags: flags, context: context) }
            let plan = try readPlan(for: node)
            let fd = try openOriginal(node)
            let h = newHandle(AssetHandle(rowID: node.rowID, ino: node.ino, fd: fd, plan: plan))
            // The app's own files in a read-write mount are read through the daemon: the app may
            // always edit them, and the kernel refuses to mix passthrough and daemon I/O on one
            // inode (rsync --inplace reads a file while it writes it: EIO otherwise).
            let usePassthrough = passthrough && plan == nil && !(access == .readWrite && node.owned)
            // Keep the kernel's cached pages unless they are of another version of this file (an
            // aliased inode's pages are another asset's or version's: never kept).
            let same = !aliased && openedPaths.withLock { p -> Bool in
                let prev = p.updateValue(node.path, forKey: inode)
                return prev == nil || prev == node.path
            }
            // A read needs no FLUSH at its close (flush does nothing for it): one round trip fewer.
            return OpenReply(handle: h, keepCache: same, passthroughFD: usePassthrough ? fd : nil, noFlush: true)
        }
        // A file this mount created.
        return try openSession(inode, flags: flags, context: context)
    }

    /// What a read of this node zeroes (nil: served as is). With strip-location on, a file whose
    /// metadata cannot be parsed with confidence is refused (EACCES), never served as it is.
    func readPlan(for node: AssetNode) throws(Errno) -> RedactionPlan? {
        guard node.strip else { return nil }
        switch redaction(for: node) {
        case .plan(let p): return p.isEmpty ? nil : p
        case .refuse(let why):
            log("refused \(node.name) to \(appID): strip-location is on and its metadata cannot be parsed with confidence (\(why))")
            throw .accessDenied
        }
    }

    /// Opens an asset's original for reading, within the descriptors the daemon may spend on one
    /// app's opens (FDBudget: the excess open fails with EMFILE, every other file keeps working).
    /// An original indexed in place (import --reference) that changed since is refused: the
    /// catalog (and the redaction plan) describe only the bytes it had.
    func openOriginal(_ node: AssetNode) throws(Errno) -> Int32 {
        let fd = try FDBudget.mount.opening { node.path.withCString { Glibc.open($0, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) } }
        guard fd >= 0 else {
            let e = errno
            log("cannot open original of \(node.name): \(String(cString: strerror(e)))")
            if e == EMFILE || e == ENFILE { throw Errno(e) }
            throw .io
        }
        // Told by the catalog, not by the path: a prefix test on the path took a referenced original
        // in a folder whose name only looks like the store's (é composed against e + U+0301: two
        // folders on disk) for a copied one, and skipped the check below.
        if !node.inStore {
            var st = stat()
            let changed = fstat(fd, &st) != 0 || UInt64(st.st_size) != node.size || Int(st.st_mtim.tv_sec) > node.ctime + 1
            if changed {
                FDBudget.mount.close(fd)
                log("refused \(node.name) to \(appID): its original at \(node.path) changed after it was imported (photogate verify reports it)")
                throw .accessDenied
            }
        }
        return fd
    }

    /// Is this asset (by row id and inode) still visible? Revoked handles fail their next read.
    func stillVisible(rowID: Int64, ino: Inode) -> Bool {
        model.withLock { m in m.nodes[rowID]?.ino == ino }
    }

    func openHandle(_ handle: UInt64) -> (any OpenHandle)? { handles.withLock { $0[handle] } }

    public func read(_ inode: Inode, handle: UInt64, offset: Int64, size: Int) throws(Errno) -> ReadReply {
        if noOpen && handle == 0 { return try readWithoutHandle(inode, offset: offset, size: size) }
        guard let h = openHandle(handle) else { throw .badFile }
        return try h.read(self, offset: offset, size: size)
    }

    public func write(_ inode: Inode, handle: UInt64, offset: Int64, data: UnsafeRawBufferPointer, context: RequestContext) throws(Errno) -> Int {
        if noOpen { throw .readOnly }
        guard let h = openHandle(handle) else { throw .badFile }
        return try h.write(self, handle: handle, offset: offset, data: data)
    }

    public func flush(_ inode: Inode, handle: UInt64, context: RequestContext) throws(Errno) {
        // No-open: nothing is ever written, so no close needs a FLUSH; ENOSYS stops them all.
        if noOpen && handle == 0 { throw .noSys }
        try openHandle(handle)?.flush(self, handle: handle, context: context)
    }

    public func release(_ inode: Inode, handle: UInt64, flags: Int32) {
        handles.withLock { $0.removeValue(forKey: handle) }?.release(self, handle: handle)
    }

    public func fsync(_ inode: Inode, handle: UInt64, dataOnly: Bool) throws(Errno) {
        try openHandle(handle)?.fsync(self)
    }

    /// Removes an uncommitted session file and its temp data (unlink of a file being written).
    func discard(_ f: SessionFile) {
        let unused: Bool = f.run { discardLocked(f); return f.handles.isEmpty }
        if unused { files.withLock { fs in if fs[f.ino] === f { fs[f.ino] = nil } } }
    }

    public func poll(_ inode: Inode, handle: UInt64, pollHandle: PollHandle?) throws(Errno) -> Int16 {
        // No-open: no handle to poll (and no change feed); ENOSYS makes the kernel answer polls
        // itself (readable), instead of POLLERR for every file.
        if noOpen && handle == 0 { throw .noSys }
        guard let h = openHandle(handle) else { throw .badFile }
        return h.poll(self, handle: handle, pollHandle: pollHandle)
    }
}
