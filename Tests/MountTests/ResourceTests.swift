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
}
