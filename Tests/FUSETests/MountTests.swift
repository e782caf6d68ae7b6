import Dispatch
@testable import FUSE
import PGSystem
import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

/// Real mounts: the test process serves a ToyFS on libfuse's threads and uses it through
/// ordinary syscalls and tools. Serialized to keep a 2-core machine sane.
@Suite(.serialized, .enabled(if: FUSEAvailability.canMount,
                             "needs /dev/fuse and the right to mount (root, or fusermount3)"))
struct MountTests {

    /// invalidateNow (called by the daemon's change watcher, outside libfuse's loop) read the
    /// session pointer with no lock while teardown destroyed the session (issue 34). A thread
    /// hammers it through mounts' unmounts: none may crash, hang, or leave a call counted.
    @Test func invalidationsDuringUnmountTouchNoDestroyedSession() throws {
        for _ in 0..<15 {
            let stop = Atomic<Bool>(false)
            let done = DispatchSemaphore(value: 0)
            var core: SessionCore?
            _ = try withMount(ToyFS()) { m in
                let c = m.session.core
                core = c
                let t = Thread {
                    while !stop.load(ordering: .relaxed) { c.invalidateNow(1) }
                    done.signal()
                }
                t.start()
                _ = try fileStat(m.root)
            }
            // The unmount (teardown) ran with the hammering thread still going; it goes on after.
            for _ in 0..<1000 { core?.invalidateNow(1) }
            stop.store(true, ordering: .relaxed)
            #expect(done.wait(timeout: .now() + 30) == .success, "an invalidation hung after the unmount")
            #expect(core?.state.withLock { $0.directNotifies } == 0)
        }
    }

    @Test func writeThenReadBackAndNamespaceOperations() throws {
        try withMount(ToyFS()) { m in
            let data = patternBytes(300_000, seed: 1)
            let fd = try check(open(m.path("new.bin"), O_CREAT | O_EXCL | O_WRONLY, 0o640), "create")
            try writeAll(fd: fd, data)
            #expect(close(fd) == 0)
            #expect(try fileStat(m.path("new.bin")).st_size == 300_000)
            #expect(try fileStat(m.path("new.bin")).st_mode & 0o7777 == 0o640)
            #expect(try readFile(m.path("new.bin")) == data)

            // O_EXCL on an existing name.
            #expect(errnoOf { open(m.path("new.bin"), O_CREAT | O_EXCL | O_WRONLY, 0o644) } == EEXIST)

            // pwrite in the middle, ftruncate, O_TRUNC.
            let rw = try check(open(m.path("new.bin"), O_RDWR), "open rw")
            let patch: [UInt8] = Array("PATCH".utf8)
            #expect(patch.withUnsafeBytes { pwrite(rw, $0.baseAddress, 5, 1000) } == 5)
            #expect(ftruncate(rw, 2000) == 0)
            #expect(close(rw) == 0)
            var expected = Array(data[0..<2000])
            expected.replaceSubrange(1000..<1005, with: patch)
            #expect(try readFile(m.path("new.bin")) == expected)
            let trunc = try check(open(m.path("new.bin"), O_WRONLY | O_TRUNC), "open O_TRUNC")
            close(trunc)
            #expect(try fileStat(m.path("new.bin")).st_size == 0)

            // chmod / utimes reach setattr.
            #expect(chmod(m.path("new.bin"), 0o600) == 0)
            #expect(try fileStat(m.path("new.bin")).st_mode & 0o7777 == 0o600)

            // rename, rename with flags, unlink.
            #expect(rename(m.path("new.bin"), m.path("renamed.bin")) == 0)
            #expect(statErrno(m.path("new.bin")) == ENOENT)
            #expect(try fileStat(m.path("renamed.bin")).st_size == 0)
            m.fs.addFile("other", data: Array("other".utf8))
            #expect(errnoOf { LibC.renameat2(AT_FDCWD, m.path("renamed.bin"), AT_FDCWD, m.path("other"), 1) } == EEXIST)
            #expect(LibC.renameat2(AT_FDCWD, m.path("renamed.bin"), AT_FDCWD, m.path("other"), 2) == 0)  // exchange
            #expect(try fileStat(m.path("renamed.bin")).st_size == 5)
            #expect(unlink(m.path("renamed.bin")) == 0)
            #expect(unlink(m.path("other")) == 0)
            #expect(statErrno(m.path("other")) == ENOENT)

            // Directories.
            #expect(mkdir(m.path("dir"), 0o755) == 0)
            let inner = try check(open(m.path("dir/inner"), O_CREAT | O_WRONLY, 0o644), "create inner")
            close(inner)
            #expect(errnoOf { rmdir(m.path("dir")) } == ENOTEMPTY)
            #expect(try listDirectory(m.path("dir")) == ["inner"])
            #expect(unlink(m.path("dir/inner")) == 0)
            #expect(rmdir(m.path("dir")) == 0)

            // statfs comes from the filesystem.
            var sv = statvfs()
            #expect(statvfs(m.root, &sv) == 0)
            #expect(sv.f_blocks == 1000 && sv.f_bavail == 500 && sv.f_bsize == 4096 && sv.f_namemax == 255)
        }
    }

