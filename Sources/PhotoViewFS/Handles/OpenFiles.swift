import FUSE
import Foundation
import PhotoLibrary
import Redaction
import PGSystem
#if canImport(Glibc)
import Glibc
#endif

extension PhotoFS {
    // MARK: files

    func newHandle(_ open: any OpenHandle) -> UInt64 { newHandle(entry: .other(open)) }

    func newHandle(entry: OpenEntry) -> UInt64 {
        let h = nextHandle.add(1, ordering: .relaxed).oldValue
        handles.withLock { $0[h] = entry }
        return h
    }

    /// A fingerprint of an original's path, for `openedPaths`: SipHash with this process's random
    /// key, so no one can make two paths match on purpose.
    static func pathKey(_ bytes: UnsafeRawBufferPointer) -> Int {
        var h = Hasher()
        h.combine(bytes: bytes)
        return h.finalize()
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

    /// open(O_TRUNC) arrives in one request (`MountOptions.atomicOpenTruncate`): it is opened as
    /// without O_TRUNC, then truncated through the new handle, as when the kernel sent the open
    /// and then setattr(size: 0); but a save over a photo (an edit) does not copy the version
    /// first only to empty the copy (issue 39: a 5 MB save copied 5 MB at its open).
    public func open(_ inode: Inode, flags: Int32, context: RequestContext) throws(Errno) -> OpenReply {
        guard flags & O_TRUNC != 0, !noOpen else { return try openFile(inode, flags: flags, context: context, truncating: false) }
        let reply = try openFile(inode, flags: flags & ~O_TRUNC, context: context, truncating: true)
        do throws(Errno) {
            _ = try setattr(inode, SetAttributes(size: 0), handle: reply.handle, context: context)
        } catch {
            release(inode, handle: reply.handle, flags: flags)
            throw error
        }
        return reply
    }

    /// `truncating`: the file will be truncated through this open at once (O_TRUNC).
    func openFile(_ inode: Inode, flags: Int32, context: RequestContext, truncating: Bool) throws(Errno) -> OpenReply {
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
        // Another user (allow_other) reads within a share of the descriptor budget (FDBudget).
        let other: UInt32? = context.uid == uid ? nil : context.uid
        if !wantsWrite, !FixedInode.all.contains(inode),
           let reply = try charging(other, { () throws(Errno) in try openForReading(inode, user: other) }) { return reply }
        let resolved = resolve(inode)
        // The control files hold memory, not descriptors, while open (a snapshot, a position, a
        // request's text), but another user's opens of them count in its share all the same
        // (given back at their release): another user held 19,900 opens of `refused`, and the
        // daemon grew by 170 MB.
        switch resolved {
        case .controlFile(FixedInode.status)?:
            if wantsWrite { throw .accessDenied }
            if let other { try FDBudget.mount.charge(user: other) }
            let content = sharedSnapshot(FixedInode.status, statusContent())
            return OpenReply(handle: newHandle(SnapshotHandle(content, user: other)), directIO: true)
        case .controlFile(FixedInode.refused)?:
            // The names the app tried to save (through any of its mounts, private ones
            // included) are its owner's to read, not every local user's.
            if wantsWrite || other != nil { throw .accessDenied }
            let content = sharedSnapshot(FixedInode.refused, refusedContent())
            return OpenReply(handle: newHandle(SnapshotHandle(content, user: other)), directIO: true)
        case .controlFile(FixedInode.changes)?:
            if wantsWrite { throw .accessDenied }
            if let other { try FDBudget.mount.charge(user: other) }
            let position = feed.withLock { $0.latest }
            return OpenReply(handle: newHandle(ChangesHandle(position: position, user: other)), directIO: true, nonSeekable: true)
        case .controlFile(FixedInode.request)?:
            if accmode != O_WRONLY { throw .accessDenied }
            if let other { try FDBudget.mount.charge(user: other) }
            return OpenReply(handle: newHandle(RequestHandle(opener: PhotoFS.process(of: context.pid), user: other)), directIO: true)
        case .sidecar(let n)?:
            // A sidecar (issue 37): read as it is stored (its location removed for a strip-location
            // app); written as a new version of it, where the app may edit its photo.
            if wantsWrite { return try openSidecarEdit(n, flags: flags, context: context) }
            if let reply = try charging(other, { () throws(Errno) in try openSidecar(n, user: other) }) { return reply }
            throw .io
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
            // A JPEG made from a HEIF photo (Compatible/) is not the photo: never saved over it.
            if wantsWrite && node.compatible {
                if other == nil { recorder.note(node.rowID, .refused) }
                throw .accessDenied
            }
            // Writing makes a new version, where the app may edit (originals are never modified).
            if wantsWrite { return try openEdit(node, flags: flags, context: context, truncating: truncating) }
            if let reply = try charging(other, { () throws(Errno) in try openAsset(inode, node, aliased: aliased, user: other) }) {
                return reply
            }
        }
        // A file this mount created.
        return try openSession(inode, flags: flags, context: context)
    }

    /// The reply to a read open of an original, opened as `handle.fd`.
    func readOpened(_ inode: Inode, _ handle: AssetHandle, owned: Bool, aliased: Bool, pathKey: Int) -> OpenReply {
        let h = newHandle(entry: .asset(handle))
        // The app's own files in a read-write mount are read through the daemon: the app may
        // always edit them, and the kernel refuses to mix passthrough and daemon I/O on one
        // inode (rsync --inplace reads a file while it writes it: EIO otherwise).
        let usePassthrough = passthrough && handle.plan == nil && !(access == .readWrite && owned)
        // Keep the kernel's cached pages unless they are of another version of this file (an
        // aliased inode's pages are another asset's or version's: never kept).
        let same = !aliased && openedPaths.withLock { p -> Bool in
            let prev = p.updateValue(pathKey, forKey: inode)
            return prev == nil || prev == pathKey
        }
        // A read needs no FLUSH at its close (flush does nothing for it): one round trip fewer.
        return OpenReply(handle: h, keepCache: same, passthroughFD: usePassthrough ? handle.fd : nil, noFlush: true)
    }

    /// `content`, or the equal buffer an earlier open of this control file got: handles opened at
    /// the same content share one copy (arrays are shared until written, and these never are).
    func sharedSnapshot(_ inode: Inode, _ content: [UInt8]) -> [UInt8] {
        snapshots.withLock { s in
            if let last = s[inode], last == content { return last }
            s[inode] = content
            return content
        }
    }

    /// Runs a read open for `user` (another user than the owner; nil: the owner) within that
    /// user's share of the descriptor budget: charged before, given back unless a handle holds it.
    func charging(_ user: UInt32?, _ open: () throws(Errno) -> OpenReply?) throws(Errno) -> OpenReply? {
        guard let user else { return try open() }
        try FDBudget.mount.charge(user: user)
        do throws(Errno) {
            if let reply = try open() { return reply }
        } catch {
            FDBudget.mount.uncharge(user: user)
            throw error
        }
        FDBudget.mount.uncharge(user: user)
        return nil
    }

    /// A visible asset's original opened for reading by the general path (an alias, location
    /// stripped, a path too long for the fast one).
    func openAsset(_ inode: Inode, _ node: AssetNode, aliased: Bool, user: UInt32?) throws(Errno) -> OpenReply? {
        if node.compatible { return try openCompatible(inode, node, aliased: aliased, user: user) }
        let plan = try readPlan(for: node, user: user)
        let fd = try openOriginal(node, user: user)
        if user == nil { recorder.note(node.rowID, .read) }   // another user's read is not the app's
        var path = node.path
        let key = path.withUTF8 { PhotoFS.pathKey(UnsafeRawBufferPointer($0)) }
        return readOpened(inode, AssetHandle(rowID: node.rowID, ino: node.ino, fd: fd, plan: plan, user: user), owned: node.owned,
                          aliased: aliased, pathKey: key)
    }

    /// The open most opens are: an original read as it is (a visible asset's own inode, not an
    /// alias; location not stripped; not a JPEG made from it). Its path is written into a buffer
    /// on the stack, and the handle is kept inline (`OpenEntry.asset`): nothing is allocated.
    /// nil: not such an open, for the general path to decide.
    func openForReading(_ inode: Inode, user: UInt32? = nil) throws(Errno) -> OpenReply? {
        enum Outcome { case elsewhere, failed(Errno), opened(NodeStore.OpenBrief, Int32, Int) }
        let outcome = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: PhotoFS.briefPathCapacity) { buf -> Outcome in
            guard let b = model.withLock({ $0.store.brief(ino: inode, pathInto: buf) }),
                  b.bits & (NodeStore.strip | NodeStore.compatible) == 0 else {
                return .elsewhere
            }
            let path = UnsafeRawPointer(buf.baseAddress!).assumingMemoryBound(to: CChar.self)
            let length = strlen(path)
            let key = PhotoFS.pathKey(UnsafeRawBufferPointer(start: buf.baseAddress, count: length))
            do throws(Errno) {
                let fd = try openOriginal(path, rowID: b.rowID, inStore: b.bits & NodeStore.inStore != 0, size: b.size, ctime: b.ctime,
                                          user: user) {
                    (self.nodeName(inode), String(decoding: UnsafeBufferPointer(start: buf.baseAddress, count: length), as: UTF8.self))
                }
                return .opened(b, fd, key)
            } catch {
                return .failed(error)
            }
        }
        switch outcome {
        case .elsewhere: return nil
        case .failed(let e): throw e
        case .opened(let b, let fd, let key):
            if user == nil { recorder.note(b.rowID, .read) }   // another user's read is not the app's
            return readOpened(inode, AssetHandle(rowID: b.rowID, ino: b.ino, fd: fd, plan: nil, user: user), owned: b.bits & NodeStore.owned != 0,
                              aliased: false, pathKey: key)
        }
    }

