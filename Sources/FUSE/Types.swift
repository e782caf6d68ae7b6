#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A FUSE node id. `1` (`Inode.root`, FUSE_ROOT_ID) is the root directory; `0` means "no inode".
public typealias Inode = UInt64

extension Inode {
    /// FUSE_ROOT_ID.
    public static let root: Inode = 1
}

/// File type bits for `Attributes.mode` (the `S_IF*` values of `<sys/stat.h>`).
public enum FileMode {
    public static let typeMask: UInt32 = 0o170000
    public static let directory: UInt32 = 0o040000
    public static let regular: UInt32 = 0o100000
    public static let symlink: UInt32 = 0o120000
    public static let fifo: UInt32 = 0o010000
    public static let socket: UInt32 = 0o140000
    public static let characterDevice: UInt32 = 0o020000
    public static let blockDevice: UInt32 = 0o060000
}

/// Seconds and nanoseconds since the epoch (a `struct timespec`).
public struct Timespec: Sendable, Equatable, Hashable {
    public var seconds: Int
    public var nanoseconds: Int

    public init(seconds: Int, nanoseconds: Int = 0) {
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }

    public static let zero = Timespec(seconds: 0)

    /// CLOCK_REALTIME now.
    public static var now: Timespec {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Timespec(seconds: Int(ts.tv_sec), nanoseconds: Int(ts.tv_nsec))
    }

    init(_ ts: timespec) { self.init(seconds: Int(ts.tv_sec), nanoseconds: Int(ts.tv_nsec)) }
    var timespecValue: timespec { timespec(tv_sec: seconds, tv_nsec: nanoseconds) }
}

/// The attributes of an inode, as the kernel sees them (maps to `struct stat`).
/// `st_blocks` is derived from `size` (512-byte units).
public struct Attributes: Sendable, Equatable {
    public var ino: Inode
    /// Type bits (`FileMode.*`) plus permission bits.
    public var mode: UInt32
    public var nlink: UInt32
    public var size: UInt64
    public var uid: UInt32
    public var gid: UInt32
    public var atime: Timespec
    public var mtime: Timespec
    public var ctime: Timespec
    public var blksize: UInt32

    /// st_blksize, the I/O size the kernel tells programs to use: 1 MiB, the largest write
    /// request (`MountOptions.maxWrite`'s default). `cp` writes in blocks of the larger of the two
    /// files' (with 4 KiB here it wrote 128 KiB blocks: 8 requests, each a round trip through the
    /// daemon, where one will do), and stdio and Python buffer that much.
    public static let preferredIOSize: UInt32 = 1 << 20

    public init(ino: Inode, mode: UInt32, nlink: UInt32 = 1, size: UInt64 = 0,
                uid: UInt32 = 0, gid: UInt32 = 0,
                atime: Timespec = .zero, mtime: Timespec = .zero, ctime: Timespec = .zero,
                blksize: UInt32 = Attributes.preferredIOSize) {
        self.ino = ino
        self.mode = mode
        self.nlink = nlink
        self.size = size
        self.uid = uid
        self.gid = gid
        self.atime = atime
        self.mtime = mtime
        self.ctime = ctime
        self.blksize = blksize
    }

    public var isDirectory: Bool { mode & FileMode.typeMask == FileMode.directory }
    public var isRegularFile: Bool { mode & FileMode.typeMask == FileMode.regular }
}

/// The answer to a name lookup (and to create/mkdir/mknod/link/symlink): `fuse_entry_param`.
///
/// Every entry with a non-zero inode that reaches the kernel counts as one lookup of that inode;
/// the kernel gives it back later with `forget`. If the reply cannot be delivered (the request
/// was interrupted), the wrapper calls `forget(ino, lookups: 1)` itself, so the count stays right.
/// An entry whose `attributes.ino` is 0 is a negative entry: the kernel caches "no such name"
/// for `entryTimeout` seconds.
public struct Entry: Sendable {
    public var attributes: Attributes
    public var generation: UInt64
    /// Seconds the kernel may cache the name -> inode mapping.
    public var entryTimeout: Double
    /// Seconds the kernel may cache the attributes.
    public var attrTimeout: Double

