import Foundation
import GrantStore
import PhotoLibrary
import Synchronization
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Every committed asset's stored bytes match the catalog's hash and size. Returns what does not.
func storeMismatches(_ libraryRoot: String) throws -> [String] {
    let lib = try Library.open(at: LibraryPaths(root: libraryRoot))
    var bad: [String] = []
    for a in try lib.assets() {
        guard let rel = a.storePath else { continue }
        guard let bytes = readAll(TestSupport.storeFolder(of: libraryRoot) + "/" + rel) else {
            bad.append("\(a.displayName): store file missing")
            continue
        }
        let hash = "sha256:" + hexString(SHA256.hash(bytes))
        if hash != a.contentHash || UInt64(bytes.count) != a.byteSize {
            bad.append("\(a.displayName): \(bytes.count) bytes \(hash.prefix(20)), catalog \(a.byteSize) \(a.contentHash.prefix(20))")
        }
    }
    return bad
}

/// `photogate verify`'s check, in process: every stored file (every version) matches its hash and
/// nothing is unaccounted for.
func verifyClean(_ f: MountFixture) throws {
    let report = try Verifier(library: try Library.open(at: LibraryPaths(root: f.library))).run()
    #expect(report.ok, "\(report.problems.map { "\($0.kind) \($0.path) \($0.detail)" })")
}

/// The hash of every asset's every version, trashed ones included: where a closed file lives on
/// (a write over an app's own file makes a new version; the earlier bytes stay as versions).
func everyStoredHash(_ libraryRoot: String) throws -> Set<String> {
    let lib = try Library.open(at: LibraryPaths(root: libraryRoot))
    var out = Set<String>()
    for a in try lib.assets() + lib.trash() {
        out.insert(a.contentHash)
        for v in try lib.versions(a.id).versions { out.insert(v.contentHash) }
    }
    return out
}

/// Writes `bytes` to `path` like `cp` does (open O_WRONLY|O_CREAT|O_TRUNC, write, close).
/// Returns 0 or the errno of the first failing call.
func cpWrite(_ bytes: [UInt8], to path: String, flags: Int32 = O_WRONLY | O_CREAT | O_TRUNC) -> Int32 {
    let fd = open(path, flags, 0o644)
    if fd < 0 { return errno }
    var off = 0
    while off < bytes.count {
        let n = bytes[off...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if n < 0 { let e = errno; close(fd); return e }
        off += n
    }
    return close(fd) == 0 ? 0 : errno
}

/// A thread that spawns `/bin/true` and reaps it, over and over, until stopped.
final class ForkingNeighbour: @unchecked Sendable {
    private let stopped = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)

    init() {
        let t = Thread { [self] in
            while !stopped.load(ordering: .relaxed) {
                var pid = pid_t()
                let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
                if posix_spawn(&pid, "/bin/true", nil, nil, argv, environ) == 0 {
                    var status: Int32 = 0
                    _ = waitpid(pid, &status, 0)
                }
                argv.forEach { free($0) }
            }
            done.signal()
        }
        t.start()
    }

    func stop() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        done.wait()
    }
}

