import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 14, other users and `allow_other`: a mount serves its owner only; with allow_other,
/// the kernel enforces the mode bits photogate reports (default_permissions), so another local
/// user can read what they allow and cannot create, delete, or file requests.
@Suite(.serialized) struct OtherUsers {
    static let otherUser = TestSupport.otherUser

    /// A second local user (TestSupport's); nil when it cannot be had here (the test skips).
    static func secondUser(_ test: String) throws -> String? { try TestSupport.secondUser(test) }

    /// `sh -c SCRIPT` as `user`, with the arguments as $1...
    static func shellAs(_ user: String, _ script: String, _ args: String...) throws -> TestSupport.Output {
        try TestSupport.run("runuser", ["-u", user, "--", "/bin/sh", "-c", script, "sh"] + args)
    }

    /// A folder another user can reach (the test temp folder is private), for mount points.
    static func openFolder() throws -> String { try TestSupport.publicTempDir("others") }

    @Test func withoutAllowOtherTheKernelKeepsOtherUsersOut() throws {
        guard fuseAvailable, let user = try Self.secondUser("withoutAllowOtherTheKernelKeepsOtherUsersOut") else { return }
        let f = try MountFixture()
        let open = try Self.openFolder()
        defer { if !isMounted(open + "/m") { TestSupport.remove(open) } }
        try f.importPhotos(["a.jpg"])
        try f.pg("authorize", "org.example.Frame", "--status", "authorized")
        let m = try f.mount("org.example.Frame", at: open + "/m")
        #expect(photos(m) == ["a.jpg"], "the owner sees the view")
        for (what, script) in [("stat", "stat \"$1\""), ("ls", "ls \"$1\""), ("read", "cat \"$1/a.jpg\" >/dev/null"),
                               ("create", "echo x > \"$1/new.jpg\""), ("request", "echo picker > \"$1/.photogate/request\"")] {
            let o = try Self.shellAs(user, script, m)
            #expect(o.status != 0, "\(what) as another user succeeded")
            #expect(o.stderr.contains("Permission denied"), "\(what): \(o.stderr)")
        }
        #expect(photos(m) == ["a.jpg"])
        #expect(try pendingRequests(f).isEmpty)
        try f.unmount(m)
        withExtendedLifetime(f) {}
    }

    /// In a `--no-open` mount the daemon sees only reads, and who reads is known only there: another
    /// user's reads were recorded as the app's (a red-team finding), so a hostile user could fill
    /// the app's report with reads it never did.
    @Test func anotherUsersReadsOfANoOpenViewAreNotTheApps() throws {
        guard fuseAvailable, let user = try Self.secondUser("anotherUsersReadsOfANoOpenViewAreNotTheApps") else { return }
        let f = try MountFixture()
        f.extraEnvironment["PHOTOGATE_REPORT_FLUSH_MS"] = "100"
        let open = try Self.openFolder()
        defer { if !isMounted(open + "/m") { TestSupport.remove(open) } }
        try f.importPhotos(["a.jpg", "b.jpg"])
        try f.pg("authorize", "org.example.Frame", "--status", "authorized")
        let m = try f.mount("org.example.Frame", extra: ["--no-open", "-o", "allow_other"], at: open + "/m")
        let o = try Self.shellAs(user, "cat \"$1/a.jpg\" >/dev/null", m)
        #expect(o.status == 0, "another user's read failed: \(o.stderr)")
        #expect(readAll(m + "/b.jpg") != nil)
        #expect(eventually(30) { ((try? f.pg("report", "org.example.Frame").stdout) ?? "").contains("b.jpg") })
        #expect(!(try f.pg("report", "org.example.Frame").stdout.contains("a.jpg")), "another user's read was recorded as the app's")
        try f.unmount(m)
        withExtendedLifetime(f) {}
    }

