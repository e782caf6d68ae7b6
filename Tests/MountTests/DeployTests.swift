import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Deployment (issue 16): truthful `photogate mounts`, systemd readiness, and the scripts in
/// scripts/test.d (install, fstab, systemd units, a second user), which exit 77 to skip.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct Deploy {
    let app = "org.example.Deploy"

    func mountsJSON(_ f: MountFixture) throws -> [[String: Any]] {
        let o = try f.pg("mounts", "--json")
        return try #require(try JSONSerialization.jsonObject(with: Data(o.stdout.utf8)) as? [[String: Any]])
    }

    @Test func killedDaemonIsListedDeadWithItsStaleMountPoint() throws {
        let f = try MountFixture()
        try f.importPhotos(["a.jpg"])
        try f.pg("authorize", app, "--access", "read-write", "--status", "authorized")
        let mp = try f.mount(app)
        let live = try #require(try mountsJSON(f).first { $0["mountpoint"] as? String == mp })
        #expect(live["state"] as? String == "live")
        let pid = try #require(live["pid"] as? Int)
        // The read path reported is the one in effect: passthrough only with CAP_SYS_ADMIN.
        let log = (try? String(contentsOfFile: f.library + "/run/logs/\(app).read-write.log", encoding: .utf8)) ?? ""
        #expect(!log.contains("passthrough_open"))

        #expect(kill(pid_t(pid), SIGKILL) == 0)
        // (The killed daemon may linger as a zombie until its reaper runs: it must count as dead.)
        #expect(eventually { ((try? mountsJSON(f).first { $0["mountpoint"] as? String == mp }?["state"]) as? String) == "dead" })
        let dead = try #require(try mountsJSON(f).first { $0["mountpoint"] as? String == mp })
        #expect(dead["state"] as? String == "dead")
        #expect(dead["problem"] as? String == String(cString: strerror(ENOTCONN)))
        let table = try f.pgStatus("mounts")
        #expect(table.stdout.contains("dead"))
        #expect(table.stderr.contains("\(mp) is stale"))
        #expect(table.stderr.contains("fusermount3 -u -z"))

        #expect(try TestSupport.run("fusermount3", ["-u", "-z", mp]).status == 0)
        #expect(!isMounted(mp))
        #expect(try mountsJSON(f).isEmpty)
        // The mount point is usable again.
        _ = try f.mount(app, at: mp)
        #expect(try mountsJSON(f).map { $0["state"] as? String } == ["live"])
        try f.unmount(mp)
    }

    /// `photogate unmount` waits for the view's daemon to end, not for it to be reaped. A daemon
    /// that has ended is a zombie until its parent (PID 1, or a subreaper) collects it, and in a
    /// container whose first process reaps late or never that takes a while: before, `unmount`
    /// polled `kill(pid, 0)`, which succeeds on a zombie, until its 10 s give-up, every time.
    /// Here python3 is a subreaper that adopts the daemon and does not reap it until `unmount`
    /// has returned; 9 s is below that give-up, and far above the unmount's own ~60 ms.
    @Test func unmountDoesNotWaitForTheEndedDaemonToBeReaped() throws {
        let f = try MountFixture()
        try f.importPhotos(["a.jpg"])
        try f.pg("authorize", app, "--access", "read-write", "--status", "authorized")
        let mp = f.dir + "/zombie-mnt"
        try FileManager.default.createDirectory(atPath: mp, withIntermediateDirectories: true)
        defer { FUSECleanup.abortAndDetach(mp) }
        let py = """
        import ctypes, json, os, subprocess, sys
        pg, lib, app, mp = sys.argv[1:5]
        assert ctypes.CDLL(None).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
        subprocess.run([pg, "mount", "--library", lib, app, mp], check=True, stdout=subprocess.DEVNULL)
        mounts = json.loads(subprocess.run([pg, "mounts", "--json", "--library", lib], check=True, capture_output=True).stdout)
        pid = next(m["pid"] for m in mounts if m["mountpoint"] == mp)
        # The daemon left `photogate mount` and is this process's child now.
        assert open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1] == str(os.getpid())
        unmount = subprocess.Popen([pg, "unmount", "--library", lib, mp], stdout=subprocess.DEVNULL)
        try:
            code = unmount.wait(timeout=9)
        except subprocess.TimeoutExpired:
            unmount.kill(); unmount.wait()
            code = "still waiting after 9 s"
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        os.waitpid(pid, 0)
        print(f"unmount={code} daemon={state}")
        """
        let o = try TestSupport.run("/usr/bin/python3", ["-c", py, TestSupport.photogateBinary, f.library, app, mp])
        #expect(o.status == 0, "\(o.stderr)")
        // The daemon had ended (a zombie, never reaped meanwhile), and unmount returned success.
        #expect(o.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "unmount=0 daemon=Z")
        #expect(!isMounted(mp))
    }

    @Test func foregroundMountTellsSystemdItIsReady() throws {
        let f = try MountFixture()
        try f.importPhotos(["a.jpg"])
        try f.pg("authorize", app, "--access", "read-write", "--status", "authorized")
        let mp = f.dir + "/notify-mnt"
        try FileManager.default.createDirectory(atPath: mp, withIntermediateDirectories: true)
        let socketPath = f.dir + "/notify.sock"
        let sock = try NotifySocket(path: socketPath)
        defer { sock.close() }

        let p = Process()
        p.executableURL = URL(fileURLWithPath: TestSupport.photogateBinary)
        p.arguments = ["mount", app, mp, "--foreground"]
        var env = ProcessInfo.processInfo.environment
        env["PHOTOGATE_LIBRARY"] = f.library
        env["NOTIFY_SOCKET"] = socketPath
        p.environment = env
        p.standardError = FileHandle.nullDevice
        try p.run()
        defer {
            if p.isRunning { p.terminate() }
            FUSECleanup.abortAndDetach(mp)
        }
        let first = try #require(sock.receive(timeout: 60), "no notification from the daemon")
        #expect(first.contains("READY=1"))
        #expect(isMounted(mp), "READY=1 must come once the view is mounted")
        #expect(listing(mp) == ["Albums", "Shared", "a.jpg"])
        p.terminate()   // SIGTERM, as systemctl stop
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
        #expect(!isMounted(mp))
        #expect(sock.receive(timeout: 60)?.contains("STOPPING=1") == true)
    }

    /// Runs scripts/test.d/NAME.sh: 0 passes, 77 skips (its message says why), else fails.
    func script(_ name: String) throws {
        let path = TestSupport.packageRoot + "/scripts/test.d/\(name).sh"
        let o = try TestSupport.run("/bin/bash", [path], environment: ["PHOTOGATE_BIN": TestSupport.photogateBinary])
        switch o.status {
        case 0: break
        case 77:
            // Reported as a skip (cancelled), not as a pass.
            let why = o.stderr.split(separator: "\n").last.map(String.init) ?? "\(name): SKIPPED"
            print(why)
            try Test.cancel(Comment(rawValue: why))
        default: Issue.record("scripts/test.d/\(name).sh exited \(o.status):\n\(o.stderr.suffix(4000))")
        }
    }

    @Test func systemdUnitsVerify() throws { try script("units") }
    @Test func fstabLinesMount() throws { try script("fstab") }
    @Test func secondUserMountsThroughFusermount() throws { try script("user") }
    /// root refuses a library another user owns (grant, import, mount, verify...), changing nothing.
    @Test func rootRefusesALibraryAnotherUserOwns() throws { try script("foreign-library") }
    @Test func runSandboxSeesOnlyItsView() throws { try script("run") }
    /// The catalog is in photogate.sqlite once the last process lets go; a damaged one is said so
    /// and nothing is made over it; backup, and rebuild from the store.
    @Test func theCatalogSurvivesAndADamagedOneIsSaidSo() throws { try script("catalog") }
    /// import catalogs the bytes it stores, refuses a --reference source changed while read, and
    /// never hangs on a FIFO.
    @Test func importCatalogsTheBytesItStores() throws { try script("import-race") }
    /// explain says what a mount's open does, through the mount's own calls.
    @Test func explainSaysWhatTheMountDoes() throws { try script("explain") }
    /// A file refused at its opener's close stays refused, whoever writes the rest.
    @Test func aRefusedCloseIsFinal() throws { try script("refused-final") }
    @Test func aRemovedRunFolderIsMadeAgainByTheMount() throws { try script("run-removed") }
    /// Upload folders are capped, and their listings are whole and read in sorted batches.
    @Test func uploadFoldersAreCappedAndListedInBatches() throws { try script("folders") }
    /// `unmount` of a view whose daemon does not end (stopped) exits 69 and names it.
    @Test func unmountSaysWhenTheDaemonHasNotEnded() throws { try script("unmount-stuck") }
    /// The web app in Debian's chromium: picking, requests, continuous mode, Recently Deleted,
    /// thumbnails, and every rule of a local web server tried from outside (issue 35).
    @Test func theWebAppInARealBrowser() throws { try script("webui") }
    /// A request reaches the person as a desktop notification on a session bus (its reason as
    /// text, linking to a running ui); without a bus it is recorded all the same.
    @Test func requestsAreAnnouncedOnTheDesktop() throws { try script("notify") }
    /// root's mount, unmount and run --bind follow no link and pass no folder another user may
    /// change, unmount only this library's views, and mount nowhere inside the library.
    @Test func cliPathsFollowNoOtherUsersLinkAndStayOutOfTheLibrary() throws { try script("cli-paths") }
    /// A view mounted for a run follows the run, whoever else uses it, and touches no other mount.
    @Test func runLifelineKeepsAReusedViewAndTouchesNoOtherMount() throws { try script("run-lifeline") }
    /// A daemon's mount is identified from the kernel's list when it is made, not by its path
    /// again (a folder swapped meanwhile), and only while it is alive (ids and devices are reused).
    @Test func aDaemonIdentifiesItsMountFromTheKernelNotThePath() throws { try script("mount-identity-race") }
    @Test func aLifelineDetachesNothingOnceItsMountIsGone() throws { try script("lifeline-id-reuse") }
    /// A mount unmounted before INIT frees its id and device at once: the daemon's fusectl folder
    /// and identity, read by them, are its own only if its connection still lives afterwards.
    @Test func aDaemonTakesNoOtherConnectionsFolderForItsOwn() throws { try script("control-reuse") }
    /// Nor another mount of its type and source made elsewhere while its own was detached and held.
    @Test func aDaemonTakesNoMountElsewhereForItsOwn() throws { try script("pin-detach") }
    /// An edit closed unchanged at the write limit, then another opened: the open waits for the
    /// first one's release, which the kernel sends after close(2) returned (forced by a shim).
    @Test func anEditOpenAfterAnotherClosedWaitsForItsRelease() throws { try script("edit-release") }
    /// Only a couple of edit opens past the limit wait at once (an edit "closed" by close(dup(fd))
    /// looks like one about to be released): a third is refused at once, not holding a thread.
    @Test func onlyACoupleOfEditOpensWaitForARelease() throws { try script("edit-wait-cap") }
    /// Eight writers' closes share the catalog log's syncs; the daemon is killed while one is held
    /// (a shim) with several closes waiting on it and the next (issue 39's group commit): every
    /// close that returned 0 is an asset after recovery, none is partial, `verify` is clean.
    @Test func aDaemonKilledInTheMiddleOfAGroupCommitLosesNoSavedPhoto() throws { try script("group-sync-kill") }
    /// A foreground daemon whose stderr's reader has gone ends cleanly at its unmount (exit 0, its
    /// registry entry removed, the app's reads in the access report), not killed by SIGPIPE.
    @Test func aForegroundDaemonWithADeadStderrEndsCleanly() throws { try script("foreground-dead-stderr") }
    /// Builds a release the first time (minutes); later runs reuse it.
    @Test func installRunsWithoutTheCheckoutAndUninstallsCleanly() throws { try script("install") }
    /// The README's quick start, as written, reaches a mounted view, sees a revoke, and unmounts.
    @Test func theReadmeQuickStartRuns() throws { try script("quickstart") }
    /// Two hosts on one catalog on a real PostgreSQL and one shared folder (issue 41): a grant on
    /// one reaches the other's running mount, across a killed listener and a server restart, and
    /// that mount fails closed while the server is gone, then recovers without a remount.
    @Test func twoHostsShareOneLibraryOnPostgreSQL() throws { try script("several-hosts") }
    /// A second host's init that names a store other than the catalog's shared folder is refused
    /// (issue 41): joined, it would write its originals where no other host looks.
    @Test func joiningACatalogWithAnotherStoreIsRefused() throws { try script("pg-join-other-store") }
    /// A close whose commit reached PostgreSQL but whose answer was cut (issue 41) was told saved:
    /// the retry finds it committed and moves its file into the store, for a new photo and an edit.
    @Test func aCloseWhoseCommitAnswerWasCutIsNotLost() throws { try script("pg-commit-unknown") }
    /// A sidecar's close whose commit went through but whose answer was cut leaves no catalog row
    /// naming a file the store lacks (issue 41): the write asks the server whether it committed.
    @Test func aSidecarWhoseCommitAnswerWasCutLeavesNoBrokenRow() throws { try script("pg-commit-unknown-sidecar") }
    /// The same while the server cannot be asked (its postmaster stopped): the close fails, but
    /// its file stays for recovery, which moves it into the store once the row is seen (issue 41).
    @Test func aSidecarWhoseCommitCannotBeAskedAboutKeepsItsFile() throws { try script("pg-commit-unknown-unreachable") }
    /// An import whose batch's commit cannot be asked about fails but keeps its copies, which the
    /// next writer's recovery moves in once the rows are seen (issue 41).
    @Test func anImportWhoseCommitCannotBeAskedAboutKeepsItsCopies() throws { try script("pg-import-unknown") }
    /// A sidecar's close whose COMMIT stays unanswered past every wait of the client (a commit
    /// held for a synchronous standby that does not come) leaves no catalog row naming a file the
    /// store lacks once the server lets it through (issue 41).
    @Test func aCommitUnansweredPastTheClientsWaitsLeavesNoBrokenRow() throws { try script("pg-commit-unknown-long") }
    /// A server that stops answering (a partition; its processes stopped) blanks the views within
    /// the fail-closed delay, not once a blocked statement times out (issue 41).
    @Test func aPartitionFromTheCatalogFailsClosedInTime() throws { try script("pg-partition") }
    /// A partition that comes while the mount reads the catalog (a refresh in a statement the
    /// server will not answer) blanks the views within the fail-closed delay too (issue 41).
    @Test func aPartitionDuringARefreshFailsClosedInTime() throws { try script("pg-partition-refresh") }
    /// A writer stopped inside its transaction (holding the write lock every host's writes take)
    /// does not stop every other host's writes for as long as it stays stopped (issue 41).
    @Test func aStoppedWriterDoesNotBlockOtherHostsWrites() throws { try script("pg-stalled-writer") }
    /// A process stopped inside the upgrade of a catalog made by an earlier photogate, or a read
    /// that never ends behind which the upgrade waits, does not stop every host; the upgrade that
    /// gives up says why and changes nothing (issue 41).
    @Test func aStoppedUpgradeDoesNotBlockOtherHosts() throws { try script("pg-stalled-upgrade") }
    /// An SQLite library migrated into PostgreSQL and a shared folder (issue 41): refused while it
    /// has a mount running or into a catalog that is not empty (nothing changed); SIGKILLed inside
    /// its transaction it leaves the catalog empty and runs again; then every listing, and what a
    /// mount shows, byte for byte, is the same on both, and both verify clean.
    @Test func anSQLiteLibraryMigratesIntoPostgreSQL() throws { try script("migrate") }
    /// Two hosts writing into add-only mounts of one shared store at once, one host's daemon
    /// SIGKILLed in the middle and recovered while the other writes (issue 41): every copy that
    /// returned 0 is an asset with its bytes on both hosts, verify is clean on both, no file is
    /// claimed twice, and nothing of the other host's is touched.
    @Test func twoHostsWriteIntoOneStoreAndOneIsKilled() throws { try script("several-writers") }
}

/// A unix datagram socket standing in for systemd's $NOTIFY_SOCKET.
final class NotifySocket {
    let fd: Int32
    init(path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw FixtureError("socket: \(errno)") }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in for (i, b) in bytes.enumerated() { raw[i] = b } }
        let ok = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard ok == 0 else { throw FixtureError("bind \(path): \(errno)") }
    }
    func receive(timeout: Double) -> String? {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, Int32(timeout * 1000)) > 0 else { return nil }
        var buf = [UInt8](repeating: 0, count: 4096)
        let n = recv(fd, &buf, buf.count, 0)
        return n > 0 ? String(decoding: buf[0..<n], as: UTF8.self) : nil
    }
    func close() { Glibc.close(fd) }
}
