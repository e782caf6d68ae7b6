import Foundation
import Testing
import TestSupport
@testable import GrantStore
@testable import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

/// `Verifier` in process: the repairs the CLI tests cannot set up from outside.
@Suite(.serialized) struct Verification {
    /// An edited photo's original (and earlier edits) are store files no asset row names: verify
    /// checks them against their versions' hashes and --repair never moves them away.
    @Test func originalsOfEditedPhotosAreVerifiedAndNeverOrphans() throws {
        let t = try TempLibrary()
        let editor = AppID("org.example.Editor")!
        try t.library.authorize(editor, access: .readWrite, status: .authorized)
        let a = try #require(try t.importJPEGs(["e.jpg"]).first)
        let originalPath = try t.library.originalPath(a)
        let before = try EditHelp.sha(originalPath)
        #expect(try EditHelp.save(t, a.rowID, app: editor, try TestMedia.jpeg(tag: "edit 1")).changed)
        #expect(try EditHelp.save(t, a.rowID, app: editor, try TestMedia.jpeg(tag: "edit 2")).changed)
        let clean = try Verifier(library: t.library).run()
        #expect(clean.ok, "\(clean.problems.map { "\($0.kind) \($0.path)" })")
        let repaired = try Verifier(library: t.library, options: VerifyOptions(repair: true)).run()
        #expect(repaired.ok)
        #expect(try EditHelp.sha(originalPath) == before, "the original moved or changed")
        // A flipped byte in the original is found, as for any asset.
        let fd = open(originalPath, O_RDWR)
        var byte: [UInt8] = [0]
        #expect(pread(fd, &byte, 1, 100) == 1)
        #expect(pwrite(fd, [~byte[0]], 1, 100) == 1)
        close(fd)
        let damaged = try Verifier(library: t.library).run()
        #expect(!damaged.ok)
        #expect(damaged.problems.contains { $0.kind == .damaged })
    }

    /// An app may save the bytes of an existing photo (app writes are not deduplicated): the
    /// other asset's verified original is then a source for a missing one.
    @Test func aMissingOriginalIsRestoredFromAnotherAssetWithTheSameBytes() throws {
        let t = try TempLibrary()
        let bytes = try TestMedia.jpeg(tag: "twice")
        let src = t.dir + "/twice.jpg"
        try TestMedia.write(bytes, to: src)
        let imported = try #require(try Importer(library: t.library, options: ImportOptions()).run([src]).imported.first)
        let writer = try StoreWriter(library: t.library, purpose: "test")
        let (id, temp, fd) = try writer.makeTemp(extension: "part")
        _ = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        let saved = try writer.commitAppFile(tempPath: temp, fd: fd, id: id, app: camera, name: "saved.jpg").asset
        close(fd)
        #expect(saved.contentHash == imported.contentHash)
        let path = try t.library.originalPath(imported)
        #expect(unlink(path) == 0)

        let report = try Verifier(library: t.library).run()
        #expect(!report.ok)
        #expect(report.problems.map(\.kind) == [.missing])
        #expect(report.problems.first?.action?.contains("from a copy of store/") == true)
        #expect(!FileManager.default.fileExists(atPath: path), "verify without repair changed the store")

        let repaired = try Verifier(library: t.library, options: VerifyOptions(repair: true)).run()
        #expect(repaired.ok, "\(repaired.problems)")
        #expect(FileManager.default.contents(atPath: path).map { [UInt8]($0) } == bytes)
        #expect(try Verifier(library: t.library).run().problems.isEmpty)
    }

    /// A mount that died after an app's close succeeded: verify counts the file to commit, and
    /// repair commits it as the app's asset (as the next mount would), discarding the unmarked one.
    @Test func aDeadMountFolderIsReportedThenRecovered() throws {
        let t = try TempLibrary()
        try t.importJPEGs(["a.jpg"])
        let writer = try StoreWriter(library: t.library, purpose: "test")
        for (i, ready) in [true, false].enumerated() {
            let (_, temp, fd) = try writer.makeTemp(extension: "part")
            let bytes = try TestMedia.jpeg(tag: "dead-\(i)")
            _ = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
            if ready { try writer.markReady(tempPath: temp, fd: fd, app: camera, name: "kept.jpg", album: nil) }
            close(fd)
        }
        let dead = t.library.paths.tmp + "/mount-999999-dead"
        #expect(rename(writer.tmpDir, dead) == 0)
        try "".write(toFile: dead + "/.lock", atomically: true, encoding: .utf8)

        let report = try Verifier(library: t.library).run()
        let d = try #require(report.problems.first { $0.kind == .deadTemp })
        #expect(d.detail.contains("1 to commit") && d.detail.contains("1 incomplete"), "\(d.detail)")
        #expect(FileManager.default.fileExists(atPath: dead))

        let repaired = try Verifier(library: t.library, options: VerifyOptions(repair: true)).run()
        #expect(repaired.ok, "\(repaired.problems)")
        #expect(!FileManager.default.fileExists(atPath: dead))
        #expect(try t.library.assets().filter { $0.owner == camera }.map { $0.ownerName } == ["kept.jpg"])
        #expect(try Verifier(library: t.library).run().problems.isEmpty)
    }

    /// One thread or many: the same findings.
    @Test func hashingThreadsDoNotChangeTheResult() throws {
        let t = try TempLibrary()
        let assets = try t.importJPEGs((0..<40).map { "p\($0).jpg" })
        for a in assets.prefix(5) {
            let fd = open(try t.library.originalPath(a), O_RDWR)
            var b: UInt8 = 0x55
            _ = pwrite(fd, &b, 1, 40)
            close(fd)
        }
        let one = try Verifier(library: t.library, options: VerifyOptions(threads: 1)).run()
        let many = try Verifier(library: t.library, options: VerifyOptions(threads: 6)).run()
        #expect(one.problems.count == 5)
        #expect(one.problems == many.problems)
        #expect(one.filesHashed == 40 && many.filesHashed == 40)
        #expect(one.bytesHashed == many.bytesHashed)
    }
}
