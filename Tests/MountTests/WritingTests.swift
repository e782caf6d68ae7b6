import Foundation
@testable import GrantStore
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct Writing {
    let app = "org.example.Editor"

    func authorizedMount(_ f: MountFixture) throws -> String {
        try f.pg("authorize", app, "--status", "authorized")
        return try f.mount(app)
    }

    @Test func ordinaryToolsCreateAssets() throws {
        let f = try MountFixture()
        let mp = try authorizedMount(f)
        let src = f.dir + "/in"
        try FileManager.default.createDirectory(atPath: src, withIntermediateDirectories: true)
        try TestMedia.write(TestMedia.jpeg(tag: "cp"), to: src + "/cp.jpg")
        try TestMedia.write(TestMedia.jpeg(tag: "rsync"), to: src + "/rsync.jpg")
        try TestMedia.write(TestMedia.jpeg(tag: "mv"), to: src + "/mv.jpg")
        try TestMedia.write(TestMedia.mp4(), to: src + "/in.mp4")
        #expect(try TestSupport.run("cp", [src + "/cp.jpg", mp + "/"]).status == 0)
        let r = try TestSupport.run("rsync", ["-a", src + "/rsync.jpg", mp + "/"])
        #expect(r.status == 0, "\(r.stderr)")
        let m = try TestSupport.run("mv", [src + "/mv.jpg", mp + "/"])
        #expect(m.status == 0, "\(m.stderr)")
        let ff = try TestSupport.run("ffmpeg", ["-v", "error", "-y", "-i", src + "/in.mp4", "-c", "copy", mp + "/out.mp4"])
        #expect(ff.status == 0, "\(ff.stderr)")
        let cv = try TestSupport.run("convert", ["-size", "40x30", "xc:red", mp + "/made.jpg"])
        #expect(cv.status == 0, "\(cv.stderr)")
        let expected = ["cp.jpg", "made.jpg", "mv.jpg", "out.mp4", "rsync.jpg"]
        #expect(eventually { Set(expected).isSubset(of: Set(listing(mp))) }, "\(listing(mp))")
        let assets = try f.assetsJSON()
        for n in expected {
            let a = try #require(assets.first { $0["name"] as? String == n }, "\(n) missing")
            #expect(a["owner"] as? String == app)
        }
        #expect(assets.first { $0["name"] as? String == "out.mp4" }?["type"] as? String == "mp4")
        // rsync's temporary name did not stay behind as an asset.
        #expect(!assets.contains { ($0["name"] as? String ?? "").hasPrefix(".rsync.jpg") })
        // The bytes read back are the bytes written.
        #expect(readAll(mp + "/cp.jpg") == readAll(src + "/cp.jpg"))
        // Each is cataloged with the hash of its stored bytes (hashed behind the writes; ffmpeg
        // goes back to its header to write the media data's size).
        #expect(try storeMismatches(f.library) == [])
        try f.unmount(mp)
    }

    /// A file refused at one close (not complete media yet) and then mended through a descriptor
    /// still open is cataloged with the hash of its final bytes, though the bytes it wrote over
    /// had been hashed at the refused close.
    @Test func aFileMendedAfterARefusedCloseIsCatalogedWithItsFinalBytes() throws {
        let f = try MountFixture()
        let mp = try authorizedMount(f)
        let jpeg = try TestMedia.jpeg(tag: "mended")
        var broken = jpeg
        broken[0] = 0
        broken[1] = 0   // no JPEG start: not media
        let fd = open(mp + "/mended.jpg", O_CREAT | O_WRONLY | O_EXCL, 0o644)
        try #require(fd >= 0)
        let kept = dup(fd)
        #expect(broken.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == broken.count)
        #expect(errnoOf { close(fd) } == EINVAL)
        #expect(Array(jpeg[0..<2]).withUnsafeBytes { pwrite(kept, $0.baseAddress, 2, 0) } == 2)
        #expect(close(kept) == 0)
        #expect(try f.assetsJSON().count == 1)
        #expect(try storeMismatches(f.library) == [])
        try f.unmount(mp)
    }

    /// At its unmount the daemon settles its temp folder: nothing is left for `photogate verify`
    /// to report, or for the next start to recover.
    @Test func anUnmountLeavesNoTempFolderBehind() throws {
        let f = try MountFixture()
        let mp = try authorizedMount(f)
        #expect(cpWrite(try TestMedia.jpeg(tag: "settled"), to: mp + "/settled.jpg") == 0)
        let tmp = TestSupport.sharedFolder(of: f.library) + "/tmp"
        #expect(!((try? FileManager.default.contentsOfDirectory(atPath: tmp)) ?? []).isEmpty, "the live daemon's folder")
        try f.unmount(mp)
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: tmp)) ?? []) == [])
        try verifyClean(f)
        #expect(try f.assetsJSON().count == 1)
    }

    /// A file whose close succeeded while the database refused its commit (kept durable and
    /// marked; its last release tried again, in vain) is committed at the unmount, once the
    /// database takes it, rather than left for the next start.
    @Test(.disabled(if: TestSupport.onPostgres, "stands a failing SQLite trigger for a database that refuses a commit"))
    func aFileTheDatabaseRefusedIsCommittedAtTheUnmount() throws {
        let f = try MountFixture()
        let mp = try authorizedMount(f)
        let lib = try Library.open(at: LibraryPaths(root: f.library))
        try lib.write { db in
            try db.execute(sql: "CREATE TRIGGER failing BEFORE INSERT ON assets BEGIN SELECT RAISE(ABORT, 'disk failing'); END")
        }
        #expect(cpWrite(try TestMedia.jpeg(tag: "late"), to: mp + "/late.jpg") == 0)
        let log = f.library + "/run/logs/\(app).read-write.log"
        func attempts() -> Int {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").components(separatedBy: "late.jpg is kept to be committed later").count - 1
        }
        // At the close, and again at the last release.
        #expect(eventually { attempts() == 2 }, "\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        try lib.write { db in try db.execute(sql: "DROP TRIGGER failing") }
        #expect(try f.assetsJSON().isEmpty)
        try f.unmount(mp)
        #expect(try f.assetsJSON().compactMap { $0["name"] as? String } == ["late.jpg"])
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: TestSupport.sharedFolder(of: f.library) + "/tmp")) ?? []) == [])
        try verifyClean(f)
    }

    @Test func nonMediaIsRefusedAtCloseAndLeavesNothing() throws {
        let f = try MountFixture()
        let mp = try authorizedMount(f)
        let fd = open(mp + "/notes.jpg", O_CREAT | O_WRONLY | O_EXCL, 0o644)
        #expect(fd >= 0)
        let text = Array("this is not a photo".utf8)
        #expect(write(fd, text, text.count) == text.count)
        #expect(errnoOf { close(fd) } == EINVAL)
        #expect(eventually { statErrno(mp + "/notes.jpg") == ENOENT })
        #expect(try f.assetsJSON().isEmpty)
        let cp = try TestSupport.run("cp", ["/etc/hostname", mp + "/host.jpg"])
        #expect(cp.status != 0)
        #expect(try f.assetsJSON().isEmpty)
        // A refused file is discarded at its last release, which the kernel sends after close(2).
        func tmp() -> [String] {
            ((try? FileManager.default.subpathsOfDirectory(atPath: TestSupport.sharedFolder(of: f.library) + "/tmp")) ?? []).filter { !$0.hasSuffix(".lock") && $0.contains(".") }
        }
        #expect(eventually { tmp().isEmpty }, "\(tmp())")
        try f.unmount(mp)
    }

    /// `PHOTOGATE_TRACE_CLOSES` (issue 39's profile of a close): each close that commits a new
    /// photo or saves an edit writes one line of where its time went, phase by phase, in order;
    /// a refused close writes none, and no line names the file.
    @Test func theCloseTraceSaysWhereEachCommittingCloseSpentItsTime() throws {
        let f = try MountFixture()
        let trace = f.dir + "/closes.trace"
        f.extraEnvironment["PHOTOGATE_TRACE_CLOSES"] = trace
        let mp = try authorizedMount(f)
        func lines() -> [String] {
            ((try? String(contentsOfFile: trace, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
        /// The phases of a line in order, each with a time that is a number of milliseconds.
        func phases(_ line: String) -> [String] {
            line.split(separator: " ").dropFirst(2).compactMap { kv in
                let p = kv.split(separator: "=")
                guard p.count == 2, let ms = Double(p[1]), ms >= 0 else { return nil }
                return String(p[0])
            }
        }
        #expect(cpWrite(try TestMedia.jpeg(tag: "traced"), to: mp + "/new-one.jpg") == 0)
        #expect(eventually { lines().count == 1 }, "\(lines())")
        let new = try #require(lines().first)
        #expect(new.hasPrefix("close new "), "\(new)")
        #expect(phases(new) == ["checks", "fsync", "scan", "hash", "queue", "catalog", "logsync", "store", "view"], "\(new)")
        // A close refused (not media) commits nothing and writes no line.
        #expect(cpWrite(Array("not a photo".utf8), to: mp + "/refused.jpg") == EINVAL)
        // A save over the app's own photo (O_TRUNC, then the new bytes) is an edit.
        #expect(cpWrite(try TestMedia.jpeg(tag: "traced, saved again"), to: mp + "/new-one.jpg") == 0)
        #expect(eventually { lines().count == 2 }, "\(lines())")
        let edit = lines()[1]
        #expect(edit.hasPrefix("close edit "), "\(edit)")
        #expect(phases(edit) == ["access", "fsync", "checks", "scan", "hash", "queue", "catalog", "logsync", "store", "view"], "\(edit)")
        // A save as exiftool makes it: a temp file (a new file's close), then renamed over the photo.
        #expect(cpWrite(try TestMedia.jpeg(tag: "traced, saved by a rename"), to: mp + "/new-one.jpg_tmp") == 0)
        #expect(rename(mp + "/new-one.jpg_tmp", mp + "/new-one.jpg") == 0)
        #expect(eventually { lines().count == 4 }, "\(lines())")
        #expect(lines()[2].hasPrefix("close new "), "\(lines())")
        let renamed = lines()[3]
        #expect(renamed.hasPrefix("close rename "), "\(renamed)")
        #expect(phases(renamed) == ["checks", "scan", "hash", "queue", "catalog", "logsync", "store", "dissolve", "view"], "\(renamed)")
        #expect(lines().count == 4)
        #expect(!lines().joined().contains("new-one") && !lines().joined().contains("refused"))
        // Only its owner reads it.
        var st = stat()
        #expect(stat(trace, &st) == 0 && st.st_mode & 0o777 == 0o600)
        try f.unmount(mp)
        // Only a mount's daemon traces: a command that commits files (import) opens nothing.
        let notMade = f.dir + "/import.trace"
        f.extraEnvironment["PHOTOGATE_TRACE_CLOSES"] = notMade
        let src = f.dir + "/imported.jpg"
        try TestMedia.write(TestMedia.jpeg(tag: "imported, not traced"), to: src)
        try f.pg("import", src)
        #expect(access(notMade, F_OK) != 0, "import made \(notMade)")
    }

    /// A FIFO at the trace's path (someone else's, in a folder all may write) is no trace: the
    /// close that would open it is not held up waiting for a reader, and commits as ever.
    @Test func aFIFOAtTheTracePathHoldsNoCloseUp() throws {
        let f = try MountFixture()
        let fifo = f.dir + "/closes.fifo"
        #expect(mkfifo(fifo, 0o666) == 0)
        f.extraEnvironment["PHOTOGATE_TRACE_CLOSES"] = fifo
        let mp = try authorizedMount(f)
        let src = f.dir + "/in.jpg"
        try TestMedia.write(TestMedia.jpeg(tag: "fifo"), to: src)
        // Bounded: with the old open(2) the close waited for a reader of the FIFO forever.
        let cp = try TestSupport.run("timeout", ["20", "cp", src, mp + "/"])
        #expect(cp.status == 0, "cp -> \(cp.status): \(cp.stderr)")
        #expect(try f.assetsJSON().contains { $0["name"] as? String == "in.jpg" })
        try f.unmount(mp)
    }

    /// A daemon run as root never writes its trace into a file someone else put at the path (they
    /// would read when each app saved, and about how much), nor through a hard link.
    @Test(.enabled(if: geteuid() == 0, "needs root to give the file to another user"))
    func aTraceFileOfAnotherUserIsLeftAlone() throws {
        let f = try MountFixture()
        let theirs = f.dir + "/theirs.trace"
        #expect(FileManager.default.createFile(atPath: theirs, contents: nil))
        #expect(chown(theirs, 65534, 65534) == 0 && chmod(theirs, 0o666) == 0)
        let linked = f.dir + "/linked.trace", mine = f.dir + "/mine.trace"
        #expect(FileManager.default.createFile(atPath: mine, contents: nil) && link(mine, linked) == 0)
        for path in [theirs, linked] {
            f.extraEnvironment["PHOTOGATE_TRACE_CLOSES"] = path
            let mp = try authorizedMount(f)
            let name = "p-\((path as NSString).lastPathComponent).jpg"
            #expect(cpWrite(try TestMedia.jpeg(tag: path), to: mp + "/" + name) == 0)
            #expect(try f.assetsJSON().contains { $0["name"] as? String == name })
            try f.unmount(mp)
            var st = stat()
            #expect(stat(path, &st) == 0 && st.st_size == 0, "\(path) was written: \(st.st_size) bytes")
        }
    }

    @Test func originalsAreNeverModified() throws {
        let f = try MountFixture()
        try f.importPhotos(["a.jpg"])
        let mp = try authorizedMount(f)
        let before = readAll(mp + "/a.jpg")
        #expect(openErrno(mp + "/a.jpg", O_WRONLY) == EACCES)
        #expect(openErrno(mp + "/a.jpg", O_RDWR) == EACCES)
        #expect(openErrno(mp + "/a.jpg", O_WRONLY | O_TRUNC) == EACCES)
        #expect(errnoOf { truncate(mp + "/a.jpg", 0) } == EACCES)
        #expect(errnoOf { chmod(mp + "/a.jpg", 0o777) } == EACCES)
        #expect(openErrno(mp + "/a.jpg", O_CREAT | O_EXCL | O_WRONLY) == EEXIST)
        #expect(readAll(mp + "/a.jpg") == before)
        // rm moves to Recently Deleted; restore brings it back.
        #expect(unlink(mp + "/a.jpg") == 0)
        #expect(eventually { statErrno(mp + "/a.jpg") == ENOENT })
        #expect(try f.pg("trash").stdout.contains("a.jpg"))
        try f.pg("restore", "a.jpg")
        #expect(eventually { readAll(mp + "/a.jpg") == before })
        try f.unmount(mp)
    }

    @Test func fullDiskGivesENOSPCAndKeepsTheLibraryConsistent() throws {
        guard let base = try TestSupport.smallTmpfs("fullDisk", size: "3m") else { return }
        defer { TestSupport.removeTmpfs(base) }
        let lib = base + "/library"
        let env = ["PHOTOGATE_LIBRARY": lib]
        let bin = TestSupport.photogateBinary
        #expect(try TestSupport.run(bin, ["init"], environment: env).status == 0)
        #expect(try TestSupport.run(bin, ["authorize", app, "--status", "authorized"], environment: env).status == 0)
        let mp = TestSupport.tempDir("fullmp")
        defer { _ = try? TestSupport.run(bin, ["unmount", mp], environment: env); if isMounted(mp) { umount2(mp, Int32(MNT_DETACH)) }; TestSupport.remove(mp) }
        let m = try TestSupport.run(bin, ["mount", app, mp], environment: env)
        #expect(m.status == 0, "\(m.stderr)")
        // A 4 MB "photo" cannot fit in 3 MB.
        var big = try TestMedia.jpeg(tag: "big")
        big += [UInt8](repeating: 0x55, count: 4 << 20)
        let fd = open(mp + "/big.jpg", O_CREAT | O_WRONLY | O_EXCL, 0o644)
        #expect(fd >= 0)
        var failure: Int32 = 0
        var off = 0
        while off < big.count {
            let n = big[off...].withUnsafeBytes { write(fd, $0.baseAddress, min(65536, $0.count)) }
            if n < 0 { failure = errno; break }
            off += n
        }
        let closeErr = errnoOf { close(fd) }
        #expect(failure == ENOSPC || closeErr == ENOSPC)
        let list = try TestSupport.run(bin, ["assets", "--json"], environment: env)
        #expect(list.status == 0)
        #expect(!list.stdout.contains("big.jpg"))
        // The library still works, and a small photo still fits once space is back.
        try TestMedia.write(TestMedia.jpeg(tag: "small"), to: mp + "/small.jpg")
        #expect(eventually { (try? TestSupport.run(bin, ["assets"], environment: env).stdout.contains("small.jpg")) == true })
    }

    @Test func killedDaemonLosesNoClosedFileAndLeavesNoPartialAsset() throws {
        let f = try MountFixture()
        let mp = try authorizedMount(f)
        let photo = try TestMedia.jpeg(tag: "base")
        let closedOK = Failures()
        let stop = Flag()
        // 50 writers, each writing files slowly; the daemon is killed while they run.
        let group = DispatchGroup()
        for w in 0..<50 {
            group.enter()
            Thread {
                defer { group.leave() }
                var i = 0
                while !stop.isSet && i < 20 {
                    let name = "w\(w)-\(i).jpg"
                    let bytes = photo + Array("\(name)".utf8)   // trailing bytes after EOI: still a JPEG, unique
                    let fd = open(mp + "/" + name, O_CREAT | O_WRONLY | O_EXCL, 0o644)
                    if fd < 0 { break }
                    var ok = true
                    for chunk in stride(from: 0, to: bytes.count, by: 512) {
                        let end = min(chunk + 512, bytes.count)
                        if bytes[chunk..<end].withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) < 0 { ok = false; break }
                        usleep(200)
                    }
                    if close(fd) == 0 && ok { closedOK.add(name) }
                    i += 1
                }
            }.start()
        }
        // Kill the daemon while writers are mid-file, once some files were closed (a fixed
        // 400 ms was not always enough for one close on a loaded machine).
        #expect(eventually { closedOK.all.count > 0 })
        let list = try #require(try JSONSerialization.jsonObject(with: Data(try f.pg("mounts", "--json").stdout.utf8)) as? [[String: Any]])
        let pid = try #require(list.first { $0["mountpoint"] as? String == mp }?["pid"] as? Int)
        kill(pid_t(pid), SIGKILL)
        stop.set()
        group.wait()
        #expect(closedOK.all.count > 0)
        // Mounting again recovers: every file whose close succeeded is there, nothing partial.
        let again = try f.mount(app)
        _ = again
        let assets = try f.assetsJSON()
        let names = Set(assets.compactMap { $0["name"] as? String })
        for n in closedOK.all { #expect(names.contains(n), "\(n) closed fine but is missing") }
        for a in assets {
            let n = a["name"] as? String ?? ""
            let expected = photo.count + n.utf8.count
            #expect(a["size"] as? Int == expected, "\(n) is partial")
        }
        // Temp data of the dead daemon is gone.
        let leftovers = try FileManager.default.subpathsOfDirectory(atPath: TestSupport.sharedFolder(of: f.library) + "/tmp").filter { $0.hasSuffix(".part") }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }
}

final class Failures: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [String] = []
    func add(_ s: String) { lock.lock(); items.append(s); lock.unlock() }
    var all: [String] { lock.lock(); defer { lock.unlock() }; return items }
}

final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.lock(); value = true; lock.unlock() }
    var isSet: Bool { lock.lock(); defer { lock.unlock() }; return value }
}