    @Test func withAllowOtherTheKernelChecksTheModeBits() throws {
        guard fuseAvailable, let user = try Self.secondUser("withAllowOtherTheKernelChecksTheModeBits") else { return }
        let f = try MountFixture()
        f.extraEnvironment["PHOTOGATE_REPORT_FLUSH_MS"] = "100"
        let open = try Self.openFolder()
        defer { if !isMounted(open + "/m") { TestSupport.remove(open) } }
        let src = try f.importPhotos(["a.jpg", "b.jpg"])
        // Authorized: the app itself may create, delete and request; another user may not.
        try f.pg("authorize", "org.example.Frame", "--status", "authorized")
        let m = try f.mount("org.example.Frame", extra: ["-o", "allow_other"], at: open + "/m")
        let before = try f.assetsJSON().count
        // What the mode bits allow: list, stat, read the photos and the status.
        for (what, script) in [("ls", "ls \"$1\" | grep -qx a.jpg"), ("read", "test \"$(cat \"$1/a.jpg\" | wc -c)\" = \"$2\""),
                               ("status", "grep -q org.example.Frame \"$1/.photogate/status\"")] {
            let o = try Self.shellAs(user, script, m, String(readAll(src + "/a.jpg")?.count ?? -1))
            #expect(o.status == 0, "\(what) as another user failed: \(o.stderr)")
        }
        // Another user's read is not the app's: the access report has the owner's read of b.jpg
        // (written after), and nothing of a.jpg.
        #expect(readAll(m + "/b.jpg") != nil)
        #expect(eventually(30) { ((try? f.pg("report", "org.example.Frame").stdout) ?? "").contains("b.jpg") })
        #expect(!(try f.pg("report", "org.example.Frame").stdout.contains("a.jpg")), "another user's read was recorded as the app's")
        // What they do not: create, copy in, make folders, delete, rename, request.
        for (what, script) in [("create", "echo x > \"$1/new.jpg\""), ("copy", "cp \"$2\" \"$1/copy.jpg\""),
                               ("mkdir", "mkdir \"$1/folder\""), ("rm", "rm -f \"$1/a.jpg\""),
                               ("rename", "mv \"$1/a.jpg\" \"$1/c.jpg\""), ("request", "echo picker > \"$1/.photogate/request\"")] {
            let o = try Self.shellAs(user, script, m, src + "/b.jpg")
            #expect(o.status != 0, "\(what) as another user succeeded")
            #expect(o.stderr.contains("Permission denied"), "\(what): \(o.stderr)")
        }
        #expect(photos(m) == ["a.jpg", "b.jpg"])
        #expect(try f.assetsJSON().count == before, "another user's file became an asset")
        #expect(try f.pg("trash").stdout.contains("a.jpg") == false, "another user's rm reached the trash")
        #expect(try pendingRequests(f).isEmpty)
        // The request file is the owner's: 0200.
        var st = stat()
        #expect(stat(m + "/.photogate/request", &st) == 0 && st.st_mode & 0o777 == 0o200)
        // The owner still works as before.
        let fd = Glibc.open(m + "/.photogate/request", O_WRONLY)
        #expect(fd >= 0)
        if fd >= 0 {
            _ = "picker\n".withCString { Glibc.write(fd, $0, strlen($0)) }
            #expect(Glibc.close(fd) == 0)
        }
        #expect(try pendingRequests(f).map { $0["kind"] as? String } == ["picker"])
        try f.unmount(m)
        withExtendedLifetime(f) {}
    }
}

extension OtherUsers {
    /// A file being written into a mount other users reach (allow_other) is its writer's bytes:
    /// in an add-only mount nobody reads the library, and another user does not read an upload
    /// in flight either, whatever its mode bits say.
    @Test func anotherUserReadsNoFileBeingWritten() throws {
        guard fuseAvailable, let user = try Self.secondUser("anotherUserReadsNoFileBeingWritten") else { return }
        let f = try MountFixture()
        let open = try Self.openFolder()
        defer { if !isMounted(open + "/m") { TestSupport.remove(open) } }
        try f.pg("authorize", "org.example.Camera", "--access", "add-only", "--status", "authorized")
        let m = try f.mount("org.example.Camera", access: "add-only", extra: ["-o", "allow_other"], at: open + "/m")
        let photo = try TestMedia.jpeg(tag: "an upload in flight")
        let fd = Glibc.open(m + "/IMG_5001.jpg", O_CREAT | O_WRONLY | O_EXCL, 0o644)
        #expect(fd >= 0, "create: errno \(errno)")
        let half = photo.count / 2
        #expect(photo.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, half) } == half)
        let o = try Self.shellAs(user, "cat \"$1/IMG_5001.jpg\" | wc -c", m)
        #expect(!o.stderr.isEmpty && o.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "0",
                "another user read \(o.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) bytes of an upload in flight: \(o.stderr)")
        // The writer itself still reads back its own bytes, and the upload completes.
        let back = Glibc.open(m + "/IMG_5001.jpg", O_RDONLY)
        var buf = [UInt8](repeating: 0, count: half)
        #expect(back >= 0 && pread(back, &buf, half, 0) == half && buf == Array(photo.prefix(half)))
        if back >= 0 { Glibc.close(back) }
        #expect(photo.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + half, photo.count - half) } == photo.count - half)
        #expect(Glibc.close(fd) == 0)
        #expect(try f.assetsJSON().count == 1)
        try f.unmount(m)
        withExtendedLifetime(f) {}
    }
}

