import Foundation
import Testing
import TestSupport

/// `photogate backup DEST`, on either catalog (issue 41: a library whose catalog is on a server is
/// backed up too).
@Suite(.serialized) struct CLIBackup {
    /// Every path under `root` (none when it is missing).
    func tree(_ root: String) -> [String] { (try? FileManager.default.subpathsOfDirectory(atPath: root))?.sorted() ?? [] }

    /// DEST is refused inside the library's folder and, for a library whose catalog is on a
    /// server, inside the shared folder whose store it copies, however spelled (a link, ".."):
    /// exit 64, and nothing is made there. Outside them the backup is an SQLite library of its
    /// own, which `assets` lists as the library does and `verify` finds whole.
    @Test func aBackupIsAnSQLiteLibraryOutsideTheLibraryAndItsSharedFolder() throws {
        let c = try CLI()
        try c.ok("import", try c.photos(["a.jpg", "b.jpg"]))
        let shared = TestSupport.sharedFolder(of: c.library)
        var inside = [c.library + "/bk", c.library + "/run/bk"]
        if shared != c.library {
            try FileManager.default.createSymbolicLink(atPath: c.dir + "/to-shared", withDestinationPath: shared)
            inside += [shared + "/bk", shared + "/store/bk", shared + "/tmp/bk", c.dir + "/to-shared/bk", shared + "/store/../bk"]
        }
        let before = (tree(c.library), tree(shared))
        for dest in inside {
            let o = try c.run("backup", dest)
            let folder = dest.hasPrefix(c.library + "/") ? "library" : "shared folder"
            #expect(o.status == Code.usage && o.stderr.contains("cannot go inside the \(folder) it copies"), "backup \(dest): \(o.status) \(o.stderr)")
        }
        #expect(tree(c.library) == before.0 && tree(shared) == before.1, "a refused backup made something in the library or its shared folder")

        let dest = c.dir + "/backup"
        let o = try c.ok("backup", dest)
        #expect(o.stdout.contains("backed up 2 assets"), "\(o.stdout)")
        let fm = FileManager.default
        #expect(fm.fileExists(atPath: dest + "/photogate.sqlite") && !fm.fileExists(atPath: dest + "/catalog.conf"), "\(tree(dest))")
        #expect(tree(dest + "/store").filter { $0.contains(".") }.count == 2, "\(tree(dest))")
        let mine = try c.run("assets", "--json"), theirs = try c.run(["assets", "--json"], env: ["PHOTOGATE_LIBRARY": dest])
        #expect(theirs.status == 0 && theirs.stdout == mine.stdout, "\(theirs.stderr)")
        let verified = try c.run(["verify"], env: ["PHOTOGATE_LIBRARY": dest])
        #expect(verified.status == 0 && verified.stdout.contains("no problems"), "\(verified.stdout)\(verified.stderr)")
    }
}
