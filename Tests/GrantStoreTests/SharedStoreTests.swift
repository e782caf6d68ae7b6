import Foundation
import GRDB
import Synchronization
import Testing
import TestSupport
@testable import GrantStore
@testable import PhotoLibrary
import Redaction
#if canImport(Glibc)
import Glibc
#endif

/// The store and tmp/ shared by several hosts (issue 41): every rule StoreWriter's crash safety
/// stands on holds when another host's recovery or `verify` comes in at any moment. These run in
/// one process on one machine, standing in for the other host at the moments that matter.
@Suite(.serialized) struct SharedStore {
    /// A recovery (another host's mount starting, say) that comes in while a writer's temp folder
    /// is being made, after its lock file exists and before it is locked, never takes the folder
    /// for a dead one: the writer ends up with a folder of its own, locked, that it can write in.
    /// Before, the folder was made and locked in place: that recovery locked it first, found it
    /// empty and removed it, and the writer then held the lock of a file in no folder (every
    /// temp file it made failed: ENOENT, a mount whose every save failed).
    @Test func aRecoveryNeverTakesAFolderBeingMade() throws {
        let t = try TempLibrary()
        let calls = Mutex(0)
        let library = t.library
        StoreWriter.beforeFolderLock.withLock { hook in
            hook = { _ in
                guard calls.withLock({ n in n += 1; return n }) == 1 else { return }
                StoreWriter.recover(library)
            }
        }
        defer { StoreWriter.beforeFolderLock.withLock { $0 = nil } }
        let writer = try StoreWriter(library: t.library, purpose: "test")
        StoreWriter.beforeFolderLock.withLock { $0 = nil }
        #expect(calls.withLock { $0 } >= 1)
        #expect(FileManager.default.fileExists(atPath: writer.tmpDir))
        // Its folder is held: another recovery cannot take it.
        let other = Glibc.open(writer.tmpDir + "/.lock", O_RDWR | O_CLOEXEC)
        #expect(other >= 0)
        #expect(flock(other, LOCK_EX | LOCK_NB) != 0, "the writer's folder is not locked")
        close(other)
        let (id, temp, fd) = try writer.makeTemp(extension: "part")
        defer { close(fd) }
        _ = try TestMedia.jpeg(tag: "made-\(UUID())").withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        let asset = try writer.commitAppFile(tempPath: temp, fd: fd, id: id, app: camera, name: "made.jpg").asset
        #expect(FileManager.default.fileExists(atPath: t.library.paths.store + "/" + asset.storePath!))
        // Who holds it is written in its lock file, for people (`verify` names a dead one's host).
        let owner = try String(contentsOfFile: writer.tmpDir + "/.lock", encoding: .utf8)
        #expect(owner == "host \(StoreWriter.hostName()) pid \(getpid())\n")
        writer.shutDown()
        #expect(Directory.entries(t.library.paths.tmp).isEmpty, "left in tmp: \(Directory.entries(t.library.paths.tmp).map(\.0))")
        let report = try Verifier(library: t.library).run()
        #expect(report.ok, "\(report.problems.map { "\($0.kind) \($0.path) \($0.detail)" })")
    }