extension OtherUsers {
    /// Another user's opens (allow_other) hold the daemon's descriptors within a share of its
    /// budget: one user holding every photo open took the whole budget, and the owner's next
    /// open failed with EMFILE.
    @Test func anotherUserTakesOnlyAShareOfTheDescriptors() throws {
        guard fuseAvailable, let user = try Self.secondUser("anotherUserTakesOnlyAShareOfTheDescriptors") else { return }
        let f = try MountFixture()
        let open = try Self.openFolder()
        defer { if !isMounted(open + "/m") { TestSupport.remove(open) } }
        let mp = try Self.smallBudgetMount(f, at: open + "/m")
        defer { _ = try? TestSupport.run(TestSupport.photogateBinary, ["unmount", mp], environment: f.env); if isMounted(mp) { FUSECleanup.abortAndDetach(mp) } }
        let holding = try Self.hold(user, [mp + "/a.jpg"], limit: 5000)
        defer { holding.close() }
        let (held, err) = (holding.held, holding.err)
        #expect(err == Int(EMFILE), "the open past the share failed with errno \(err)")
        #expect(held >= 16 && held <= (600 - 256) / 8, "another user held \(held) descriptors")
        // The owner opens as before while that user holds its share.
        var mine: [Int32] = []
        defer { for fd in mine { close(fd) } }
        for _ in 0..<100 {
            let fd = Glibc.open(mp + "/a.jpg", O_RDONLY)
            if fd < 0 { break }
            mine.append(fd)
        }
        #expect(mine.count == 100, "the owner's open failed after \(mine.count): errno \(errno)")
        withExtendedLifetime(f) {}
    }
}

extension OtherUsers {
    /// Each open of `.photogate/refused` (and `status`, `changes`) kept a copy of its content in
    /// the daemon until its close, counted in no budget: another user (allow_other) held 19,900
    /// opens of `refused` and the daemon grew by 170 MB. Those opens now count in the user's share
    /// of the budget like its opens of photos, and are given back at their close. Found by a
    /// hostile review.
    @Test func anotherUsersOpensOfControlFilesStopAtItsShare() throws {
        guard fuseAvailable, let user = try Self.secondUser("anotherUsersOpensOfControlFilesStopAtItsShare") else { return }
        let f = try MountFixture()
        let open = try Self.openFolder()
        defer { if !isMounted(open + "/m") { TestSupport.remove(open) } }
        let mp = try Self.smallBudgetMount(f, at: open + "/m")
        defer { _ = try? TestSupport.run(TestSupport.photogateBinary, ["unmount", mp], environment: f.env); if isMounted(mp) { FUSECleanup.abortAndDetach(mp) } }
        // A refusal on record, so that `refused` has content.
        let refusedName = mp + "/notes.jpg"
        let fd = Glibc.open(refusedName, O_CREAT | O_WRONLY | O_EXCL, 0o644)
        if fd >= 0 { _ = "not a photo".withCString { Glibc.write(fd, $0, strlen($0)) }; Glibc.close(fd) }
        #expect(eventually { (readAll(mp + "/.photogate/refused")?.count ?? 0) > 0 })
        // `refused` (names the app tried to save, through any of its mounts) is the owner's alone.
        let refused = try Self.hold(user, [mp + "/.photogate/refused"], limit: 1)
        refused.close()
        #expect(refused.held == 0 && refused.err == Int(EACCES), "another user opened refused: \(refused.held), errno \(refused.err)")
        var st = stat()
        #expect(stat(mp + "/.photogate/refused", &st) == 0 && st.st_mode & 0o777 == 0o400, "refused's mode: \(String(st.st_mode & 0o777, radix: 8))")
        let control = ["status", "changes"].map { mp + "/.photogate/" + $0 }
        let first = try Self.hold(user, control, limit: 5000)
        #expect(first.err == Int(EMFILE), "the open past the share failed with errno \(first.err)")
        #expect(first.held >= 16 && first.held <= (600 - 256) / 8, "another user held \(first.held) opens of control files")
        // Its photos count in the same share: none is left while it holds its control files.
        let photo = try Self.hold(user, [mp + "/a.jpg"], limit: 1)
        photo.close()
        #expect(photo.held == 0 && photo.err == Int(EMFILE), "a photo opened past the share: \(photo.held), errno \(photo.err)")
        // The owner opens as before.
        var mine: [Int32] = []
        for _ in 0..<100 {
            let fd = Glibc.open((control + [mp + "/.photogate/refused"])[mine.count % 3], O_RDONLY)
            if fd < 0 { break }
            mine.append(fd)
        }
        #expect(mine.count == 100, "the owner's open failed after \(mine.count): errno \(errno)")
        for fd in mine { Glibc.close(fd) }
        // Closed, the share is given back.
        first.close()
        let again = try Self.hold(user, control, limit: 10)
        again.close()
        #expect(again.held == 10, "after its closes the other user opened \(again.held), errno \(again.err)")
        withExtendedLifetime(f) {}
    }
}

