import FUSE
import Foundation
import PhotoLibrary
import Redaction
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One app's view of the library as a filesystem: the FUSE adapter. It asks `ViewPolicy` (through
/// `ViewModel`) for every decision and answers from memory; the library (`LibraryPort`) is read
/// only when it changes, and written only for what the app does (create, delete, albums, requests).
///
/// The rooms (folders of this module): Namespace/ (node kinds, lookup, attributes, readdir),
/// Handles/ (one type per kind of open file), Writes/ (files being written and edits, their
/// commit), Mutations/ (create, mkdir, rmdir, unlink, rename, upload folders), Control/
/// (`.photogate/`), Refresh/ (catching up with the library, invalidations, the watcher), Model/
/// (the in-memory view), Errors/ (the errno mapping), Daemon/ (the process that runs a mount),
/// Compatible/ (HEIF photos served as JPEG to an app with the `compatible` option).
///
/// LOCKS, and the order they nest in (a lock may be taken while holding only those above it):
///   1. `SessionFile.lock` (`f.run`): one file being written; never two at once. Held across
///      its commit, which refreshes the view (so 2 and 3 nest inside it).
///   2. `fetchLock`: one refresh at a time, held while it reads the catalog (never `refreshLock`
///      then: a blank, fail closed, must not wait on a statement a server cut off does not answer;
///      let go of, as `refreshLock` is, before waiting for the kernel to take invalidations).
///      `refreshLock`: held while the model is swapped or patched and the kernel told (the
///      invalidator never calls back into PhotoFS); taken inside `fetchLock`, or alone (blank).
///   3. `model`: the view. Inside it only `listingsChanged` (folder attributes) is taken.
///   4. Leaves, never held while taking another lock: `files`, `edits`, `sessionNames`,
///      `albumSessions`, `waitingSidecars`, `sidecarTimes`, `folders`, `rootFolders`, `committedOrder`, `writingBytes`, `writingFreed`,
///      `addedToday`, `aliases`, `openedPaths`, `handles`, `redactionCache`, `snapshots`, `backupTrail`, `feed` (holds poll
///      handles, notifies after release), `invalidatorBox`, `readPathBox`, `listingsChanged`, `pendingDrops`, the recorder's
///      state, `compatibles`' own (CompatibleFiles); and each handle's own lock (`ChangesHandle.position`,
///      `RequestHandle.buffer`), released before `feed` is taken or a request submitted. `rootFolderNames` takes only
///      `rootFolders` inside it. A file being written has a running hash with two locks of its own, taken under the
///      file's (RunningHash.swift).
/// Atomics (`nextHandle`, `requested`, `viewBytes`, `opensAnswered`, `FDBudget`'s count) take no lock. The FUSE
/// session's own locks (`connection`, `backing`) are leaves below all of these.
public final class PhotoFS: FileSystemOperations, @unchecked Sendable {
    public let library: any LibraryPort
    public let appID: AppID
    public let access: AccessLevel
    let writer: any AppFileWriter
    let model: Mutex<ViewModel>
    /// Files this mount is writing (Writes/).
    let files = Mutex<[Inode: SessionFile]>([:])
    /// Bytes of files being written in this mount, and its limits (Writes/Limits.swift, `admitGrowth`).
    let writingBytes = Mutex<UInt64>(0)
    /// Rung whenever `writingBytes` goes down: an edit open past the limit waits on it for an
    /// edit whose close has returned but whose release has not been served (`admitEditCopy`).
    let writingFreed = FreedBell()
    /// What the app added in the last 24 hours as last asked (`statfs`), and when (monotonic s).
    let addedToday = Mutex<(bytes: UInt64, at: Double)?>(nil)
    let writeLimit: UInt64 = (UInt64(ProcessInfo.processInfo.environment["PHOTOGATE_WRITE_LIMIT_MB"] ?? "") ?? 4096) << 20
    /// What one app may add in a day (Writes/Limits.swift, `addRefusal`).
    let dailyLimit: UInt64 = (UInt64(ProcessInfo.processInfo.environment["PHOTOGATE_DAILY_LIMIT_MB"] ?? "") ?? 65536) << 20
    /// Upload folders a mount keeps (they live in its memory for its life): past this, mkdir
    /// fails with EDQUOT, like the mount's other per-app limits. PHOTOGATE_MAX_FOLDERS, default
    /// 10,000 (50,000 mkdir took a daemon from 38 to 101 MB, never given back).
    let folderLimit: Int = Int(ProcessInfo.processInfo.environment["PHOTOGATE_MAX_FOLDERS"] ?? "") ?? 10_000
    /// The names of `rootFolders`, sorted, made again only after a change (a listing read them
    /// sorted on every READDIR: 8,000 folders cost 0.42 s per `ls`).
    let rootFolderNames = Mutex<[String]?>(nil)
    let diskReserve: UInt64? = UInt64(ProcessInfo.processInfo.environment["PHOTOGATE_DISK_RESERVE_MB"] ?? "").map { $0 << 20 }
    /// Edits in progress, by the asset's inode (EditSession.swift).
    let edits = Mutex<[Inode: SessionFile]>([:])
    /// Inodes that stand for another asset: after a rename over it (EditSession.swift), or its
    /// old inode after a new version (Refresh.swift).
    let aliases = Mutex(AliasTable(capacity: PhotoFS.keptCommittedNames))
    /// The stored path each inode was last opened from: after an edit, the next open drops the
    /// kernel's cached pages of the old version.
    /// (A fingerprint of the path, `PhotoFS.pathKey`: an open keeps no string.)
    let openedPaths = Mutex<[Inode: Int]>([:])
    /// Own assets this mount renamed and files it committed, recently: a save by backup
    /// (Mutations/BackupSaves.swift).
    let backupTrail = Mutex(BackupTrail())
    /// Committed add-only files still known by name, oldest first.
    let committedOrder = Mutex<[Inode]>([])
    /// Folders the app made (UploadFolders.swift), and those at the top by name.
    let folders = Mutex<[Inode: UploadFolder]>([:])
    let rootFolders = Mutex<[String: Inode]>([:])
    /// Files being written in `Albums/X/`, by album and name.
    let albumSessions = Mutex<[String: [String: Inode]]>([:])
    let sessionNames = Mutex<[String: Inode]>([:])
    /// Sidecars closed before their photo was written, by inode (Writes/SidecarSessions.swift).
    let waitingSidecars = Mutex<Set<Inode>>([])
    /// Modification times the app set on sidecars (by the version's inode), kept for this mount
    /// only, so that `rclone` and `rsync` run again find them unchanged.
    let sidecarTimes = Mutex<[Inode: Timespec]>([:])
    let handles = Mutex<[UInt64: OpenEntry]>([:])
    let nextHandle = Atomic<UInt64>(1)
    let requested = Atomic<Bool>(false)
    let refreshLock = NSLock()
    /// One refresh at a time, while it reads the catalog (Refresh.swift); taken before `refreshLock`.
    let fetchLock = NSLock()
    /// How many times the view was blanked (fail closed): a refresh that read the catalog before
    /// one does not apply what it read.
    let blanks = Atomic<Int>(0)
    let invalidatorBox = Mutex<Invalidator?>(nil)
    /// Redactions by inode (OpenFiles.swift `redaction(for:)`); those of removed inodes go at refreshes.
    let redactionCache = Mutex<[Inode: RedactionResult]>([:])
    /// The JPEGs of a `compatible` view (Compatible/), made in the library's cache.
    let compatibles: CompatibleFiles
    /// The content of `.photogate/status` and `refused` as last opened, by inode: an open at the
    /// same content shares it (SnapshotHandle) rather than keeping a copy of its own.
    let snapshots = Mutex<[Inode: [UInt8]]>([:])
    let feed: Mutex<ChangeFeed>
    /// Bytes of the assets in the view, for statfs (computed per refresh, never per request).
    let viewBytes: Atomic<UInt64>
    public let uid: UInt32
    /// A view for one user (`owner`): its root is that user's alone (0700), so that no one else
    /// passes through it, even to names whose attributes the kernel has cached (with allow_other
    /// and default_permissions, a `stat` of those is answered from the cache, never asking).
    let ownerOnly: Bool
    public let gid: UInt32
    let log: @Sendable (String) -> Void
    public let passthrough: Bool
    /// A no-open mount (`photogate mount --no-open`): read-only, and the kernel opens files without
    /// asking (OPEN and FLUSH are answered ENOSYS once, and the kernel stops sending them), so a
    /// warm open+read+close costs no round trip to the daemon. Reads then arrive without a handle,
    /// and the inode alone says what to serve: Handles/NoOpen.swift.
    public let noOpen: Bool
    /// OPEN requests a no-open mount answered (1: the first, answered ENOSYS; `.photogate/status`
    /// shows it). Other mounts do not count.
    let opensAnswered = Atomic<Int>(0)
    let started = Timespec.now
    /// When a folder's listing last changed other than by this mount's own syscalls: the mtime of
    /// every folder. With cached listings, a listing the kernel finished filling just after an
    /// invalidation would keep stale names; a newer mtime makes the kernel drop it the next time
    /// it refreshes the folder's attributes (which the invalidation also forces).
    let listingsChanged = Mutex<Timespec>(.zero)
    /// Inodes that left the view whose cached pages the kernel has not dropped yet. The kernel
    /// marks a revoked inode's attributes stale before it drops its pages, and with the writeback
    /// cache a read does not refresh the size first: a `stat` answered ENOENT in between, and a
    /// read through a handle opened before the revoke then got pages read ahead. GETATTR of such
    /// an inode waits until its pages are gone (Refresh.swift).
    let pendingDrops = Mutex<Set<Inode>>([])
    /// The access report: what the app read, made, edited, deleted or was refused, written in
    /// batches (Control/AccessRecorder.swift). `MountDaemon` stops it (a last batch) at the end.
    public let recorder: AccessRecorder

