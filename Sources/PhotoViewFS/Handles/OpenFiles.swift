import FUSE
import Foundation
import PhotoLibrary
import Redaction
#if canImport(Glibc)
import Glibc
#endif

enum OpenKind: Sendable {
    case asset(rowID: Int64, ino: Inode, fd: Int32, plan: RedactionPlan?)
    case session(ino: Inode)
    /// An edit of a visible asset (EditSession.swift).
    case edit(ino: Inode)
    case status(content: [UInt8])
    case changes(position: Int64)
    case request(buffer: [UInt8])
}

extension PhotoFS {
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
            if !node.path.hasPrefix(library.storeRoot + "/") {
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
            return OpenReply(handle: h, keepCache: same, passthroughFD: usePassthrough ? fd : nil)
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
}
