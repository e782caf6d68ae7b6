import Foundation
import Testing
import FUSE
import PhotoLibrary
@testable import PhotoViewFS
#if canImport(Glibc)
import Glibc
#endif

/// PhotoFS driven in this process through a fake library (`FakeLibrary`), with no mount: what
/// each handler answers and what it tells the kernel (`RecordingInvalidator`).
@Suite struct PhotoFSPortTests {
    static let app = AppID("org.example.Viewer")!
    static let other = AppID("org.example.Other")!
    let context = RequestContext(uid: getuid(), gid: getgid(), pid: getpid(), umask: 0o022)

    /// A library with two of the person's photos and one of another app's, and a mount of `app`.
    /// Grants dog.jpg to the app; returns its row and the inode the view gives it.
    func grantDog(_ lib: FakeLibrary, _ fs: PhotoFS) throws -> (row: Int64, ino: Inode) {
        let dog = lib.asset(named: "dog.jpg")!.rowID
        lib.select(Self.app, dog)
        fs.refresh()
        return (dog, try fs.lookup(parent: FixedInode.root, name: "dog.jpg", context: context).attributes.ino)
    }

    func make(_ status: AuthorizationStatus, access: AccessLevel = .readWrite) throws
        -> (FakeLibrary, PhotoFS, RecordingInvalidator) {
        let lib = try FakeLibrary()
        lib.setApp(Self.app, readWrite: status, addOnly: status)
        lib.setApp(Self.other)
        try lib.addAsset("beach.jpg", captured: 1_700_000_001)
        try lib.addAsset("dog.jpg", captured: 1_700_000_002)
        try lib.addAsset("theirs.jpg", owner: Self.other, captured: 1_700_000_003)
        let fs = try PhotoFS(library: lib, app: Self.app, access: access, passthrough: false)
        let rec = RecordingInvalidator()
        fs.setInvalidator(rec)
        return (lib, fs, rec)
    }

    func names(_ fs: PhotoFS, _ dir: Inode = FixedInode.root) throws -> [String] {
        try fs.readdir(dir, handle: 0, offset: 0, plus: true, context: context)
            .map { String(decoding: $0.name, as: UTF8.self) }.filter { $0 != "." && $0 != ".." }
    }

    /// The errno a handler fails with (nil: it succeeded).
    func errno(_ body: () throws -> Void) -> Errno? {
        do { try body(); return nil } catch { return error as? Errno ?? Errno(-1) }
    }

    @Test func anAuthorizedAppSeesEveryAssetAndTheAlbumFolders() throws {
        let (_, fs, _) = try make(.authorized)
        #expect(try names(fs) == ["Albums", "Shared", "beach.jpg", "dog.jpg", "theirs.jpg"])
        let e = try fs.lookup(parent: FixedInode.root, name: "dog.jpg", context: context)
        #expect(e.attributes.size == UInt64("photo bytes".utf8.count))
        #expect(e.attributes.mode == FileMode.regular | 0o444)
        let (a, _) = try fs.getattr(e.attributes.ino, handle: nil, context: context)
        #expect(a.ino == e.attributes.ino)
        #expect(try fs.lookup(parent: FixedInode.root, name: "Albums", context: context).attributes.isDirectory)
    }

    @Test func aLimitedAppSeesOnlyItsSelectionAndNoAlbums() throws {
        let (lib, fs, _) = try make(.limited)
        #expect(try names(fs) == [])
        let beach = lib.asset(named: "beach.jpg")!.rowID
        lib.select(Self.app, beach)
        fs.refresh()
        #expect(try names(fs) == ["beach.jpg"])
        #expect(errno { _ = try fs.lookup(parent: FixedInode.root, name: "dog.jpg", context: context) } == .noEntry)
        #expect(errno { _ = try fs.lookup(parent: FixedInode.root, name: "Albums", context: context) } == .noEntry)
        #expect(errno { _ = try fs.lookup(parent: FixedInode.root, name: "theirs.jpg", context: context) } == .noEntry)
    }

    @Test func aGrantFromTheFeedShowsTheAssetAndDropsTheCachedListing() throws {
        let (lib, fs, rec) = try make(.limited)
        #expect(errno { _ = try fs.lookup(parent: FixedInode.root, name: "dog.jpg", context: context) } == .noEntry)
        lib.select(Self.app, lib.asset(named: "dog.jpg")!.rowID)
        fs.refresh()
        let e = try fs.lookup(parent: FixedInode.root, name: "dog.jpg", context: context)
        #expect(e.attributes.size > 0)
        // A name that appears needs no entry invalidation (failed lookups are not cached), but
        // the root's cached listing must go; nothing is deleted.
        #expect(rec.calls == [.inode(FixedInode.root)])
    }