    static let longTimeout = 86_400.0

    /// `owner`: the user the mount is for, when not this process's (a view root mounts for
    /// `photogate run`, whose command runs as an unprivileged id of its own): its files and folders
    /// are that user's, and it is the mount's owner for every rule that tells the owner from others.
    public init(library: any LibraryPort, app: AppID, access: AccessLevel, passthrough: Bool = true, noOpen: Bool = false,
                owner: (uid: UInt32, gid: UInt32)? = nil, log: @escaping @Sendable (String) -> Void = { _ in }) throws {
        self.library = library
        self.appID = app
        self.access = access
        self.log = log
        self.noOpen = noOpen
        self.passthrough = passthrough && !noOpen
        try library.registerApp(app)
        writer = try library.appFileWriter(purpose: "mount")
        let initial = try ViewModel(snapshot: library.view(for: app, access: access, lean: true), storeRoot: library.storeRoot)
        FreedMemory.giveBack(afterBuildOf: initial.store.count)   // the snapshot is gone
        viewBytes = Atomic(initial.totalBytes)
        model = Mutex(initial)
        feed = Mutex(ChangeFeed(latest: try library.latestChangeToken(app)))
        uid = owner?.uid ?? getuid()
        gid = owner?.gid ?? getgid()
        ownerOnly = owner != nil
        recorder = AccessRecorder(app: app, library: library, log: log)
        compatibles = CompatibleFiles(cacheRoot: library.cacheRoot, log: log)
    }

    public func setInvalidator(_ i: Invalidator?) { invalidatorBox.withLock { $0 = i } }

    /// Tells `.photogate/status` the read path in effect ("passthrough" or "daemon"), as the
    /// session knows it (the kernel may refuse passthrough after the mount).
    public func setReadPath(_ provider: @escaping @Sendable () -> String) { readPathBox.withLock { $0 = provider } }
    let readPathBox = Mutex<(@Sendable () -> String)?>(nil)
    var invalidator: Invalidator? { invalidatorBox.withLock { $0 } }
}