    /// The stack buffer of `openForReading`: Swift keeps up to 1 KiB on the stack (more comes from
    /// malloc). A longer path (rare: the store's are ~100 bytes) takes the general path.
    static let briefPathCapacity = 1024

    /// The name of the visible asset with this inode, for a log line.
    func nodeName(_ inode: Inode) -> String {
        model.withLock { m in m.byIno[inode].flatMap { m.nodes[$0]?.name } } ?? "inode \(inode)"
    }

    /// What a read of this node zeroes (nil: served as is). With strip-location on, a file whose
    /// metadata cannot be parsed with confidence is refused (EACCES), never served as it is.
    /// `user`: another user's read (allow_other), which is not the app's: not in its report.
    func readPlan(for node: AssetNode, user: UInt32? = nil) throws(Errno) -> RedactionPlan? {
        guard node.strip else { return nil }
        switch redaction(for: node) {
        case .plan(let p): return p.isEmpty ? nil : p
        case .refuse(let why):
            log("refused \(node.name) to \(appID): strip-location is on and its metadata cannot be parsed with confidence (\(why))")
            if user == nil { recorder.note(node.rowID, .refused) }
            throw .accessDenied
        }
    }

    /// Opens an asset's original for reading, within the descriptors the daemon may spend on one
    /// app's opens (FDBudget: the excess open fails with EMFILE, every other file keeps working).
    /// An original indexed in place (import --reference) that changed since is refused: the
    /// catalog (and the redaction plan) describe only the bytes it had.
    func openOriginal(_ node: AssetNode, user: UInt32? = nil) throws(Errno) -> Int32 {
        let opened = node.path.withCString { p in
            Result { () throws(Errno) -> Int32 in
                try openOriginal(p, rowID: node.rowID, inStore: node.inStore, size: node.size, ctime: node.ctime, user: user) { (node.name, node.path) }
            }
        }
        return try opened.get()
    }

