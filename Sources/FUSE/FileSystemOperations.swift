#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A filesystem served through `FUSESession`, one method per FUSE request.
///
/// Rules (the wrapper enforces the FUSE side of them):
/// - Each method runs on one of libfuse's worker threads, several at once: keep state in
///   `Mutex`/`Atomic`. Return quickly; never wait for something only another request can do.
/// - Return the answer or throw an `Errno`: the wrapper sends exactly one reply per request
///   (the answer, or `fuse_reply_err(errno)`). Methods cannot reply themselves.
/// - Lookup counting: every successful `lookup`, `create`, `mkdir`, `mknod`, `symlink` and `link`
///   returning a non-zero inode counts one lookup; so does every entry packed into a readdirplus
///   reply (the wrapper tells you through `didReturnEntry`). The kernel later gives them back
///   with `forget(inode, lookups: n)`. An inode may be dropped once its count is back to zero.
/// - Do not call `FUSESession.flushNotifications()` from these methods (it returns at once
///   there); the `invalidate*`/`notifyDelete` calls are fine anywhere.
///
/// Everything but `lookup`, `getattr`, `readdir`, `open` and `read` has a default (see the
/// extension): a read-only filesystem without links or xattrs.
public protocol FileSystemOperations: AnyObject, Sendable {
    func lookup(parent: Inode, name: FileName, context: RequestContext) throws(Errno) -> Entry
    /// The kernel dropped `lookups` references to `inode`. No reply; cannot fail.
    func forget(_ inode: Inode, lookups: UInt64)
    /// `handle` is the open handle when the kernel has one (fstat), else nil.
    func getattr(_ inode: Inode, handle: UInt64?, context: RequestContext) throws(Errno) -> (Attributes, timeout: Double)
    func setattr(_ inode: Inode, _ changes: SetAttributes, handle: UInt64?, context: RequestContext) throws(Errno) -> (Attributes, timeout: Double)

    func opendir(_ inode: Inode, flags: Int32, context: RequestContext) throws(Errno) -> OpenReply
    /// Entries after `offset` (0 = from the start), each with the offset of the next one.
    /// Returning every remaining entry is correct: the wrapper packs what fits into the kernel's
    /// buffer (`fuse_add_direntry[_plus]`) and drops the rest; if everything fit, it calls again
    /// from the last `nextOffset` until you return an empty array or the buffer is full. Return
    /// "." and ".." yourself if you want them listed. With `plus`, each packed entry with a
    /// non-zero inode other than "." and ".." counts as a lookup: see `didReturnEntry`.
    /// An error on the first call is the reply; an error on a later call ends the batch.
    func readdir(_ inode: Inode, handle: UInt64, offset: Int64, plus: Bool, context: RequestContext) throws(Errno) -> [DirectoryEntry]
    /// Called once for every entry the wrapper actually packed into a readdirplus reply (non-zero
    /// inode, not "." or ".."): the kernel now holds one more lookup of `inode` and will `forget`
    /// it. Count it exactly like a successful lookup. Called before the reply is sent; if the
    /// reply cannot be delivered the wrapper balances it with `forget(inode, lookups: 1)`.
    func didReturnEntry(_ inode: Inode)
    func releasedir(_ inode: Inode, handle: UInt64)

    func open(_ inode: Inode, flags: Int32, context: RequestContext) throws(Errno) -> OpenReply
    /// Up to `size` bytes at `offset`. Fewer bytes mean end of file (unless the file was opened
    /// with `directIO`, where the count is returned to the caller as is).
    func read(_ inode: Inode, handle: UInt64, offset: Int64, size: Int) throws(Errno) -> ReadReply
    /// A read with no open of the filesystem's own (handle 0: the kernel opened the file itself,
    /// FOPEN_NOOPEN-style), with its caller: who reads is then known only here.
    func readWithoutOpen(_ inode: Inode, offset: Int64, size: Int, context: RequestContext) throws(Errno) -> ReadReply
    /// Returns the number of bytes written. `data` is only valid during the call.
    func write(_ inode: Inode, handle: UInt64, offset: Int64, data: UnsafeRawBufferPointer, context: RequestContext) throws(Errno) -> Int
    /// Called on every close(2) of a descriptor (may be several per open); its errno is close's.
    func flush(_ inode: Inode, handle: UInt64, context: RequestContext) throws(Errno)
    /// The last close of an open. No error reaches anyone.
    func release(_ inode: Inode, handle: UInt64, flags: Int32)
    func fsync(_ inode: Inode, handle: UInt64, dataOnly: Bool) throws(Errno)

