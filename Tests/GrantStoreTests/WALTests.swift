import Foundation
import Synchronization
import Testing
import TestSupport
@testable import GrantStore
import GRDB
import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

/// The WAL a process leaves behind. photogate keeps SQLite's log between processes (no
/// checkpoint at close, so a CLI command syncs little), which made one large transaction costly
/// for ever after: every later process rebuilt the log's index by reading all of it, and every
/// commit's checkpoint copied it all again.
@Suite(.serialized, .disabled(if: TestSupport.onPostgres, "SQLite's write-ahead log: a PostgreSQL catalog has its server's")) struct WALLeftBehind {
    func walSize(_ lib: LibraryPaths) -> Int64 {
        var st = stat()
        return stat(lib.database + "-wal", &st) == 0 ? Int64(st.st_size) : -1
    }

    /// One transaction larger than `Library.largeLog` (a bulk fill): once the library is
    /// released the log is empty, and every row is in the database.
    @Test func aLargeTransactionLeavesNoLargeLog() throws {
        let dir = TestSupport.tempDir("wal")
        defer { TestSupport.remove(dir) }
        let paths = LibraryPaths(root: dir + "/library")
        try TestMedia.write(TestMedia.jpeg(tag: "wal"), to: dir + "/one.jpg")
        let count = 80_000
        do {
            let library = try Library.create(at: paths)
            let original = try ReferencedOriginal(scanning: dir + "/one.jpg")
            try library.insertReferenced([original], count: count) { i in BulkAsset(name: "W_\(i).jpg", original: 0) }
            #expect(walSize(paths) > Library.largeLog, "the fill was meant to outgrow the threshold: \(walSize(paths)) bytes")
        }
        #expect(walSize(paths) == 0, "the log left behind: \(walSize(paths)) bytes")
        let reopened = try Library.open(at: paths)
        #expect(try reopened.assets().count == count)
    }

    /// Scripts grant in loops, one process per asset, often with no mount running. Each such
    /// process is the last to let go of the library: the log is checkpointed into the database
    /// and emptied at its end, so it never grows, and every grant is in the database file.
    @Test func grantsInALoopKeepTheLogShort() throws {
        let dir = TestSupport.tempDir("wal")
        defer { TestSupport.remove(dir) }
        let paths = LibraryPaths(root: dir + "/library")
        try TestMedia.write(TestMedia.jpeg(tag: "wal-loop"), to: dir + "/one.jpg")
        let app = AppID("org.example.Loop")!
        let count = 300
        do {
            let library = try Library.create(at: paths)
            let original = try ReferencedOriginal(scanning: dir + "/one.jpg")
            try library.insertReferenced([original], count: count) { i in BulkAsset(name: "L_\(i).jpg", original: 0) }
            _ = try library.authorize(app, access: .readWrite, status: .limited)
        }
        var largest: Int64 = 0
        for i in 0..<count {
            do {
                let library = try Library.open(at: paths)   // one CLI command
                _ = try library.grant(app, ["L_\(i).jpg"])
            }
            largest = max(largest, walSize(paths))
        }
        #expect(largest == 0, "the log was left with \(largest) bytes by a process that was the last to let go")
        #expect(try grantsInDatabaseFileAlone(paths, app) == count)
        let reopened = try Library.open(at: paths)
        #expect(try reopened.grants(app).count == count)
    }

    /// The grants the database file holds, read from a copy of that file alone (no log): what a
    /// backup of "the database file" gets.
    func grantsInDatabaseFileAlone(_ paths: LibraryPaths, _ app: AppID) throws -> Int {
        let copy = TestSupport.tempDir("wal-copy") + "/copy.sqlite"
        defer { TestSupport.remove((copy as NSString).deletingLastPathComponent) }
        try FileManager.default.copyItem(atPath: paths.database, toPath: copy)
        return try DatabaseQueue(path: copy).read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM selections WHERE app_id = ?", arguments: [app.rawValue]) ?? -1
        }
    }

    /// A healthy log is never taken for a damaged one: between a restart's new header and its
    /// first frame, or a stat and a read of a log another connection truncates, it looked damaged
    /// (a hostile review measured 262 of 10,901 reads under a busy writer), and a commit's close
    /// failed with EIO. Another connection restarts and truncates the log as fast as it can while
    /// this one syncs after each of its own commits.
    @Test func aLogRestartedByAnotherConnectionIsNeverTakenForDamaged() throws {
        let dir = TestSupport.tempDir("wal")
        defer { TestSupport.remove(dir) }
        let paths = LibraryPaths(root: dir + "/library")
        let app = AppID("org.example.Busy")!
        do { _ = try Library.create(at: paths) }
        let busy = try Library.open(at: paths)
        let mine = try Library.open(at: paths)
        try busy.pool!.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_autocheckpoint = 1") }
        let stop = Atomic<Bool>(false)
        let churn = Thread {
            var i = 0
            while !stop.load(ordering: .relaxed) {
                _ = try? busy.authorize(AppID("org.example.Churn\(i % 50)")!, access: .readWrite, status: i % 2 == 0 ? .limited : .authorized)
                if i % 7 == 0 { _ = busy.checkpointLargeLog() ; _ = try? busy.pool!.writeWithoutTransaction { db in try db.checkpoint(.truncate) } }
                i += 1
            }
        }
        churn.start()
        defer { stop.store(true, ordering: .relaxed) }
        var failures: [String] = []
        _ = try mine.authorize(app, access: .readWrite, status: .limited)
        let until = Date().addingTimeInterval(4)
        var syncs = 0
        while Date() < until {
            do { try mine.syncLog() } catch { failures.append("\(error)") }
            syncs += 1
        }
        stop.store(true, ordering: .relaxed)
        #expect(failures.isEmpty, "\(failures.count) of \(syncs) healthy syncs failed, the first: \(failures.first ?? "")")
    }

    /// While another connection holds the library (a running mount), a command's small write
    /// stays in the log (no checkpoint, no sync of the database: the reason the log is kept);
    /// once the last one lets go, the database file alone holds it.
    @Test func theLastToLetGoPutsTheLogInTheDatabase() throws {
        let dir = TestSupport.tempDir("wal")
        defer { TestSupport.remove(dir) }
        let paths = LibraryPaths(root: dir + "/library")
        try TestMedia.write(TestMedia.jpeg(tag: "wal-last"), to: dir + "/one.jpg")
        let app = AppID("org.example.Small")!
        do {
            let library = try Library.create(at: paths)
            let original = try ReferencedOriginal(scanning: dir + "/one.jpg")
            try library.insertReferenced([original], count: 3) { i in BulkAsset(name: "S_\(i).jpg", original: 0) }
        }
        do {
            let mount = try Library.open(at: paths)   // held, as a mount's daemon holds it
            _ = try mount.lastChange()
            do {
                let command = try Library.open(at: paths)
                _ = try command.authorize(app, access: .readWrite, status: .limited)
                _ = try command.grant(app, ["S_0.jpg", "S_1.jpg"])
            }
            #expect(walSize(paths) > 0, "a command's write while a mount held the library was checkpointed")
            withExtendedLifetime(mount) {}
        }
        #expect(walSize(paths) == 0, "the last to let go left \(walSize(paths)) bytes in the log")
        #expect(try grantsInDatabaseFileAlone(paths, app) == 2)
    }
}