    /// The same by the original's path; `describe` (its name and path) only for a log line.
    func openOriginal(_ path: UnsafePointer<CChar>, rowID: Int64, inStore: Bool, size: UInt64, ctime: Int, user: UInt32? = nil,
                      describe: () -> (name: String, path: String)) throws(Errno) -> Int32 {
        // A referenced original (import --reference) lives in a folder someone else may write: its
        // path was recorded with no symbolic link in it, and it is opened so, or not at all (a
        // folder on the way swapped for a link to /etc would otherwise serve /etc/shadow).
        let fd = try FDBudget.mount.opening { pg_open_original(path, inStore ? 0 : 1) }
        guard fd >= 0 else {
            let e = errno
            log("cannot open original of \(describe().name): \(String(cString: strerror(e)))")
            throw .system(e)
        }
        // Told by the catalog, not by the path: a prefix test on the path took a referenced original
        // in a folder whose name only looks like the store's (é composed against e + U+0301: two
        // folders on disk) for a copied one, and skipped the check. The one rule (OriginalCheck):
        // a changed referenced original is refused, a store file of another size is damaged.
        var st = stat()
        let outcome = fstat(fd, &st) != 0 ? (inStore ? .storeDamaged : .referenceChanged)
            : OriginalCheck.check(st, inStore: inStore, size: size, added: ctime)
        switch outcome {
        case .same: break
        case .referenceChanged:
            FDBudget.mount.close(fd)
            let (name, path) = describe()
            log("refused \(name) to \(appID): its original at \(path) changed after it was imported (photogate verify reports it)")
            if user == nil { recorder.note(rowID, .refused) }   // another user's open is not the app's
            throw .accessDenied
        case .storeDamaged:
            FDBudget.mount.close(fd)
            log("cannot serve \(describe().name): its store file is \(st.st_size) bytes, the catalog says \(size) (damaged; photogate verify reports it)")
            throw .io
        }
        return fd
    }