    @Test func ordinaryToolsWork() throws {
        let fs = ToyFS()
        fs.addFile("hello.txt", data: Array("hello, world\n".utf8))
        fs.addDirectory("sub")
        try withMount(fs) { m in
            let (lsStatus, listing) = try runTool("/bin/ls", ["-la", m.root])
            #expect(lsStatus == 0)
            #expect(listing.contains("hello.txt") && listing.contains("sub"))

            let (catStatus, text) = try runTool("/bin/cat", [m.path("hello.txt")])
            #expect(catStatus == 0 && text == "hello, world\n")

            // cp in (copy_file_range falls back to read/write) and out.
            let outside = try makeTemporaryDirectory()
            defer { unlink(outside + "/src"); unlink(outside + "/back"); rmdir(outside) }
            let payload = patternBytes(200_000, seed: 7)
            try Data(payload).write(to: URL(fileURLWithPath: outside + "/src"))
            #expect(try runTool("/bin/cp", [outside + "/src", m.path("sub/copy")]).0 == 0)
            #expect(try runTool("/bin/cp", [m.path("sub/copy"), outside + "/back"]).0 == 0)
            #expect(try Array(Data(contentsOf: URL(fileURLWithPath: outside + "/back"))) == payload)
            #expect(try runTool("/bin/rm", [m.path("sub/copy")]).0 == 0)
            #expect(try listDirectory(m.path("sub")).isEmpty)
        }
    }

    @Test func thrownErrorsReachTheSyscallExactlyOnce() throws {
        let fs = ToyFS()
        fs.addFile("denied", data: [1, 2, 3]) { $0.openError = .accessDenied }
        fs.addFile("broken", data: [1, 2, 3]) { $0.readError = .io; $0.directIO = true }
        fs.addFile("plain", data: Array("plain".utf8))
        // ReadReply.file with a bad descriptor: libfuse's own copy fails and becomes the reply.
        fs.addFile("badfd") { $0.backingFD = -1; $0.attributes.size = 10; $0.directIO = true }
        fs.mutate { $0.lookupErrors[FileName("eio")] = .io }
        try withMount(fs) { m in
            #expect(errnoOf { open(m.path("denied"), O_RDONLY) } == EACCES)
            #expect(statErrno(m.path("eio")) == EIO)
            #expect(statErrno(m.path("missing")) == ENOENT)
            let fd = try check(open(m.path("broken"), O_RDONLY), "open broken")
            var byte: UInt8 = 0
            #expect(errnoOf { Glibc.read(fd, &byte, 1) } == EIO)
            close(fd)
            let bad = try check(open(m.path("badfd"), O_RDONLY), "open badfd")
            #expect(errnoOf { Glibc.read(bad, &byte, 1) } == EBADF)
            close(bad)

            // Defaults of the protocol extension.
            #expect(errnoOf { symlink("plain", m.path("link")) } == EPERM)
            #expect(errnoOf { link(m.path("plain"), m.path("hard")) } == EPERM)
            #expect(errnoOf { mkfifo(m.path("fifo"), 0o644) } == EPERM)
            var buffer = [UInt8](repeating: 0, count: 64)
            #expect(errnoOf { LibC.getxattr(m.path("plain"), "user.test", &buffer, 64) } == EOPNOTSUPP)
            #expect(errnoOf { LibC.getxattr(m.path("plain"), "user.test", nil, 0) } == EOPNOTSUPP)
            #expect(errnoOf { LibC.setxattr(m.path("plain"), "user.test", "v", 1, 0) } == EOPNOTSUPP)
            #expect(errnoOf { LibC.listxattr(m.path("plain"), nil, 0) } == EOPNOTSUPP)

            // Many concurrent failing and succeeding requests: every one answered, none twice
            // (a missing reply hangs here until the watchdog; a double reply crashes libfuse).
            let failures = Mutex(0)
            DispatchQueue.concurrentPerform(iterations: 8) { worker in
                for i in 0..<150 {
                    var ok = true
                    switch (worker + i) % 4 {
                    case 0: ok = statErrno(m.path("eio")) == EIO
                    case 1: ok = errnoOf { open(m.path("denied"), O_RDONLY) } == EACCES
                    case 2: ok = statErrno(m.path("missing-\(i)")) == ENOENT
                    default: ok = (try? readFile(m.path("plain"))) == Array("plain".utf8)
                    }
                    if !ok { failures.withLock { $0 += 1 } }
                }
            }
            #expect(failures.withLock { $0 } == 0)
        }
    }