    /// Create and open a regular file. The returned entry counts as a lookup.
    func create(parent: Inode, name: FileName, mode: UInt32, flags: Int32, context: RequestContext) throws(Errno) -> (Entry, OpenReply)
    func mkdir(parent: Inode, name: FileName, mode: UInt32, context: RequestContext) throws(Errno) -> Entry
    func mknod(parent: Inode, name: FileName, mode: UInt32, rdev: UInt64, context: RequestContext) throws(Errno) -> Entry
    func unlink(parent: Inode, name: FileName, context: RequestContext) throws(Errno)
    func rmdir(parent: Inode, name: FileName, context: RequestContext) throws(Errno)
    func rename(parent: Inode, name: FileName, newParent: Inode, newName: FileName, flags: RenameFlags, context: RequestContext) throws(Errno)
    func link(_ inode: Inode, newParent: Inode, newName: FileName, context: RequestContext) throws(Errno) -> Entry
    func symlink(target: [UInt8], parent: Inode, name: FileName, context: RequestContext) throws(Errno) -> Entry
    func readlink(_ inode: Inode) throws(Errno) -> [UInt8]
    func statfs(_ inode: Inode) throws(Errno) -> StatFS

    func setxattr(_ inode: Inode, name: [UInt8], value: UnsafeRawBufferPointer, flags: Int32) throws(Errno)
    /// The whole value. The wrapper implements the size protocol: for a size probe (`size == 0`)
    /// it answers the length, and when the value is longer than `size` it answers ERANGE.
    func getxattr(_ inode: Inode, name: [UInt8], size: Int) throws(Errno) -> [UInt8]
    /// The whole list: names each followed by a NUL byte. Same size protocol as `getxattr`.
    func listxattr(_ inode: Inode, size: Int) throws(Errno) -> [UInt8]
    func removexattr(_ inode: Inode, name: [UInt8]) throws(Errno)

    /// access(2) (not called with `MountOptions.defaultPermissions`).
    func access(_ inode: Inode, mask: Int32, context: RequestContext) throws(Errno)
    /// Current readiness (POLLIN, POLLOUT, ...). `pollHandle` is non-nil when the caller will
    /// sleep: keep it and call `notify()` when readiness changes (the kernel then polls again).
    func poll(_ inode: Inode, handle: UInt64, pollHandle: PollHandle?) throws(Errno) -> Int16
    func fallocate(_ inode: Inode, handle: UInt64, mode: Int32, offset: Int64, length: Int64) throws(Errno)
}

