import FUSE
import Foundation
import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

extension PhotoFS {
    /// What one mount may have being written at once (one app must not fill the disk for the
    /// others), and the room it leaves on the library's disk for the database and the CLI (so
    /// that `photogate authorize APP --status denied` works on a full disk): a write past either
    /// fails (EDQUOT, ENOSPC), and the file is then refused at its close. The copy an edit open
    /// makes of the current version counts as written by the app (`openEdit`; past either, the
    /// open fails). Settings of the daemon: PHOTOGATE_WRITE_LIMIT_MB (default 4096) and
    /// PHOTOGATE_DISK_RESERVE_MB (default the smaller of 64 MiB and 2% of the disk).
    func admitGrowth(_ f: SessionFile, to end: UInt64) throws(Errno) {
        let growth = end - f.counted
        let admitted = writingBytes.withLock { total -> Bool in
            if total + growth > writeLimit { return false }
            total += growth
            return true
        }
        guard admitted else {
            log("\(appID) has \(writingBytes.withLock { $0 } >> 20) MiB being written, the limit is \(writeLimit >> 20) MiB: \(f.name) refused")
            throw Errno(EDQUOT)
        }
        var st = statvfs()
        if statvfs(library.storeRoot, &st) == 0 {
            let avail = UInt64(st.f_bavail) * UInt64(st.f_frsize)
            let reserve = diskReserve ?? min(64 << 20, UInt64(st.f_blocks) * UInt64(st.f_frsize) / 50)
            if avail < growth + reserve {
                writingBytes.withLock { $0 -= growth }
                throw .noSpace
            }
        }
        f.counted = end
    }

    /// What one app may add (issue 34: an app wrote a video followed by a 4,000 MiB hole made
    /// with ftruncate, again and again: 4 GB assets taking no disk, 16 s of hashing each, and 4 GB
    /// in every backup). A file whose bytes are mostly holes is not media a camera or an editor
    /// writes: refused. One file is bounded by what a mount may have being written
    /// (`admitGrowth`); the bytes an app adds in a day by `addLimit`, which a commit asks in its
    /// own transaction. nil: admitted; else the reason, for `.photogate/refused`.
    func addRefusal(_ f: SessionFile) -> (Errno, String)? {
        var st = stat()
        guard fstat(f.fd, &st) == 0 else { return nil }
        let size = UInt64(max(0, st.st_size)), allocated = UInt64(max(0, st.st_blocks)) * 512
        if size > 1 << 20, allocated < size / 2 {
            return (.invalid, "mostly holes: \(allocated >> 20) MiB of its \(size >> 20) MiB are written (a sparse file is not a photo or video)")
        }
        return nil
    }

    /// The daily limit of a file whose commit failed before it could ask (the database busy or
    /// failing), asked in a transaction of its own before the file is kept to be committed later:
    /// that later commit asks no limit, since this close says saved. Not asked (nil) for a file
    /// told saved already (kept at an earlier close), nor for one whose commit may have gone
    /// through with its answer lost (`LibraryPort.isCommitted`; or that cannot be asked): counted
    /// then, it would count twice, and its temp may be the only file of a committed row. Nor
    /// when the catalog cannot answer: a busy catalog never costs an app its photo.
    func dailyRefusalBeforeKeeping(_ f: SessionFile) -> (Errno, String)? {
        guard !f.ready, (try? library.isCommitted(tempPath: f.tempPath)) == false else { return nil }
        var st = stat()
        guard fstat(f.fd, &st) == 0 else { return nil }
        let size = UInt64(max(0, st.st_size))
        guard let added = try? library.bytesAdded(by: appID, since: addLimit().since) else { return nil }
        return added + size > dailyLimit ? dailyRefusal(added: added, size: size) : nil
    }

    /// The daily limit as of now: what the app may have added in the last 24 hours.
    func addLimit() -> DailyLimit { DailyLimit(bytes: dailyLimit, since: Date().timeIntervalSince1970 - 86_400) }

