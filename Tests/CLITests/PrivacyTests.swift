import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 14: the library on disk is private to its owner, whatever the umask.
enum Privacy {
    /// Runs photogate under `umask 022` (Debian's default), whatever the test process's umask.
    @discardableResult
    static func run022(_ c: CLI, _ args: [String]) throws -> TestSupport.Output {
        try TestSupport.run("/bin/sh", ["-c", "umask 022 && exec \"$0\" \"$@\"", TestSupport.photogateBinary] + args,
                            environment: ["PHOTOGATE_LIBRARY": c.library])
    }

    /// Every entry under `root` (itself included) whose mode is not 0700 (folders) or 0600 (files).
    static func notPrivate(_ root: String) -> [String] {
        var bad: [String] = []
        func check(_ path: String) {
            var st = stat()
            guard lstat(path, &st) == 0 else { return }
            let mode = st.st_mode & 0o7777
            switch st.st_mode & S_IFMT {
            case S_IFDIR:
                if mode != 0o700 { bad.append("\(path) \(String(mode, radix: 8))") }
                for n in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] { check(path + "/" + n) }
            case S_IFREG:
                if mode != 0o600 { bad.append("\(path) \(String(mode, radix: 8))") }
            default:
                bad.append("\(path): unexpected file type")
            }
        }
        check(root)
        return bad
    }

    static let otherUser = TestSupport.otherUser

    /// A second local user (TestSupport's); nil when it cannot be had here (the test skips).
    static func secondUser(_ test: String) throws -> String? { try TestSupport.secondUser(test) }

    /// Runs a command as another user; returns its exit status and stderr.
    static func runAs(_ user: String, _ args: [String]) throws -> TestSupport.Output {
        try TestSupport.run("runuser", ["-u", user, "--"] + args)
    }

    static func storeFiles(_ library: String) -> [String] {
        let store = library + "/store"
        return ((try? FileManager.default.subpathsOfDirectory(atPath: store)) ?? [])
            .filter { $0.hasSuffix(".jpg") }.map { store + "/" + $0 }
    }
}