    public init(attributes: Attributes, generation: UInt64 = 0,
                entryTimeout: Double = 1.0, attrTimeout: Double = 1.0) {
        self.attributes = attributes
        self.generation = generation
        self.entryTimeout = entryTimeout
        self.attrTimeout = attrTimeout
    }
}

/// Who made the request (`fuse_req_ctx`). `pid` is the thread id of the caller; `umask` is only
/// meaningful for create/mkdir/mknod.
public struct RequestContext: Sendable {
    public var uid: UInt32
    public var gid: UInt32
    public var pid: Int32
    public var umask: UInt32

    public init(uid: UInt32, gid: UInt32, pid: Int32, umask: UInt32) {
        self.uid = uid
        self.gid = gid
        self.pid = pid
        self.umask = umask
    }
}

/// A name in a directory, exactly as the kernel sent it: raw bytes, no NUL, no "/".
/// Linux names need not be UTF-8; `string` is nil when they are not.
public struct FileName: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let bytes: [UInt8]

    public init(_ bytes: [UInt8]) { self.bytes = bytes }
    public init(_ string: String) { self.bytes = Array(string.utf8) }
    public init(stringLiteral value: String) { self.init(value) }

    init(cString: UnsafePointer<CChar>) {
        let count = strlen(cString)
        self.bytes = cString.withMemoryRebound(to: UInt8.self, capacity: count) {
            Array(UnsafeBufferPointer(start: $0, count: count))
        }
    }

    /// The name as a String, or nil if it is not valid UTF-8.
    public var string: String? { String(validating: bytes, as: UTF8.self) }

    public var description: String {
        string ?? String(decoding: bytes, as: UTF8.self)
    }
}

/// The answer to open/opendir/create: the handle the kernel will pass back, and cache flags.
public struct OpenReply: Sendable {
    /// Any value the filesystem likes; passed back to read/write/flush/release/...
    /// For files, keep it below 2^63: the wrapper uses the top bit to remember which opens it
    /// registered for passthrough (a handle with the top bit set simply never gets passthrough).
    public var handle: UInt64
    /// FOPEN_DIRECT_IO: bypass the page cache (every read/write reaches the filesystem).
    public var directIO: Bool
    /// FOPEN_KEEP_CACHE: do not drop the page cache of the inode on this open.
    public var keepCache: Bool
    /// FOPEN_NONSEEKABLE.
    public var nonSeekable: Bool
    /// FOPEN_CACHE_DIR (opendir only): the kernel may cache readdir results.
    public var cacheReaddir: Bool
    /// A file descriptor of the backing file for kernel passthrough (libfuse >= 3.17, kernel with
    /// FUSE_PASSTHROUGH, CAP_SYS_ADMIN). The wrapper registers it with `fuse_passthrough_open`
    /// (one backing id per inode, refcounted across opens, closed on the last release) and the
    /// kernel then serves read/write itself. The wrapper never closes this descriptor. When
    /// passthrough is not active, or registration fails, it is ignored and the filesystem keeps
    /// serving `read`/`write` — so keep the descriptor usable for that.
    /// An inode must be always passthrough or never: the kernel fails an open with EIO when one
    /// inode mixes passthrough and cached opens.
    public var passthroughFD: Int32?
    /// FOPEN_NOFLUSH: `close(2)` sends no FLUSH (one round trip fewer per open) for opens whose
    /// `flush` would do nothing (reads). Allowed with passthrough.
    public var noFlush: Bool

    public init(handle: UInt64 = 0, directIO: Bool = false, keepCache: Bool = false,
                nonSeekable: Bool = false, cacheReaddir: Bool = false, passthroughFD: Int32? = nil,
                noFlush: Bool = false) {
        self.handle = handle
        self.directIO = directIO
        self.keepCache = keepCache
        self.nonSeekable = nonSeekable
        self.cacheReaddir = cacheReaddir
        self.passthroughFD = passthroughFD
        self.noFlush = noFlush
    }
}