extension OtherUsers {
    /// `a.jpg` imported, `org.example.Frame` authorized and mounted at `mp` with `allow_other` by
    /// a daemon with 600 descriptors: a budget of 600 - 256, others' share half, each user's an
    /// eighth. The caller unmounts it.
    static func smallBudgetMount(_ f: MountFixture, at mp: String) throws -> String {
        try f.importPhotos(["a.jpg"])
        try f.pg("authorize", "org.example.Frame", "--status", "authorized")
        try FileManager.default.createDirectory(atPath: mp, withIntermediateDirectories: true)
        let m = try TestSupport.run("/bin/sh", ["-c", "ulimit -n 600 && exec \"$0\" \"$@\"", TestSupport.photogateBinary,
                                                "mount", "org.example.Frame", mp, "-o", "allow_other"], environment: f.env)
        #expect(m.status == 0, "\(m.stderr)")
        return mp
    }

    /// Opens `files` in turn as `user`, until `limit` opens or the first error; says how many it
    /// held and the errno, then holds them until `close` (its stdin closes).
    static func hold(_ user: String, _ files: [String], limit: Int) throws -> (held: Int, err: Int, close: () -> Void) {
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
        holder.arguments = ["-u", user, "--", "python3", "-c", """
            import os, sys
            files, limit = sys.argv[2:], int(sys.argv[1])
            fds, err = [], 0
            while len(fds) < limit:
                try: fds.append(os.open(files[len(fds) % len(files)], os.O_RDONLY))
                except OSError as e: err = e.errno; break
            print(len(fds), err, flush=True)
            sys.stdin.read()
            """, String(limit)] + files
        let input = Pipe(), output = Pipe()
        holder.standardInput = input
        holder.standardOutput = output
        try holder.run()
        var line = Data()
        while !line.contains(0x0a) {
            let d = output.fileHandleForReading.availableData
            if d.isEmpty { break }
            line.append(d)
        }
        let fields = String(decoding: line, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { Int($0) }
        #expect(fields.count == 2, "the holder said: \(String(decoding: line, as: UTF8.self))")
        return (fields.first ?? -1, fields.last ?? -1, { try? input.fileHandleForWriting.close(); holder.waitUntilExit() })
    }
}

/// The photos a mount lists (the folders and control files aside).
func photos(_ m: String) -> [String] { listing(m).filter { $0.hasSuffix(".jpg") } }

/// `photogate requests --json`.
func pendingRequests(_ f: MountFixture) throws -> [[String: Any]] {
    try JSONSerialization.jsonObject(with: Data(f.pg("requests", "--json").stdout.utf8)) as? [[String: Any]] ?? []
}
