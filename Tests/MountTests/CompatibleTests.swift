import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 37, "Compatible files": an app with `options APP --compatible on` sees HEIC/HEIF photos
/// as JPEG, through real mounts, judged by libvips, ImageMagick's identify and exiftool. The HEICs
/// are made here (libvips' heifsave, libheif's x265 encoder in Debian 12), with a HEIF rotation
/// (`irot`) and an EXIF orientation as a phone writes them, a capture date and a GPS position.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct Compatible {
    let app = "org.example.OldViewer"

    // MARK: fixtures

    /// A HEIC of 400x300 stored pixels, turned a quarter (a HEIF `irot`, and EXIF Orientation 6
    /// beside it, as iPhones write): upright it is 300x400. `tag` makes its bytes its own.
    static func heic(_ path: String, tag: String, gps: Bool = true) throws {
        let png = path + ".png", plain = path + ".plain.heic"
        defer { unlink(png); unlink(plain) }
        try check(TestSupport.run("convert", ["-size", "400x300", "xc:steelblue", png]), "convert")
        try check(TestSupport.run("vips", ["copy", png, plain + "[Q=60]"]), "vips heifsave")
        var args = ["-overwrite_original", "-q", "-DateTimeOriginal=2019:05:04 10:11:12", "-Orientation#=6", "-Make=\(tag)"]
        if gps { args += ["-GPSLatitude=48.8566", "-GPSLatitudeRef=N", "-GPSLongitude=2.3522", "-GPSLongitudeRef=E"] }
        try check(TestSupport.run("exiftool", args + [plain]), "exiftool")
        try TestMedia.write(try rotated(try #require(readAll(plain)), quarterTurns: 1), to: path)
    }

    static func check(_ o: TestSupport.Output, _ what: String) throws {
        if o.status != 0 { throw FixtureError("\(what) -> \(o.status): \(o.stderr)") }
    }

    /// Adds an `irot` property to the primary item of a HEIF file written by libheif: one more
    /// property in `ipco`, associated in `ipma`; the boxes around grow and the item locations
    /// past the insertion move (`iloc`, construction method 0, as libheif writes them).
    static func rotated(_ d: [UInt8], quarterTurns: UInt8) throws -> [UInt8] {
        func be(_ o: Int, _ n: Int) -> Int { (0..<n).reduce(0) { $0 << 8 | Int(d[o + $1]) } }
        func find(_ name: String, _ from: Int, _ to: Int) throws -> (at: Int, size: Int) {
            var i = from
            while i + 8 <= to {
                let size = be(i, 4)
                guard size >= 8 else { break }
                if String(decoding: d[(i + 4)..<(i + 8)], as: UTF8.self) == name { return (i, size) }
                i += size
            }
            throw FixtureError("no \(name) box")
        }
        let meta = try find("meta", 0, d.count)
        let inner = meta.at + 12
        let iprp = try find("iprp", inner, meta.at + meta.size)
        let ipco = try find("ipco", iprp.at + 8, iprp.at + iprp.size)
        let ipma = try find("ipma", iprp.at + 8, iprp.at + iprp.size)
        let pitm = try find("pitm", inner, meta.at + meta.size)
        let primary = d[pitm.at + 8] == 0 ? be(pitm.at + 12, 2) : be(pitm.at + 12, 4)
        var properties = 0
        var i = ipco.at + 8
        while i < ipco.at + ipco.size { properties += 1; i += be(i, 4) }
        let irot: [UInt8] = [0, 0, 0, 9] + Array("irot".utf8) + [quarterTurns & 3]
        let version = d[ipma.at + 8], wide = d[ipma.at + 11] & 1 == 1
        var p = ipma.at + 12
        let count = be(p, 4); p += 4
        var entries: [UInt8] = []
        for _ in 0..<count {
            let idBytes = version < 1 ? 2 : 4
            let item = be(p, idBytes)
            entries += d[p..<(p + idBytes)]; p += idBytes
            let n = Int(d[p]); p += 1
            let w = wide ? 2 : 1
            let assoc = Array(d[p..<(p + n * w)]); p += n * w
            if item == primary {
                let index = properties + 1
                entries += [UInt8(n + 1)] + assoc + (wide ? [UInt8(0x80 | (index >> 8)), UInt8(index & 0xff)] : [UInt8(0x80 | index)])
            } else {
                entries += [UInt8(n)] + assoc
            }
        }
        let body = Array(d[(ipma.at + 8)..<(ipma.at + 12)]) + [UInt8(count >> 24), UInt8(count >> 16 & 0xff), UInt8(count >> 8 & 0xff), UInt8(count & 0xff)] + entries
        let size = 8 + body.count
        let newIpma = [UInt8(size >> 24), UInt8(size >> 16 & 0xff), UInt8(size >> 8 & 0xff), UInt8(size & 0xff)] + Array("ipma".utf8) + body
        let delta = irot.count + newIpma.count - ipma.size
        var out = Array(d[..<(ipco.at + ipco.size)]) + irot + Array(d[(ipco.at + ipco.size)..<ipma.at]) + newIpma + Array(d[(ipma.at + ipma.size)...])
        func bump(_ o: Int, _ by: Int) {
            let v = (0..<4).reduce(0) { $0 << 8 | Int(out[o + $1]) } + by
            for k in 0..<4 { out[o + k] = UInt8(v >> (24 - 8 * k) & 0xff) }
        }
        bump(ipco.at, irot.count)
        bump(iprp.at, delta)
        bump(meta.at, delta)
        // iloc: extents that point past the insertion (the mdat, after meta) move by delta.
        func ob(_ o: Int, _ n: Int) -> Int { (0..<n).reduce(0) { $0 << 8 | Int(out[o + $1]) } }
        var iloc = meta.at + 12
        while iloc < meta.at + meta.size + delta {
            if String(decoding: out[(iloc + 4)..<(iloc + 8)], as: UTF8.self) == "iloc" { break }
            iloc += ob(iloc, 4)
        }
        var q = iloc + 8
        let v = out[q]; q += 4
        let offsetSize = Int(out[q] >> 4), lengthSize = Int(out[q] & 15), baseSize = Int(out[q + 1] >> 4)
        let indexSize = v == 1 || v == 2 ? Int(out[q + 1] & 15) : 0
        q += 2
        let items = v < 2 ? ob(q, 2) : ob(q, 4); q += v < 2 ? 2 : 4
        for _ in 0..<items {
            q += v < 2 ? 2 : 4
            let method = v == 1 || v == 2 ? ob(q, 2) & 15 : 0
            if v == 1 || v == 2 { q += 2 }
            q += 2
            let base = ob(q, baseSize); q += baseSize
            let extents = ob(q, 2); q += 2
            for _ in 0..<extents {
                q += indexSize
                let offset = ob(q, offsetSize)
                if method == 0 && offset + base > ipma.at {
                    let moved = offset + delta
                    for k in 0..<offsetSize { out[q + k] = UInt8(moved >> (8 * (offsetSize - 1 - k)) & 0xff) }
                }
                q += offsetSize + lengthSize
            }
        }
        return out
    }

    /// A HEIC whose structure is whole (import takes it) but whose data (the coded image, and
    /// its EXIF) is all 0xFF: no decoder makes a picture of it.
    static func corruptHEIC(_ path: String) throws {
        let png = path + ".png"
        defer { unlink(png) }
        try check(TestSupport.run("convert", ["-size", "400x300", "xc:steelblue", png]), "convert")
        try check(TestSupport.run("vips", ["copy", png, path + "[Q=60]"]), "vips heifsave")
        var d = try #require(readAll(path))
        var mdat = 0
        while mdat + 4 < d.count && !(d[mdat] == 0x6d && d[mdat + 1] == 0x64 && d[mdat + 2] == 0x61 && d[mdat + 3] == 0x74) { mdat += 1 }
        guard mdat + 8 < d.count else { throw FixtureError("no mdat") }
        for k in (mdat + 4)..<d.count { d[k] = 0xFF }
        try TestMedia.write(d, to: path)
    }

    /// exiftool's tags of a file, by name (-n: numbers as numbers).
    static func tags(_ path: String) throws -> [String: Any] {
        let o = try TestSupport.run("exiftool", ["-j", "-n", path])
        return (try JSONSerialization.jsonObject(with: Data(o.stdout.utf8)) as? [[String: Any]])?.first ?? [:]
    }

    /// libvips' width and height of a file (for a HEIF: upright, as libheif decodes it).
    static func dimensions(_ path: String) throws -> (Int, Int) {
        let w = try TestSupport.run("vipsheader", ["-f", "width", path]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let h = try TestSupport.run("vipsheader", ["-f", "height", path]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        return (Int(w) ?? -1, Int(h) ?? -1)
    }

    static func size(_ path: String) -> Int64? {
        var st = stat()
        return stat(path, &st) == 0 ? Int64(st.st_size) : nil
    }

    /// The cache's JPEGs (and failure marks), by path, with their inode and change time.
    static func cached(_ library: String) -> [String: (ino: UInt64, ctime: Int)] {
        var out: [String: (UInt64, Int)] = [:]
        let root = library + "/cache/compatible"
        for folder in (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [] {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: root + "/" + folder)) ?? [] {
                var st = stat()
                if stat(root + "/" + folder + "/" + name, &st) == 0 {
                    out[folder + "/" + name] = (UInt64(st.st_ino), st.st_ctim.tv_sec * 1_000_000_000 + st.st_ctim.tv_nsec)
                }
            }
        }
        return out
    }

    /// A library with IMG_0001.HEIC (rotated, dated, located) and a real photo.jpg, and `app`.
    func library(_ f: MountFixture) throws -> String {
        let src = f.dir + "/src"
        try FileManager.default.createDirectory(atPath: src, withIntermediateDirectories: true)
        try Self.heic(src + "/IMG_0001.HEIC", tag: "one")
        try TestMedia.write(TestMedia.jpeg(tag: "photo"), to: src + "/photo.jpg")
        try f.pg("import", src)
        return src
    }

    // MARK: tests

    @Test func aLimitedAppReadsItsHEICAsAJPEGUprightWithItsDate() throws {
        let f = try MountFixture()
        let src = try library(f)
        try f.pg("authorize", app, "--status", "limited")
        try f.pg("grant", app, "IMG_0001.HEIC", "photo.jpg")
        try f.pg("options", app, "--compatible", "on")
        let apps = try f.pg("apps").stdout
        #expect(apps.contains(app) && apps.contains("compatible"), "\(apps)")
        let mp = try f.mount(app)
        let statusBytes = try #require(readAll(mp + "/.photogate/status"))
        let status = try #require(try JSONSerialization.jsonObject(with: Data(statusBytes)) as? [String: Any])
        #expect((status["options"] as? [String: Any])?["compatible"] as? Bool == true, "\(status)")
        #expect(listing(mp).sorted() == ["IMG_0001.jpg", "photo.jpg"], "\(listing(mp))")
        #expect(statErrno(mp + "/IMG_0001.HEIC") == ENOENT)
        // The size told is the size read, and what cp copies.
        let told = try #require(Self.size(mp + "/IMG_0001.jpg"))
        let bytes = try #require(readAll(mp + "/IMG_0001.jpg"))
        #expect(Int64(bytes.count) == told)
        let out = f.dir + "/out"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        try Self.check(TestSupport.run("cp", [mp + "/IMG_0001.jpg", out + "/"]), "cp")
        #expect(Self.size(out + "/IMG_0001.jpg") == told)
        // A JPEG, upright (the HEIC's pixels are 400x300, turned: 300x400), orientation 1, dated.
        let identify = try TestSupport.run("identify", ["-format", "%m %w %h", out + "/IMG_0001.jpg"]).stdout
        #expect(identify == "JPEG 300 400", "\(identify)")
        let (w, h) = try Self.dimensions(src + "/IMG_0001.HEIC")
        #expect((w, h) == (300, 400), "libheif's upright size of the fixture")
        let t = try Self.tags(out + "/IMG_0001.jpg")
        #expect(t["FileType"] as? String == "JPEG")
        #expect((t["Orientation"] as? Int ?? 1) == 1, "the pixels are upright already: \(t["Orientation"] ?? "-")")
        #expect(t["DateTimeOriginal"] as? String == "2019:05:04 10:11:12", "\(t["DateTimeOriginal"] ?? "-")")
        #expect(t["Make"] as? String == "one")
        #expect(t["ProfileDescription"] as? String == "sRGB")
        // A real JPEG is served as it is.
        #expect(readAll(mp + "/photo.jpg") == readAll(src + "/photo.jpg"))
        // The JPEG is not the photo: read-only, and no save over it, by an open or by a rename.
        var st = stat()
        #expect(stat(mp + "/IMG_0001.jpg", &st) == 0 && st.st_mode & 0o777 == 0o444)
        #expect(errnoOf { access(mp + "/IMG_0001.jpg", W_OK) } == EACCES)
        #expect(openErrno(mp + "/IMG_0001.jpg", O_WRONLY | O_TRUNC) == EACCES)
        #expect(openErrno(mp + "/IMG_0001.jpg", O_RDWR) == EACCES)
        try TestMedia.write(TestMedia.jpeg(tag: "over"), to: mp + "/new.jpg")
        #expect(errnoOf { rename(mp + "/new.jpg", mp + "/IMG_0001.jpg") } == EACCES)
        let ex = try #require(try JSONSerialization.jsonObject(with: Data(try f.pg("explain", app, "IMG_0001.jpg", "--json").stdout.utf8)) as? [String: Any])
        #expect(ex["compatible"] as? Bool == true)
        #expect((ex["edit"] as? [String: Any])?["decision"] as? String == "never")
        #expect(readAll(mp + "/IMG_0001.jpg") == bytes, "refused writes changed nothing")
        let versions = try f.pg("versions", "IMG_0001.HEIC").stdout
        #expect(!versions.contains("org.example"), "no version was saved: \(versions)")
        try f.unmount(mp)
    }

    @Test func aSecondOpenIsServedFromTheCache() throws {
        let f = try MountFixture()
        try library(f)
        try f.pg("authorize", app, "--status", "authorized")
        try f.pg("options", app, "--compatible", "on")
        #expect(Self.cached(f.library).isEmpty)
        var mp = try f.mount(app)
        let first = try #require(readAll(mp + "/IMG_0001.jpg"))
        let made = Self.cached(f.library)
        #expect(made.count == 1, "one JPEG made: \(made.keys)")
        let (path, file) = try #require(made.first)
        #expect(path.hasSuffix(".jpg"))
        // Private to the library's owner.
        var st = stat()
        #expect(stat(f.library + "/cache/compatible/" + path, &st) == 0 && st.st_mode & 0o777 == 0o600)
        #expect(stat(f.library + "/cache/compatible", &st) == 0 && st.st_mode & 0o777 == 0o700)
        // Another daemon (the kernel's caches went with the first): the same file, not made again.
        try f.unmount(mp)
        mp = try f.mount(app)
        #expect(Self.size(mp + "/IMG_0001.jpg") == Int64(first.count))
        #expect(readAll(mp + "/IMG_0001.jpg") == first)
        let after = Self.cached(f.library)
        #expect(after.count == 1 && after[path]?.ino == file.ino && after[path]?.ctime == file.ctime,
                "the cached JPEG was made again: \(made) -> \(after)")
        try f.unmount(mp)
        // Deleted for good, the photo leaves no copy of its pixels in the cache.
        try f.pg("delete", "IMG_0001.HEIC")
        #expect(Self.cached(f.library).count == 1, "Recently Deleted keeps it (it may come back)")
        try f.pg("trash", "--delete", "IMG_0001.HEIC")
        #expect(Self.cached(f.library).isEmpty)
    }

    @Test func aNoOpenMountReadsTheSameJPEG() throws {
        let f = try MountFixture()
        try library(f)
        try f.pg("authorize", app, "--status", "authorized")
        try f.pg("options", app, "--compatible", "on")
        let normal = try f.mount(app)
        let jpeg = try #require(readAll(normal + "/IMG_0001.jpg"))
        let noOpen = try f.mount(app, extra: ["--no-open"])
        #expect(Self.size(noOpen + "/IMG_0001.jpg") == Int64(jpeg.count))
        #expect(readAll(noOpen + "/IMG_0001.jpg") == jpeg)
        try f.unmount(noOpen)
        try f.unmount(normal)
    }

    @Test func stripLocationServesAJPEGWithoutGPS() throws {
        let f = try MountFixture()
        try library(f)
        let viewer = "org.example.PlainViewer"
        for a in [app, viewer] {
            try f.pg("authorize", a, "--status", "authorized")
            try f.pg("options", a, "--compatible", "on")
        }
        try f.pg("options", app, "--strip-location", "on")
        let stripped = try f.mount(app), plain = try f.mount(viewer)
        let out = f.dir + "/out"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        try Self.check(TestSupport.run("cp", [plain + "/IMG_0001.jpg", out + "/plain.jpg"]), "cp")
        try Self.check(TestSupport.run("cp", [stripped + "/IMG_0001.jpg", out + "/stripped.jpg"]), "cp")
        // The position is carried where the app may have it, and only there.
        #expect(!(try StripLocation.locationLeft(in: out + "/plain.jpg")).isEmpty, "the fixture's GPS is carried over")
        #expect(try StripLocation.locationLeft(in: out + "/stripped.jpg").isEmpty)
        let t = try Self.tags(out + "/stripped.jpg")
        #expect(t.keys.filter { $0.hasPrefix("GPSL") }.isEmpty, "GPS tags left: \(t.keys.filter { $0.hasPrefix("GPS") })")
        #expect(t["DateTimeOriginal"] as? String == "2019:05:04 10:11:12")
        #expect(Self.size(stripped + "/IMG_0001.jpg") == Self.size(out + "/stripped.jpg"))
        #expect(Self.cached(f.library).keys.contains { $0.hasSuffix("-nogps.jpg") })
        try f.unmount(stripped)
        try f.unmount(plain)
    }

    @Test func theOptionReachesARunningMountBothWays() throws {
        let f = try MountFixture()
        let src = try library(f)
        try f.pg("authorize", app, "--status", "authorized")
        let mp = try f.mount(app)
        let heic = try #require(readAll(src + "/IMG_0001.HEIC"))
        #expect(readAll(mp + "/IMG_0001.HEIC") == heic)
        try f.pg("options", app, "--compatible", "on")
        #expect(eventually { statErrno(mp + "/IMG_0001.HEIC") == ENOENT && statErrno(mp + "/IMG_0001.jpg") == 0 })
        let jpeg = try #require(readAll(mp + "/IMG_0001.jpg"))
        #expect(jpeg.starts(with: [0xFF, 0xD8, 0xFF]))
        // A HEIC imported while it runs comes as a JPEG too, and the app's history names it so.
        let more = f.dir + "/more"
        try FileManager.default.createDirectory(atPath: more, withIntermediateDirectories: true)
        try Self.heic(more + "/IMG_0002.HEIC", tag: "two")
        try f.pg("import", more)
        #expect(eventually { statErrno(mp + "/IMG_0002.jpg") == 0 })
        #expect(readAll(mp + "/IMG_0002.jpg")?.starts(with: [0xFF, 0xD8, 0xFF]) == true)
        let changes = try f.pg("changes", app, "--json").stdout
        #expect(changes.contains("IMG_0002.jpg") && !changes.contains("IMG_0002.HEIC"), "\(changes)")
        try f.pg("options", app, "--compatible", "off")
        #expect(eventually { statErrno(mp + "/IMG_0001.jpg") == ENOENT && statErrno(mp + "/IMG_0001.HEIC") == 0 })
        #expect(readAll(mp + "/IMG_0001.HEIC") == heic)
        try f.unmount(mp)
    }

    @Test func aRealJPEGKeepsItsNameBesideAHEICOfTheSameStem() throws {
        let f = try MountFixture()
        let src = f.dir + "/src"
        try FileManager.default.createDirectory(atPath: src, withIntermediateDirectories: true)
        try Self.heic(src + "/IMG_0007.HEIC", tag: "seven")
        try TestMedia.write(TestMedia.jpeg(tag: "seven-jpeg"), to: src + "/IMG_0007.jpg")
        try f.pg("import", src)
        try f.pg("authorize", app, "--status", "authorized")
        try f.pg("options", app, "--compatible", "on")
        let mp = try f.mount(app)
        #expect(listing(mp).filter { $0.hasPrefix("IMG") }.sorted() == ["IMG_0007-1.jpg", "IMG_0007.jpg"], "\(listing(mp))")
        #expect(readAll(mp + "/IMG_0007.jpg") == readAll(src + "/IMG_0007.jpg"))
        #expect(try Self.tags(mp + "/IMG_0007-1.jpg")["Make"] as? String == "seven")
        let names = try f.pg("assets", "--app", app).stdout
        #expect(names.contains("IMG_0007-1.jpg"), "\(names)")
        try f.unmount(mp)
    }

    @Test func aHEICNoDecoderReadsIsEIOAndTheMountGoesOn() throws {
        let f = try MountFixture()
        try library(f)
        let bad = f.dir + "/bad"
        try FileManager.default.createDirectory(atPath: bad, withIntermediateDirectories: true)
        try Self.corruptHEIC(bad + "/BAD.HEIC")
        try f.pg("import", bad)
        try f.pg("authorize", app, "--status", "authorized")
        try f.pg("options", app, "--compatible", "on")
        let mp = try f.mount(app)
        #expect(Self.size(mp + "/BAD.jpg") == 0)
        #expect(openErrno(mp + "/BAD.jpg", O_RDONLY) == EIO)
        let o = try TestSupport.run("cp", [mp + "/BAD.jpg", f.dir + "/copy.jpg"])
        #expect(o.status != 0 && o.stderr.contains("Input/output error"), "\(o.stderr)")
        #expect(Self.cached(f.library).keys.contains { $0.hasSuffix(".failed") }, "the failure is remembered")
        // The daemon is alive and serves the rest.
        #expect(readAll(mp + "/IMG_0001.jpg")?.starts(with: [0xFF, 0xD8, 0xFF]) == true)
        #expect(openErrno(mp + "/BAD.jpg", O_RDONLY) == EIO)
        let mounts = try f.pg("mounts").stdout
        #expect(mounts.contains(mp), "\(mounts)")
        try f.unmount(mp)
    }
}