    /// Is this asset (by row id and inode) still visible? Revoked handles fail their next read.
    func stillVisible(rowID: Int64, ino: Inode) -> Bool {
        model.withLock { m in m.nodes[rowID]?.ino == ino }
    }

    func entry(_ handle: UInt64) -> OpenEntry? { handles.withLock { $0[handle] } }

    /// A handle other than an original's read (those are `OpenEntry.asset`).
    func openHandle(_ handle: UInt64) -> (any OpenHandle)? {
        if case .other(let h)? = entry(handle) { return h }
        return nil
    }

    public func readWithoutOpen(_ inode: Inode, offset: Int64, size: Int, context: RequestContext) throws(Errno) -> ReadReply {
        guard noOpen else { return try read(inode, handle: 0, offset: offset, size: size) }
        return try readWithoutHandle(inode, offset: offset, size: size, user: context.uid == uid ? nil : context.uid)
    }

    public func read(_ inode: Inode, handle: UInt64, offset: Int64, size: Int) throws(Errno) -> ReadReply {
        if noOpen && handle == 0 { return try readWithoutHandle(inode, offset: offset, size: size, user: nil) }
        switch entry(handle) {
        case .asset(let a)?: return try a.read(self, offset: offset, size: size)
        case .other(let h)?: return try h.read(self, offset: offset, size: size)
        case nil: throw .badFile
        }
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
        switch handles.withLock({ $0.removeValue(forKey: handle) }) {
        case .asset(let a)?:
            FDBudget.mount.close(a.fd)
            if let user = a.user { FDBudget.mount.uncharge(user: user) }
        case .other(let h)?:
            h.release(self, handle: handle)
            if let user = h.user { FDBudget.mount.uncharge(user: user) }
        case nil: break
        }
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
        switch entry(handle) {
        case .asset?: return Int16(POLLIN | POLLRDNORM)
        case .other(let h)?: return h.poll(self, handle: handle, pollHandle: pollHandle)
        case nil: throw .badFile
        }
    }
}