    /// Why a file of `size` bytes is refused when the app added `added` in the last day.
    func dailyRefusal(added: UInt64, size: UInt64) -> (Errno, String) {
        (Errno(EDQUOT), "this app added \(added >> 20) MiB in the last 24 hours; \(size >> 20) MiB more is past its limit of \(dailyLimit >> 20) MiB a day")
    }

    /// A file leaves the bytes being written (committed or dropped), or counts only its first
    /// `end` bytes from now on.
    func uncount(_ f: SessionFile, downTo end: UInt64 = 0) {
        guard f.counted > end else { return }
        let c = f.counted - end
        f.counted = end
        writingBytes.withLock { $0 -= min($0, c) }
        writingFreed.ring()
    }

    /// `admitGrowth` for the copy an edit open makes, waiting (at most 5 s) for an edit the app has
    /// closed to end. An edit closed unchanged ends at its release, and the kernel sends that
    /// release after close(2) has returned (FUSE_RELEASE is asynchronous): another of the daemon's
    /// threads may serve the app's next open first. Past the limit, that open then failed with
    /// EDQUOT although the app had closed an edit and opened another, within its limit. It waits
    /// only while an edit is between its last close and its release (every handle flushed); one
    /// still open (a descriptor the app kept) is no reason to wait, and the open fails at once.
    /// FUSE cannot tell a last close from the close of a copy (`close(dup(fd))`, a forked child's
    /// exit): an edit the app still holds may look closed. So at most `editOpensWaiting` opens
    /// wait at once, and the others fail at once: a waiting open holds one of the daemon's request
    /// threads, and an app holding an edit "closed" that way, opening photo after photo past its
    /// limit at once, took all of them for 5 s at a time (every request of its mount unanswered
    /// meanwhile, the release they waited for too, and a SIGTERM's end held up as long).
    func admitEditCopy(_ f: SessionFile, to end: UInt64) throws(Errno) {
        let deadline = Date().addingTimeInterval(5)
        var waiting = false
        defer { if waiting { writingFreed.leave() } }
        while true {
            let seen = writingFreed.count
            do throws(Errno) { return try admitGrowth(f, to: end) } catch {
                guard error == Errno(EDQUOT), endingEdits() else { throw error }
                if !waiting {
                    guard writingFreed.enter(atMost: PhotoFS.editOpensWaiting) else { throw error }
                    waiting = true
                    // Said once it holds a waiting place (edit-wait-cap.sh waits for it).
                    log("\(f.name) waits for an edit of \(appID) to be released, to open within the write limit")
                }
                guard writingFreed.wait(past: seen, until: deadline) else { throw error }
            }
        }
    }

    /// Edit opens past the limit that may wait at once for an edit's release (`admitEditCopy`):
    /// well under the daemon's request threads (16), which serve that release.
    static let editOpensWaiting = 2

    /// Is an edit between its last close and its release (each of its handles flushed, none
    /// released yet): bytes about to be given back?
    private func endingEdits() -> Bool {
        let open = edits.withLock { Array($0.values) }
        return open.contains { f in f.run { f.isWriting && !f.handles.isEmpty && !f.handles.values.contains(false) && f.counted > 0 } }
    }

    /// Drops a file being written and its temp data.
    func discardLocked(_ f: SessionFile) {
        guard f.state != .discarded else { return }
        uncount(f)
        let wasWriting = f.isWriting
        f.closeTemp()
        if wasWriting {
            Glibc.unlink(f.tempPath)
            writer.clearReady(tempPath: f.tempPath)
        }
        f.state = .discarded
        f.dirty = false
        f.ready = false
        if f.editing != nil { return }   // an edit: the asset keeps its name and current version
        sessionNames.withLock { n in if n[f.name] == f.ino { n[f.name] = nil } }
        if let folder = f.folder { setFolderChild(folder, f.name, nil, ifCurrently: .session(f.ino)) }
        forgetAlbumSession(f)
        if wasWriting {
            // The name leaves the listing without a directory operation: drop cached listings.
            invalidateListings([FixedInode.root] + (f.album.flatMap { a in model.withLock { $0.albums[a]?.ino } }.map { [$0] } ?? []))
        }
    }