@Suite(.serialized) struct CLIPrivacy {
    @Test func initAndImportUnderUmask022AreOwnerOnly() throws {
        let c = try CLI(initialize: false)
        let o = try Privacy.run022(c, ["init", c.library])
        #expect(o.status == 0, "\(o.stderr)")
        #expect(Privacy.notPrivate(c.library).isEmpty, "after init: \(Privacy.notPrivate(c.library))")
        let src = try c.photos(["a.jpg", "b.jpg", "c.jpg"])
        let i = try Privacy.run022(c, ["import", src])
        #expect(i.status == 0, "\(i.stderr)")
        let r = try Privacy.run022(c, ["import", "--reference", try c.photos(["r.jpg"])])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try Privacy.run022(c, ["grant", "--new-app", "org.example.Editor", "a.jpg"]).status == 0)
        #expect(Privacy.storeFiles(c.library).count == 3)
        #expect(Privacy.notPrivate(c.library).isEmpty, "after import: \(Privacy.notPrivate(c.library))")
    }

    @Test func initIntoAnOpenFolderMakesItPrivate() throws {
        let c = try CLI(initialize: false)
        try FileManager.default.createDirectory(atPath: c.library, withIntermediateDirectories: true)
        chmod(c.library, 0o755)
        let o = try Privacy.run022(c, ["init", c.library])
        #expect(o.status == 0, "\(o.stderr)")
        #expect(Privacy.notPrivate(c.library).isEmpty, "\(Privacy.notPrivate(c.library))")
    }

    @Test func anOpenLibraryIsTightenedOnOpen() throws {
        let c = try CLI()
        try c.ok("import", try c.photos(["a.jpg", "b.jpg"]))
        // What an older photogate left: everything readable by all.
        #expect(try TestSupport.run("chmod", ["-R", "go+rX", c.library]).status == 0)
        #expect(!Privacy.notPrivate(c.library).isEmpty)
        let o = try Privacy.run022(c, ["assets"])
        #expect(o.status == 0, "\(o.stderr)")
        #expect(o.stderr.contains("made it private"), "\(o.stderr)")
        #expect(Privacy.notPrivate(c.library).isEmpty, "\(Privacy.notPrivate(c.library))")
        // Private already: nothing to say.
        let again = try Privacy.run022(c, ["assets"])
        #expect(again.status == 0 && again.stderr.isEmpty, "\(again.stderr)")
    }

    @Test func aSecondLocalUserCannotReadTheDatabaseOrTheStore() throws {
        guard let user = try Privacy.secondUser("aSecondLocalUserCannotReadTheDatabaseOrTheStore") else { return }
        // A folder the other user can reach, like a Debian home (0755) in /tmp (1777): only the
        // library's own modes protect it (the tests' temp folders are 0700 all the way down).
        let home = try TestSupport.publicTempDir("privacy")
        defer { TestSupport.remove(home) }
        let c = try CLI(initialize: false)
        let library = home + "/library"
        func pg(_ args: String...) throws -> TestSupport.Output {
            try TestSupport.run("/bin/sh", ["-c", "umask 022 && exec \"$0\" \"$@\"", TestSupport.photogateBinary] + args,
                                environment: ["PHOTOGATE_LIBRARY": library])
        }
        #expect(try pg("init").status == 0)
        #expect(try pg("import", try c.photos(["a.jpg", "b.jpg"])).status == 0)
        let db = library + "/photogate.sqlite"
        let photo = try #require(Privacy.storeFiles(library).first)
        // A fresh library never was readable by the other user.
        for target in [db, photo] {
            let o = try Privacy.runAs(user, ["cat", target])
            #expect(o.status != 0, "\(user) read \(target)")
            #expect(o.stderr.contains("Permission denied"), "\(o.stderr)")
        }
        #expect(try Privacy.runAs(user, ["ls", library + "/store"]).status != 0)
        #expect(try Privacy.runAs(user, ["cp", db, "/tmp/stolen-\(getpid()).sqlite"]).status != 0)
        // Control: opened the way an older photogate left it, the other user can read both.
        #expect(try TestSupport.run("chmod", ["-R", "go+rX", library]).status == 0)
        #expect(try Privacy.runAs(user, ["cat", db]).status == 0, "the control read failed: the test proves nothing")
        #expect(try Privacy.runAs(user, ["cat", photo]).status == 0)
        // Any photogate command by the owner makes it private again.
        #expect(try pg("assets").status == 0)
        for target in [db, photo] { #expect(try Privacy.runAs(user, ["cat", target]).status != 0, "\(user) read \(target)") }
        #expect(try Privacy.runAs(user, ["ls", library + "/store"]).status != 0)
    }

    /// A library open to others that belongs to someone else is refused, and nothing changes:
    /// root's library to another user (68: it is open, and they cannot tighten it), a user's
    /// library to root (74: not root's to use at all, whatever its modes; see LibraryOwnership).
    /// Its owner makes it private by using it.
    @Test func someoneElsesOpenLibraryIsRefused() throws {
        guard let user = try Privacy.secondUser("someoneElsesOpenLibraryIsRefused") else { return }
        // A folder the other user can reach (the tests' temp folders are 0700 all the way down).
        let home = try TestSupport.publicTempDir("privacy")
        defer { TestSupport.remove(home) }
        let c = try CLI(initialize: false)
        let library = home + "/library"
        try c.ok("init", library)
        try c.ok("import", "--library", library, try c.photos(["a.jpg"]))
        #expect(try TestSupport.run("chmod", ["-R", "go+rX", library]).status == 0)
        func mode() -> mode_t {
            var st = stat()
            return stat(library, &st) == 0 ? st.st_mode & 0o777 : 0
        }
        // root's, open: another user may not silently change root's files, nor use them open.
        let o = try Privacy.runAs(user, [TestSupport.photogateBinary, "assets", "--library", library])
        #expect(o.status == Code.conflict, "\(o.status) \(o.stderr)")
        #expect(o.stderr.contains("open to other users") && o.stderr.contains("root"), "\(o.stderr)")
        #expect(mode() == 0o755, "the refusal changed the library")
        // The user's, open: root does not use it at all.
        #expect(try TestSupport.run("chown", ["-R", user, library]).status == 0)
        let r = try c.run("assets", "--library", library)
        #expect(r.status == Code.notOwner, "\(r.status) \(r.stderr)")
        #expect(r.stderr.contains("belongs to \(user)") && r.stderr.contains("runuser -u \(user)"), "\(r.stderr)")
        #expect(mode() == 0o755, "the refusal changed the library")
        // Its owner makes it private by using it.
        let owner = try Privacy.runAs(user, [TestSupport.photogateBinary, "assets", "--library", library])
        #expect(owner.status == 0, "\(owner.stderr)")
        #expect(owner.stderr.contains("made it private"), "\(owner.stderr)")
        #expect(mode() == 0o700)
    }

    /// run/bell is opened following no symbolic link, and only a regular file is rung: a link
    /// left at its name (the red team's, to a file of root's) takes no byte elsewhere, and a FIFO
    /// there does not hang the command.
    @Test func theBellIsNeverFollowedOutOfRun() throws {
        let c = try CLI()
        try c.ok("import", try c.photos(["a.jpg"]))
        let bell = c.library + "/run/bell"
        let victim = c.dir + "/victim"
        try Data("root's own bytes\n".utf8).write(to: URL(fileURLWithPath: victim))
        unlink(bell)
        #expect(symlink(victim, bell) == 0)
        try c.ok("grant", "--new-app", "org.example.Editor", "a.jpg")
        try c.ok("authorize", "org.example.Other", "--access", "read-write", "--status", "authorized")
        #expect(FileManager.default.contents(atPath: victim) == Data("root's own bytes\n".utf8), "a command rang the bell through the symlink")
        // A FIFO nobody reads: an open for writing that blocked would never return.
        unlink(bell)
        #expect(mkfifo(bell, 0o600) == 0)
        let o = try TestSupport.run("timeout", ["-s", "KILL", "20", TestSupport.photogateBinary, "revoke", "org.example.Editor", "a.jpg"],
                                    environment: ["PHOTOGATE_LIBRARY": c.library])
        #expect(o.status == 0, "\(o.status) \(o.stderr)")
    }
}
