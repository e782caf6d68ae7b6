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
        let store = TestSupport.storeFolder(of: library)
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
        #expect(try Privacy.runAs(user, ["ls", TestSupport.storeFolder(of: library)]).status != 0)
        #expect(try Privacy.runAs(user, ["cp", db, "/tmp/stolen-\(getpid()).sqlite"]).status != 0)
        // Control: opened the way an older photogate left it, the other user can read both.
        #expect(try TestSupport.run("chmod", ["-R", "go+rX", library]).status == 0)
        #expect(try Privacy.runAs(user, ["cat", db]).status == 0, "the control read failed: the test proves nothing")
        #expect(try Privacy.runAs(user, ["cat", photo]).status == 0)
        // Any photogate command by the owner makes it private again.
        #expect(try pg("assets").status == 0)
        for target in [db, photo] { #expect(try Privacy.runAs(user, ["cat", target]).status != 0, "\(user) read \(target)") }
        #expect(try Privacy.runAs(user, ["ls", TestSupport.storeFolder(of: library)]).status != 0)
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

    /// Whoever may rename entries in a folder on the way to a library can swap the library for
    /// theirs: such a library is refused (74), the folder named, and nothing changes. A folder
    /// writable by others, by a group that is not its owner's alone, or through an ACL, or owned
    /// by another user is refused, as written and as resolved through symbolic links (the
    /// library's own name a link, a chain of links), and so is another user's link on the way;
    /// a sticky folder (as /tmp) is not. The daemon refuses it too.
    @Test func aLibraryUnderAFolderOthersMayChangeIsRefused() throws {
        guard getuid() == 0 else { print("aLibraryUnderAFolderOthersMayChangeIsRefused: SKIPPED — needs root to chown"); return }
        let c = try CLI(initialize: false)
        let outer = c.dir + "/outer"
        #expect(mkdir(outer, 0o755) == 0)
        chmod(outer, 0o755)
        let library = outer + "/library"
        try c.ok("init", library)
        try c.ok("import", "--library", library, try c.photos(["a.jpg"]))
        try c.ok("authorize", "--library", library, "org.example.Viewer", "--status", "authorized")
        func assets(_ lib: String = library) throws -> TestSupport.Output { try c.run("assets", "--library", lib) }
        let before = try assets()
        #expect(before.status == 0 && before.stdout.contains("a.jpg"), "\(before.stderr)")
        let stranger: uid_t = 4242
        func refused(_ o: TestSupport.Output, naming path: String, _ words: String, _ line: Int = #line) {
            #expect(o.status == Code.notOwner, "line \(line): \(o.status) \(o.stderr)")
            #expect(o.stderr.contains(path + ",") && o.stderr.contains(words), "line \(line): \(o.stderr)")
        }
        // Writable by others.
        chmod(outer, 0o777)
        refused(try assets(), naming: outer, "anyone may rename")
        // Sticky, as /tmp: no one renames an entry that is not theirs.
        chmod(outer, 0o1777)
        #expect(try assets().status == 0)
        // Writable by a group that is not root's alone.
        #expect(chown(outer, 0, 4242) == 0)
        chmod(outer, 0o775)
        refused(try assets(), naming: outer, "its group")
        // Root's own group (no other member, no other account's primary group): fine.
        #expect(chown(outer, 0, 0) == 0)
        #expect(try assets().status == 0)
        // An ACL entry that lets another user write (the group bits are then its mask).
        chmod(outer, 0o755)
        #expect(try TestSupport.run("setfacl", ["-m", "u:4242:rwx", outer]).status == 0)
        refused(try assets(), naming: outer, "an ACL lets uid 4242")
        #expect(try TestSupport.run("setfacl", ["-m", "m::rx", outer]).status == 0)
        #expect(try assets().status == 0, "an ACL whose mask allows no writing was refused")
        #expect(try TestSupport.run("setfacl", ["-b", outer]).status == 0)
        chmod(outer, 0o755)
        // Owned by another user.
        #expect(chown(outer, stranger, 0) == 0)
        refused(try assets(), naming: outer, "belongs to uid 4242")
        #expect(chown(outer, 0, 0) == 0)
        // Through symbolic links: another user's link is refused; root's link to a folder others
        // may change is refused by the folder it resolves to.
        let link = c.dir + "/alias"
        #expect(symlink(outer, link) == 0)
        #expect(lchown(link, stranger, 0) == 0)
        refused(try assets(link + "/library"), naming: link, "belongs to uid 4242")
        #expect(lchown(link, 0, 0) == 0)
        #expect(try assets(link + "/library").status == 0)
        // A chain: root's link to another user's link to the folder.
        let first = c.dir + "/first", second = c.dir + "/second"
        #expect(symlink(second, first) == 0 && symlink(outer, second) == 0)
        #expect(lchown(second, stranger, 0) == 0)
        refused(try assets(first + "/library"), naming: second, "belongs to uid 4242")
        // The library's own name a link, to a library in a folder others may change.
        let named = c.dir + "/named-library"
        #expect(symlink(library, named) == 0)
        // Another user's library reached through root's link is named as the library, not as a
        // folder above it.
        #expect(chown(library, stranger, 0) == 0)
        let theirs = try assets(named)
        #expect(theirs.status == Code.notOwner && theirs.stderr.contains("the library at \(named) belongs to uid 4242"), "\(theirs.stderr)")
        #expect(chown(library, 0, 0) == 0)
        chmod(outer, 0o777)
        refused(try assets(link + "/library"), naming: outer, "anyone may rename")
        refused(try assets(named), naming: outer, "anyone may rename")
        // The daemon refuses it too.
        let mp = c.dir + "/mnt"
        #expect(mkdir(mp, 0o700) == 0)
        defer { FUSECleanup.abortAndDetach(mp) }   // only if the refusal failed and it mounted
        refused(try c.run("mount", "--library", library, "org.example.Viewer", mp), naming: outer, "anyone may rename")
        chmod(outer, 0o755)
        let after = try assets()
        #expect(after.status == 0 && after.stdout == before.stdout, "a refusal changed the library")
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
