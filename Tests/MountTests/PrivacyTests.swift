import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 14: what a mount makes in the library (daemon log, mount registry, the database's WAL
/// and SHM, the daemon's temp folder and files, new store folders, the bell) is owner-only too,
/// even when photogate runs under umask 022.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct MountPrivacy {
    let app = "org.example.Editor"

    /// Entries under `root` whose mode is not 0700 (folders) or 0600 (files).
    func notPrivate(_ root: String) -> [String] {
        var bad: [String] = []
        for rel in [""] + ((try? FileManager.default.subpathsOfDirectory(atPath: root)) ?? []) {
            let path = rel.isEmpty ? root : root + "/" + rel
            var st = stat()
            guard lstat(path, &st) == 0 else { continue }   // gone meanwhile (a temp file committed)
            let mode = st.st_mode & 0o7777
            let want: mode_t = (st.st_mode & S_IFMT) == S_IFDIR ? 0o700 : 0o600
            if mode != want { bad.append("\(rel.isEmpty ? "." : rel) \(String(mode, radix: 8))") }
        }
        return bad
    }

    @Test func filesAMountMakesAreOwnerOnlyUnderUmask022() throws {
        let old = umask(0o022)   // photogate and the daemon it spawns inherit it
        defer { umask(old) }
        let f = try MountFixture()
        try f.importPhotos(["a.jpg"])
        try f.pg("authorize", app, "--status", "authorized")
        let mp = try f.mount(app)
        // An app writes a new photo: the daemon's temp file exists until the close.
        let fd = open(mp + "/new.jpg", O_CREAT | O_EXCL | O_WRONLY, 0o644)
        #expect(fd >= 0)
        let bytes = try TestMedia.jpeg(tag: "privacy")
        #expect(bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count)
        let temps = ((try? FileManager.default.subpathsOfDirectory(atPath: TestSupport.sharedFolder(of: f.library) + "/tmp")) ?? []).filter { $0.hasSuffix(".jpg") || $0.hasSuffix(".part") }
        #expect(!temps.isEmpty, "no temp file while writing")
        #expect(notPrivate(f.library).isEmpty, "while writing: \(notPrivate(f.library))")
        #expect(close(fd) == 0)
        #expect(eventually { (try? f.assetsJSON().count) == 2 })
        // What a running mount keeps in the library.
        let files = (try? FileManager.default.subpathsOfDirectory(atPath: f.library)) ?? []
        // Where the originals and temps are: the library's folder, or a linked one's shared folder.
        let shared = TestSupport.sharedFolder(of: f.library)
        let sharedFiles = shared == f.library ? files : (try? FileManager.default.subpathsOfDirectory(atPath: shared)) ?? []
        for want in (TestSupport.onPostgres ? ["catalog.conf"] : ["photogate.sqlite-wal", "photogate.sqlite-shm"]) + ["run/bell"] {
            #expect(files.contains(want), "\(want) missing: \(files)")
        }
        #expect(files.contains { $0.hasPrefix("run/logs/") && $0.hasSuffix(".log") }, "\(files)")
        #expect(files.contains { $0.hasPrefix("run/mounts/") && $0.hasSuffix(".json") }, "\(files)")
        #expect(sharedFiles.contains { $0.hasPrefix("tmp/mount-") }, "\(sharedFiles)")
        #expect(notPrivate(f.library).isEmpty, "mounted: \(notPrivate(f.library))")
        #expect(notPrivate(shared).isEmpty, "mounted: \(notPrivate(shared))")
        // And the new asset's store folder and file.
        let id = try #require(f.assetsJSON().first { $0["name"] as? String == "new.jpg" }?["id"] as? String)
        #expect(sharedFiles.contains("store/\(id.prefix(2))"), "\(sharedFiles)")
        try f.unmount(mp)
        #expect(notPrivate(f.library).isEmpty, "after unmount: \(notPrivate(f.library))")
    }

    /// `photogate run` mounts its view inside the library (run/sandbox/). Making an open library
    /// private must not walk into that view (its modes are its daemon's, and cannot be changed):
    /// it did, every chmod there failed, and every command refused the library while a run was on.
    @Test func makingTheLibraryPrivateSkipsAViewMountedInsideIt() throws {
        let f = try MountFixture()
        try f.importPhotos(["a.jpg"])
        let app = "org.example.Inside"
        try f.pg("authorize", app, "--status", "authorized")
        let mp = f.library + "/run/sandbox/test/view"
        try FileManager.default.createDirectory(atPath: mp, withIntermediateDirectories: true)
        _ = try f.mount(app, at: mp)
        #expect(listing(mp).contains("a.jpg"))
        chmod(f.library, 0o755)
        let o = try f.pgStatus("assets")
        #expect(o.status == 0, "\(o.stderr)")
        #expect(o.stderr.contains("made it private"), "\(o.stderr)")
        var st = stat()
        #expect(stat(f.library, &st) == 0 && st.st_mode & 0o077 == 0)
        try f.unmount(mp)
    }

    /// The daemon's log is opened in run/logs/ following no symbolic link: a link left at its name
    /// (the red team's, to a file of root's) takes none of the daemon's output; the mount says why
    /// it cannot start (exit 72) and nothing is mounted.
    @Test func theDaemonLogIsNeverFollowedOutOfRun() throws {
        let f = try MountFixture()
        try f.importPhotos(["a.jpg"])
        try f.pg("authorize", app, "--status", "authorized")
        let victim = f.dir + "/victim"
        try Data("root's own bytes\n".utf8).write(to: URL(fileURLWithPath: victim))
        try FileManager.default.createDirectory(atPath: f.library + "/run/logs", withIntermediateDirectories: true)
        #expect(symlink(victim, f.library + "/run/logs/\(app).read-write.log") == 0)
        let mp = f.dir + "/log-mnt"
        try FileManager.default.createDirectory(atPath: mp, withIntermediateDirectories: true)
        let o = try f.pgStatus("mount", app, mp)
        if o.status == 0 { _ = try? f.pg("unmount", mp) }
        #expect(o.status == 72, "\(o.status) \(o.stderr)")
        #expect(o.stderr.contains("symbolic link"), "\(o.stderr)")
        #expect(!isMounted(mp))
        #expect(FileManager.default.contents(atPath: victim) == Data("root's own bytes\n".utf8), "the daemon logged through the symlink")
    }
}