    @Test(arguments: [true, false])
    func readdirWithManyEntries(plus: Bool) throws {
        let fs = ToyFS(entryTimeout: 60, attrTimeout: 60, readdirPage: 700)
        let dir = fs.addDirectory("many")
        let names = (0..<5000).map { String(format: "photo-%05d-with-a-longish-name.jpg", $0) }
        for name in names { fs.addFile(name, in: dir, data: [0x42]) }
        try withMount(fs, options: .test(readdirplus: plus)) { m in
            #expect(m.session.connection?.readdirplus == plus)
            let listed = try listDirectory(m.path("many"))
            #expect(listed.count == 5000)
            #expect(Set(listed) == Set(names))
            let calls = fs.mutate { $0.readdirCalls }
            #expect(calls > 5, "5,000 entries need many buffers (\(calls) readdir calls)")

            let (lsStatus, longListing) = try runTool("/bin/ls", ["-l", m.path("many")])
            #expect(lsStatus == 0)
            #expect(longListing.split(separator: "\n").count == 5001)  // "total" + entries

            let returned = fs.mutate { $0.entriesReturnedByReaddirplus }
            if plus {
                #expect(returned >= 5000, "readdirplus entries are counted as lookups")
            } else {
                #expect(returned == 0)
            }
            // Drop the kernel's dentries and inodes: every lookup it holds (from lookup and from
            // readdirplus) comes back through forget. Over-forgetting means miscounting.
            let dropCaches = open("/proc/sys/vm/drop_caches", O_WRONLY)
            if dropCaches >= 0 {
                let fd = dropCaches
                _ = write(fd, "2\n", 2)
                close(fd)
                let balanced = eventually(60) {
                    fs.mutate { st in st.lookups.keys.allSatisfy { $0 == dir } && st.lookups.count <= 1 }
                }
                #expect(balanced, "lookups not given back: \(fs.mutate { $0.lookups.count })")
            }
            #expect(fs.mutate { $0.forgetUnderflows } == 0)
        }
    }

