// Kept in one file (over ~400 lines): the table of C callbacks: each is a few lines that sit next to the one fuse_lowlevel_ops they fill.
import CFuse3
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// The C side: one non-capturing closure per libfuse low-level operation, in the style of
// libfuse's example/passthrough_hp.cc — call the filesystem, then reply exactly once with the
// answer or the errno. Nothing here waits for another request.

@inline(__always)
private func core(_ req: fuse_req_t?) -> SessionCore {
    HandlerThread.mark()
    return Unmanaged<SessionCore>.fromOpaque(fuse_req_userdata(req)!).takeUnretainedValue()
}

/// The request's caller, refused (EACCES) when the mount serves only some users
/// (`MountOptions.onlyUsers`) and it is none of them.
@inline(__always)
private func context(_ req: fuse_req_t?) throws(Errno) -> RequestContext {
    guard let ctx = fuse_req_ctx(req)?.pointee else { throw .accessDenied }
    if let only = core(req).options.onlyUsers, !only.contains(ctx.uid) { throw .accessDenied }
    return RequestContext(uid: ctx.uid, gid: ctx.gid, pid: ctx.pid, umask: ctx.umask)
}

/// The same refusal for requests that take no caller's context (xattrs, statfs, readlink).
@inline(__always)
private func admit(_ req: fuse_req_t?) throws(Errno) { _ = try context(req) }

/// The caller, unchecked: for requests on a handle an admitted open made.
@inline(__always)
private func handleContext(_ req: fuse_req_t?) -> RequestContext {
    guard let ctx = fuse_req_ctx(req)?.pointee else { return RequestContext(uid: 0, gid: 0, pid: 0, umask: 0) }
    return RequestContext(uid: ctx.uid, gid: ctx.gid, pid: ctx.pid, umask: ctx.umask)
}

@inline(__always)
private func replyError(_ req: fuse_req_t?, _ error: Errno) {
    _ = fuse_reply_err(req, error.replyCode)
}

@inline(__always)
private func replyOK(_ req: fuse_req_t?) {
    _ = fuse_reply_err(req, 0)
}

/// The filesystem's handle for a file open (the passthrough marker stripped).
@inline(__always)
private func fileHandle(_ fi: UnsafeMutablePointer<fuse_file_info>?) -> UInt64 {
    (fi?.pointee.fh ?? 0) & ~passthroughHandleBit
}

private func name(_ cString: UnsafePointer<CChar>?) -> FileName {
    guard let cString else { return FileName([]) }
    return FileName(cString: cString)
}

private func bytes(_ cString: UnsafePointer<CChar>?) -> [UInt8] { name(cString).bytes }

// MARK: - Conversions

extension Attributes {
    var statValue: stat {
        var st = stat()
        st.st_ino = .init(truncatingIfNeeded: ino)
        st.st_mode = .init(truncatingIfNeeded: mode)
        st.st_nlink = .init(truncatingIfNeeded: nlink)
        st.st_uid = .init(truncatingIfNeeded: uid)
        st.st_gid = .init(truncatingIfNeeded: gid)
        st.st_size = .init(truncatingIfNeeded: size)
        st.st_blksize = .init(truncatingIfNeeded: blksize)
        st.st_blocks = .init(truncatingIfNeeded: (size + 511) / 512)
        st.st_atim = atime.timespecValue
        st.st_mtim = mtime.timespecValue
        st.st_ctim = ctime.timespecValue
        return st
    }
}

extension Entry {
    var param: fuse_entry_param {
        var p = fuse_entry_param()
        p.ino = attributes.ino
        p.generation = generation
        p.attr = attributes.statValue
        p.attr_timeout = attrTimeout
        p.entry_timeout = entryTimeout
        return p
    }
}

extension DirectoryEntry {
    var param: fuse_entry_param {
        Entry(attributes: attributes, entryTimeout: entryTimeout, attrTimeout: attrTimeout).param
    }