    @Test func aRevokeHidesTheAssetTellsTheKernelAndRefusesOpenHandles() throws {
        let (lib, fs, rec) = try make(.limited)
        let (dog, ino) = try grantDog(lib, fs)
        let h = try fs.open(ino, flags: O_RDONLY, context: context).handle
        defer { fs.release(ino, handle: h, flags: 0) }
        _ = try fs.read(ino, handle: h, offset: 0, size: 4)
        rec.clear()
        lib.deselect(Self.app, dog)
        fs.refresh()
        // Pages first, then the name, then the listing.
        // READs under way are waited for first: a reply landing after the page drop would leave its
        // pages readable through a handle opened before the revoke.
        #expect(rec.calls == [.quiesceReads, .inode(ino), .delete(parent: FixedInode.root, child: ino, name: "dog.jpg"), .inode(FixedInode.root)])
        #expect(errno { _ = try fs.lookup(parent: FixedInode.root, name: "dog.jpg", context: context) } == .noEntry)
        #expect(errno { _ = try fs.read(ino, handle: h, offset: 0, size: 4) } == .accessDenied)
        #expect(try names(fs) == [])
    }

    /// A new version gets a new inode; the old one, which the kernel may still reach by the
    /// name until it receives the queued delete (or by an album's entry), stands for the current
    /// version: a save is never answered ENOENT. Opens through it drop cached pages.
    @Test func theOldInodeOfANewVersionStandsForIt() throws {
        let (lib, fs, rec) = try make(.authorized)
        let row = lib.asset(named: "beach.jpg")!.rowID
        let old = try fs.lookup(parent: FixedInode.root, name: "beach.jpg", context: context).attributes.ino
        rec.clear()
        let saved = Array("a longer, saved photo".utf8)
        try lib.saveNewVersion(row, bytes: saved)
        fs.refresh()
        let now = try fs.lookup(parent: FixedInode.root, name: "beach.jpg", context: context).attributes
        #expect(now.ino != old)
        #expect(rec.calls.contains(.delete(parent: FixedInode.root, child: old, name: "beach.jpg")))
        let (through, _) = try fs.getattr(old, handle: nil, context: context)
        #expect(through.size == UInt64(saved.count), "the old inode answers \(through.size) bytes")
        let reply = try fs.open(old, flags: O_RDONLY, context: context)
        defer { fs.release(old, handle: reply.handle, flags: 0) }
        #expect(!reply.keepCache, "cached pages of the old version were kept")
    }

    /// An `open(O_TRUNC)` for an edit through the old inode of a new version (a name the kernel
    /// has not dropped yet) is the open, then a truncate of that inode without a handle: the
    /// truncate reaches the edit the open started, as it does through the current inode. Before,
    /// it found no edit under the old inode and failed with EACCES (issue 37: tools that save in
    /// place could save once).
    @Test func aTruncateThroughTheOldInodeOfANewVersionReachesItsEdit() throws {
        let (lib, fs, _) = try make(.authorized)
        let row = try lib.addAsset("mine.jpg", owner: Self.app)
        fs.refresh()
        let old = try fs.lookup(parent: FixedInode.root, name: "mine.jpg", context: context).attributes.ino
        try lib.saveNewVersion(row, bytes: Array("the saved version".utf8))
        fs.refresh()
        #expect(try fs.lookup(parent: FixedInode.root, name: "mine.jpg", context: context).attributes.ino != old)
        let reply = try fs.open(old, flags: O_RDWR, context: context)
        defer { fs.release(old, handle: reply.handle, flags: 0) }
        let (a, _) = try fs.setattr(old, SetAttributes(size: 0), handle: nil, context: context)
        #expect(a.size == 0)
    }

    /// Strip-location turned on gives the redacted view its own inode, and the plain one is not
    /// kept standing for it: its cached pages hold the location.
    @Test func aStripChangeLeavesNoAliasToThePlainInode() throws {
        let (lib, fs, _) = try make(.authorized)
        let row = lib.asset(named: "beach.jpg")!.rowID
        let plain = try fs.lookup(parent: FixedInode.root, name: "beach.jpg", context: context).attributes.ino
        lib.setStrip(Self.app, row, true)
        fs.refresh()
        let redacted = try fs.lookup(parent: FixedInode.root, name: "beach.jpg", context: context).attributes.ino
        #expect(redacted != plain)
        // Stale, not served: the kernel looks the name up again and gets the redacted inode.
        #expect(errno { _ = try fs.getattr(plain, handle: nil, context: context) } == .stale)
        #expect(errno { _ = try fs.open(plain, flags: O_RDONLY, context: context) } == .stale)
    }

