import FUSE
import Foundation
import Redaction
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// An open file of a mount. Each kind answers the requests on its handles itself; PhotoFS's
/// read/write/flush/release/fsync/poll only find the handle (`PhotoFS.handles`) and ask it.
/// A handle's own state is guarded by its own lock, taken with no other lock of the mount held
/// (see the lock order in PhotoFS.swift).
protocol OpenHandle: AnyObject, Sendable {
    func read(_ fs: PhotoFS, offset: Int64, size: Int) throws(Errno) -> ReadReply
    func write(_ fs: PhotoFS, handle: UInt64, offset: Int64, data: UnsafeRawBufferPointer) throws(Errno) -> Int
    func flush(_ fs: PhotoFS, handle: UInt64, context: RequestContext) throws(Errno)
    func release(_ fs: PhotoFS, handle: UInt64)
    func fsync(_ fs: PhotoFS) throws(Errno)
    func poll(_ fs: PhotoFS, handle: UInt64, pollHandle: PollHandle?) -> Int16
    /// The user other than the mount's owner whose share of the descriptor budget this open is
    /// counted in (FDBudget.charge), given back at its release; nil for the owner.
    var user: UInt32? { get }
}

extension OpenHandle {
    func write(_ fs: PhotoFS, handle: UInt64, offset: Int64, data: UnsafeRawBufferPointer) throws(Errno) -> Int { throw .badFile }
    func flush(_ fs: PhotoFS, handle: UInt64, context: RequestContext) throws(Errno) {}
    func release(_ fs: PhotoFS, handle: UInt64) {}
    func fsync(_ fs: PhotoFS) throws(Errno) {}
    func poll(_ fs: PhotoFS, handle: UInt64, pollHandle: PollHandle?) -> Int16 { Int16(POLLIN | POLLRDNORM) }
    var user: UInt32? { nil }
}

/// What a handle number stands for (`PhotoFS.handles`). Reads of originals, most opens by far,
/// are kept inline as values: such an open makes no object.
enum OpenEntry: Sendable {
    case asset(AssetHandle)
    case other(any OpenHandle)
}

/// A visible asset open for reading: its original's descriptor, and the redaction plan when
/// location is stripped. Reads fail once the asset is no longer visible (revoked handles).
/// Closed at its release (`PhotoFS.release`).
struct AssetHandle: Sendable {
    let rowID: Int64
    let ino: Inode
    let fd: Int32
    let plan: RedactionPlan?
    /// The user other than the mount's owner whose share of the descriptor budget holds `fd`
    /// (FDBudget.charge), nil for the owner.
    var user: UInt32? = nil

    func read(_ fs: PhotoFS, offset: Int64, size: Int) throws(Errno) -> ReadReply {
        guard fs.stillVisible(rowID: rowID, ino: ino) else { throw .accessDenied }
        guard let plan else { return .file(fd: fd, offset: offset, count: size) }
        return .bytes(try AssetHandle.readBytes(fd, offset: offset, size: size, zeroing: plan))
    }

    /// Up to `size` bytes of an original from `offset`, with the plan's ranges zeroed: the one
    /// place an asset's bytes are read into memory (redacted reads, and every read of a no-open
    /// mount, whose descriptor is closed before the reply goes).
    static func readBytes(_ fd: Int32, offset: Int64, size: Int, zeroing plan: RedactionPlan?) throws(Errno) -> [UInt8] {
        var buf = [UInt8](repeating: 0, count: size)
        let n = buf.withUnsafeMutableBytes { b in pread(fd, b.baseAddress, size, off_t(offset)) }
        if n < 0 { throw .system(errno) }
        buf.removeLast(size - n)
        if let plan { buf.withUnsafeMutableBytes { b in plan.apply(to: b, fileOffset: UInt64(offset)) } }
        return buf
    }
}

/// A file this mount writes (`edit: false`, Writes/Sessions.swift) or a new version of a visible
/// asset (`edit: true`, Writes/EditSession.swift): the session file does the work.
///
/// A handle belongs to the session it was opened on: that session file, at the `generation` it
/// had then (an add-only restart makes the same file a new session). Sessions are never looked up
/// by inode through a handle: a descriptor kept (a fork, a dup) past the close that committed an
/// edit once found the next edit of the same inode, wrote into it, and held its commit back until
/// its own release. A handle of an earlier session writes and truncates nothing (EACCES), reads
/// nothing of the current one, and its flush and release neither commit it nor count towards its
/// last close. A child of the same open shares that handle, and so that session.
final class SessionHandle: OpenHandle {
    let file: SessionFile
    let generation: Int
    let edit: Bool

    init(file: SessionFile, generation: Int, edit: Bool) {
        self.file = file
        self.generation = generation
        self.edit = edit
    }