/// The answer to a read.
public enum ReadReply: Sendable {
    /// These bytes (at most `size` are sent; fewer means end of file).
    case bytes([UInt8])
    /// `count` bytes of `fd` at `offset`: libfuse splices (or copies) them straight from the
    /// descriptor into the reply (`fuse_reply_data` with FUSE_BUF_IS_FD|FUSE_BUF_FD_SEEK), without
    /// a trip through Swift. A short read of the descriptor gives a short reply; a failed read gives
    /// the errno. The descriptor must stay open until the call returns (it is not closed).
    case file(fd: Int32, offset: Int64, count: Int)
}

/// One directory entry for `readdir`.
public struct DirectoryEntry: Sendable {
    /// The raw name (non-empty, no "/" or NUL; the wrapper skips invalid names).
    public var name: [UInt8]
    /// For plain readdir only `ino` and the type bits of `mode` are used; readdirplus sends all.
    public var attributes: Attributes
    /// The offset of the *next* entry: the kernel passes it back to continue after this one.
    /// Must be non-zero (0 means "from the start").
    public var nextOffset: Int64
    public var entryTimeout: Double
    public var attrTimeout: Double

    public init(name: [UInt8], attributes: Attributes, nextOffset: Int64,
                entryTimeout: Double = 1.0, attrTimeout: Double = 1.0) {
        self.name = name
        self.attributes = attributes
        self.nextOffset = nextOffset
        self.entryTimeout = entryTimeout
        self.attrTimeout = attrTimeout
    }

    public init(name: String, attributes: Attributes, nextOffset: Int64,
                entryTimeout: Double = 1.0, attrTimeout: Double = 1.0) {
        self.init(name: Array(name.utf8), attributes: attributes, nextOffset: nextOffset,
                  entryTimeout: entryTimeout, attrTimeout: attrTimeout)
    }
}

/// The fields a setattr request changes (nil / false = unchanged).
public struct SetAttributes: Sendable, Equatable {
    public var mode: UInt32?
    public var uid: UInt32?
    public var gid: UInt32?
    /// truncate / ftruncate, and open(O_TRUNC) unless `MountOptions.atomicOpenTruncate` (then it
    /// arrives as open with O_TRUNC in its flags; else as open, then setattr(size: 0)).
    public var size: UInt64?
    public var atime: Timespec?
    public var mtime: Timespec?
    /// Set atime / mtime to the filesystem's "now" (utimensat with UTIME_NOW).
    public var atimeNow: Bool
    public var mtimeNow: Bool
    public var ctime: Timespec?

    public init(mode: UInt32? = nil, uid: UInt32? = nil, gid: UInt32? = nil, size: UInt64? = nil,
                atime: Timespec? = nil, mtime: Timespec? = nil,
                atimeNow: Bool = false, mtimeNow: Bool = false, ctime: Timespec? = nil) {
        self.mode = mode
        self.uid = uid
        self.gid = gid
        self.size = size
        self.atime = atime
        self.mtime = mtime
        self.atimeNow = atimeNow
        self.mtimeNow = mtimeNow
        self.ctime = ctime
    }

    /// True when nothing at all is to be changed.
    public var isEmpty: Bool {
        mode == nil && uid == nil && gid == nil && size == nil && atime == nil && mtime == nil
            && !atimeNow && !mtimeNow && ctime == nil
    }
}

/// statfs(2) answer. Counts are in units of `fragmentSize` (which defaults to `blockSize`).
public struct StatFS: Sendable, Equatable {
    public var blockSize: UInt64
    public var fragmentSize: UInt64?
    public var blocks: UInt64
    public var blocksFree: UInt64
    public var blocksAvailable: UInt64
    public var files: UInt64
    public var filesFree: UInt64
    public var nameMax: UInt64

    public init(blockSize: UInt64 = 4096, fragmentSize: UInt64? = nil, blocks: UInt64 = 0,
                blocksFree: UInt64 = 0, blocksAvailable: UInt64 = 0, files: UInt64 = 0,
                filesFree: UInt64 = 0, nameMax: UInt64 = 255) {
        self.blockSize = blockSize
        self.fragmentSize = fragmentSize
        self.blocks = blocks
        self.blocksFree = blocksFree
        self.blocksAvailable = blocksAvailable
        self.files = files
        self.filesFree = filesFree
        self.nameMax = nameMax
    }
}