/// Issue 13's data loss: the commit of an app's file raced with the next writer of the same name,
/// which wrote into the file that had just become the store's original.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct WriteRaces {
    /// `cp a M/x; cp b M/x` on fresh names: the first close commits a; the second writer gets the
    /// answer for a committed asset (a new version of the app's own file in a read-write mount, a
    /// new asset in an add-only one), the original stays byte for byte, and the store keeps
    /// exactly what the catalog says.
    @Test(arguments: ["limited", "add-only"])
    func secondWriterNeverChangesACommittedOriginal(_ mode: String) throws {
        let f = try MountFixture()
        let app = "org.example.Racer"
        let mp: String
        if mode == "add-only" {
            try f.pg("authorize", app, "--access", "add-only", "--status", "authorized")
            mp = try f.mount(app, access: "add-only")
        } else {
            try f.pg("authorize", app, "--status", "limited")
            mp = try f.mount(app)
        }
        var firstOK: [String: [UInt8]] = [:]
        // A neighbour thread keeps forking, as a test process running others in parallel does (and
        // an app that runs helpers): children inherit the writers' descriptors and close them late,
        // and the daemon's notifications to the kernel lag behind its replies. A save must still be
        // there by its name the moment close returns (the old inode stands for the new version).
        let neighbour = ForkingNeighbour()
        defer { neighbour.stop() }
        for k in 0..<24 {
            let a = try TestMedia.jpeg(tag: "a\(k)"), b = try TestMedia.jpeg(tag: "b\(k)-longer-than-a")
            let name = "x\(k).jpg"
            let e1 = cpWrite(a, to: mp + "/" + name)
            #expect(e1 == 0, "first cp of \(name): errno \(e1)")
            if e1 == 0 { firstOK[name] = a }
            let e2 = cpWrite(b, to: mp + "/" + name)
            if mode == "add-only" {
                #expect(e2 == 0, "second cp of \(name) into add-only: errno \(e2)")
            } else {
                #expect(e2 == 0, "second cp of \(name): errno \(e2)")
                // The name reads back b (the new version), and a is kept as the original.
                let back = readAll(mp + "/" + name)
                #expect(back == b ? true : false,
                        "\(name) does not read back the second file: \(back.map { "\($0.count) bytes\($0 == a ? ", the first file's" : "")" } ?? "unreadable (errno \(errno))"), second file \(b.count) bytes")
                let lib = try Library.open(at: LibraryPaths(root: f.library))
                let id = try #require(try lib.assets().first { $0.ownerName == name }?.id)
                let original = try #require(try lib.versions(id).versions.first)
                #expect(original.contentHash == "sha256:" + hexString(SHA256.hash(a)), "\(name): the original changed")
            }
            #expect(try storeMismatches(f.library) == [], "after round \(k)")
            let report = try Verifier(library: try Library.open(at: LibraryPaths(root: f.library))).run()
            #expect(report.ok, "round \(k): \(report.problems.map { "\($0.kind) \($0.path)" })")
        }
        let hashes = try everyStoredHash(f.library)
        for (n, a) in firstOK {
            #expect(hashes.contains("sha256:" + hexString(SHA256.hash(a))), "\(n): the first file's close succeeded but it is not an asset")
        }
        try f.unmount(mp)
    }

    /// When close(2) returns 0 the file is an asset: stat, open, cmp and ls see it at once.
    @Test func closeMeansCommitted() throws {
        let f = try MountFixture()
        let app = "org.example.Closer"
        try f.pg("authorize", app, "--status", "limited")
        let mp = try f.mount(app)
        for k in 0..<30 {
            let bytes = try TestMedia.jpeg(tag: "c\(k)")
            let name = "c\(k).jpg"
            #expect(cpWrite(bytes, to: mp + "/" + name) == 0)
            var st = stat()
            #expect(stat(mp + "/" + name, &st) == 0 && st.st_size == bytes.count, "\(name): stat right after close")
            #expect(readAll(mp + "/" + name) == bytes ? true : false, "\(name): read right after close")
            #expect(listing(mp).contains(name), "\(name): ls right after close")
            // Another writer opening the committed name edits the app's own asset: opened and
            // closed without a write, nothing changes.
            #expect(openErrno(mp + "/" + name, O_WRONLY) == 0)
            #expect(readAll(mp + "/" + name) == bytes ? true : false, "\(name): an open without writes changed it")
            #expect(openErrno(mp + "/" + name, O_CREAT | O_EXCL | O_WRONLY) == EEXIST)
        }
        let names = Set(try f.assetsJSON().compactMap { $0["name"] as? String })
        #expect(names.count == 30)
        #expect(try storeMismatches(f.library) == [])
        try f.unmount(mp)
    }

    /// Many writers on a few names: overwrite right after close, rename over, unlink right after a
    /// commit. The test's threads take turns per name (one POSIX file with two concurrent writers
    /// legitimately ends with the last writer's bytes), so what races is the daemon's own work
    /// after each close. After every round every store file matches its hash, and every file whose
    /// close returned 0 is an asset, a version of one, or in the trash (when an unlink came after it).
    @Test func writersRacingOnFewNamesNeverCorruptTheStore() throws {
        let f = try MountFixture()
        let app = "org.example.Stress"
        try f.pg("authorize", app, "--status", "limited")
        let mp = try f.mount(app)
        let names = ["p0.jpg", "p1.jpg", "p2.jpg"]
        let locks = names.map { _ in NSLock() }
        for round in 0..<6 {
            let committed = Failures()
            let group = DispatchGroup()
            for w in 0..<6 {
                group.enter()
                Thread {
                    defer { group.leave() }
                    var rng = SplitMix(seed: UInt64(round * 100 + w))
                    for i in 0..<8 {
                        let k = Int(rng.next() % UInt64(names.count))
                        let name = names[k]
                        let bytes = (try? TestMedia.jpeg(tag: "r\(round)w\(w)i\(i)")) ?? []
                        switch rng.next() % 4 {
                        case 0:
                            // Write to a temp name, then rename it over the shared name.
                            let tmp = ".\(name).w\(w)i\(i)"
                            if cpWrite(bytes, to: mp + "/" + tmp) == 0 {
                                committed.add(hexString(SHA256.hash(bytes)))
                                locks[k].lock()
                                _ = rename(mp + "/" + tmp, mp + "/" + name)
                                locks[k].unlock()
                            }
                        case 1:
                            locks[k].lock()
                            _ = unlink(mp + "/" + name)
                            locks[k].unlock()
                        default:
                            locks[k].lock()
                            if cpWrite(bytes, to: mp + "/" + name) == 0 { committed.add(hexString(SHA256.hash(bytes))) }
                            locks[k].unlock()
                        }
                    }
                }.start()
            }
            group.wait()
            #expect(try storeMismatches(f.library) == [], "round \(round)")
            let hashes = try everyStoredHash(f.library)
            let lost = committed.all.filter { !hashes.contains("sha256:" + $0) }
            #expect(lost.isEmpty, "round \(round): \(lost.count) closed files were lost")
        }
        try f.unmount(mp)
    }
}