    /// Non-empty, no "/" and no NUL.
    var hasValidName: Bool { !name.isEmpty && !name.contains(0x2F) && !name.contains(0) }

    var isDotOrDotDot: Bool { name == [0x2E] || name == [0x2E, 0x2E] }
}

private func setAttributes(_ attr: stat, _ toSet: Int32) -> SetAttributes {
    var c = SetAttributes()
    if toSet & FUSE_SET_ATTR_MODE != 0 { c.mode = UInt32(attr.st_mode) }
    if toSet & FUSE_SET_ATTR_UID != 0 { c.uid = UInt32(attr.st_uid) }
    if toSet & FUSE_SET_ATTR_GID != 0 { c.gid = UInt32(attr.st_gid) }
    if toSet & FUSE_SET_ATTR_SIZE != 0 { c.size = UInt64(truncatingIfNeeded: attr.st_size) }
    c.atimeNow = toSet & FUSE_SET_ATTR_ATIME_NOW != 0
    c.mtimeNow = toSet & FUSE_SET_ATTR_MTIME_NOW != 0
    if toSet & FUSE_SET_ATTR_ATIME != 0 && !c.atimeNow { c.atime = Timespec(attr.st_atim) }
    if toSet & FUSE_SET_ATTR_MTIME != 0 && !c.mtimeNow { c.mtime = Timespec(attr.st_mtim) }
    if toSet & FUSE_SET_ATTR_CTIME != 0 { c.ctime = Timespec(attr.st_ctim) }
    return c
}

// MARK: - Replies that hand the kernel a reference

extension SessionCore {
    /// fuse_reply_entry; if the kernel did not take it (interrupted request), give the lookup back.
    fileprivate func replyEntry(_ req: fuse_req_t?, _ entry: Entry) {
        var p = entry.param
        if fuse_reply_entry(req, &p) != 0, entry.attributes.ino != 0 {
            fs.forget(entry.attributes.ino, lookups: 1)
        }
    }

    /// Fills `fi` from the filesystem's answer and registers passthrough when asked and possible.
    fileprivate func apply(_ reply: OpenReply, inode: Inode, to fi: UnsafeMutablePointer<fuse_file_info>,
                           req: fuse_req_t?, isDirectory: Bool) {
        fi.pointee.fh = reply.handle
        fi.pointee.direct_io = reply.directIO ? 1 : 0
        fi.pointee.keep_cache = reply.keepCache ? 1 : 0
        fi.pointee.nonseekable = reply.nonSeekable ? 1 : 0
        fi.pointee.noflush = reply.noFlush ? 1 : 0
        if isDirectory {
            fi.pointee.cache_readdir = reply.cacheReaddir ? 1 : 0
            return
        }
        guard let fd = reply.passthroughFD, reply.handle & passthroughHandleBit == 0 else { return }
        let id = acquireBacking(req, inode: inode, fd: fd)
        guard id > 0 else { return }
        cfuse_fi_set_backing_id(fi, id)
        fi.pointee.fh = reply.handle | passthroughHandleBit
        // With FOPEN_DIRECT_IO the kernel would send reads to us instead of the backing file, and
        // it fails (EIO) a passthrough open with any flag outside FOPEN_PASSTHROUGH_MASK
        // (passthrough, direct_io, parallel_direct_writes, noflush): keep_cache and nonseekable
        // among them (noflush stays). A passthrough file's pages are the backing file's anyway.
        fi.pointee.direct_io = 0
        fi.pointee.keep_cache = 0
        fi.pointee.nonseekable = 0
    }

    /// Undo `apply` for an open whose reply the kernel never got, or on release.
    fileprivate func releasePassthrough(_ req: fuse_req_t?, inode: Inode, rawHandle: UInt64) {
        if rawHandle & passthroughHandleBit != 0 { releaseBacking(req, inode: inode) }
    }
}

// MARK: - The operation table