    @Test func largeReadsThroughBytesAndFileReplies() throws {
        let content = patternBytes((1 << 20) * 3 + 12345, seed: 3)
        let backingPath = try makeTemporaryDirectory() + "/backing"
        defer { unlink(backingPath); rmdir(String(backingPath.dropLast("/backing".count))) }
        try Data(content).write(to: URL(fileURLWithPath: backingPath))
        let backing = try check(open(backingPath, O_RDONLY), "open backing")
        defer { close(backing) }

        let fs = ToyFS()
        let bytesCached = fs.addFile("bytes-cached", data: content)
        let bytesDirect = fs.addFile("bytes-direct", data: content) { $0.directIO = true }
        let fileCached = fs.addFile("file-cached") { $0.backingFD = backing; $0.attributes.size = UInt64(content.count) }
        let fileDirect = fs.addFile("file-direct") {
            $0.backingFD = backing; $0.attributes.size = UInt64(content.count); $0.directIO = true
        }
        try withMount(fs, options: .test(passthrough: false)) { m in
            #expect(m.session.connection?.maxWrite == 1 << 20)
            for name in ["bytes-cached", "bytes-direct", "file-cached", "file-direct"] {
                let read = try readFile(m.path(name), chunk: 1 << 20)
                #expect(read.count == content.count, "\(name)")
                #expect(read == content, "\(name) content differs")
            }
            let st = fs.mutate { $0 }
            // Direct I/O: one 1 MiB read(2) is one 1 MiB FUSE read.
            #expect(st.maxReadSize == 1 << 20)
            for ino in [bytesCached, bytesDirect, fileCached, fileDirect] { #expect(st.readCalls[ino, default: 0] > 0) }
            #expect(st.readCalls[bytesDirect, default: 0] <= 5)

            // A read at an offset through the splice path, and past the end.
            let fd = try check(open(m.path("file-direct"), O_RDONLY), "open")
            defer { close(fd) }
            var chunk = [UInt8](repeating: 0, count: 4096)
            #expect(chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 4096, 1_000_001) } == 4096)
            #expect(chunk == Array(content[1_000_001..<1_004_097]))
            #expect(chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 4096, off_t(content.count)) } == 0)
        }
    }

    /// What photogate relies on when a file's inode is replaced under the same name and the
    /// kernel has not yet received the notification deleting the old name: an OPEN of the old
    /// inode answered ESTALE makes the kernel look the name up again and open what it is now, or
    /// fail ENOENT if the name is gone too; answered ENOENT, the open fails though the name is
    /// there.
    @Test func anOpenAnsweredStaleLooksTheNameUpAgain() throws {
        let fs = ToyFS(entryTimeout: 3600, attrTimeout: 3600)
        let replaced = fs.addFile("replaced.jpg", data: Array("old".utf8))
        let gone = fs.addFile("gone.jpg", data: Array("old".utf8))
        let final = fs.addFile("final.jpg", data: Array("old".utf8))
        try withMount(fs) { m in
            // The names are now cached for their inodes.
            for name in ["replaced.jpg", "gone.jpg", "final.jpg"] {
                #expect((try? readFile(m.path(name))) == Array("old".utf8))
            }
            // Behind the kernel's back: two names become new inodes, one goes away.
            fs.mutate { st in
                st.nodes[replaced]?.openError = .stale
                st.nodes[gone]?.openError = .stale
                st.nodes[final]?.openError = .noEntry
            }
            for name in ["replaced.jpg", "gone.jpg", "final.jpg"] { fs.detach(FileName(name)) }
            fs.addFile("replaced.jpg", data: Array("new".utf8))
            fs.addFile("final.jpg", data: Array("new".utf8))
            #expect((try? readFile(m.path("replaced.jpg"))) == Array("new".utf8))
            #expect(errnoOf { open(m.path("gone.jpg"), O_RDONLY) } == ENOENT)
            #expect(errnoOf { open(m.path("final.jpg"), O_RDONLY) } == ENOENT)
        }
    }

    /// FOPEN_NOFLUSH: close(2) of such an open sends no FLUSH (issue 18: a round trip per read
    /// open); other opens still get theirs.
    @Test func noFlushOpensSendNoFlush() throws {
        let fs = ToyFS()
        let quiet = fs.addFile("quiet", data: [1, 2, 3]) { $0.noFlush = true }
        let plain = fs.addFile("plain", data: [1, 2, 3])
        try withMount(fs, options: .test(passthrough: false)) { m in
            let quietBytes = try readFile(m.path("quiet"))
            let plainBytes = try readFile(m.path("plain"))
            #expect(quietBytes == [1, 2, 3])
            #expect(plainBytes == [1, 2, 3])
            // FLUSH is synchronous in close(2): counted by the time close returned.
            let st = fs.mutate { $0 }
            #expect(st.flushCalls[quiet, default: 0] == 0)
            #expect(st.flushCalls[plain, default: 0] >= 1)
        }
    }

    @Test func nonUTF8Names() throws {
        let fs = ToyFS()
        try withMount(fs) { m in
            let raw: [UInt8] = [0x66, 0xFF, 0x2E, 0x6A, 0xFE, 0x70]  // "f\xFF.j\xFEp"
            let path = m.cPath(raw)
            let fd = path.withUnsafeBufferPointer { open($0.baseAddress!, O_CREAT | O_WRONLY, 0o644) }
            #expect(fd >= 0)
            if fd >= 0 { close(fd) }
            let name = fs.mutate { $0.nodes[.root]!.childNames.first }
            #expect(name?.bytes == raw)
            #expect(name?.string == nil)
            let listed: [[UInt8]] = try listDirectory(Array(m.root.utf8CString))
            #expect(listed == [raw])
            var st = stat()
            #expect(path.withUnsafeBufferPointer { stat($0.baseAddress!, &st) } == 0)
            #expect(path.withUnsafeBufferPointer { unlink($0.baseAddress!) } == 0)
            let after: [String] = try listDirectory(m.root)
            #expect(after.isEmpty)
        }
    }

    @Test func invalidationReachesTheKernel() throws {
        // Long timeouts: the kernel trusts its caches until told otherwise.
        let fs = ToyFS(entryTimeout: 3600, attrTimeout: 3600)
        let a = fs.addFile("a", data: Array("0123456789".utf8)) { $0.keepCache = true }
        fs.addFile("b", data: [1])
        try withMount(fs) { m in
            // Attributes.
            #expect(try fileStat(m.path("a")).st_size == 10)
            fs.mutate { $0.nodes[a]!.attributes.size = 20; $0.nodes[a]!.data = Array("abcdefghijABCDEFGHIJ".utf8) }
            #expect(try fileStat(m.path("a")).st_size == 10, "attributes should still be cached")
            m.session.invalidateInode(a, offset: -1)  // attributes only
            m.session.flushNotifications()
            #expect(try fileStat(m.path("a")).st_size == 20)

            // Page cache (file kept open, keep_cache): stale until invalidated.
            let fd = try check(open(m.path("a"), O_RDONLY), "open a")
            defer { close(fd) }
            var buf = [UInt8](repeating: 0, count: 20)
            #expect(buf.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 20, 0) } == 20)
            #expect(buf == Array("abcdefghijABCDEFGHIJ".utf8))
            fs.mutate { $0.nodes[a]!.data = Array("ZYXWVUTSRQzyxwvutsrq".utf8) }
            #expect(buf.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 20, 0) } == 20)
            #expect(buf == Array("abcdefghijABCDEFGHIJ".utf8), "data should still be cached")
            m.session.invalidateInode(a)
            m.session.flushNotifications()
            #expect(buf.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 20, 0) } == 20)
            #expect(buf == Array("ZYXWVUTSRQzyxwvutsrq".utf8))

            // Entries: a name removed behind the kernel's back stays visible until invalidated.
            #expect(statErrno(m.path("b")) == 0)
            fs.detach("b")
            #expect(statErrno(m.path("b")) == 0, "entry should still be cached")
            m.session.invalidateEntry(parent: .root, name: Array("b".utf8))
            m.session.flushNotifications()
            #expect(statErrno(m.path("b")) == ENOENT)

            // Batches keep order and flush waits for all of them.
            for _ in 0..<100 { m.session.invalidateInode(a, offset: -1) }
            fs.mutate { $0.nodes[a]!.attributes.size = 7 }
            m.session.invalidateInode(a, offset: -1)
            m.session.flushNotifications()
            #expect(try fileStat(m.path("a")).st_size == 7)
        }
    }

    /// Reads one inotify event (mask, name) with a timeout.
    private func nextInotifyEvent(_ fd: Int32, timeout: Int32) -> (wd: Int32, mask: UInt32, name: [UInt8])? {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard Glibc.poll(&pfd, 1, timeout) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, 4096) }
        guard n >= 16 else { return nil }
        return buffer.withUnsafeBytes { raw in
            let wd = raw.loadUnaligned(fromByteOffset: 0, as: Int32.self)
            let mask = raw.loadUnaligned(fromByteOffset: 4, as: UInt32.self)
            let length = Int(raw.loadUnaligned(fromByteOffset: 12, as: UInt32.self))
            return (wd, mask, Array(raw[16..<min(n, 16 + length)].prefix { $0 != 0 }))
        }
    }

    @Test func notifyDeleteRemovesTheNameAndWakesInotify() throws {
        let fs = ToyFS(entryTimeout: 3600, attrTimeout: 3600)
        let d = fs.addFile("d", data: [1])
        let e = fs.addFile("e", data: [2])
        try withMount(fs) { m in
            #expect(statErrno(m.path("d")) == 0)
            #expect(statErrno(m.path("e")) == 0)
            let inotify = try check(inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC)), "inotify_init1")
            defer { close(inotify) }
            let watchD = try check(inotify_add_watch(inotify, m.path("d"), UInt32(IN_DELETE_SELF)), "watch d")
            try check(inotify_add_watch(inotify, m.path("e"), UInt32(IN_DELETE_SELF)), "watch e")

            // invalidateEntry drops the name but does not claim the inode was deleted...
            fs.detach("e")
            m.session.invalidateEntry(parent: .root, name: Array("e".utf8))
            m.session.flushNotifications()
            #expect(statErrno(m.path("e")) == ENOENT)
            #expect(nextInotifyEvent(inotify, timeout: 100) == nil)

            // ...notifyDelete does: watchers of the file get IN_DELETE_SELF.
            fs.detach("d")
            m.session.notifyDelete(parent: .root, child: d, name: Array("d".utf8))
            m.session.flushNotifications()
            let event = nextInotifyEvent(inotify, timeout: 60_000)
            #expect(event?.wd == watchD)
            #expect((event?.mask ?? 0) & UInt32(IN_DELETE_SELF) != 0, "no IN_DELETE_SELF after notifyDelete")
            #expect(statErrno(m.path("d")) == ENOENT)

            // A wrong child inode is ignored by the kernel (the cached entry stays).
            fs.addFile("f", data: [3])
            #expect(statErrno(m.path("f")) == 0)
            m.session.notifyDelete(parent: .root, child: e, name: Array("f".utf8))
            m.session.flushNotifications()
            #expect(statErrno(m.path("f")) == 0)
        }
    }

    @Test func notificationsFromInsideHandlersDoNotDeadlock() throws {
        // The kernel holds the directory's lock while the unlink handler runs; an entry
        // invalidation of that directory run synchronously there would wait for it forever.
        let fs = ToyFS(entryTimeout: 3600, attrTimeout: 3600)
        fs.addFile("victim", data: [1])
        let other = fs.addFile("other", data: [2])
        try withMount(fs) { m in
            #expect(statErrno(m.path("other")) == 0)
            let session = m.session
            fs.unlinkHook.withLock {
                $0 = { parent, name in
                    session.invalidateEntry(parent: parent, name: name.bytes)
                    session.invalidateEntry(parent: parent, name: Array("other".utf8))
                    session.notifyDelete(parent: parent, child: other, name: Array("other".utf8))
                    session.invalidateInode(parent)
                    session.flushNotifications()  // must not wait inside a handler
                }
            }
            fs.detach("other")
            let start = monotonicSeconds()
            #expect(unlink(m.path("victim")) == 0)
            #expect(monotonicSeconds() - start < 2)
            m.session.flushNotifications()
            #expect(statErrno(m.path("other")) == ENOENT)
        }
    }

    @Test func writebackCacheAndEscapedOptions() throws {
        let fs = ToyFS()
        var options = MountOptions.test(passthrough: false)
        options.writebackCache = true
        options.fsName = "toy,with comma"
        let status = try withMount(fs, options: options) { m in
            #expect(m.session.connection?.writebackCache == true)
            let mounts = try #require(TestSupport.readWhole("/proc/self/mounts"))
            #expect(mounts.contains("toy,with\\040comma \(m.root) fuse.toy"))
            let data = patternBytes(100_000, seed: 5)
            let fd = try check(open(m.path("wb"), O_CREAT | O_RDWR, 0o644), "create")
            try writeAll(fd: fd, data, chunk: 3000)  // unaligned writes: the kernel merges pages
            #expect(fsync(fd) == 0)
            #expect(close(fd) == 0)
            #expect(try readFile(m.path("wb")) == data)
            let ino = try #require(fs.inode(named: "wb"))
            #expect(fs.mutate { $0.nodes[ino]?.data } == data)
        }
        #expect(status == 0)
    }

    @Test func pollWakesUpThroughPollHandle() throws {
        let fs = ToyFS()
        let p = fs.addFile("pollable", data: Array("x".utf8)) { $0.pollable = true; $0.directIO = true }
        try withMount(fs) { m in
            let fd = try check(open(m.path("pollable"), O_RDONLY), "open pollable")
            defer { close(fd) }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            #expect(Glibc.poll(&pfd, 1, 0) == 0, "not ready yet")

            // A poller blocks; once the kernel has handed the daemon its poll handle (and the
            // poller still waits), the file becomes ready and the handle must wake it, long
            // before poll's own 60 s timeout. (A fixed 0.3 s delay and a 3 s bound were timing,
            // not conditions: a loaded machine broke them.)
            let result = Atomic<Int32>(-2), revents = Atomic<Int32>(0)
            let done = DispatchSemaphore(value: 0)
            Thread {
                var q = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                result.store(Glibc.poll(&q, 1, 60_000), ordering: .releasing)
                revents.store(Int32(q.revents), ordering: .releasing)
                done.signal()
            }.start()
            #expect(eventually(60) { fs.mutate { $0.pollHandles[p] != nil } }, "the kernel asked to be notified")
            #expect(result.load(ordering: .acquiring) == -2, "poll returned before the file was ready")
            fs.makeReady(p)
            #expect(done.wait(timeout: .now() + 50) == .success, "the poll handle did not wake the poller")
            #expect(result.load(ordering: .acquiring) == 1)
            #expect(Int16(revents.load(ordering: .acquiring)) & Int16(POLLIN) != 0)
        }
    }

    @Test func unmountFromAnotherThreadEndsRunPromptly() throws {
        let fs = ToyFS()
        fs.addFile("held", data: [1, 2, 3])
        // With a file and a directory still open on the mount: run() must return anyway.
        var fds: [Int32] = []
        let status = try withMount(fs) { m in
            fds.append(try check(open(m.path("held"), O_RDONLY), "open held"))
            fds.append(try check(open(m.root, O_RDONLY | O_DIRECTORY), "open root"))
        }
        #expect(status == 0)
        // The connection is gone: the descriptors fail instead of hanging.
        var byte: UInt8 = 0
        #expect(errnoOf { Glibc.read(fds[0], &byte, 1) } != 0)
        for fd in fds { close(fd) }

        // Idle mount, unmounted from a different thread while run() blocks on its own thread.
        let status2 = try withMount(ToyFS()) { m in
            let done = DispatchSemaphore(value: 0)
            Thread { m.session.unmount(); done.signal() }.start()
            #expect(done.wait(timeout: .now() + 60) == .success)
        }
        #expect(status2 == 0)
    }

    /// A process forked while a session ends holds a copy of its /dev/fuse descriptor until it
    /// execs; closing the session's own then does not end the connection. A request that process
    /// makes after the loop stopped (a chdir into the mount before its exec, say) waited for ever,
    /// and the process with it: a test run hung so. The session now aborts its connection itself.
    @Test(.enabled(if: ConnectionControl.available, "needs fusectl mounted at /sys/fs/fuse/connections (the session aborts its connection there)"))
    func anEndedSessionsConnectionEndsThoughAChildHoldsACopyOfTheDevice() throws {
        let fs = ToyFS()
        fs.addDirectory("inside")
        var toChild: [Int32] = [-1, -1], fromChild: [Int32] = [-1, -1]
        try check(pipe(&toChild), "pipe")
        try check(pipe(&fromChild), "pipe")
        for fd in toChild + fromChild { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        defer { for fd in toChild + fromChild where fd >= 0 { close(fd) } }
        var child = pid_t(0)
        defer {
            // Whatever happened, the child and the `stat` it ran go (a SIGKILL ends a request
            // they wait on, and with them the last copy of the device).
            if child > 0 { kill(-child, SIGKILL); var st: Int32 = 0; _ = waitpid(child, &st, 0) }
        }
        try withMount(fs) { m in
            // The copy, as fd 9 in the child (as a fork not yet exec'd would hold it): the child
            // goes into the mount while it is served, then, told to, asks it for its statfs.
            let copy = fcntl(m.session.core.deviceDescriptor, F_DUPFD_CLOEXEC, 10)
            try check(copy, "dup /dev/fuse")
            defer { close(copy) }
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
            posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
            posix_spawn_file_actions_adddup2(&actions, copy, 9)
            // Nothing else of this process (other tests run in parallel: a descriptor of theirs in
            // a mount of theirs, inherited here, made its unmount fail as busy).
            pg_spawn_closefrom(&actions, 10)
            var attributes = posix_spawnattr_t()
            posix_spawnattr_init(&attributes)
            defer { posix_spawnattr_destroy(&attributes) }
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
            posix_spawnattr_setpgroup(&attributes, 0)
            let script = #"cd "$0/inside" && echo in && read go && { stat -f . >/dev/null 2>&1; echo "status $?"; }"#
            let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/sh"), strdup("-c"), strdup(script), strdup(m.root), nil]
            defer { argv.forEach { free($0) } }
            guard posix_spawn(&child, "/bin/sh", &actions, &attributes, argv, environ) == 0 else {
                throw HarnessError(description: "cannot spawn /bin/sh")
            }
            close(fromChild[1]); fromChild[1] = -1
            close(toChild[0]); toChild[0] = -1
            #expect(readLine(fromChild[0], timeout: 60) == "in", "the child did not get into the mount")
        }
        // The session has ended and its mount is gone (withMount checked); the child still holds
        // a copy of the device and its working folder is the mount's.
        _ = write(toChild[1], "go\n", 3)
        let answer = readLine(fromChild[0], timeout: 30)
        #expect(answer != nil, "the child's request to the ended session still waits")
        #expect(answer != "status 0", "the ended session answered a request")
    }

    /// An administrator aborting a connection (`echo 1 > /sys/fs/fuse/connections/N/abort`) ends
    /// the session; its mount must go with it. The device then reports an error as it does once
    /// the kernel has let go of the mount, and the session took that for "nothing to unmount":
    /// a dead mount was left ("Transport endpoint is not connected").
    @Test(.enabled(if: ConnectionControl.available, "needs fusectl mounted at /sys/fs/fuse/connections"))
    func aConnectionAbortedThroughFusectlLeavesNoMountBehind() throws {
        try withMount(ToyFS()) { m in
            let own = try #require(m.session.core.state.withLock { $0.own }, "the mount was not identified")
            let abort = "/sys/fs/fuse/connections/\((UInt64(own.major) << 20) | UInt64(own.minor))/abort"
            let fd = try check(open(abort, O_WRONLY), "open \(abort)")
            defer { close(fd) }
            #expect(write(fd, "1", 1) == 1)
            #expect(eventually(30) { !isMounted(m.root) }, "the aborted session left its mount")
        }
    }

    /// A session keeps the identity of the mount it made (by which it unmounts it at its end)
    /// only once a lookup sent through that mount reached its own handler; the filesystem never
    /// sees that lookup.
    @Test func aMountIsConfirmedAsTheSessionsOwnByAProbe() throws {
        let fs = ToyFS()
        try withMount(fs) { m in
            let (own, control, confirmed) = m.session.core.state.withLock { ($0.own, $0.control, $0.confirmed) }
            #expect(own != nil, "the mount was not identified")
            #expect(confirmed, "the probe did not reach the session")
            #expect(m.session.mountIdentified)
            if ConnectionControl.available { #expect(control != nil, "the fusectl folder was dropped") }
            #expect(fs.mutate { $0.lookupNames.allSatisfy { !$0.starts(with: Array(".photogate-probe-".utf8)) } },
                    "the filesystem saw the probe")
        }
    }

    /// A line read from `fd` within `timeout` seconds (without its newline), nil on timeout or EOF.
    private func readLine(_ fd: Int32, timeout: Double) -> String? {
        var line: [UInt8] = []
        let deadline = monotonicSeconds() + timeout
        while true {
            let left = deadline - monotonicSeconds()
            guard left > 0 else { return nil }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, Int32(min(left, 1) * 1000)) >= 0 else { return nil }
            guard p.revents != 0 else { continue }
            var byte: UInt8 = 0
            guard read(fd, &byte, 1) == 1 else { return nil }
            if byte == UInt8(ascii: "\n") { return String(decoding: line, as: UTF8.self) }
            line.append(byte)
        }
    }

    /// libfuse's signal handlers are process-wide (one `fuse_instance`): this assumes no other
    /// in-process session installs them at the same time (other targets mount in child processes).
    @Test func signalEndsTheLoop() throws {
        let status = try withMount(ToyFS()) { m in
            try m.session.installSignalHandlers()
            var current = sigaction()
            sigaction(SIGHUP, nil, &current)
            // Only send it if libfuse's handler is the one installed (it never replaces a custom one).
            let handler = unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self)
            guard handler != 0 && handler != 1 else {
                Issue.record("libfuse did not install a SIGHUP handler; not sending the signal")
                return
            }
            // Delivered to this (non-loop) thread: only the exit flag is set; the session must
            // notice it and end the loop by itself.
            let start = monotonicSeconds()
            kill(getpid(), SIGHUP)
            let ended = eventually(60) { !isMounted(m.root) }
            #expect(ended)
            #expect(monotonicSeconds() - start < 3)
        }
        #expect(status == SIGHUP)
        // Handlers are restored once run() returned.
        var after = sigaction()
        sigaction(SIGHUP, nil, &after)
        #expect(unsafeBitCast(after.__sigaction_handler.sa_handler, to: Int.self) == 0)
    }

    @Test func passthroughWhenAvailable() throws {
        let content = patternBytes(256 << 10, seed: 11)
        let dir = try makeTemporaryDirectory()
        defer { unlink(dir + "/backing"); rmdir(dir) }
        try Data(content).write(to: URL(fileURLWithPath: dir + "/backing"))
        let backing = try check(open(dir + "/backing", O_RDONLY), "open backing")
        defer { close(backing) }
        let fs = ToyFS()
        let ino = fs.addFile("through") {
            $0.passthroughFD = backing; $0.backingFD = backing; $0.attributes.size = UInt64(content.count)
        }
        try withMount(fs) { m in
            let info = try #require(m.session.connection)
            #expect(m.session.passthroughActive == info.passthroughActive)
            #expect(try readFile(m.path("through")) == content)
            #expect(try readFile(m.path("through")) == content)  // second open shares the backing id
            let reads = fs.mutate { $0.readCalls[ino, default: 0] }
            if m.session.passthroughActive {
                #expect(reads == 0, "with passthrough the kernel reads the backing file itself")
                // RELEASE is asynchronous after close(2).
                #expect(eventually(60) { m.session.core.backing.withLock { $0.isEmpty } },
                        "backing ids closed on the last release")
            } else {
                // libfuse \(m.session.libfuseVersion) or this kernel has no passthrough: the
                // filesystem served the reads itself.
                #expect(reads > 0)
            }
        }
    }

    @Test func sessionLifecycleEdges() throws {
        // Bad mount points.
        let session = try FUSESession(operations: ToyFS(), options: .test())
        #expect(throws: Errno.noEntry) { try session.mount(at: "/nonexistent/fusetests") }
        #expect(throws: Errno.notDirectory) { try session.mount(at: "/etc/hostname") }
        // run() without a mount returns at once.
        #expect(session.run() == -EINVAL)
        // Notifications on a session that is not mounted are harmless.
        session.invalidateInode(1)
        session.invalidateEntry(parent: 1, name: Array("x".utf8))
        session.flushNotifications()
        #expect(session.connection == nil)
        #expect(!session.libfuseVersion.isEmpty)

        // unmount() between mount() and run(): run() returns 0 immediately, nothing left mounted.
        let dir = try makeTemporaryDirectory()
        defer { rmdir(dir) }
        let second = try FUSESession(operations: ToyFS(), options: .test())
        try second.mount(at: dir)
        #expect(isMounted(dir))
        second.unmount()
        #expect(!isMounted(dir))
        let start = monotonicSeconds()
        #expect(second.run() == 0)
        #expect(monotonicSeconds() - start < 1)

        // A second run() after the session ended.
        #expect(second.run() == -EINVAL)

        // Errno basics.
        #expect(Errno.noEntry.rawValue == ENOENT)
        #expect(Errno.noEntry.description == "No such file or directory")
        #expect(Errno.notSupported == Errno(EOPNOTSUPP))
    }
}
