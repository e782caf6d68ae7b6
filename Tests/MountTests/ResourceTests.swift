import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 14, resource exhaustion: one app writing without end must not stop other apps, nor the
/// person (who must be able to deny it), and gets a clear errno.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct Resources {
    /// Writes `total` bytes of a JPEG-looking stream to an open fd in 64 KiB pieces; returns the
    /// errno of the first failing write (0 if none failed).
    func fill(_ fd: Int32, total: Int) throws -> Int32 {
        var bytes = try TestMedia.jpeg(tag: "hog")
        bytes += [UInt8](repeating: 0x42, count: 64 << 10)
        var written = 0
        while written < total {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress, min($0.count, total - written)) }
            if n < 0 { return errno }
            written += n
        }
        return 0
    }

    @Test func aMountsBytesBeingWrittenAreLimited() throws {
        let f = try MountFixture()
        let hog = "org.example.Hog", other = "org.example.Other"
        try f.pg("authorize", hog, "--status", "limited")
        try f.pg("authorize", other, "--status", "limited")
        let mp = f.dir + "/hog"
        try FileManager.default.createDirectory(atPath: mp, withIntermediateDirectories: true)
        var env = f.env
        env["PHOTOGATE_WRITE_LIMIT_MB"] = "1"
        let m = try TestSupport.run(TestSupport.photogateBinary, ["mount", hog, mp], environment: env)
        #expect(m.status == 0, "\(m.stderr)")
        defer { _ = try? TestSupport.run(TestSupport.photogateBinary, ["unmount", mp], environment: f.env); if isMounted(mp) { FUSECleanup.abortAndDetach(mp) } }
        let om = try f.mount(other)
        let fd = open(mp + "/big.jpg", O_CREAT | O_WRONLY | O_EXCL, 0o644)
        #expect(fd >= 0)
        #expect(try fill(fd, total: 2 << 20) == EDQUOT, "writing past the mount's limit")
        // Held open at the limit: other apps and the person are not stopped.
        #expect(cpWrite(try TestMedia.jpeg(tag: "other"), to: om + "/fine.jpg") == 0)
        #expect(try f.pgStatus("authorize", hog, "--status", "denied").status == 0)
        #expect(errnoOf { close(fd) } == EDQUOT)
        #expect(!(try f.assetsJSON().contains { $0["name"] as? String == "big.jpg" }))
        try f.unmount(om)
    }

    @Test func aFullDiskLeavesRoomForThePerson() throws {
        guard let base = try TestSupport.smallTmpfs("reserve", size: "16m") else { return }
        defer { TestSupport.removeTmpfs(base) }
        let lib = base + "/library"
        var env = ["PHOTOGATE_LIBRARY": lib]
        let bin = TestSupport.photogateBinary
        let app = "org.example.Filler"
        #expect(try TestSupport.run(bin, ["init"], environment: env).status == 0)
        #expect(try TestSupport.run(bin, ["authorize", app, "--status", "limited"], environment: env).status == 0)
        let mp = TestSupport.tempDir("reservemp")
        defer { _ = try? TestSupport.run(bin, ["unmount", mp], environment: ["PHOTOGATE_LIBRARY": lib]); if isMounted(mp) { FUSECleanup.abortAndDetach(mp) }; TestSupport.remove(mp) }
        env["PHOTOGATE_DISK_RESERVE_MB"] = "4"
        #expect(try TestSupport.run(bin, ["mount", app, mp], environment: env).status == 0)
        let fd = open(mp + "/fill.jpg", O_CREAT | O_WRONLY | O_EXCL, 0o644)
        #expect(fd >= 0)
        #expect(try fill(fd, total: 32 << 20) == ENOSPC)
        // The app stopped short of the reserve: the disk still has room, and the person can deny it
        // while it holds the file open.
        var st = statvfs()
        #expect(statvfs(base, &st) == 0 && UInt64(st.f_bavail) * UInt64(st.f_frsize) >= 3 << 20)
        let deny = try TestSupport.run(bin, ["authorize", app, "--status", "denied"], environment: ["PHOTOGATE_LIBRARY": lib])
        #expect(deny.status == 0, "\(deny.stderr)")
        #expect(errnoOf { close(fd) } == ENOSPC)
    }

    /// Writes JPEGs padded to `padding` bytes past their end into a new folder, and imports them
    /// into the library `env` names.
    func importPadded(_ names: [String], padding: Int, env: [String: String]) throws {
        let src = TestSupport.tempDir("padded")
        defer { TestSupport.remove(src) }
        for n in names { try TestMedia.write(try TestMedia.jpeg(tag: n) + [UInt8](repeating: 0x5a, count: padding), to: src + "/" + n) }
        let o = try TestSupport.run(TestSupport.photogateBinary, ["import", src], environment: env)
        #expect(o.status == 0, "import: \(o.stderr)")
    }

    /// An edit open copies the photo into the library's tmp/: bytes the app has being written, as
    /// if it had written them. An app holding edit opens stops short of the disk reserve (each
    /// open past it fails with ENOSPC and leaves nothing), the person can deny it while it holds
    /// them, and closing them gives the room back with nothing added. Without the count, the
    /// copies took the disk to its last bytes and `authorize --status denied` failed with ENOSPC.
    @Test func editOpensHeldStopShortOfTheReserve() throws {
        guard let base = try TestSupport.smallTmpfs("editreserve", size: "16m") else { return }
        defer { TestSupport.removeTmpfs(base) }
        let lib = base + "/library"
        var env = ["PHOTOGATE_LIBRARY": lib]
        let bin = TestSupport.photogateBinary
        let app = "org.example.EditHog"
        #expect(try TestSupport.run(bin, ["init"], environment: env).status == 0)
        // Photos of 1 MiB, then smaller ones that fit in what the big ones leave.
        let big = (0..<8).map { "big-\($0).jpg" }, small = (0..<24).map { "small-\($0).jpg" }
        try importPadded(big, padding: 1 << 20, env: env)
        try importPadded(small, padding: 48 << 10, env: env)
        #expect(try TestSupport.run(bin, ["authorize", app, "--status", "authorized"], environment: env).status == 0)
        #expect(try TestSupport.run(bin, ["options", app, "--edit-any", "on"], environment: env).status == 0)
        func assetCount() throws -> Int {
            let o = try TestSupport.run(bin, ["assets", "--json"], environment: ["PHOTOGATE_LIBRARY": lib])
            return ((try JSONSerialization.jsonObject(with: Data(o.stdout.utf8)) as? [[String: Any]]) ?? []).count
        }
        func free() -> UInt64 {
            var st = statvfs()
            return statvfs(base, &st) == 0 ? UInt64(st.f_bavail) * UInt64(st.f_frsize) : 0
        }
        let assetsBefore = try assetCount()
        #expect(assetsBefore == big.count + small.count)
        let mp = TestSupport.tempDir("editreservemp")
        defer { _ = try? TestSupport.run(bin, ["unmount", mp], environment: ["PHOTOGATE_LIBRARY": lib]); if isMounted(mp) { FUSECleanup.abortAndDetach(mp) }; TestSupport.remove(mp) }
        env["PHOTOGATE_DISK_RESERVE_MB"] = "4"
        let m = try TestSupport.run(bin, ["mount", app, mp], environment: env)
        #expect(m.status == 0, "\(m.stderr)")
        let freeBefore = free()
        var fds: [Int32] = []
        defer { for fd in fds { close(fd) } }
        var failures: [String: Int32] = [:]
        for n in big + small {
            let fd = open(mp + "/" + n, O_RDWR | O_CLOEXEC)
            if fd < 0 { failures[n] = errno } else { fds.append(fd) }
        }
        print("held \(fds.count) edit opens, \(failures.count) refused; free: \(freeBefore >> 10) KiB before, \(free() >> 10) KiB now")
        #expect(!fds.isEmpty, "no edit open succeeded")
        #expect(!failures.isEmpty, "every edit open succeeded: the test's disk is too large")
        #expect(failures.values.allSatisfy { $0 == ENOSPC }, "\(failures.mapValues { String(cString: strerror($0)) })")
        // The app stopped short of the reserve (bytes are counted, the disk rounds each copy up to
        // its blocks): the person can deny it while it holds the edits.
        #expect(free() >= (4 << 20) - (64 << 10), "the edits ate into the reserve: \(free() >> 10) KiB free")
        let deny = try TestSupport.run(bin, ["authorize", app, "--status", "denied"], environment: ["PHOTOGATE_LIBRARY": lib])
        #expect(deny.status == 0, "\(deny.stderr)")
        // Closed unchanged: nothing added, and their copies are gone.
        for fd in fds { #expect(errnoOf { close(fd) } == 0) }
        fds = []
        #expect(try assetCount() == assetsBefore)
        #expect(eventually { free() + (256 << 10) >= freeBefore }, "\(free() >> 10) KiB free, \(freeBefore >> 10) KiB before the edits")
    }

    /// The same against the mount's limit on bytes being written: an edit open past it fails with
    /// EDQUOT, a second open of a photo being edited joins that edit (nothing more is copied), and
    /// an edit's bytes stop counting when it ends (closed unchanged, saved, or refused), so the app
    /// can open as many again.
    @Test func editOpensCountAgainstTheWriteLimitUntilTheyEnd() throws {
        let f = try MountFixture()
        let names = (0..<4).map { "p\($0).jpg" }
        try importPadded(names, padding: 1 << 20, env: f.env)
        let app = "org.example.EditQuota"
        try f.pg("authorize", app, "--status", "authorized")
        try f.pg("options", app, "--edit-any", "on")
        let mp = f.dir + "/quota"
        try FileManager.default.createDirectory(atPath: mp, withIntermediateDirectories: true)
        var env = f.env
        env["PHOTOGATE_WRITE_LIMIT_MB"] = "3"   // two photos of just over 1 MiB, not three
        let m = try TestSupport.run(TestSupport.photogateBinary, ["mount", app, mp], environment: env)
        #expect(m.status == 0, "\(m.stderr)")
        defer { _ = try? TestSupport.run(TestSupport.photogateBinary, ["unmount", mp], environment: f.env); if isMounted(mp) { FUSECleanup.abortAndDetach(mp) } }
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        func edit(_ n: String) -> Int32 {
            let fd = open(mp + "/" + n, O_RDWR | O_CLOEXEC)
            if fd < 0 { return -errno }
            held.append(fd)
            return fd
        }
        func end(_ fd: Int32) -> Int32 {
            held.removeAll { $0 == fd }
            return errnoOf { close(fd) }
        }
        let a = edit("p0.jpg"), b = edit("p1.jpg")
        try #require(a >= 0 && b >= 0, "two edit opens within the limit: \(a), \(b)")
        #expect(edit("p2.jpg") == -EDQUOT, "a third edit open past the limit")
        // Closed unchanged: its bytes no longer count.
        #expect(end(a) == 0)
        let c = edit("p2.jpg")
        #expect(c >= 0, "an edit open after one closed unchanged: \(String(cString: strerror(-c)))")
        // Saved as a new version (two bytes of its padding changed): its bytes no longer count.
        let size = lseek(b, 0, SEEK_END)
        #expect(pwrite(b, Array("XY".utf8), 2, size - 2) == 2)
        #expect(end(b) == 0, "the edit is saved")
        let d = edit("p3.jpg")
        #expect(d >= 0, "an edit open after one was saved: \(String(cString: strerror(-d)))")
        // Refused (not media): its bytes no longer count.
        #expect(ftruncate(c, 0) == 0)
        #expect(write(c, "not a photo", 11) == 11)
        #expect(end(c) == EINVAL)
        let e = edit("p0.jpg")
        #expect(e >= 0, "an edit open after one was refused: \(String(cString: strerror(-e)))")
        // At the limit: a second open of a photo being edited joins its edit; another one is refused.
        let d2 = edit("p3.jpg")
        #expect(d2 >= 0, "a second open of an edit at the limit: \(String(cString: strerror(-d2)))")
        #expect(edit("p1.jpg") == -EDQUOT)
        for fd in held { #expect(errnoOf { close(fd) } == 0) }
        held = []
        let id = try #require(try f.assetsJSON().first { $0["name"] as? String == "p1.jpg" }?["id"] as? String)
        let obj = try JSONSerialization.jsonObject(with: Data(try f.pg("versions", id, "--json").stdout.utf8))
        let versions = (obj as? [[String: Any]]) ?? ((obj as? [String: Any])?["versions"] as? [[String: Any]] ?? [])
        #expect(versions.count == 2, "p1.jpg: the original and one edit: \(obj)")
        #expect(try f.assetsJSON().count == names.count, "nothing added")
        let unmount = try TestSupport.run(TestSupport.photogateBinary, ["unmount", mp], environment: f.env)
        #expect(unmount.status == 0, "\(unmount.stderr)")
    }

    /// A save that empties the photo at its open (open O_TRUNC: one request, issue 39) copies
    /// nothing of the version it replaces, so it is charged nothing against the limit at its
    /// open: with the limit spent by two edits open in place, an O_TRUNC open of a third photo
    /// works (it got EDQUOT when every open copied the version first) and saves a new version.
    @Test func aSaveThatEmptiesThePhotoAtItsOpenCopiesNothing() throws {
        let f = try MountFixture()
        let names = (0..<3).map { "p\($0).jpg" }
        try importPadded(names, padding: 1 << 20, env: f.env)
        let app = "org.example.TruncQuota"
        try f.pg("authorize", app, "--status", "authorized")
        try f.pg("options", app, "--edit-any", "on")
        let mp = f.dir + "/trunc"
        try FileManager.default.createDirectory(atPath: mp, withIntermediateDirectories: true)
        var env = f.env
        env["PHOTOGATE_WRITE_LIMIT_MB"] = "3"   // two photos of just over 1 MiB, not three
        let m = try TestSupport.run(TestSupport.photogateBinary, ["mount", app, mp], environment: env)
        #expect(m.status == 0, "\(m.stderr)")
        defer { _ = try? TestSupport.run(TestSupport.photogateBinary, ["unmount", mp], environment: f.env); if isMounted(mp) { FUSECleanup.abortAndDetach(mp) } }
        let a = open(mp + "/p0.jpg", O_RDWR | O_CLOEXEC), b = open(mp + "/p1.jpg", O_RDWR | O_CLOEXEC)
        #expect(a >= 0 && b >= 0, "two edit opens within the limit")
        #expect(openErrno(mp + "/p2.jpg", O_RDWR | O_CLOEXEC) == EDQUOT, "a third in-place edit open past the limit")
        let c = open(mp + "/p2.jpg", O_WRONLY | O_TRUNC | O_CLOEXEC)
        #expect(c >= 0, "an O_TRUNC open copies nothing: \(String(cString: strerror(errno)))")
        let photo = try TestMedia.jpeg(tag: "written over p2")
        #expect(photo.withUnsafeBytes { write(c, $0.baseAddress, $0.count) } == photo.count)
        #expect(errnoOf { close(c) } == 0, "saved")
        #expect(errnoOf { close(a) } == 0 && errnoOf { close(b) } == 0)
        #expect(readAll(mp + "/p2.jpg") == photo ? true : false, "the save is the photo's current version")
        let id = try #require(try f.assetsJSON().first { $0["name"] as? String == "p2.jpg" }?["id"] as? String)
        let obj = try JSONSerialization.jsonObject(with: Data(try f.pg("versions", id, "--json").stdout.utf8))
        let versions = (obj as? [[String: Any]]) ?? ((obj as? [String: Any])?["versions"] as? [[String: Any]] ?? [])
        #expect(versions.count == 2, "p2.jpg: the original and the save: \(obj)")
    }

    /// Opening one granted file until the daemon's budget is spent (issue 14: 20,000 opens broke
    /// the mount): the excess open fails with EMFILE, and the mount keeps working (a new file is
    /// written, and once the app lets go, opens work again).
    @Test func manyOpensOfOneFileFailWithEMFILEAndBreakNothing() throws {
        var lim = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &lim)
        lim.rlim_cur = lim.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &lim)
        let f = try MountFixture()
        try f.importPhotos(["one.jpg"])
        let app = "org.example.Opener"
        try f.pg("authorize", app, "--status", "authorized")
        let mp = try f.mount(app, extra: ["--no-passthrough"])
        var fds: [Int32] = []
        defer { for fd in fds { close(fd) } }
        var failure: Int32 = 0
        for _ in 0..<Int(lim.rlim_max) {
            let fd = open(mp + "/one.jpg", O_RDONLY)
            if fd < 0 { failure = errno; break }
            fds.append(fd)
        }
        print("held \(fds.count) opens of one file; then errno \(failure)")
        // The daemon's budget ran out before this process's own limit did.
        #expect(failure == EMFILE)
        #expect(fds.count < Int(lim.rlim_max) - 200, "the daemon kept no reserve (\(fds.count) opens held)")
        // Close a few of the test's own, so that the test itself can open files again.
        for fd in fds.suffix(16) { close(fd) }
        fds.removeLast(16)
        #expect(cpWrite(try TestMedia.jpeg(tag: "while full"), to: mp + "/new.jpg") == 0, "creating a file while the opens are held")
        for fd in fds { close(fd) }
        fds = []
        #expect(readAll(mp + "/one.jpg") != nil, "opens work again")
        // The kernel delivers ~20,000 releases after the closes return: unmount once they are in
        // (on a loaded machine an immediate unmount found the mount still busy).
        #expect(eventually(60) { (try? f.pg("unmount", mp)) != nil }, "the mount stayed busy")
        #expect(!isMounted(mp))
    }

    /// Files an app creates and holds open cost the daemon descriptors too: each holds its temp
    /// file, and its running hash a second one. Outside the budget, an app holding ~300 new files
    /// took a daemon with 600 descriptors to its last one (the reserve for its database, logs and
    /// commits gone), and the next create failed with EIO. Counted in the budget, the excess
    /// create fails with EMFILE, the daemon keeps its reserve, every held file commits at its
    /// close, and new files work again after.
    @Test func newFilesHeldOpenFailWithEMFILEAndEveryHeldFileCommits() throws {
        let f = try MountFixture()
        let app = "org.example.Hoarder"
        try f.pg("authorize", app, "--status", "limited")
        let mp = f.dir + "/hoard"
        try FileManager.default.createDirectory(atPath: mp, withIntermediateDirectories: true)
        // The daemon inherits a limit of 600 descriptors (a budget of 600 - the reserve).
        let m = try TestSupport.run("/bin/sh", ["-c", "ulimit -n 600 && exec \"$0\" \"$@\"", TestSupport.photogateBinary, "mount", app, mp],
                                    environment: f.env)
        #expect(m.status == 0, "\(m.stderr)")
        defer { _ = try? TestSupport.run(TestSupport.photogateBinary, ["unmount", mp], environment: f.env); if isMounted(mp) { FUSECleanup.abortAndDetach(mp) } }
        var fds: [(name: String, fd: Int32)] = []
        defer { for h in fds { close(h.fd) } }
        /// Creates files until a create fails, writing `content(name)` into each; returns its errno.
        func hold(_ round: String, _ content: (String) throws -> [UInt8]) throws -> Int32 {
            for i in 0..<2000 {
                let name = "\(round)-\(i).jpg"
                let fd = open(mp + "/" + name, O_CREAT | O_WRONLY | O_EXCL, 0o644)
                if fd < 0 { return errno }
                fds.append((name, fd))
                let bytes = try content(name)
                #expect(bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count)
            }
            return 0
        }
        let failure = try hold("held") { try TestMedia.jpeg(tag: $0) }
        let held = fds.count
        print("held \(held) new files; then errno \(failure)")
        #expect(failure == EMFILE, "the create past the budget")
        #expect(held >= 100 && held <= (600 - 256) / 2, "two descriptors per held file, within the budget")
        // Held at the limit: the daemon keeps its reserve, and the person still manages the app.
        let list = try #require(try JSONSerialization.jsonObject(with: Data(try f.pg("mounts", "--json").stdout.utf8)) as? [[String: Any]])
        let pid = try #require(list.first { $0["mountpoint"] as? String == mp }?["pid"] as? Int)
        func daemonDescriptors() -> Int { ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []).count }
        let daemonFDs = daemonDescriptors()
        print("the daemon holds \(daemonFDs) descriptors of 600")
        #expect(daemonFDs <= 600 - 200, "the daemon's reserve is gone: \(daemonFDs) descriptors of 600")
        #expect(try f.pgStatus("authorize", app, "--status", "limited").status == 0)
        var failedCloses: [String] = []
        for h in fds where close(h.fd) != 0 { failedCloses.append("\(h.name): \(String(cString: strerror(errno)))") }
        let names = Set(fds.map(\.name))
        fds = []
        #expect(failedCloses.isEmpty, "closes that did not commit: \(failedCloses.prefix(5))")
        let committed = Set(try f.assetsJSON().compactMap { $0["name"] as? String })
        #expect(names.subtracting(committed).isEmpty, "held files missing from the library: \(names.subtracting(committed).sorted().prefix(5))")
        // Committed and refused files give every descriptor back: as many can be held again.
        // Counted below: the descriptors of files (temps, hashes); not the catalog's connections, of
        // which a pool may open one more at any time (a socket to PostgreSQL, a reader of SQLite).
        func daemonFiles() -> [String] {
            let dir = "/proc/\(pid)/fd"
            return ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).compactMap {
                try? FileManager.default.destinationOfSymbolicLink(atPath: dir + "/" + $0)
            }.filter { !$0.hasPrefix("socket:") && !$0.contains("photogate.sqlite") }
        }
        let settledFiles = daemonFiles()
        #expect(try hold("refused") { _ in Array("not a photo".utf8) } == EMFILE)
        #expect(fds.count == held, "held \(fds.count) after the commits, \(held) before")
        for h in fds { #expect(errnoOf { close(h.fd) } == EINVAL, "\(h.name) is refused at its close") }
        fds = []
        // A refused file's temp is dropped at its last RELEASE, which arrives after close(2).
        #expect(eventually { daemonFiles().count <= settledFiles.count }, "the daemon holds \(daemonFiles()), \(settledFiles) before")
        #expect(try hold("again") { try TestMedia.jpeg(tag: $0) } == EMFILE)
        #expect(fds.count == held, "held \(fds.count) after the refusals, \(held) before")
        for h in fds { close(h.fd) }
        fds = []
        #expect(cpWrite(try TestMedia.jpeg(tag: "after"), to: mp + "/after.jpg") == 0, "a new file after the held ones closed")
    }
}