/// Issue 13, "a file being written": what an app leaves behind never grows the daemon.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct FilesBeingWritten {
    func daemonPID(_ f: MountFixture, _ mp: String) throws -> Int32 {
        let list = try #require(try JSONSerialization.jsonObject(with: Data(try f.pg("mounts", "--json").stdout.utf8)) as? [[String: Any]])
        return Int32(try #require(list.first { $0["mountpoint"] as? String == mp }?["pid"] as? Int))
    }

    func openFDs(_ pid: Int32) -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []).count
    }

    func tempFiles(_ f: MountFixture) -> [String] {
        ((try? FileManager.default.subpathsOfDirectory(atPath: f.library + "/tmp")) ?? []).filter { $0.hasSuffix(".part") }
    }

    @Test func emptyAndRefusedFilesAreDiscardedAtTheirLastClose() throws {
        let f = try MountFixture()
        let app = "org.example.Empty"
        try f.pg("authorize", app, "--status", "limited")
        let mp = try f.mount(app)
        let pid = try daemonPID(f, mp)
        let before = openFDs(pid)
        for i in 0..<2000 {
            let fd = open(mp + "/e\(i).jpg", O_CREAT | O_WRONLY | O_EXCL, 0o644)
            #expect(fd >= 0, "create \(i): errno \(errno)")
            if fd < 0 { break }
            close(fd)
        }
        // The releases arrive after close(2): wait for them, then nothing may be left.
        #expect(eventually { openFDs(pid) <= before + 2 && tempFiles(f).isEmpty }, "fds \(before) -> \(openFDs(pid)), temp files \(tempFiles(f).count)")
        #expect(listing(mp).isEmpty, "\(listing(mp).prefix(5))")
        // A refused close: the name is gone at once (no cached size, no phantom EEXIST).
        let fd = open(mp + "/bad.jpg", O_CREAT | O_WRONLY | O_EXCL, 0o644)
        let text = Array("not a photo".utf8)
        #expect(write(fd, text, text.count) == text.count)
        #expect(errnoOf { close(fd) } == EINVAL)
        #expect(statErrno(mp + "/bad.jpg") == ENOENT)
        #expect(cpWrite(try TestMedia.jpeg(tag: "good"), to: mp + "/bad.jpg", flags: O_CREAT | O_WRONLY | O_EXCL) == 0)
        try f.unmount(mp)
    }

    /// A file refused at its close is visible to the app (.photogate/refused) and to the person
    /// (photogate refused), with its name, the reason and the time.
    @Test func refusedFilesAreRecordedForTheAppAndThePerson() throws {
        let f = try MountFixture()
        let app = "org.example.Refused"
        try f.pg("authorize", app, "--status", "limited")
        let mp = try f.mount(app)
        #expect(cpWrite(Array("plain text".utf8), to: mp + "/notes.jpg") == EINVAL)
        let whole = try TestMedia.jpeg(tag: "cut")
        let cut = Array(whole.prefix(whole.count - 40))   // ends inside the scan data: no end of image
        #expect(cpWrite(cut, to: mp + "/cut.jpg") == EINVAL, "an incomplete JPEG must be refused")
        let text = String(decoding: readAll(mp + "/.photogate/refused") ?? [], as: UTF8.self)
        let lines = text.split(separator: "\n")
        #expect(lines.count == 2, "\(text)")
        #expect(lines.first?.contains("\tnotes.jpg\t") == true && lines.first?.contains("not a photo or video") == true, "\(text)")
        #expect(lines.last?.contains("\tcut.jpg\t") == true && lines.last?.contains("truncated") == true, "\(text)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(try f.pg("refused", app, "--json").stdout.utf8)) as? [[String: Any]])
        #expect(json.map { $0["name"] as? String } == ["notes.jpg", "cut.jpg"])
        #expect(json.allSatisfy { ($0["date"] as? String)?.hasSuffix("Z") == true && $0["app"] as? String == app })
        #expect(try f.assetsJSON().isEmpty)
        try f.unmount(mp)
    }

    /// A child that inherited the descriptor of a file being written and exits sends a close too:
    /// that close must not commit what the parent has written so far.
    @Test func aChildClosingAnInheritedDescriptorCommitsNothing() throws {
        let f = try MountFixture()
        let app = "org.example.Forker"
        try f.pg("authorize", app, "--status", "limited")
        let mp = try f.mount(app)
        let bytes = try TestMedia.jpeg(tag: "fork") + [UInt8](repeating: 0x20, count: 4096)
        let fd = open(mp + "/f.jpg", O_CREAT | O_WRONLY | O_EXCL, 0o644)   // no O_CLOEXEC: children inherit it
        #expect(fd >= 0)
        let half = bytes.count / 2
        #expect(bytes.withUnsafeBytes { write(fd, $0.baseAddress, half) } == half)
        var pid = pid_t()
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
        defer { argv.forEach { free($0) } }
        #expect(posix_spawn(&pid, "/bin/true", nil, nil, argv, environ) == 0)
        var status: Int32 = 0
        #expect(waitpid(pid, &status, 0) == pid)
        // The child's exit closed its copy: nothing is committed, and the parent goes on writing.
        #expect(!(try f.assetsJSON().contains { $0["name"] as? String == "f.jpg" }), "the child's close committed half a file")
        let rest = bytes.count - half
        #expect(bytes[half...].withUnsafeBytes { write(fd, $0.baseAddress, rest) } == rest, "write after the child's exit: errno \(errno)")
        #expect(close(fd) == 0)
        let a = try #require(try f.assetsJSON().first { $0["name"] as? String == "f.jpg" })
        #expect(a["size"] as? Int == bytes.count)
        #expect(readAll(mp + "/f.jpg") == bytes ? true : false)
        try f.unmount(mp)
    }

    /// Add-only, a name the app wrote and writes again is the same file made a new session: a
    /// descriptor kept (a dup, a forked child's copy) past the close that committed the first
    /// writes and truncates nothing of the second (EACCES), and the second is committed at its own
    /// close, not held back until the stale descriptor goes.
    @Test func aDescriptorKeptPastACommitNeverReachesTheNameWrittenAgain() throws {
        let f = try MountFixture()
        let app = "org.example.Again"
        try f.pg("authorize", app, "--access", "add-only", "--status", "authorized")
        let mp = try f.mount(app, access: "add-only")
        let first = try TestMedia.jpeg(tag: "first")
        let second = try TestMedia.jpeg(tag: "second, written again under the same name")
        let fd = open(mp + "/again.jpg", O_CREAT | O_WRONLY | O_EXCL, 0o644)
        try #require(fd >= 0, "create: errno \(errno)")
        let stale = dup(fd)   // the same open: what a forked child keeps
        var held = [fd, stale]
        defer { held.filter { $0 >= 0 }.forEach { close($0) } }
        #expect(write(fd, first, first.count) == first.count)
        #expect(close(fd) == 0)
        held[0] = -1
        #expect(try f.assetsJSON().map { $0["size"] as? Int } == [first.count])
        let again = open(mp + "/again.jpg", O_WRONLY | O_TRUNC)
        try #require(again >= 0, "open again: errno \(errno)")
        held.append(again)
        let junk = Array("STALE-WRITE-THROUGH-A-KEPT-DESCRIPTOR".utf8)
        #expect(errnoOf { Int32(pwrite(stale, junk, junk.count, 0)) } == EACCES, "a stale write was not refused")
        #expect(errnoOf { ftruncate(stale, 4) } == EACCES, "a stale truncate was not refused")
        #expect(write(again, second, second.count) == second.count)
        #expect(close(again) == 0)
        held.removeLast()
        #expect(try f.assetsJSON().compactMap { $0["size"] as? Int }.sorted() == [first.count, second.count].sorted(),
                "the second file was not committed at its close")
        #expect(close(stale) == 0)
        held[1] = -1
        #expect(try f.assetsJSON().count == 2)
        try verifyClean(f)
        try f.unmount(mp)
    }

    /// A file being written in Albums/X/ is found by name there; O_EXCL does not duplicate it;
    /// rmdir of the album waits for it (ENOTEMPTY).
    @Test func aFileBeingWrittenInAnAlbumIsThere() throws {
        let f = try MountFixture()
        let app = "org.example.Albums"
        try f.pg("authorize", app, "--status", "authorized")
        try f.pg("album", "create", "Trip")
        let mp = try f.mount(app)
        let fd = open(mp + "/Albums/Trip/new.jpg", O_CREAT | O_WRONLY | O_EXCL, 0o644)
        #expect(fd >= 0)
        var st = stat()
        #expect(stat(mp + "/Albums/Trip/new.jpg", &st) == 0)
        #expect(listing(mp + "/Albums/Trip") == ["new.jpg"])
        #expect(openErrno(mp + "/Albums/Trip/new.jpg", O_CREAT | O_WRONLY | O_EXCL) == EEXIST)
        #expect(errnoOf { rmdir(mp + "/Albums/Trip") } == ENOTEMPTY)
        let bytes = try TestMedia.jpeg(tag: "album")
        #expect(bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count)
        #expect(close(fd) == 0)
        #expect(readAll(mp + "/Albums/Trip/new.jpg") == bytes ? true : false)
        let members = try f.pg("assets", "--album", "Trip", "--json").stdout
        #expect(members.contains("new.jpg"))
        try f.unmount(mp)
    }

    /// Times an app sets on a file it is writing are kept, and without a capture date in the
    /// media the modification time the writer set is the capture date (`cp -a`, `touch -d`).
    @Test func timesSetWhileWritingAreKept() throws {
        let f = try MountFixture()
        let app = "org.example.Times"
        try f.pg("authorize", app, "--status", "limited")
        let mp = try f.mount(app)
        let src = f.dir + "/p.png"
        try TestMedia.write(try TestMedia.png(), to: src)
        #expect(try TestSupport.run("touch", ["-d", "2001-02-03 04:05:06Z", src]).status == 0)
        let o = try TestSupport.run("cp", ["-a", src, mp + "/p.png"])
        #expect(o.status == 0, "\(o.stderr)")
        let a = try #require(try f.assetsJSON().first { $0["name"] as? String == "p.png" })
        #expect((a["captureDate"] as? String ?? "").hasPrefix("2001-02-03T04:05:06"), "\(a["captureDate"] ?? "nil")")
        // touch (UTIME_NOW) of a file being written, and of the mount root and a folder.
        let fd = open(mp + "/t.png", O_CREAT | O_WRONLY | O_EXCL, 0o644)
        #expect(fd >= 0)
        #expect(errnoOf { utimensat(AT_FDCWD, mp + "/t.png", nil, 0) } == 0)
        #expect(errnoOf { utimensat(AT_FDCWD, mp, nil, 0) } == 0)
        #expect(errnoOf { chmod(mp, 0o700) } == 0)
        close(fd)
        try f.unmount(mp)
    }
}