/// Defaults: a read-only filesystem without links, device nodes or extended attributes.
///
/// - mkdir/unlink/rmdir/rename/create/write/setattr: EROFS.
/// - link/symlink/mknod: EPERM.
/// - xattrs: the four defaults throw ENOSYS, which the kernel turns into EOPNOTSUPP (ENOTSUP) at
///   the syscall and then remembers, so later xattr calls cost no round trip. Override all four
///   to support xattrs; an override must never throw ENOSYS itself.
/// - readlink: EINVAL. statfs: all zero counts (4096-byte blocks, names up to 255 bytes).
/// - access: allowed. poll: POLLIN|POLLOUT|POLLRDNORM|POLLWRNORM (always ready).
/// - fallocate: EOPNOTSUPP. flush/fsync: success.
/// - opendir: handle 0. forget, didReturnEntry, releasedir, release: nothing.
/// - ioctl, lseek, copy_file_range, locks and bmap are not wired: libfuse answers ENOSYS, and the
///   kernel falls back to its generic implementation (or ENOTTY/ENOSYS for ioctl).
extension FileSystemOperations {
    public func readWithoutOpen(_ inode: Inode, offset: Int64, size: Int, context: RequestContext) throws(Errno) -> ReadReply {
        try read(inode, handle: 0, offset: offset, size: size)
    }
    public func forget(_ inode: Inode, lookups: UInt64) {}
    public func didReturnEntry(_ inode: Inode) {}
    public func setattr(_ inode: Inode, _ changes: SetAttributes, handle: UInt64?, context: RequestContext) throws(Errno) -> (Attributes, timeout: Double) {
        throw .readOnly
    }
    public func opendir(_ inode: Inode, flags: Int32, context: RequestContext) throws(Errno) -> OpenReply {
        OpenReply(handle: 0)
    }
    public func releasedir(_ inode: Inode, handle: UInt64) {}
    public func write(_ inode: Inode, handle: UInt64, offset: Int64, data: UnsafeRawBufferPointer, context: RequestContext) throws(Errno) -> Int {
        throw .readOnly
    }
    public func flush(_ inode: Inode, handle: UInt64, context: RequestContext) throws(Errno) {}
    public func release(_ inode: Inode, handle: UInt64, flags: Int32) {}
    public func fsync(_ inode: Inode, handle: UInt64, dataOnly: Bool) throws(Errno) {}
    public func create(parent: Inode, name: FileName, mode: UInt32, flags: Int32, context: RequestContext) throws(Errno) -> (Entry, OpenReply) {
        throw .readOnly
    }
    public func mkdir(parent: Inode, name: FileName, mode: UInt32, context: RequestContext) throws(Errno) -> Entry {
        throw .readOnly
    }
    public func mknod(parent: Inode, name: FileName, mode: UInt32, rdev: UInt64, context: RequestContext) throws(Errno) -> Entry {
        throw .permission
    }
    public func unlink(parent: Inode, name: FileName, context: RequestContext) throws(Errno) {
        throw .readOnly
    }
    public func rmdir(parent: Inode, name: FileName, context: RequestContext) throws(Errno) {
        throw .readOnly
    }
    public func rename(parent: Inode, name: FileName, newParent: Inode, newName: FileName, flags: RenameFlags, context: RequestContext) throws(Errno) {
        throw .readOnly
    }
    public func link(_ inode: Inode, newParent: Inode, newName: FileName, context: RequestContext) throws(Errno) -> Entry {
        throw .permission
    }
    public func symlink(target: [UInt8], parent: Inode, name: FileName, context: RequestContext) throws(Errno) -> Entry {
        throw .permission
    }
    public func readlink(_ inode: Inode) throws(Errno) -> [UInt8] { throw .invalid }
    public func statfs(_ inode: Inode) throws(Errno) -> StatFS { StatFS() }
    public func setxattr(_ inode: Inode, name: [UInt8], value: UnsafeRawBufferPointer, flags: Int32) throws(Errno) {
        throw .noSys
    }
    public func getxattr(_ inode: Inode, name: [UInt8], size: Int) throws(Errno) -> [UInt8] { throw .noSys }
    public func listxattr(_ inode: Inode, size: Int) throws(Errno) -> [UInt8] { throw .noSys }
    public func removexattr(_ inode: Inode, name: [UInt8]) throws(Errno) { throw .noSys }
    public func access(_ inode: Inode, mask: Int32, context: RequestContext) throws(Errno) {}
    public func poll(_ inode: Inode, handle: UInt64, pollHandle: PollHandle?) throws(Errno) -> Int16 {
        Int16(POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM)
    }
    public func fallocate(_ inode: Inode, handle: UInt64, mode: Int32, offset: Int64, length: Int64) throws(Errno) {
        throw .notSupported
    }
}
