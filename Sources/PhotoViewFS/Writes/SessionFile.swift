import FUSE
import Foundation
import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

/// A file an app creates through its mount: a temp file in the library's `tmp/` until the close(2)
/// of its last writer commits it as an asset, before that close returns.
///
/// Why the commit happens at the last FLUSH and not at RELEASE: the kernel sends RELEASE after
/// close(2) has returned, so a commit there raced with the next writer of the same name, who
/// shared the temp file that had just become the store's original (issue 13's data loss). Here a
/// committed file's descriptor is closed under the same lock every write takes, so nothing can
/// write into an original.
///
/// Locking: `lock` guards every field and every use of `fd`; it comes first in the mount's lock
/// order (PhotoFS.swift): never take it while holding another lock of the mount.
final class SessionFile: @unchecked Sendable {
    enum State: Equatable {
        /// Being written (or created and not written yet).
        case writing
        /// An asset now; `fd` is closed.
        case committed(rowID: Int64)
        /// Refused, empty or unlinked: its temp file is gone.
        case discarded
    }

    let ino: Inode
    let album: String?
    /// The upload folder it is written in (see UploadFolders.swift), if any.
    let folder: Inode?
    /// An edit: the asset (row id) whose new version this file becomes (EditSession.swift).
    let editing: Int64?
    /// Refused and discarded at a close: every later close of the file fails (EINVAL).
    var refusedAtClose = false
    /// A sidecar (issue 37): a file named like one (`photo.jpg.xmp`, `IMG_1.THM`), or rsync's
    /// temp name for one. It becomes a version of a photo's sidecar at its close, not an asset
    /// (Writes/SidecarSessions.swift).
    let isSidecar: Bool
    /// The sidecar this file writes (its photo known), or nil while its photo has not arrived.
    var sidecarKey: SidecarKey?
    /// Closed before its photo arrived: kept (named, its bytes in its temp file) until a photo of
    /// its name is written in this mount, then committed to it; dropped at the unmount.
    var waitingForPhoto = false
    /// When it began waiting (monotonic seconds).
    var waitingSince: Double = 0
    /// For an edit: the original's path of the version it was made from (the view's `node.path`),
    /// checked again where the new version commits (`LibraryPort.commitVersion`).
    let basedOn: String?
    private let lock = NSLock()

    var id: String
    var tempPath: String
    var name: String
    var fd: Int32
    var state: State = .writing
    /// Which session of this file is current: an add-only app writing again a name it wrote makes
    /// the same file a new session (`PhotoFS.restartLocked`). A handle belongs to the session it
    /// was opened on (`SessionHandle.generation`): one of an earlier session touches nothing here.
    var generation = 0
    /// The handles open on the current session: true once the app closed (flushed) it after its
    /// last write.
    var handles: [UInt64: Bool] = [:]
    /// The user who created it: only they (or root) open it again while it is written. In a
    /// mount other users reach (allow_other), a file being written is its writer's own bytes, not
    /// something to read (add-only: not even for the app's other users).
    var creator: UInt32?
    /// The process (thread group) that opened each handle.
    var openers: [UInt64: Int32] = [:]
    /// Written (or truncated) since the last commit attempt.
    var dirty = false
    /// Durable and marked complete, but not committed: the database refused the commit at close
    /// (busy, failing). Retried at the last release; recovery commits it after a crash.
    var ready = false
    var size: UInt64 = 0
    var mtime: Timespec
    var mode: UInt32 = 0o644
    /// The errno of a write that failed (a full disk): such a file never becomes an asset, since
    /// part of what the app wrote is missing; its close fails with that errno.
    var failedWrite: Int32 = 0
    /// Bytes of this file counted against the mount's limit on bytes being written.
    var counted: UInt64 = 0
    /// Refused at a close (not complete media yet): its name is gone at once, but the file stays
    /// writable through descriptors still open elsewhere (a child that inherited one and exited
    /// sends that close too), until its last release discards it or a later close commits it.
    var hidden = false
    /// The process whose close refused it (hidden): only that process may still mend and close
    /// it (a descriptor it kept); any other's close of it fails, and its release adds nothing.
    var refusedOpener: Int32?
    /// An edit of a photo whose location the app may not see starts from the redacted bytes it
    /// reads: their hash. Saving them back unchanged is no edit (else the current version would
    /// lose its location to an app that only wrote back what it was shown).
    var shownHash: String?
    /// The content hash of the temp file, computed behind the writes (nil: hashed at the commit).
    /// Set by `useTemp`, ended by `closeTemp`.
    private(set) var hash: RunningHash?

    /// A session with no temp file yet: `useTemp` gives it one.
    init(id: String, ino: Inode, tempPath: String, name: String, album: String?, folder: Inode?, editing: Int64? = nil,
         basedOn: String? = nil, isSidecar: Bool = false, sidecarKey: SidecarKey? = nil) {
        self.id = id
        self.isSidecar = isSidecar
        self.sidecarKey = sidecarKey
        self.basedOn = basedOn
        self.folder = folder
        self.editing = editing
        self.ino = ino
        self.tempPath = tempPath
        self.fd = -1
        self.name = name
        self.album = album
        mtime = .now
    }

    /// Descriptors a session's temp file costs the daemon, taken from the mount's budget by
    /// `PhotoFS.makeSessionTemp` and given back by `closeTemp`: the file's, and its running hash's.
    static let descriptors = 2

    /// The temp file (`fd`, from `makeSessionTemp`, `size` bytes in it now) is the one written from
    /// here on, hashed behind its writes with `hasher` (an earlier temp file's descriptor is closed).
    func useTemp(fd: Int32, size: UInt64, hasher: any ContentHasher) {
        closeTemp()
        self.fd = fd
        self.size = size
        hash = RunningHash(fd: fd, size: size, hasher: hasher)
    }

    /// Closes the temp file's descriptor (at a commit or a discard), and its running hash with it,
    /// giving both back to the mount's descriptor budget.
    func closeTemp() {
        hash?.finish()
        hash = nil
        if fd >= 0 {
            Glibc.close(fd)
            FDBudget.mount.release(SessionFile.descriptors)
        }
        fd = -1
    }

    /// For the library's commit: asked once the file is found to be media, the hash computed
    /// behind the writes, or nil.
    var contentHash: (() -> String?)? { hash.map { h in { h.digest() } } }

    func run<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    var isWriting: Bool { state == .writing }
    /// Reachable by name: being written and not refused, or (add-only) committed.
    func isNamed(addOnly: Bool) -> Bool {
        switch state {
        case .writing: return !hidden
        case .committed: return addOnly
        case .discarded: return false
        }
    }
    /// The asset this file became (nil for a sidecar, which became no asset of its own).
    var committedRowID: Int64? {
        if case .committed(let r) = state, !isSidecar { return r }
        return nil
    }
    var isCommitted: Bool { if case .committed = state { return true }; return false }
}
