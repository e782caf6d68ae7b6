import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The access report (issue 36) through real mounts: each kind of access recorded once per day
/// with a count, nothing for the person's own commands, the report right after a daemon is
/// killed, and no app able to read it.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct AccessReportThroughMounts {
    let app = "org.example.Reporter"
    let otherApp = "org.example.Bystander"

    /// A fixture whose mounts write the report every 100 ms.
    func fixture() throws -> MountFixture {
        let f = try MountFixture()
        f.extraEnvironment["PHOTOGATE_REPORT_FLUSH_MS"] = "100"
        return f
    }

    struct Entry: Equatable, CustomStringConvertible {
        var app: String, kind: String, id: String?, name: String?, count: Int, days: Int
        var description: String { "\(app) \(kind) \(name ?? "-") x\(count)" }
    }

    func report(_ f: MountFixture, _ args: String...) throws -> [Entry] {
        let o = try f.pg(["report", "--json"] + args)
        let list = try #require(try JSONSerialization.jsonObject(with: Data(o.stdout.utf8)) as? [[String: Any]])
        return list.map { d in
            Entry(app: d["app"] as? String ?? "", kind: d["kind"] as? String ?? "", id: d["id"] as? String,
                  name: d["name"] as? String, count: d["count"] as? Int ?? -1, days: d["days"] as? Int ?? -1)
        }
    }

    func entry(_ list: [Entry], _ kind: String, _ name: String) -> Entry? {
        list.first { $0.kind == kind && $0.name == name }
    }

    @Test func eachKindOfAccessIsRecordedOncePerDayWithACount() throws {
        let f = try fixture()
        try f.importPhotos(["a.jpg", "b.jpg", "hidden.jpg"])
        try f.pg("authorize", app, "--status", "limited")
        try f.pg("grant", app, "a.jpg", "b.jpg")
        let mp = try f.mount(app)
        // read: three opens of a.jpg are one entry counted 3.
        for _ in 0..<3 { #expect(readAll(mp + "/a.jpg") != nil) }
        // created, then edited (its own file: a new version), then deleted.
        #expect(cpWrite(try TestMedia.jpeg(tag: "mine"), to: mp + "/mine.jpg") == 0)
        let mineID = try #require(try f.assetsJSON().first { $0["name"] as? String == "mine.jpg" }?["id"] as? String)
        #expect(cpWrite(try TestMedia.jpeg(tag: "mine, edited"), to: mp + "/mine.jpg") == 0)
        // refused: writing to the person's photo without consent, deleting it.
        #expect(openErrno(mp + "/b.jpg", O_WRONLY) == EACCES)
        #expect(errnoOf { unlink(mp + "/b.jpg") } == EACCES)
        // A photo the app cannot see leaves no trace: it was never this app's to be refused.
        #expect(openErrno(mp + "/hidden.jpg", O_RDONLY) == ENOENT)
        #expect(errnoOf { unlink(mp + "/mine.jpg") } == 0)
        var list: [Entry] = []
        #expect(eventually(30) {
            list = (try? report(f, app)) ?? []
            return list.count == 5 && list.contains { $0.kind == "deleted" }
        }, "the report: \(list)")
        #expect(entry(list, "read", "a.jpg").map { [$0.count, $0.days] } == [3, 1])
        #expect(list.first { $0.kind == "created" }?.id == mineID)
        #expect(list.first { $0.kind == "edited" }?.id == mineID)
        #expect(list.first { $0.kind == "deleted" }?.id == mineID)
        #expect(entry(list, "refused", "b.jpg")?.count == 2, "an edit and a delete refused: \(list)")
        #expect(!list.contains { $0.name == "hidden.jpg" })
        #expect(list.allSatisfy { $0.app == app })
        // Per photo: which apps read it.
        #expect(try report(f, "--asset", "a.jpg").map(\.kind) == ["read"])
        // Piped: tab-separated, a header, ISO dates.
        let piped = try f.pg("report", app).stdout.split(separator: "\n").map(String.init)
        #expect(piped.first == "LAST\tAPP\tKIND\tID\tNAME\tCOUNT\tDAYS\tFIRST")
        #expect(piped.count == 6 && piped.dropFirst().allSatisfy { $0.split(separator: "\t").count == 8 && $0.hasSuffix("Z") })
        try f.unmount(mp)
        // Nothing after the app's day is shown with --since in the future; unknown app: exit 66.
        #expect(try report(f, app, "--since", "2999-01-01").isEmpty)
        #expect(try f.pgStatus("report", "org.example.Nobody").status == 66)
        #expect(try f.pgStatus("report", "--since", "yesterday").status == 64)
        // --clear forgets it.
        try f.pg("report", "--clear", app)
        #expect(try report(f).isEmpty)
    }

    /// Findings of the review of the report (each failed before its fix): a read through a
    /// read-write open is a read; an editor's temp file dissolved into the photo it saved leaves
    /// no `created` of a photo that never was; a --no-open read spanning several batches counts once.
    @Test func readsThroughEditsCountAndTempFilesLeaveNoTrace() throws {
        let f = try fixture()
        try f.importPhotos(["e.jpg"])
        try f.importPadded("big.jpg")
        try f.pg("authorize", app, "--status", "limited")
        try f.pg("grant", app, "e.jpg")
        try f.pg("grant", app, "--edit", "e.jpg")
        let mp = try f.mount(app)
        // O_RDWR, read, close without writing: nothing saved, but the app read the photo.
        let fd = open(mp + "/e.jpg", O_RDWR)
        #expect(fd >= 0)
        var buf = [UInt8](repeating: 0, count: 1 << 16)
        #expect(read(fd, &buf, buf.count) > 0)
        close(fd)
        // A save by rename: the editor's temp file becomes the photo's new version.
        #expect(cpWrite(try TestMedia.jpeg(tag: "saved by rename"), to: mp + "/.e.jpg.tmp") == 0)
        #expect(rename(mp + "/.e.jpg.tmp", mp + "/e.jpg") == 0)
        var list: [Entry] = []
        #expect(eventually(30) {
            list = (try? report(f, app)) ?? []
            return list.contains { $0.kind == "edited" } && list.contains { $0.kind == "read" }
        }, "\(list)")
        try f.unmount(mp)
        list = try report(f, app)
        #expect(entry(list, "read", "e.jpg") != nil, "a read through O_RDWR was not recorded: \(list)")
        #expect(!list.contains { $0.kind == "created" }, "the dissolved temp file stays as created: \(list)")
        // --no-open: the first read of big.jpg recorded, then the rest of it read after that
        // batch was written: still one read.
        try f.pg("report", "--clear")
        try f.pg("authorize", app, "--status", "authorized")
        let no = try f.mount(app, extra: ["--no-open"])
        let bfd = open(no + "/big.jpg", O_RDONLY)
        #expect(bfd >= 0)
        #expect(pread(bfd, &buf, 4096, 0) == 4096)
        #expect(eventually(30) { ((try? report(f, app)) ?? []).contains { $0.name == "big.jpg" } })
        var off: off_t = 4096
        while true {
            let n = pread(bfd, &buf, buf.count, off)
            if n <= 0 { break }
            off += off_t(n)
        }
        close(bfd)
        try f.unmount(no)
        #expect(entry(try report(f, app), "read", "big.jpg")?.count == 1)
    }

    /// The person's own commands (import, grants, albums, options, listings) are not the app's.
    @Test func thePersonsOwnCommandsAreNotRecorded() throws {
        let f = try fixture()
        try f.importPhotos(["p.jpg", "q.jpg"])
        try f.pg("authorize", app, "--status", "limited")
        try f.pg("grant", app, "p.jpg")
        try f.pg("revoke", app, "p.jpg")
        try f.pg("album", "create", "Mine")
        try f.pg("album", "add", "Mine", "q.jpg")
        try f.pg("options", app, "--strip-location", "on")
        try f.pg("trash")
        try f.pg("explain", app, "p.jpg")
        try f.pg("assets", "--app", app)
        // A mount that ran while the person did all that, which the app never touched.
        let mp = try f.mount(app)
        try f.pg("grant", app, "q.jpg")
        #expect(eventually { listing(mp) == ["q.jpg"] })
        try f.unmount(mp)
        #expect(try report(f).isEmpty)
    }

    /// A --no-open mount never sees an open: the first read the daemon serves is the access.
    @Test func aNoOpenMountRecordsTheFirstReadTheDaemonServes() throws {
        let f = try fixture()
        try f.importPhotos(["n.jpg", "untouched.jpg"])
        try f.pg("authorize", app, "--status", "authorized")
        let mp = try f.mount(app, extra: ["--no-open"])
        #expect(readAll(mp + "/n.jpg") != nil)
        var list: [Entry] = []
        #expect(eventually(30) { list = (try? report(f, app)) ?? []; return !list.isEmpty }, "nothing recorded")
        #expect(list.map(\.kind) == ["read"] && list.first?.name == "n.jpg" && (list.first?.count ?? 0) >= 1, "\(list)")
        try f.unmount(mp)
    }

    /// Killed with SIGKILL, a daemon loses at most what it had not written yet: what the report
    /// shows after is what it showed before, or more of the same, never a wrong entry. (The
    /// report is flushed every 100 ms here: a flush between the two later reads records one of
    /// them, so 2 is as right as 1 or 3; a count of 2 once failed a run under load.)
    @Test func aKilledDaemonLosesAtMostTheLastBatch() throws {
        let f = try fixture()
        try f.importPhotos(["k.jpg", "other.jpg"])
        try f.pg("authorize", app, "--status", "limited")
        try f.pg("grant", app, "k.jpg")
        let mp = try f.mount(app)
        #expect(readAll(mp + "/k.jpg") != nil)
        #expect(eventually(30) { (try? report(f, app))?.first?.count == 1 })
        for _ in 0..<2 { #expect(readAll(mp + "/k.jpg") != nil) }
        let list = try #require(try JSONSerialization.jsonObject(with: Data(try f.pg("mounts", "--json").stdout.utf8)) as? [[String: Any]])
        let pid = try #require(list.first { $0["mountpoint"] as? String == mp }?["pid"] as? Int)
        #expect(kill(pid_t(pid), SIGKILL) == 0)
        #expect(eventually { statErrno(mp + "/k.jpg") == ENOTCONN })
        #expect(try TestSupport.run("fusermount3", ["-u", "-z", mp]).status == 0)
        let after = try report(f)
        #expect(after.count == 1 && after[0].name == "k.jpg" && after[0].kind == "read", "\(after)")
        #expect((1...3).contains(after[0].count), "k.jpg read 3 times, 1 shown before the kill; the report says \(after[0].count)")
    }

    /// Recording off: nothing is written, by mounts running or started later; on again, they
    /// record again.
    @Test func recordingOffRecordsNothing() throws {
        let f = try fixture()
        try f.importPhotos(["off.jpg", "on.jpg"])
        try f.pg("authorize", app, "--status", "authorized")
        try f.pg("report", "--recording", "off")
        let mp = try f.mount(app)
        for _ in 0..<3 { #expect(readAll(mp + "/off.jpg") != nil) }
        try f.pg("report", "--recording", "on")
        // The mount learns within its interval; until it has, reads of on.jpg are not recorded.
        #expect(eventually(30) {
            _ = readAll(mp + "/on.jpg")
            return ((try? report(f, app)) ?? []).contains { $0.name == "on.jpg" }
        })
        #expect(!(try report(f, app)).contains { $0.name == "off.jpg" })
        try f.unmount(mp)
        #expect(try f.pgStatus("report", "--recording", "maybe").status == 64)
        #expect(try f.pgStatus("report", "--retention", "0").status == 64)
    }

    /// The report is the person's: no mount shows it, to its app or another, and it lives in the
    /// private library.
    @Test func noAppCanReadTheReport() throws {
        let f = try fixture()
        try f.importPhotos(["secret.jpg", "shared.jpg"])
        try f.pg("authorize", app, "--status", "limited")
        try f.pg("grant", app, "secret.jpg", "shared.jpg")
        try f.pg("authorize", otherApp, "--status", "limited")
        try f.pg("grant", otherApp, "shared.jpg")
        let mine = try f.mount(app)
        let theirs = try f.mount(otherApp)
        #expect(readAll(mine + "/secret.jpg") != nil)
        #expect(eventually(30) { ((try? report(f, app)) ?? []).count == 1 })
        let secretID = try #require(try f.assetsJSON().first { $0["name"] as? String == "secret.jpg" }?["id"] as? String)
        for mp in [mine, theirs] {
            #expect(Set(listing(mp + "/.photogate")) == ["status", "request", "refused", "changes"])
            // Nothing a mount serves names what an app did (the other app's id, or the photo
            // it read, for the bystander).
            for file in ["status", "refused"] {
                let text = String(decoding: readAll(mp + "/.photogate/" + file) ?? [], as: UTF8.self)
                #expect(!text.contains("report") && !(mp == theirs && (text.contains(app) || text.contains(secretID))), "\(file): \(text)")
            }
        }
        // In the library, which only its owner may enter.
        var st = stat()
        #expect(stat(f.library, &st) == 0 && st.st_mode & 0o077 == 0)
        try f.unmount(theirs)
        try f.unmount(mine)
    }
}
