import Foundation
import Testing
import TestSupport
@testable import GrantStore
@testable import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

/// Referenced originals that change, move or go, and store originals that go (issue 38): the
/// advice of `verify` is a command that works, and the asset keeps its id, grants and albums.
@Suite(.serialized) struct ReferenceRefresh {
    func importReference(_ t: TempLibrary, _ path: String) throws -> ImportSummary {
        try Importer(library: t.library, options: ImportOptions(reference: true)).run([path])
    }

    func problems(_ t: TempLibrary) throws -> [VerifyProblem] {
        try Verifier(library: t.library, options: VerifyOptions()).run().problems
    }

    @Test func aChangedReferenceImportedAgainIsANewVersionOfTheSameAsset() throws {
        let t = try TempLibrary()
        let src = t.dir + "/ref"
        try FileManager.default.createDirectory(atPath: src, withIntermediateDirectories: true)
        try TestMedia.write(TestMedia.jpeg(tag: "first"), to: src + "/a.jpg")
        let a = try #require(try importReference(t, src + "/a.jpg").imported.first)
        try t.library.createAlbum("Kept")
        try t.library.addToAlbum("Kept", [a.id])
        try t.library.authorize(editor, access: .readWrite, status: .limited)
        try t.library.grant(editor, [a.id])
        // Tagged by another program: other bytes, another size (told at once, whatever the clock).
        let tagged = try TestMedia.jpeg(tag: "tagged by a photo manager")
        #expect(tagged.count != a.byteSize)
        try TestMedia.write(tagged, to: src + "/a.jpg")
        #expect(try t.library.explain(editor, asset: a.id, access: .readWrite).original == .referenceChanged)
        let changed = try #require(try problems(t).first { $0.kind == .referenceChanged })
        #expect(changed.action?.contains("photogate import --reference") == true, "\(changed)")
        // The advice, done: the same asset, a new version, grants and album kept, served again.
        let s = try importReference(t, src + "/a.jpg")
        #expect(s.imported.isEmpty && s.duplicates.isEmpty && s.repaired.map(\.asset.id) == [a.id])
        #expect(try t.library.versions(a.id).versions.count == 2)
        #expect(try t.library.grants(editor).map(\.asset.id) == [a.id])
        #expect(try t.library.assets(album: "Kept").map(\.id) == [a.id])
        let e = try t.library.explain(editor, asset: a.id, access: .readWrite)
        #expect(e.visible && e.original == .same, "\(String(describing: e.original))")
        #expect(try problems(t).isEmpty)
    }

    @Test func aMovedReferenceImportedWhereItIsNowIsReferencedThere() throws {
        let t = try TempLibrary()
        let src = t.dir + "/ref", moved = t.dir + "/moved"
        for d in [src, moved] { try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true) }
        try TestMedia.write(TestMedia.jpeg(tag: "moving"), to: src + "/a.jpg")
        let a = try #require(try importReference(t, src + "/a.jpg").imported.first)
        #expect(rename(src + "/a.jpg", moved + "/a.jpg") == 0)
        let missing = try #require(try problems(t).first { $0.kind == .referenceMissing })
        #expect(missing.action?.contains("--reference NEWPATH") == true)
        let s = try importReference(t, moved + "/a.jpg")
        #expect(s.imported.isEmpty && s.repaired.map(\.asset.id) == [a.id])
        #expect(try t.library.currentOriginal(rowID: a.rowID).path == moved + "/a.jpg")
        #expect(try problems(t).isEmpty)
    }

    @Test func aMissingStoreOriginalIsRestoredByImportingItAgain() throws {
        let t = try TempLibrary()
        let a = try #require(try t.importJPEGs(["b.jpg"]).first)
        let stored = try t.library.originalPath(a)
        let copy = t.dir + "/kept-b.jpg"
        try FileManager.default.copyItem(atPath: stored, toPath: copy)
        #expect(unlink(stored) == 0)
        let missing = try #require(try problems(t).first { $0.kind == .missing })
        #expect(missing.action?.contains("photogate import") == true, "\(missing)")
        let s = try Importer(library: t.library, options: ImportOptions()).run([copy])
        #expect(s.imported.isEmpty && s.repaired.map(\.asset.id) == [a.id])
        #expect(FileManager.default.fileExists(atPath: stored))
        #expect(try problems(t).isEmpty)
    }
}