    var ino: Inode { file.ino }

    /// Was this handle opened on the file's current session? Only under the file's lock.
    var isCurrentLocked: Bool { generation == file.generation }

    func read(_ fs: PhotoFS, offset: Int64, size: Int) throws(Errno) -> ReadReply {
        try fs.readSession(self, offset: offset, size: size)
    }

    func write(_ fs: PhotoFS, handle: UInt64, offset: Int64, data: UnsafeRawBufferPointer) throws(Errno) -> Int {
        try fs.writeSession(self, handle: handle, offset: offset, data: data)
    }

    func flush(_ fs: PhotoFS, handle: UInt64, context: RequestContext) throws(Errno) {
        try fs.flushSession(self, handle: handle, context: context)
    }

    func release(_ fs: PhotoFS, handle: UInt64) { fs.releaseSession(self, handle: handle) }

    func fsync(_ fs: PhotoFS) throws(Errno) { try fs.fsyncSession(self) }
}

/// `.photogate/status` and `.photogate/refused`: their content as it was at the open. Opens at
/// the same content share one buffer (`PhotoFS.sharedSnapshot`): holding thousands of them open
/// costs a handle each, not a copy each.
final class SnapshotHandle: OpenHandle {
    let content: [UInt8]
    let user: UInt32?

    init(_ content: [UInt8], user: UInt32? = nil) {
        self.content = content
        self.user = user
    }

    func read(_ fs: PhotoFS, offset: Int64, size: Int) throws(Errno) -> ReadReply {
        .bytes(PhotoFS.slice(content, offset, size))
    }
}

/// `.photogate/changes`: reads the feed from where this handle got to; polls wait for new lines.
final class ChangesHandle: OpenHandle {
    let position: Mutex<Int64>
    let user: UInt32?

    init(position: Int64, user: UInt32? = nil) {
        self.position = Mutex(position)
        self.user = user
    }

    func read(_ fs: PhotoFS, offset: Int64, size: Int) throws(Errno) -> ReadReply {
        let from = position.withLock { $0 }
        let (bytes, next) = fs.feed.withLock { $0.read(after: from, max: size) }
        position.withLock { $0 = next }
        return .bytes(bytes)
    }

    func poll(_ fs: PhotoFS, handle: UInt64, pollHandle: PollHandle?) -> Int16 {
        let from = position.withLock { $0 }
        return fs.feed.withLock { f -> Int16 in
            if f.hasEntries(after: from) { return Int16(POLLIN | POLLRDNORM) }
            // One waiter per open file: a newer handle replaces (and frees) the older one.
            if let p = pollHandle { f.addPoller(p, for: handle) }
            return 0
        }
    }

    /// Its poll handle goes with it (fuse_pollhandle_destroy when the last reference drops).
    func release(_ fs: PhotoFS, handle: UInt64) { _ = fs.feed.withLock { $0.removePoller(for: handle) } }
}

/// `.photogate/request`, open for writing: the text is submitted at the close.
final class RequestHandle: OpenHandle {
    let buffer = Mutex<[UInt8]>([])
    /// The process that opened it. Only its close submits the request (and gets EBUSY or EINVAL):
    /// a child that inherited the descriptor (a fork between open and close) and exits first
    /// sends a FLUSH too, which took the text, so the opener's own close succeeded with nothing
    /// recorded (DaemonResources.threeThousandRequestsAreCappedAndRingNoBell, flaky under load).
    /// Without the opener's close, the last release submits it.
    let opener: Int32
    let user: UInt32?

    init(opener: Int32, user: UInt32? = nil) {
        self.opener = opener
        self.user = user
    }

    func read(_ fs: PhotoFS, offset: Int64, size: Int) throws(Errno) -> ReadReply { throw .badFile }

    func write(_ fs: PhotoFS, handle: UInt64, offset: Int64, data: UnsafeRawBufferPointer) throws(Errno) -> Int {
        try buffer.withLock { b throws(Errno) in
            if b.count + data.count > 4096 { throw .invalid }
            b.append(contentsOf: data)
        }
        return data.count
    }

    func flush(_ fs: PhotoFS, handle: UInt64, context: RequestContext) throws(Errno) {
        guard PhotoFS.process(of: context.pid) == opener else { return }
        let text = buffer.withLock { b in defer { b = [] }; return b }
        if !text.isEmpty { try fs.submitRequest(text) }
    }

    func release(_ fs: PhotoFS, handle: UInt64) {
        let text = buffer.withLock { b in defer { b = [] }; return b }
        if !text.isEmpty { try? fs.submitRequest(text) }
    }

    func poll(_ fs: PhotoFS, handle: UInt64, pollHandle: PollHandle?) -> Int16 { Int16(POLLOUT | POLLWRNORM) }
}