    /// An album's entry names the asset's inode too. Strip-location gives the asset a new one
    /// while the album's members (by row) stay the same: the entry must still be dropped, or the
    /// kernel keeps `Albums/X/name` on the plain inode (for its entry timeout, a day).
    @Test func aStripChangeDropsTheAssetsAlbumEntries() throws {
        let (lib, fs, rec) = try make(.authorized)
        let row = lib.asset(named: "beach.jpg")!.rowID
        let trip = try fs.mkdir(parent: FixedInode.albums, name: "Trip", mode: 0o755, context: context).attributes.ino
        try fs.link(try fs.lookup(parent: FixedInode.root, name: "beach.jpg", context: context).attributes.ino,
                    newParent: trip, newName: "beach.jpg", context: context)
        let plain = try fs.lookup(parent: trip, name: "beach.jpg", context: context).attributes.ino
        rec.clear()
        lib.setStrip(Self.app, row, true)
        fs.refresh()
        #expect(try fs.lookup(parent: trip, name: "beach.jpg", context: context).attributes.ino != plain)
        #expect(rec.calls.contains(.entry(parent: trip, name: "beach.jpg")), "\(rec.calls)")
    }

    /// Every handler called on an inode (not a name) answers ESTALE for one the view no longer
    /// has, so that the kernel looks the name up again; lookups by name keep ENOENT.
    @Test func inodeHandlersAnswerStaleForAnInodeTheViewLost() throws {
        let (lib, fs, _) = try make(.limited)
        let (dog, ino) = try grantDog(lib, fs)
        lib.deselect(Self.app, dog)
        fs.refresh()
        #expect(errno { _ = try fs.lookup(parent: FixedInode.root, name: "dog.jpg", context: context) } == .noEntry)
        #expect(errno { _ = try fs.open(ino, flags: O_RDONLY, context: context) } == .stale)
        #expect(errno { _ = try fs.getattr(ino, handle: nil, context: context) } == .stale)
        #expect(errno { _ = try fs.setattr(ino, SetAttributes(), handle: nil, context: context) } == .stale)
        #expect(errno { try fs.access(ino, mask: R_OK, context: context) } == .stale)
        #expect(errno { _ = try fs.opendir(ino, flags: 0, context: context) } == .stale)
        #expect(errno { _ = try fs.link(ino, newParent: FixedInode.root, newName: "again.jpg", context: context) } == .stale)
        // Granted back: the same inode is described again.
        lib.select(Self.app, dog)
        fs.refresh()
        #expect(try fs.getattr(ino, handle: nil, context: context).0.ino == ino)
    }

    @Test func aStatusChangeRebuildsTheViewAndDeletesEveryName() throws {
        let (lib, fs, rec) = try make(.authorized)
        let inos = try ["beach.jpg", "dog.jpg", "theirs.jpg"].map { try fs.lookup(parent: FixedInode.root, name: FileName($0), context: context).attributes.ino }
        lib.setApp(Self.app, readWrite: .denied, addOnly: .denied)
        fs.refresh()
        #expect(try names(fs) == [])
        let deleted = rec.calls.compactMap { c -> Inode? in if case .delete(FixedInode.root, let child, _) = c { return child }; return nil }
        #expect(Set(deleted).isSuperset(of: inos))
        #expect(rec.calls.contains(.delete(parent: FixedInode.root, child: FixedInode.albums, name: "Albums")))
    }