func makeLowLevelOperations(readdirplus: Bool) -> fuse_lowlevel_ops {
    var ops = fuse_lowlevel_ops()

    ops.`init` = { userdata, conn in
        guard let userdata, let conn else { return }
        HandlerThread.mark()
        Unmanaged<SessionCore>.fromOpaque(userdata).takeUnretainedValue().negotiate(conn)
    }

    ops.lookup = { req, parent, cname in
        let c = core(req)
        if c.probing.load(ordering: .relaxed), c.isProbe(parent: parent, name: cname, pid: fuse_req_ctx(req)?.pointee.pid ?? 0) {
            fuse_reply_err(req, ENOENT)
            return
        }
        do throws(Errno) {
            let entry = try c.fs.lookup(parent: parent, name: name(cname), context: try context(req))
            c.replyEntry(req, entry)
        } catch { replyError(req, error) }
    }

    ops.forget = { req, ino, nlookup in
        core(req).fs.forget(ino, lookups: nlookup)
        fuse_reply_none(req)
    }

    ops.forget_multi = { req, count, forgets in
        let c = core(req)
        if let forgets {
            for i in 0..<count { c.fs.forget(forgets[i].ino, lookups: forgets[i].nlookup) }
        }
        fuse_reply_none(req)
    }

    ops.getattr = { req, ino, fi in
        let c = core(req)
        do throws(Errno) {
            let handle: UInt64? = fi == nil ? nil : fileHandle(fi)
            let (attributes, timeout) = try c.fs.getattr(ino, handle: handle, context: try context(req))
            var st = attributes.statValue
            _ = fuse_reply_attr(req, &st, timeout)
        } catch { replyError(req, error) }
    }

    ops.setattr = { req, ino, attr, toSet, fi in
        let c = core(req)
        do throws(Errno) {
            guard let attr else { throw .invalid }
            let handle: UInt64? = fi == nil ? nil : fileHandle(fi)
            let (attributes, timeout) = try c.fs.setattr(ino, setAttributes(attr.pointee, toSet), handle: handle,
                                                         context: try context(req))
            var st = attributes.statValue
            _ = fuse_reply_attr(req, &st, timeout)
        } catch { replyError(req, error) }
    }

    ops.readlink = { req, ino in
        let c = core(req)
        do throws(Errno) {
            try admit(req)
            var target = try c.fs.readlink(ino)
            if let nul = target.firstIndex(of: 0) { target.removeSubrange(nul...) }
            guard !target.isEmpty else { throw .io }
            withCName(target) { ptr, _ in _ = fuse_reply_readlink(req, ptr) }
        } catch { replyError(req, error) }
    }

    ops.mknod = { req, parent, cname, mode, rdev in
        let c = core(req)
        do throws(Errno) {
            let entry = try c.fs.mknod(parent: parent, name: name(cname), mode: UInt32(mode), rdev: UInt64(rdev),
                                       context: try context(req))
            c.replyEntry(req, entry)
        } catch { replyError(req, error) }
    }

    ops.mkdir = { req, parent, cname, mode in
        let c = core(req)
        do throws(Errno) {
            let entry = try c.fs.mkdir(parent: parent, name: name(cname), mode: UInt32(mode), context: try context(req))
            c.replyEntry(req, entry)
        } catch { replyError(req, error) }
    }

    ops.unlink = { req, parent, cname in
        let c = core(req)
        do throws(Errno) {
            try c.fs.unlink(parent: parent, name: name(cname), context: try context(req))
            replyOK(req)
        } catch { replyError(req, error) }
    }

    ops.rmdir = { req, parent, cname in
        let c = core(req)
        do throws(Errno) {
            try c.fs.rmdir(parent: parent, name: name(cname), context: try context(req))
            replyOK(req)
        } catch { replyError(req, error) }
    }

    ops.symlink = { req, link, parent, cname in
        let c = core(req)
        do throws(Errno) {
            let entry = try c.fs.symlink(target: bytes(link), parent: parent, name: name(cname), context: try context(req))
            c.replyEntry(req, entry)
        } catch { replyError(req, error) }
    }

    ops.rename = { req, parent, cname, newParent, newName, flags in
        let c = core(req)
        do throws(Errno) {
            let known: RenameFlags = [.noReplace, .exchange]
            let renameFlags = RenameFlags(rawValue: UInt32(flags))
            guard known.isSuperset(of: renameFlags),
                  renameFlags != [.noReplace, .exchange] else { throw .invalid }
            try c.fs.rename(parent: parent, name: name(cname), newParent: newParent, newName: name(newName),
                            flags: renameFlags, context: try context(req))
            replyOK(req)
        } catch { replyError(req, error) }
    }

    ops.link = { req, ino, newParent, newName in
        let c = core(req)
        do throws(Errno) {
            let entry = try c.fs.link(ino, newParent: newParent, newName: name(newName), context: try context(req))
            c.replyEntry(req, entry)
        } catch { replyError(req, error) }
    }

    ops.open = { req, ino, fi in
        let c = core(req)
        guard let fi else { return replyError(req, .invalid) }
        do throws(Errno) {
            let reply = try c.fs.open(ino, flags: fi.pointee.flags, context: try context(req))
            c.apply(reply, inode: ino, to: fi, req: req, isDirectory: false)
            if fuse_reply_open(req, fi) != 0 {
                // The open was interrupted: the kernel will never release it.
                c.releasePassthrough(req, inode: ino, rawHandle: fi.pointee.fh)
                c.fs.release(ino, handle: reply.handle, flags: fi.pointee.flags)
            }
        } catch { replyError(req, error) }
    }

    ops.read = { req, ino, size, offset, fi in
        let c = core(req)
        // Counted until the reply is written: the reply is what puts its pages in the cache.
        let gate = c.readGate.enter()
        defer { c.readGate.leave(gate) }
        do throws(Errno) {
            let handle = fileHandle(fi)
            let reply = handle == 0 ? try c.fs.readWithoutOpen(ino, offset: Int64(offset), size: size, context: handleContext(req))
                : try c.fs.read(ino, handle: handle, offset: Int64(offset), size: size)
            switch reply {
            case .bytes(let data):
                let count = min(data.count, size)
                data.withUnsafeBytes { buf in
                    _ = fuse_reply_buf(req, buf.baseAddress?.assumingMemoryBound(to: CChar.self), count)
                }
            case .file(let fd, let fileOffset, let count):
                var bufv = cfuse_bufvec_fd(max(0, min(count, size)), fd, off_t(fileOffset))
                // No FUSE_BUF_SPLICE_MOVE: see `negotiate` (moving pages is slower than copying).
                _ = fuse_reply_data(req, &bufv, fuse_buf_copy_flags(0))
            }
        } catch { replyError(req, error) }
    }

    ops.write = { req, ino, buf, size, offset, fi in
        let c = core(req)
        do throws(Errno) {
            let data = UnsafeRawBufferPointer(start: buf, count: buf == nil ? 0 : size)
            let written = try c.fs.write(ino, handle: fileHandle(fi), offset: Int64(offset), data: data,
                                         context: handleContext(req))
            guard written >= 0 else { throw .io }
            _ = fuse_reply_write(req, min(written, size))
        } catch { replyError(req, error) }
    }

    ops.flush = { req, ino, fi in
        let c = core(req)
        do throws(Errno) {
            try c.fs.flush(ino, handle: fileHandle(fi), context: handleContext(req))
            replyOK(req)
        } catch { replyError(req, error) }
    }

    ops.release = { req, ino, fi in
        let c = core(req)
        let raw = fi?.pointee.fh ?? 0
        c.releasePassthrough(req, inode: ino, rawHandle: raw)
        c.fs.release(ino, handle: raw & ~passthroughHandleBit, flags: fi?.pointee.flags ?? 0)
        replyOK(req)
    }

    ops.fsync = { req, ino, datasync, fi in
        let c = core(req)
        do throws(Errno) {
            try c.fs.fsync(ino, handle: fileHandle(fi), dataOnly: datasync != 0)
            replyOK(req)
        } catch { replyError(req, error) }
    }

    ops.opendir = { req, ino, fi in
        let c = core(req)
        guard let fi else { return replyError(req, .invalid) }
        do throws(Errno) {
            let reply = try c.fs.opendir(ino, flags: fi.pointee.flags, context: try context(req))
            c.apply(reply, inode: ino, to: fi, req: req, isDirectory: true)
            if fuse_reply_open(req, fi) != 0 { c.fs.releasedir(ino, handle: reply.handle) }
        } catch { replyError(req, error) }
    }

    ops.readdir = { req, ino, size, offset, fi in
        readDirectory(req, ino, size, offset, fi, plus: false)
    }

    if readdirplus {
        ops.readdirplus = { req, ino, size, offset, fi in
            readDirectory(req, ino, size, offset, fi, plus: true)
        }
    }

    ops.releasedir = { req, ino, fi in
        core(req).fs.releasedir(ino, handle: fi?.pointee.fh ?? 0)
        replyOK(req)
    }

    ops.fsyncdir = { req, _, _, _ in
        _ = core(req)
        replyOK(req)
    }

    ops.statfs = { req, ino in
        let c = core(req)
        do throws(Errno) {
            try admit(req)
            let s = try c.fs.statfs(ino)
            var v = statvfs()
            v.f_bsize = .init(truncatingIfNeeded: s.blockSize)
            v.f_frsize = .init(truncatingIfNeeded: s.fragmentSize ?? s.blockSize)
            v.f_blocks = .init(truncatingIfNeeded: s.blocks)
            v.f_bfree = .init(truncatingIfNeeded: s.blocksFree)
            v.f_bavail = .init(truncatingIfNeeded: s.blocksAvailable)
            v.f_files = .init(truncatingIfNeeded: s.files)
            v.f_ffree = .init(truncatingIfNeeded: s.filesFree)
            v.f_favail = .init(truncatingIfNeeded: s.filesFree)
            v.f_namemax = .init(truncatingIfNeeded: s.nameMax)
            _ = fuse_reply_statfs(req, &v)
        } catch { replyError(req, error) }
    }

    ops.setxattr = { req, ino, cname, value, size, flags in
        let c = core(req)
        do throws(Errno) {
            try admit(req)
            let data = UnsafeRawBufferPointer(start: value, count: value == nil ? 0 : size)
            try c.fs.setxattr(ino, name: bytes(cname), value: data, flags: flags)
            replyOK(req)
        } catch { replyError(req, error) }
    }

    ops.getxattr = { req, ino, cname, size in
        let c = core(req)
        do throws(Errno) {
            try admit(req)
            let value = try c.fs.getxattr(ino, name: bytes(cname), size: size)
            replySized(req, value, size)
        } catch { replyError(req, error) }
    }

    ops.listxattr = { req, ino, size in
        let c = core(req)
        do throws(Errno) {
            try admit(req)
            let list = try c.fs.listxattr(ino, size: size)
            replySized(req, list, size)
        } catch { replyError(req, error) }
    }

    ops.removexattr = { req, ino, cname in
        let c = core(req)
        do throws(Errno) {
            try admit(req)
            try c.fs.removexattr(ino, name: bytes(cname))
            replyOK(req)
        } catch { replyError(req, error) }
    }

    ops.access = { req, ino, mask in
        let c = core(req)
        do throws(Errno) {
            try c.fs.access(ino, mask: mask, context: try context(req))
            replyOK(req)
        } catch { replyError(req, error) }
    }

    ops.create = { req, parent, cname, mode, fi in
        let c = core(req)
        guard let fi else { return replyError(req, .invalid) }
        do throws(Errno) {
            let (entry, reply) = try c.fs.create(parent: parent, name: name(cname), mode: UInt32(mode),
                                                 flags: fi.pointee.flags, context: try context(req))
            let ino = entry.attributes.ino
            c.apply(reply, inode: ino, to: fi, req: req, isDirectory: false)
            var p = entry.param
            if fuse_reply_create(req, &p, fi) != 0 {
                c.releasePassthrough(req, inode: ino, rawHandle: fi.pointee.fh)
                c.fs.release(ino, handle: reply.handle, flags: fi.pointee.flags)
                if ino != 0 { c.fs.forget(ino, lookups: 1) }
            }
        } catch { replyError(req, error) }
    }

    ops.poll = { req, ino, fi, ph in
        let c = core(req)
        do throws(Errno) {
            let handle = ph.map { PollHandle(raw: $0, core: c) }
            let revents = try c.fs.poll(ino, handle: fileHandle(fi), pollHandle: handle)
            _ = fuse_reply_poll(req, UInt32(UInt16(bitPattern: revents)))
        } catch { replyError(req, error) }
    }

    ops.fallocate = { req, ino, mode, offset, length, fi in
        let c = core(req)
        do throws(Errno) {
            try c.fs.fallocate(ino, handle: fileHandle(fi), mode: mode, offset: Int64(offset), length: Int64(length))
            replyOK(req)
        } catch { replyError(req, error) }
    }

    return ops
}