    /// Remembers a committed add-only file by name, forgetting the oldest beyond the limit.
    func keepCommitted(_ ino: Inode) {
        let evicted: [Inode] = committedOrder.withLock { order in
            order.removeAll { $0 == ino }
            order.append(ino)
            guard order.count > PhotoFS.keptCommittedNames else { return [] }
            let out = Array(order.prefix(order.count - PhotoFS.keptCommittedNames))
            order.removeFirst(out.count)
            return out
        }
        for e in evicted {
            guard let f = session(e) else { continue }
            let gone: Bool = f.run { f.handles.isEmpty && f.isCommitted }
            if gone {
                files.withLock { $0[e] = nil }
                sessionNames.withLock { n in if n[f.name] == e { n[f.name] = nil } }
                if let folder = f.folder { setFolderChild(folder, f.name, nil, ifCurrently: .session(e)) }
            }
        }
    }

    func forgetCommitted(_ ino: Inode) {
        committedOrder.withLock { $0.removeAll { $0 == ino } }
    }

    /// An add-only app removes or replaces the name of a file it wrote: the photo stays in the
    /// library (an add-only app deletes nothing) and this mount forgets the name. Returns false
    /// when `ino` is not such a file.
    func forgetCommittedName(_ ino: Inode) -> Bool {
        guard access == .addOnly, let f = session(ino) else { return false }
        let forgotten: Bool = f.run {
            guard f.isCommitted, f.handles.isEmpty else { return false }
            f.state = .discarded
            sessionNames.withLock { n in if n[f.name] == ino { n[f.name] = nil } }
            if let folder = f.folder { setFolderChild(folder, f.name, nil, ifCurrently: .session(ino)) }
            return true
        }
        guard forgotten else { return false }
        forgetCommitted(ino)
        files.withLock { fs in if fs[ino] === f { fs[ino] = nil } }
        return true
    }

    /// The steps a save over a photo or a sidecar takes at its close before its commit: the file
    /// made durable, the limits on what a file is asked (`addRefusal`: `refused` says why, the
    /// file is dropped and the errno thrown; the daily limit is the commit's to ask), and whether
    /// it holds exactly the bytes the app was shown redacted (`shownHash`): then it is no save,
    /// its temp file is removed, and this returns true for the caller to end the session.
    func saveIsWhatWasShownLocked(_ f: SessionFile, refused: (String) -> Void) throws(Errno) -> Bool {
        guard Glibc.fsync(f.fd) == 0 else {
            let e = errno
            discardLocked(f)
            throw .system(e)
        }
        CloseTrace.mark("fsync")
        if let (errno, why) = addRefusal(f) {
            refused(why)
            discardLocked(f)
            throw errno
        }
        CloseTrace.mark("checks")
        guard let shown = f.shownHash else { return false }
        var saved = f.contentHash?()
        if saved == nil {
            do throws(Errno) { saved = try readShown(f.fd, plan: nil).hash } catch {
                discardLocked(f)
                throw error
            }
        }
        guard saved == shown else { return false }
        log("\(f.name) saved by \(appID) unchanged (the bytes it reads, its location stripped)")
        Glibc.unlink(f.tempPath)
        return true
    }
}

/// A count rung each time bytes being written are given back, to wait on (`admitEditCopy`).
final class FreedBell: @unchecked Sendable {
    private let condition = NSCondition()
    private var rung: UInt64 = 0
    private var waiters = 0

    var count: UInt64 { condition.lock(); defer { condition.unlock() }; return rung }

    func ring() {
        condition.lock()
        rung &+= 1
        condition.broadcast()
        condition.unlock()
    }

    /// Counts one more waiter, if fewer than `limit` are counted; `leave` when done.
    func enter(atMost limit: Int) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard waiters < limit else { return false }
        waiters += 1
        return true
    }

    func leave() {
        condition.lock()
        waiters -= 1
        condition.unlock()
    }

    /// Waits until it is rung past `seen`; false at the deadline.
    func wait(past seen: UInt64, until deadline: Date) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while rung == seen {
            if !condition.wait(until: deadline) { return rung != seen }
        }
        return true
    }
}