    @Test func readsOfAGrantedAssetServeItsBytes() throws {
        let (lib, fs, _) = try make(.authorized)
        _ = lib
        let ino = try fs.lookup(parent: FixedInode.root, name: "beach.jpg", context: context).attributes.ino
        let h = try fs.open(ino, flags: O_RDONLY, context: context).handle
        defer { fs.release(ino, handle: h, flags: 0) }
        guard case .file(let fd, let offset, let count) = try fs.read(ino, handle: h, offset: 0, size: 64) else {
            Issue.record("expected the original's descriptor")
            return
        }
        var buf = [UInt8](repeating: 0, count: count)
        let n = buf.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, off_t(offset)) }
        #expect(Array(buf.prefix(n)) == Array("photo bytes".utf8))
        #expect(errno { _ = try fs.open(ino, flags: O_WRONLY, context: context) } == .accessDenied)
    }

    @Test func createWriteAndCloseCommitsThroughThePort() throws {
        let (lib, fs, _) = try make(.authorized)
        let (entry, open) = try fs.create(parent: FixedInode.root, name: "new.jpg", mode: 0o644, flags: O_WRONLY | O_CREAT, context: context)
        let bytes = Array("fresh pixels".utf8)
        let n = try bytes.withUnsafeBytes { try fs.write(entry.attributes.ino, handle: open.handle, offset: 0, data: $0, context: context) }
        #expect(n == bytes.count)
        // Listed while it is being written; an asset once the close (flush) returns.
        #expect(try names(fs).contains("new.jpg"))
        #expect(lib.commits.isEmpty)
        try fs.flush(entry.attributes.ino, handle: open.handle, context: context)
        fs.release(entry.attributes.ino, handle: open.handle, flags: 0)
        #expect(lib.commits.map(\.name) == ["new.jpg"])
        #expect(lib.commits.first?.bytes == bytes)
        #expect(lib.asset(named: "new.jpg")?.owner == Self.app)
        let e = try fs.lookup(parent: FixedInode.root, name: "new.jpg", context: context)
        #expect(e.attributes.size == UInt64(bytes.count))
        #expect(try names(fs).filter { $0 == "new.jpg" }.count == 1)
    }

    /// A new file's daily limit is asked in its commit's transaction; a commit that fails before
    /// it could ask (the database busy) keeps the file to be committed later, with no limit asked
    /// again: so the limit is asked at that close, and a file past it is refused, not kept.
    @Test func aCommitThatFailsAsksTheDailyLimitBeforeTheFileIsKept() throws {
        let (lib, fs, _) = try make(.authorized)
        lib.failCommits = true
        func write(_ name: String) throws -> Errno? {
            let (entry, open) = try fs.create(parent: FixedInode.root, name: FileName(name), mode: 0o644, flags: O_WRONLY | O_CREAT, context: context)
            let bytes = Array("late pixels".utf8)
            _ = try bytes.withUnsafeBytes { try fs.write(entry.attributes.ino, handle: open.handle, offset: 0, data: $0, context: context) }
            defer { fs.release(entry.attributes.ino, handle: open.handle, flags: 0) }
            return errno { try fs.flush(entry.attributes.ino, handle: open.handle, context: context) }
        }
        // Under the limit: kept, the close says saved.
        #expect(try write("kept.jpg") == nil)
        #expect(lib.locked { lib.markedReady }.contains("kept.jpg"))
        // Past it: refused, not kept for a commit that would ask no limit.
        lib.addedBytes = fs.dailyLimit
        #expect(try write("past.jpg") == Errno(EDQUOT))
        #expect(!lib.locked { lib.markedReady }.contains("past.jpg"))
        #expect(lib.commits.isEmpty)
    }

    /// A save over a photo asks the daily limit in the transaction that commits its version, as a
    /// new file does: room other saves took after the mount's own checks is not found again
    /// (asked only before the commit, eight saves at once could each find room the others took).
    @Test func aSaveAsksTheDailyLimitInItsCommit() throws {
        let (lib, fs, _) = try make(.authorized)
        _ = try lib.addAsset("mine.jpg", owner: Self.app)
        fs.refresh()
        lib.versionsCommit = true
        func save(_ text: String) throws -> Errno? {
            let ino = try fs.lookup(parent: FixedInode.root, name: "mine.jpg", context: context).attributes.ino
            let open = try fs.open(ino, flags: O_WRONLY | O_TRUNC, context: context)
            defer { fs.release(ino, handle: open.handle, flags: 0) }
            _ = try fs.setattr(ino, SetAttributes(size: 0), handle: open.handle, context: context)
            _ = try Array(text.utf8).withUnsafeBytes { try fs.write(ino, handle: open.handle, offset: 0, data: $0, context: context) }
            return errno { try fs.flush(ino, handle: open.handle, context: context) }
        }
        #expect(try save("within the limit") == nil)
        #expect(lib.locked { lib.versionFiles }.count == 1)
        lib.locked { lib.addedByTheCommit = fs.dailyLimit }
        #expect(try save("past the limit by the commit") == Errno(EDQUOT))
        #expect(lib.locked { lib.versionFiles }.count == 1, "a save past the daily limit made a version")
        // A commit that fails before it could ask (the database busy) keeps the edit to be
        // committed later, asking no limit then: so the limit is asked at that close.
        lib.locked { lib.addedByTheCommit = 0 }
        lib.failCommits = true
        #expect(try save("kept for later") == nil)
        let kept = lib.locked { lib.markedVersionsReady }.count   // at its close, and again at its release
        #expect(kept >= 1)
        lib.addedBytes = fs.dailyLimit
        #expect(try save("past the limit, the database busy") == Errno(EDQUOT))
        #expect(lib.locked { lib.markedVersionsReady }.count == kept, "an edit past the daily limit was kept to be committed")
    }

    /// A close told saved (its file kept, the database busy) is not refused by the daily limit
    /// when its commit is made later: not a new file at a retry that fails again, nor an edit at
    /// a retry that commits.
    @Test func aCloseToldSavedIsNeverRefusedByTheDailyLimitLater() throws {
        let (lib, fs, _) = try make(.authorized)
        _ = try lib.addAsset("mine.jpg", owner: Self.app)
        fs.refresh()
        lib.versionsCommit = true
        lib.failCommits = true
        // A new file kept; past the limit by its release, whose commit fails again.
        let (entry, created) = try fs.create(parent: FixedInode.root, name: "kept.jpg", mode: 0o644, flags: O_WRONLY | O_CREAT, context: context)
        _ = try Array("kept pixels".utf8).withUnsafeBytes { try fs.write(entry.attributes.ino, handle: created.handle, offset: 0, data: $0, context: context) }
        #expect(errno { try fs.flush(entry.attributes.ino, handle: created.handle, context: context) } == nil)
        #expect(lib.locked { lib.markedReady }.contains("kept.jpg"))
        lib.addedBytes = fs.dailyLimit
        fs.release(entry.attributes.ino, handle: created.handle, flags: 0)
        #expect(try lib.refusals(Self.app).map(\.reason) == [])
        // An edit kept; past the limit by its release, whose commit goes through.
        lib.addedBytes = 0
        let ino = try fs.lookup(parent: FixedInode.root, name: "mine.jpg", context: context).attributes.ino
        let open = try fs.open(ino, flags: O_WRONLY | O_TRUNC, context: context)
        _ = try fs.setattr(ino, SetAttributes(size: 0), handle: open.handle, context: context)
        _ = try Array("an edit told saved".utf8).withUnsafeBytes { try fs.write(ino, handle: open.handle, offset: 0, data: $0, context: context) }
        #expect(errno { try fs.flush(ino, handle: open.handle, context: context) } == nil)
        #expect(lib.locked { lib.markedVersionsReady }.count == 1)
        lib.failCommits = false
        lib.addedBytes = fs.dailyLimit
        fs.release(ino, handle: open.handle, flags: 0)
        #expect(lib.locked { lib.versionFiles }.count == 1, "the edit told saved was not committed")
        #expect(try lib.refusals(Self.app).map(\.reason) == [])
    }

    /// A file told saved (kept, the database busy) and then resized is no longer the file told
    /// saved: its commit asks the limits again, as after a write.
    @Test func aFileToldSavedThenResizedAsksTheLimitsAgain() throws {
        let (lib, fs, _) = try make(.authorized)
        lib.failCommits = true
        let (entry, created) = try fs.create(parent: FixedInode.root, name: "grown.jpg", mode: 0o644, flags: O_WRONLY | O_CREAT, context: context)
        _ = try Array("kept pixels".utf8).withUnsafeBytes { try fs.write(entry.attributes.ino, handle: created.handle, offset: 0, data: $0, context: context) }
        #expect(errno { try fs.flush(entry.attributes.ino, handle: created.handle, context: context) } == nil)
        #expect(lib.locked { lib.markedReady }.contains("grown.jpg"))
        _ = try fs.setattr(entry.attributes.ino, SetAttributes(size: 4096), handle: created.handle, context: context)
        lib.failCommits = false
        lib.addedBytes = fs.dailyLimit
        fs.release(entry.attributes.ino, handle: created.handle, flags: 0)
        #expect(lib.commits.map(\.name) == [], "a file resized after it was told saved was committed past the daily limit")
    }

    /// An edit whose commit went through but whose answer was lost counts in what the app added:
    /// the daily limit asked again before the edit is kept would count it twice, and refusing it
    /// would delete the only copy of a version the catalog names.
    @Test func anEditWhoseCommitAnswerWasLostIsKeptNotRefused() throws {
        let (lib, fs, _) = try make(.authorized)
        _ = try lib.addAsset("mine.jpg", owner: Self.app)
        fs.refresh()
        lib.versionsCommit = true
        lib.locked { lib.commitsLoseTheirAnswer = true }
        let edit = Array("an edit of 600 KiB".utf8) + [UInt8](repeating: 0x5a, count: 600 << 10)
        lib.addedBytes = fs.dailyLimit - UInt64(edit.count) - 1   // room for it once, not twice
        let ino = try fs.lookup(parent: FixedInode.root, name: "mine.jpg", context: context).attributes.ino
        let open = try fs.open(ino, flags: O_WRONLY | O_TRUNC, context: context)
        defer { fs.release(ino, handle: open.handle, flags: 0) }
        _ = try fs.setattr(ino, SetAttributes(size: 0), handle: open.handle, context: context)
        _ = try edit.withUnsafeBytes { try fs.write(ino, handle: open.handle, offset: 0, data: $0, context: context) }
        #expect(errno { try fs.flush(ino, handle: open.handle, context: context) } == nil)
        let temp = try #require(lib.locked { lib.versionFiles }.first)
        #expect(FileManager.default.fileExists(atPath: temp), "the committed version's file was deleted")
        #expect(try lib.refusals(Self.app).map(\.reason) == [])
    }

    /// A file written front to back reaches its commit with its content hash, computed behind
    /// the writes (the library then does not read the whole file again); one written over in
    /// place reaches it without (the library hashes it).
    @Test func theCommitGetsTheHashComputedBehindTheWrites() throws {
        let (lib, fs, _) = try make(.authorized)
        func write(_ name: FileName, _ parts: [(offset: Int, bytes: [UInt8])]) throws {
            let (entry, open) = try fs.create(parent: FixedInode.root, name: name, mode: 0o644, flags: O_WRONLY | O_CREAT, context: context)
            for p in parts {
                _ = try p.bytes.withUnsafeBytes { try fs.write(entry.attributes.ino, handle: open.handle, offset: Int64(p.offset), data: $0, context: context) }
            }
            try fs.flush(entry.attributes.ino, handle: open.handle, context: context)
            fs.release(entry.attributes.ino, handle: open.handle, flags: 0)
        }
        let big = (0..<700_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try write("front.jpg", [(0, Array(big[0..<300_000])), (300_000, Array(big[300_000...]))])
        try write("patched.jpg", [(0, big), (0, Array("head".utf8))])
        var patched = big
        patched.replaceSubrange(0..<4, with: Array("head".utf8))
        let hashes = Dictionary(uniqueKeysWithValues: lib.locked { lib.commitHashes }.map { ($0.name, $0.hash) })
        #expect(hashes["front.jpg"] == .some(BytesHasher.hash(big)))
        // Either not hashed yet when written over (then hashed as it is now) or spoilt: never
        // the bytes before the patch.
        #expect(hashes["patched.jpg"] == .some(nil) || hashes["patched.jpg"] == .some(BytesHasher.hash(patched)))
        #expect(lib.commits.first { $0.name == "patched.jpg" }?.bytes == patched)
    }

    @Test func anEmptyFileIsNeverCommitted() throws {
        let (lib, fs, _) = try make(.authorized)
        let (entry, open) = try fs.create(parent: FixedInode.root, name: "empty.jpg", mode: 0o644, flags: O_WRONLY | O_CREAT, context: context)
        try fs.flush(entry.attributes.ino, handle: open.handle, context: context)
        fs.release(entry.attributes.ino, handle: open.handle, flags: 0)
        #expect(lib.commits.isEmpty)
        #expect(errno { _ = try fs.lookup(parent: FixedInode.root, name: "empty.jpg", context: context) } == .noEntry)
    }

    @Test func unlinkMovesToTheTrashWithoutNotifyingTheKernelAgain() throws {
        let (lib, fs, rec) = try make(.authorized)
        let ino = try fs.lookup(parent: FixedInode.root, name: "beach.jpg", context: context).attributes.ino
        rec.clear()
        try fs.unlink(parent: FixedInode.root, name: "beach.jpg", context: context)
        #expect(lib.asset(named: "beach.jpg")?.trashedDate != nil)
        #expect(errno { _ = try fs.lookup(parent: FixedInode.root, name: "beach.jpg", context: context) } == .noEntry)
        // The unlink syscall already dropped the name: notifying again would take its directory lock.
        #expect(!rec.calls.contains { if case .delete = $0 { return true }; return false })
        #expect(rec.calls.contains(.inode(ino)))
    }

    @Test func aLimitedAppMayNotDeleteWhatItDidNotCreate() throws {
        let (lib, fs, _) = try make(.limited)
        lib.select(Self.app, lib.asset(named: "dog.jpg")!.rowID)
        fs.refresh()
        #expect(errno { try fs.unlink(parent: FixedInode.root, name: "dog.jpg", context: context) } == .accessDenied)
        #expect(lib.asset(named: "dog.jpg")?.trashedDate == nil)
    }

    @Test func anAppRenamesItsOwnAssetButNoOtherOne() throws {
        let (lib, fs, _) = try make(.authorized)
        let row = try lib.addAsset("mine.jpg", owner: Self.app)
        fs.refresh()
        try fs.rename(parent: FixedInode.root, name: "mine.jpg", newParent: FixedInode.root, newName: "renamed.jpg", flags: [], context: context)
        #expect(lib.assets[row]?.ownerName == "renamed.jpg")
        #expect(errno { _ = try fs.lookup(parent: FixedInode.root, name: "mine.jpg", context: context) } == .noEntry)
        #expect(try fs.lookup(parent: FixedInode.root, name: "renamed.jpg", context: context).attributes.size > 0)
        #expect(errno {
            try fs.rename(parent: FixedInode.root, name: "dog.jpg", newParent: FixedInode.root, newName: "cat.jpg", flags: [], context: context)
        } == .accessDenied)
        #expect(lib.asset(named: "dog.jpg") != nil)
    }

    /// A save by rename over an asset whose version commits but whose source cannot then be
    /// dissolved fails, and leaves the committed version's file for recovery: deleting it left
    /// the version's row without a file when its move into the store had failed too.
    @Test func aRenameOverThatFailsAfterTheVersionCommittedKeepsItsFile() throws {
        let (lib, fs, _) = try make(.authorized)
        _ = try lib.addAsset("draft.jpg", owner: Self.app)
        _ = try lib.addAsset("photo.jpg", owner: Self.app)
        fs.refresh()
        lib.versionsCommit = true
        lib.dissolveFails = true
        #expect(errno {
            try fs.rename(parent: FixedInode.root, name: "draft.jpg", newParent: FixedInode.root, newName: "photo.jpg", flags: [], context: context)
        } != nil)
        let files = lib.locked { lib.versionFiles }
        #expect(files.count == 1)
        // The version the view showed is the one it was made from: the commit checks it again.
        let shown = try #require(lib.asset(named: "photo.jpg")?.storePath)
        #expect(lib.locked { lib.versionBases } == [lib.storeRoot + "/" + shown])
        for f in files { #expect(FileManager.default.fileExists(atPath: f), "the committed version's file was deleted") }
    }

    @Test func anAddOnlyMountShowsNothingButTakesNewFiles() throws {
        let (lib, fs, _) = try make(.authorized, access: .addOnly)
        #expect(try names(fs) == [])
        #expect(errno { _ = try fs.lookup(parent: FixedInode.root, name: "dog.jpg", context: context) } == .noEntry)
        let (entry, open) = try fs.create(parent: FixedInode.root, name: "upload.jpg", mode: 0o644, flags: O_WRONLY | O_CREAT, context: context)
        _ = try Array("new".utf8).withUnsafeBytes { try fs.write(entry.attributes.ino, handle: open.handle, offset: 0, data: $0, context: context) }
        try fs.flush(entry.attributes.ino, handle: open.handle, context: context)
        fs.release(entry.attributes.ino, handle: open.handle, flags: 0)
        #expect(lib.commits.map(\.name) == ["upload.jpg"])
        // Still nothing listed, and the asset it became cannot be read back.
        #expect(try names(fs) == [])
        #expect(errno { _ = try fs.open(entry.attributes.ino, flags: O_RDONLY, context: context) } == .noEntry)
    }

    @Test func albumsAreMadeAndRemovedThroughThePort() throws {
        let (lib, fs, _) = try make(.authorized)
        let e = try fs.mkdir(parent: FixedInode.albums, name: "Trip", mode: 0o755, context: context)
        #expect(e.attributes.isDirectory)
        #expect(lib.albums["Trip"] == [])
        #expect(errno { _ = try fs.mkdir(parent: FixedInode.albums, name: "Trip", mode: 0o755, context: context) } == .exists)
        try fs.rename(parent: FixedInode.root, name: "dog.jpg", newParent: e.attributes.ino, newName: "dog.jpg", flags: [], context: context)
        #expect(try names(fs, e.attributes.ino) == ["dog.jpg"])
        #expect(errno { try fs.rmdir(parent: FixedInode.albums, name: "Trip", context: context) } == .notEmpty)
        try fs.unlink(parent: e.attributes.ino, name: "dog.jpg", context: context)
        try fs.rmdir(parent: FixedInode.albums, name: "Trip", context: context)
        #expect(lib.albums["Trip"] == nil)
        #expect(lib.asset(named: "dog.jpg")?.trashedDate == nil)
    }

    @Test func aRequestWrittenToTheControlFileIsRecorded() throws {
        let (lib, fs, _) = try make(.limited)
        let ino = try fs.lookup(parent: FixedInode.control, name: "request", context: context).attributes.ino
        #expect(errno { _ = try fs.open(ino, flags: O_RDONLY, context: context) } == .accessDenied)
        let h = try fs.open(ino, flags: O_WRONLY, context: context).handle
        _ = try Array("read-write\nto edit the trip\n".utf8).withUnsafeBytes { try fs.write(ino, handle: h, offset: 0, data: $0, context: context) }
        try fs.flush(ino, handle: h, context: context)
        fs.release(ino, handle: h, flags: 0)
        #expect(lib.requests.count == 1)
        #expect(lib.requests.first?.1 == .readWrite)
        #expect(lib.requests.first?.2 == "to edit the trip")
    }

    /// Opens of `.photogate/refused` and `status` at the same content share one buffer (each kept
    /// a copy until its close: 19,900 opens held 170 MB); another user's opens of the control
    /// files count in its share of the descriptor budget until their release.
    @Test func controlFileOpensShareTheirContentAndCountInAnotherUsersShare() throws {
        let (lib, fs, _) = try make(.authorized)
        try lib.recordRefusal(Self.app, name: "notes.jpg", reason: "not a photo")
        func content(_ h: UInt64) -> [UInt8]? { (fs.openHandle(h) as? SnapshotHandle)?.content }
        func buffer(_ b: [UInt8]?) -> UnsafeRawPointer? { b?.withUnsafeBytes { $0.baseAddress } }
        for ino in [FixedInode.refused, FixedInode.status] {
            let a = try fs.open(ino, flags: O_RDONLY, context: context).handle
            let b = try fs.open(ino, flags: O_RDONLY, context: context).handle
            #expect(content(a) != nil && !(content(a)?.isEmpty ?? true))
            #expect(buffer(content(a)) == buffer(content(b)), "inode \(ino): two opens at the same content hold two copies")
            if ino == FixedInode.refused {
                try lib.recordRefusal(Self.app, name: "more.jpg", reason: "not a photo")
                let c = try fs.open(ino, flags: O_RDONLY, context: context).handle
                #expect(String(decoding: content(c) ?? [], as: UTF8.self).contains("more.jpg"), "a later open sees the new content")
                #expect(!String(decoding: content(a) ?? [], as: UTF8.self).contains("more.jpg"), "an earlier open keeps its own")
                fs.release(ino, handle: c, flags: 0)
            }
            fs.release(ino, handle: a, flags: 0)
            fs.release(ino, handle: b, flags: 0)
        }
        let user: UInt32 = 3_777_001
        let other = RequestContext(uid: user, gid: user, pid: getpid(), umask: 0o022)
        // `refused` is the owner's alone (the names the app tried to save, through any mount).
        #expect(errno { _ = try fs.open(FixedInode.refused, flags: O_RDONLY, context: other) } == .accessDenied)
        #expect(FDBudget.mount.heldByOthers(user: user) == 0)
        var held: [(Inode, UInt64)] = []
        for ino in [FixedInode.status, FixedInode.changes] {
            held.append((ino, try fs.open(ino, flags: O_RDONLY, context: other).handle))
        }
        #expect(FDBudget.mount.heldByOthers(user: user) == 2)
        while true {
            do { held.append((FixedInode.status, try fs.open(FixedInode.status, flags: O_RDONLY, context: other).handle)) } catch {
                #expect(error == Errno(EMFILE))
                break
            }
            if held.count > FDBudget.mount.perUserLimit { break }
        }
        #expect(held.count == FDBudget.mount.perUserLimit, "another user held \(held.count) opens of control files")
        for (ino, h) in held { fs.release(ino, handle: h, flags: 0) }
        #expect(FDBudget.mount.heldByOthers(user: user) == 0, "released opens were not given back")
    }

    @Test func statfsCountsOnlyTheVisibleBytes() throws {
        let (lib, fs, _) = try make(.limited)
        let before = try fs.statfs(FixedInode.root)
        lib.select(Self.app, lib.asset(named: "dog.jpg")!.rowID)
        fs.refresh()
        let after = try fs.statfs(FixedInode.root)
        #expect(after.blocks - after.blocksFree == 1)
        #expect(before.blocks - before.blocksFree == 0)
    }

    /// Free space is what the app may still add today (its daily limit less what it added),
    /// in 64 MiB steps: never the disk's, which moved with every hidden import and grant, and
    /// which an app that parked its own writes on a step's edge read a 349-byte import in.
    @Test func statfsFreeSpaceIsTheAppsOwnAllowanceNotTheDisks() throws {
        let (lib, fs, _) = try make(.limited)
        let s = try fs.statfs(FixedInode.root)
        #expect(s.blockSize > 0)
        #expect((s.blocksFree * s.blockSize) % (64 << 20) == 0, "free space \(s.blocksFree * s.blockSize) is not in 64 MiB steps")
        #expect(s.blocksAvailable == s.blocksFree)
        #expect(s.blocksFree * s.blockSize == fs.dailyLimit / (64 << 20) * (64 << 20))
        // What the app added itself counts (a fresh daemon asks the library).
        lib.addedBytes = 200 << 20
        let fs2 = try PhotoFS(library: lib, app: Self.app, access: .readWrite, passthrough: false)
        let t = try fs2.statfs(FixedInode.root)
        #expect(t.blocksFree * t.blockSize == (fs2.dailyLimit - (200 << 20)) / (64 << 20) * (64 << 20))
    }
}