/// getxattr/listxattr size protocol: size 0 asks for the length; a value that does not fit is ERANGE.
private func replySized(_ req: fuse_req_t?, _ value: [UInt8], _ size: Int) {
    if size == 0 {
        _ = fuse_reply_xattr(req, value.count)
    } else if value.count > size {
        replyError(req, .range)
    } else {
        value.withUnsafeBytes { buf in
            _ = fuse_reply_buf(req, buf.baseAddress?.assumingMemoryBound(to: CChar.self), value.count)
        }
    }
}

/// readdir and readdirplus: ask the filesystem for entries from `offset`, pack what fits into
/// `size` bytes, ask again while everything fit, reply once.
private func readDirectory(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ size: Int, _ offset: off_t,
                           _ fi: UnsafeMutablePointer<fuse_file_info>?, plus: Bool) {
    let c = core(req)
    let handle = fi?.pointee.fh ?? 0
    let ctx = handleContext(req)
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: max(size, 1), alignment: 8)
    defer { buffer.deallocate() }
    let chars = buffer.assumingMemoryBound(to: CChar.self)

    var used = 0
    var next = Int64(offset)
    var counted: [Inode] = []
    var calls = 0
    fill: while used < size {
        let entries: [DirectoryEntry]
        do throws(Errno) {
            entries = try c.fs.readdir(ino, handle: handle, offset: next, plus: plus, context: ctx)
        } catch {
            if calls == 0 { return replyError(req, error) }
            break fill  // send what we have; the kernel asks again from `next`
        }
        calls += 1
        if entries.isEmpty { break }
        let start = next
        for entry in entries {
            guard entry.hasValidName, entry.nextOffset != 0 else {
                if entry.nextOffset != 0 { next = entry.nextOffset }
                continue
            }
            let need = withCName(entry.name) { cname, _ -> Int in
                if plus {
                    var p = entry.param
                    return fuse_add_direntry_plus(req, chars + used, size - used, cname, &p, off_t(entry.nextOffset))
                } else {
                    var st = stat()
                    st.st_ino = .init(truncatingIfNeeded: entry.attributes.ino)
                    st.st_mode = .init(truncatingIfNeeded: entry.attributes.mode)
                    return fuse_add_direntry(req, chars + used, size - used, cname, &st, off_t(entry.nextOffset))
                }
            }
            if need > size - used { break fill }
            used += need
            next = entry.nextOffset
            if plus && entry.attributes.ino != 0 && !entry.isDotOrDotDot {
                c.fs.didReturnEntry(entry.attributes.ino)
                counted.append(entry.attributes.ino)
            }
        }
        // A filesystem that ignores `offset` would otherwise repeat itself forever.
        if next == start || calls >= 64 { break }
    }
    if fuse_reply_buf(req, used > 0 ? UnsafePointer(chars) : nil, used) != 0 {
        for inode in counted { c.fs.forget(inode, lookups: 1) }
    }
}