    /// A folder being made whose maker still holds its lock is left alone; once nobody holds it
    /// (its maker died), or when it has no lock file yet, the next recovery removes it; `verify`
    /// reports none of them (they never hold a writer's file).
    @Test func foldersBeingMadeAreRemovedOnlyOnceTheirMakerIsGone() throws {
        let t = try TempLibrary()
        let tmp = t.library.paths.tmp
        let held = tmp + "/" + StoreWriter.newFolderPrefix + "00000000000000aa"
        let dead = tmp + "/" + StoreWriter.newFolderPrefix + "00000000000000bb"
        let bare = tmp + "/" + StoreWriter.newFolderPrefix + "00000000000000cc"
        let gone = tmp + "/" + StoreWriter.goneFolderPrefix + "00000000000000dd"
        for d in [held, dead, bare, gone] { #expect(mkdir(d, 0o700) == 0) }
        let fd = Glibc.open(held + "/.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        #expect(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0)
        for d in [dead, gone] { close(Glibc.open(d + "/.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)) }
        let report = try Verifier(library: t.library).run()
        #expect(report.problems.isEmpty, "\(report.problems.map { "\($0.kind) \($0.path) \($0.detail)" })")
        StoreWriter.recover(t.library)
        #expect(Directory.entries(tmp).map(\.0) == [(held as NSString).lastPathComponent])
        close(fd)
        // A process another test spawns at this moment holds a copy of the descriptor until its
        // exec: the lock is let go of once it is.
        #expect(eventually {
            let probe = Glibc.open(held + "/.lock", O_RDWR | O_CLOEXEC)
            defer { if probe >= 0 { close(probe) } }
            return probe >= 0 && flock(probe, LOCK_EX | LOCK_NB) == 0
        })
        StoreWriter.recover(t.library)
        #expect(Directory.entries(tmp).isEmpty)
    }

    /// `verify`, on any host, while a writer (on any host) is between its row's commit and the
    /// rename of its file into the store: the asset is not reported missing, and `--repair`
    /// touches nothing of the writer's. Before, verify reported it missing (and repair "restored"
    /// it from another asset with the same bytes, then the writer's rename replaced that).
    @Test func verifyLeavesAWriterBetweenItsRowAndItsRenameAlone() throws {
        let t = try TempLibrary()
        let writer = try StoreWriter(library: t.library, purpose: "test")
        let (id, temp, fd) = try writer.makeTemp(extension: "part")
        defer { close(fd) }
        _ = try TestMedia.jpeg(tag: "in-flight-\(UUID())").withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        #expect(fsync(fd) == 0)
        // The commit's first half: the row, and not yet the rename.
        let (scan, size, date) = try StoreWriter.scan(fd: fd)
        let facts = NewAssetFacts(scan: scan, byteSize: size, contentHash: try StoreWriter.hash(fd: fd, size: size), fileDate: date)
        let rel = StoreWriter.storeRelativePath(id: id, kind: scan.kind)
        _ = try t.library.write { db in
            try Library.ensureApp(db, camera)
            return try StoreWriter.insertRow(db, id: id, name: "flight.jpg", owner: camera, ownerName: "flight.jpg", facts: facts,
                                      storePath: rel, referencePath: nil, shared: false)
        }
        let report = try Verifier(library: t.library).run()
        #expect(report.ok, "\(report.problems.map { "\($0.kind) \($0.path) \($0.detail)" })")
        let repaired = try Verifier(library: t.library, options: VerifyOptions(repair: true)).run()
        #expect(repaired.problems.isEmpty, "\(repaired.problems.map { "\($0.kind) \($0.path) \($0.detail) \($0.action ?? "")" })")
        #expect(FileManager.default.fileExists(atPath: temp), "repair touched the writer's file")
        #expect(!FileManager.default.fileExists(atPath: t.library.paths.root + "/" + LostAndFound.folder))
        // The writer's end (or its recovery) moves it, and all is well.
        writer.shutDown()
        #expect(FileManager.default.fileExists(atPath: t.library.paths.store + "/" + rel))
        let after = try Verifier(library: t.library).run()
        #expect(after.ok, "\(after.problems.map { "\($0.kind) \($0.path) \($0.detail)" })")
    }

    /// A commit that went through but whose answer was lost (a server's connection cut at
    /// COMMIT: the mount keeps the file, marked, to commit it again at its last release) is that
    /// same asset when committed again, and its file still moves into the store. Before, the
    /// second try took the file for a copy of the first one's asset (same app, same bytes),
    /// deleted it, and the asset's row named a store file that never came: verify said missing.
    @Test func aCommitWhoseAnswerWasLostIsTheSameAssetTheSecondTime() throws {
        let t = try TempLibrary()
        let writer = try StoreWriter(library: t.library, purpose: "test")
        let (id, temp, fd) = try writer.makeTemp(extension: "part")
        defer { close(fd) }
        _ = try TestMedia.jpeg(tag: "lost-answer-\(UUID())").withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        let first = try writer.commitAppFile(tempPath: temp, fd: fd, id: id, app: camera, name: "twice.jpg", reuseSameContent: .anyName)
        #expect(!first.reused)
        // As if the rename had not happened yet when the answer was lost: the file back in tmp.
        let stored = t.library.paths.store + "/" + first.asset.storePath!
        #expect(rename(stored, temp) == 0)
        let second = try writer.commitAppFile(tempPath: temp, fd: fd, id: id, app: camera, name: "twice.jpg", reuseSameContent: .anyName)
        #expect(second.asset.id == first.asset.id)
        #expect(FileManager.default.fileExists(atPath: stored), "the file never reached the store")
        #expect(try t.library.assets().filter { $0.owner == camera }.count == 1)
        writer.shutDown()
        let report = try Verifier(library: t.library).run()
        #expect(report.ok, "\(report.problems.map { "\($0.kind) \($0.path) \($0.detail)" })")
    }
}