/// `photogate backup DEST` never replaces a DEST that appeared while it ran (rename(2) replaces an
/// empty folder), and a DEST.partial is claimed by making it: a second backup to the same DEST
/// stops without touching the first one's.
@Suite(.serialized) struct BackupRaces {
    @Test func aFolderMadeMeanwhileIsNeverReplaced() throws {
        let t = try TempLibrary()
        try t.importJPEGs(["a.jpg"])
        let dest = t.dir + "/backup"
        Library.beforeBackupRename.withLock { $0 = { if $0 == dest { mkdir(dest, 0o700) } } }
        defer { Library.beforeBackupRename.withLock { $0 = nil } }
        #expect(throws: LibraryError.self) { try t.library.backup(to: dest) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dest).isEmpty, "the folder made meanwhile was replaced")
        #expect(FileManager.default.fileExists(atPath: dest + ".partial/photogate.sqlite"), "the complete backup was removed")
    }

    /// A symbolic link at DEST that leads nowhere (left in a sticky folder by another user, say)
    /// is there all the same: refused before anything is made when it is there from the start;
    /// made meanwhile, the complete backup stays in DEST.partial, as the error says (it was
    /// removed: the link was not "there" to a check that followed it).
    @Test func aLinkToNothingAtDestIsThereToo() throws {
        let t = try TempLibrary()
        try t.importJPEGs(["c.jpg"])
        let early = t.dir + "/early"
        #expect(symlink("/nonexistent/x", early) == 0)
        #expect(throws: LibraryError.self) { try t.library.backup(to: early) }
        #expect(access(early + ".partial", F_OK) != 0, "a backup was made over a link at DEST")

        let dest = t.dir + "/backup"
        Library.beforeBackupRename.withLock { $0 = { if $0 == dest { _ = symlink("/nonexistent/y", dest) } } }
        defer { Library.beforeBackupRename.withLock { $0 = nil } }
        do {
            _ = try t.library.backup(to: dest)
            Issue.record("the backup went over a link made meanwhile")
        } catch {
            #expect("\(error)".contains(dest + ".partial"), "\(error)")
        }
        #expect(FileManager.default.fileExists(atPath: dest + ".partial/photogate.sqlite"), "the complete backup the error names was removed")
        var st = stat()
        #expect(lstat(dest, &st) == 0 && st.st_mode & S_IFMT == S_IFLNK)
    }

    @Test func aSecondBackupToTheSameFolderLeavesTheFirstAlone() throws {
        let t = try TempLibrary()
        try t.importJPEGs(["b.jpg"])
        let dest = t.dir + "/backup"
        let second = Mutex<String>("")
        let library = t.library
        Library.beforeBackupRename.withLock { hook in
            hook = { backedUp in
                guard backedUp == dest else { return }   // another suite's backup
                Library.beforeBackupRename.withLock { $0 = nil }
                do { _ = try library.backup(to: dest); second.withLock { $0 = "succeeded" } } catch { second.withLock { $0 = "\(error)" } }
            }
        }
        defer { Library.beforeBackupRename.withLock { $0 = nil } }
        _ = try t.library.backup(to: dest)
        #expect(second.withLock { $0 }.contains("is there"), "the second backup: \(second.withLock { $0 })")
        #expect(FileManager.default.fileExists(atPath: dest + "/photogate.sqlite"))
        #expect(!FileManager.default.fileExists(atPath: dest + ".partial"))
    }
}