/// renameat2(2) flags. Requests with any other flag (RENAME_WHITEOUT) are answered EINVAL by
/// the wrapper.
public struct RenameFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// RENAME_NOREPLACE: fail with EEXIST if the target exists.
    public static let noReplace = RenameFlags(rawValue: 1)
    /// RENAME_EXCHANGE: atomically swap source and target (both must exist).
    public static let exchange = RenameFlags(rawValue: 2)
}

/// What was negotiated with the kernel in FUSE_INIT (a snapshot; `FUSESession.connection`).
public struct ConnectionInfo: Sendable, Equatable {
    public var protocolMajor: UInt32
    public var protocolMinor: UInt32
    /// Largest write request (and, with it, read request) size.
    public var maxWrite: UInt32
    public var maxReadahead: UInt32
    /// The library and the kernel both offer FUSE_CAP_PASSTHROUGH.
    public var passthroughAvailable: Bool
    /// Passthrough was requested and granted (see `MountOptions.passthrough`).
    public var passthroughActive: Bool
    public var readdirplus: Bool
    public var writebackCache: Bool
    public var spliceWrite: Bool
}

/// How to mount. `fsName`/`subtype` show up in /proc/mounts as `fsName` and `fuse.subtype`.
public struct MountOptions: Sendable {
    public var fsName: String
    public var subtype: String
    /// `-o allow_other`: let users other than the mounter in (root, or user_allow_other).
    public var allowOther: Bool
    /// `-o default_permissions`: the kernel checks mode bits itself (no `access` calls).
    public var defaultPermissions: Bool
    /// Raw `-o` options, one per element, e.g. "ro", "noatime" (commas inside an element are
    /// escaped, so "a,b" is one option named "a,b").
    public var extra: [String]
    /// Maximum worker threads of the multi-threaded loop.
    public var threads: Int
    /// Ask for FUSE_CAP_PASSTHROUGH when libfuse (>= 3.17) and the kernel offer it. With
    /// passthrough active the writeback cache stays off.
    public var passthrough: Bool
    /// Readdirplus for every readdir (READDIRPLUS on, READDIRPLUS_AUTO off).
    public var readdirplus: Bool
    /// FUSE_CAP_WRITEBACK_CACHE (ignored when passthrough is active).
    public var writebackCache: Bool
    /// `-o max_read=N` (nil: no limit beyond max pages).
    public var maxRead: UInt32?
    /// Largest write request; default 1 MiB (which also lets reads be 1 MiB: max_pages 256).
    public var maxWrite: UInt32?
    /// FUSE_CAP_ATOMIC_O_TRUNC: open(O_TRUNC) arrives as one open with O_TRUNC in its flags,
    /// which the file system truncates itself; off, as an open without it, then setattr(size: 0).
    public var atomicOpenTruncate: Bool
    /// libfuse debug logging of every request on stderr.
    public var debug: Bool
    /// The only users whose requests are served (nil: all the kernel lets in): a mount with
    /// allow_other that is for one user, whose path other users can read in the mount table.
    /// Anyone else gets EACCES for every request that names a file.
    public var onlyUsers: Set<UInt32>?

    public init(fsName: String, subtype: String, allowOther: Bool = false,
                defaultPermissions: Bool = false, extra: [String] = [], threads: Int = 4,
                passthrough: Bool = true, readdirplus: Bool = true, writebackCache: Bool = false,
                maxRead: UInt32? = nil, maxWrite: UInt32? = nil, atomicOpenTruncate: Bool = false, debug: Bool = false,
                onlyUsers: Set<UInt32>? = nil) {
        self.fsName = fsName
        self.subtype = subtype
        self.allowOther = allowOther
        self.defaultPermissions = defaultPermissions
        self.extra = extra
        self.threads = threads
        self.passthrough = passthrough
        self.readdirplus = readdirplus
        self.writebackCache = writebackCache
        self.maxRead = maxRead
        self.maxWrite = maxWrite
        self.atomicOpenTruncate = atomicOpenTruncate
        self.debug = debug
        self.onlyUsers = onlyUsers
    }
}
