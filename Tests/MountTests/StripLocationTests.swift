import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 5 through real mounts: with strip-location an app reads every file with its location
/// bytes zeroed in place; exiftool is the independent judge.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct StripLocation {
    let app = "org.example.Viewer"

    /// Location tags exiftool still reports with a real value.
    static func locationLeft(in path: String) throws -> [String] {
        let o = try TestSupport.run("exiftool", ["-a", "-G1", "-n", "-j", path])
        guard let obj = (try JSONSerialization.jsonObject(with: Data(o.stdout.utf8)) as? [[String: Any]])?.first else { return ["unreadable"] }
        let pattern = ["GPSLatitude", "GPSLongitude", "GPSAltitude", "GPSPosition", "GPSCoordinates", "LocationInformation", "Location"]
        var left: [String] = []
        for (k, v) in obj {
            let tag = k.split(separator: ":").last.map(String.init) ?? k
            guard pattern.contains(where: { tag == $0 || tag.hasPrefix($0) }), !tag.hasSuffix("Ref") else { continue }
            if let n = v as? NSNumber, n.doubleValue == 0 { continue }
            if let s = v as? String, s.trimmingCharacters(in: CharacterSet(charactersIn: " 0.+-/")).isEmpty { continue }
            left.append("\(k)=\(v)")
        }
        return left
    }

    /// A JPEG whose EXIF block has a broken TIFF header: its location cannot be found with confidence.
    static func unparseableJPEG() throws -> [UInt8] {
        let base = try TestMedia.jpeg(tag: "broken")
        let exif: [UInt8] = Array("Exif".utf8) + [0, 0] + Array("ZZ".utf8) + [0, 42, 0, 0, 0, 8] + [UInt8](repeating: 7, count: 24)
        let len = exif.count + 2
        return [0xFF, 0xD8, 0xFF, 0xE1, UInt8(len >> 8), UInt8(len & 0xff)] + exif + Array(base[2...])
    }

    func makeFiles(_ dir: String) throws -> [String] {
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        var names: [String] = []
        try TestMedia.write(TestMedia.jpeg(tag: "strip", gps: true), to: dir + "/gps.jpg"); names.append("gps.jpg")
        try TestMedia.write(TestMedia.png(), to: dir + "/gps.png")
        var o = try TestSupport.run("exiftool", ["-overwrite_original", "-q", "-GPSLatitude=48.8566", "-GPSLatitudeRef=N",
                                                 "-GPSLongitude=2.3522", "-GPSLongitudeRef=E", dir + "/gps.png"])
        #expect(o.status == 0, "\(o.stderr)"); names.append("gps.png")
        o = try TestSupport.run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=duration=1:size=64x48:rate=5",
                                           "-pix_fmt", "yuv420p", "-metadata", "location=+48.8566+002.3522/", dir + "/gps.mp4"])
        #expect(o.status == 0, "\(o.stderr)"); names.append("gps.mp4")
        o = try TestSupport.run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=duration=1:size=64x48:rate=5",
                                           "-pix_fmt", "yuv420p", "-movflags", "use_metadata_tags",
                                           "-metadata", "com.apple.quicktime.location.ISO6709=+48.8566+002.3522+035.000/", dir + "/gps.mov"])
        #expect(o.status == 0, "\(o.stderr)"); names.append("gps.mov")
        for n in names { #expect(!(try Self.locationLeft(in: dir + "/" + n)).isEmpty, "the \(n) fixture has no location to strip") }
        return names
    }

    @Test func strippedReadsCarryNoLocationAndOnlyPlannedBytesDiffer() throws {
        let f = try MountFixture()
        let src = f.dir + "/src"
        let names = try makeFiles(src)
        try f.pg("import", src)
        try f.pg("authorize", app, "--status", "authorized")
        try f.pg("options", app, "--strip-location", "on")
        let mp = try f.mount(app)
        let out = f.dir + "/out"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        for n in names {
            let original = try #require(readAll(src + "/" + n))
            let served = try #require(readAll(mp + "/" + n), "\(n) unreadable through the mount")
            #expect(served.count == original.count, "\(n): size must not change")
            try TestMedia.write(served, to: out + "/" + n)
            let left = try Self.locationLeft(in: out + "/" + n)
            #expect(left.isEmpty, "\(n) still carries location: \(left)")
            // Every differing byte lies inside a range `explain` reports.
            let ex = try #require(try JSONSerialization.jsonObject(with: Data(try f.pg("explain", app, n, "--json").stdout.utf8)) as? [String: Any])
            let ranges = (ex["redactedRanges"] as? [[String: Any]] ?? []).map { (($0["offset"] as? Int) ?? 0, ($0["length"] as? Int) ?? 0) }
            #expect(!ranges.isEmpty)
            for i in 0..<original.count where original[i] != served[i] {
                if !ranges.contains(where: { i >= $0.0 && i < $0.0 + $0.1 }) {
                    Issue.record("\(n): byte \(i) changed outside every redacted range")
                    break
                }
            }
            // It still decodes.
            if n.hasSuffix(".mp4") || n.hasSuffix(".mov") {
                let p = try TestSupport.run("ffprobe", ["-v", "error", out + "/" + n])
                #expect(p.status == 0 && p.stderr.isEmpty, "\(n): \(p.stderr)")
            } else {
                let p = try TestSupport.run("identify", [out + "/" + n])
                #expect(p.status == 0, "\(n): \(p.stderr)")
            }
        }
        try f.unmount(mp)
    }

    @Test func optionReachesARunningMountAndNeverSharesPages() throws {
        let f = try MountFixture()
        try f.importPhotos(["here.jpg"], gps: true)
        try f.pg("authorize", app, "--status", "authorized")
        let mp = try f.mount(app)
        let plain = try #require(readAll(mp + "/here.jpg"))
        let plainIno = try #require(inode(mp + "/here.jpg"))
        #expect(!(try Self.locationLeft(in: mp + "/here.jpg")).isEmpty)
        try f.pg("options", app, "--strip-location", "on")
        #expect(eventually { readAll(mp + "/here.jpg") != plain })
        #expect(inode(mp + "/here.jpg") != plainIno, "a redacted view must be another inode")
        #expect(try Self.locationLeft(in: mp + "/here.jpg").isEmpty)
        try f.pg("options", app, "--strip-location", "off")
        #expect(eventually { readAll(mp + "/here.jpg") == plain })
        // Per grant: strip only what was granted that way.
        try f.pg("authorize", app, "--status", "limited")
        try f.pg("grant", app, "--strip-location", "here.jpg")
        #expect(eventually { (try? Self.locationLeft(in: mp + "/here.jpg").isEmpty) == true })
        try f.unmount(mp)
    }

    @Test func unparseableMetadataIsRefusedNotLeaked() throws {
        let f = try MountFixture()
        let broken = try Self.unparseableJPEG()
        let src = f.dir + "/src"
        try FileManager.default.createDirectory(atPath: src, withIntermediateDirectories: true)
        try TestMedia.write(Array(broken), to: src + "/odd.jpg")
        try f.pg("import", src)
        try f.pg("authorize", app, "--status", "authorized")
        let mp = try f.mount(app)
        #expect(readAll(mp + "/odd.jpg") == Array(broken))      // no strip-location: served as is
        try f.pg("options", app, "--strip-location", "on")
        #expect(eventually { openErrno(mp + "/odd.jpg", O_RDONLY) == EACCES })
        let ex = try f.pg("explain", app, "odd.jpg")
        #expect(ex.stdout.contains("refused"))
        try f.unmount(mp)
    }

    /// A referenced original edited after import (say, GPS added) is never served with the old
    /// plan or size: the open is refused, and `photogate verify` reports it.
    @Test func aReferencedOriginalChangedAfterImportIsRefused() throws {
        let f = try MountFixture()
        let src = f.dir + "/ref"
        try FileManager.default.createDirectory(atPath: src, withIntermediateDirectories: true)
        let mp = try Self.changeAfterImport(f, folder: src, name: "r.jpg", app: "org.example.RefReader")
        #expect(openErrno(mp + "/r.jpg", O_RDONLY) == EACCES)
        let v = try f.pgStatus("verify", "--json")
        #expect(v.status != 0 && v.stdout.contains("reference-changed"), "\(v.stdout)")
        try f.unmount(mp)
    }

    /// The same with location kept: such an open takes the short path (OpenFiles.swift
    /// `openForReading`, no strings built), which must check a referenced original as well.
    @Test func aReferencedOriginalChangedAfterImportIsRefusedWithLocationKept() throws {
        let f = try MountFixture()
        let src = f.dir + "/ref"
        try FileManager.default.createDirectory(atPath: src, withIntermediateDirectories: true)
        let mp = try Self.changeAfterImport(f, folder: src, name: "r.jpg", app: "org.example.RefKeeper", strip: false)
        #expect(openErrno(mp + "/r.jpg", O_RDONLY) == EACCES, "a changed referenced original was opened")
        try f.unmount(mp)
    }

    /// An original whose path is longer than the short path's stack buffer (1 KiB) is opened by
    /// the general path: read as it is, and checked for changes all the same.
    @Test func anOriginalWithAPathLongerThanTheOpensBufferIsReadAndChecked() throws {
        let f = try MountFixture()
        var src = f.dir + "/long"
        for i in 0..<5 { src += "/" + String(repeating: Character(String(i)), count: 240) }
        try FileManager.default.createDirectory(atPath: src, withIntermediateDirectories: true)
        #expect(src.utf8.count > 1100)
        let mp = try Self.changeAfterImport(f, folder: src, name: "long.jpg", app: "org.example.LongPath", strip: false)
        #expect(openErrno(mp + "/long.jpg", O_RDONLY) == EACCES, "a changed referenced original was opened")
        try f.unmount(mp)
    }

    /// Imports a JPEG in `folder` by reference, mounts it for `app` with strip-location on, reads
    /// it once, then adds GPS to the original with exiftool and moves its time on, as any edit
    /// does (a same-second edit would look unchanged by time). Returns the mount point.
    static func changeAfterImport(_ f: MountFixture, folder: String, name: String, app: String, strip: Bool = true) throws -> String {
        let original = try TestMedia.jpeg(tag: folder + name)
        try TestMedia.write(original, to: folder + "/" + name)
        try f.pg("import", "--reference", folder + "/" + name)
        try f.pg("authorize", app, "--status", "authorized")
        if strip { try f.pg("options", app, "--strip-location", "on") }
        let mp = try f.mount(app)
        let first = readAll(mp + "/" + name)
        #expect(first != nil)
        if !strip { #expect(first == original, "the original reads differently through the mount") }
        let e = try TestSupport.run("exiftool", ["-q", "-overwrite_original", "-GPSLatitude=43.3", "-GPSLatitudeRef=N", folder + "/" + name])
        #expect(e.status == 0)
        #expect(try TestSupport.run("touch", ["-d", "+5 seconds", folder + "/" + name]).status == 0)
        return mp
    }

    /// Whether an original was copied into the store is decided by the bytes of its path. A
    /// library named "café" (é composed) and a folder beside it named "café" with e + U+0301
    /// are two folders on disk, but the same string to Swift's `hasPrefix`: a referenced original
    /// under the second one's store/ counted as copied in, and was served after it changed.
    @Test func aReferenceUnderAnEquivalentlyNamedFolderIsStillChecked() throws {
        let f = try MountFixture(libraryName: "caf\u{E9}")
        let twin = f.dir + "/cafe\u{301}/store"
        try FileManager.default.createDirectory(atPath: twin, withIntermediateDirectories: true)
        var a = stat(), b = stat()
        #expect(stat(TestSupport.storeFolder(of: f.library), &a) == 0 && stat(twin, &b) == 0 && a.st_ino != b.st_ino,
                "the two folders were meant to be distinct on disk")
        let mp = try Self.changeAfterImport(f, folder: twin, name: "t.jpg", app: "org.example.TwinReader")
        #expect(openErrno(mp + "/t.jpg", O_RDONLY) == EACCES, "a changed referenced original was opened")
        try f.unmount(mp)
    }
}
