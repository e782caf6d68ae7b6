import Foundation
import Testing
import TestSupport
@testable import GrantStore
import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

/// The WAL a process leaves behind. photogate keeps SQLite's log between processes (no
/// checkpoint at close, so a CLI command syncs little), which made one large transaction costly
/// for ever after: every later process rebuilt the log's index by reading all of it, and every
/// commit's checkpoint copied it all again.
@Suite(.serialized) struct WALLeftBehind {
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

    /// Scripts grant in loops, one process per asset, often with no mount running (so no
    /// connection keeps the log's index between them). Each process then rebuilt that index from
    /// the whole log, and once the log passed SQLite's 4 MB, each commit's checkpoint copied all
    /// of it into the database again. The log stays short instead: it is truncated when a
    /// process lets go of it past `Library.largeLog`, so it never grows by more than one
    /// process's writes beyond that.
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
        var truncations = 0
        var last = walSize(paths)
        for i in 0..<count {
            do {
                let library = try Library.open(at: paths)   // one CLI command
                _ = try library.grant(app, ["L_\(i).jpg"])
            }
            let size = walSize(paths)
            if size < last { truncations += 1 }
            largest = max(largest, size)
            last = size
        }
        // The grants wrote more than the threshold in all, so the log was let go of along the way.
        #expect(truncations > 0, "the log was never truncated (largest \(largest) bytes)")
        // Short: under half of SQLite's own 4 MB checkpoint size, whatever the threshold is.
        #expect(largest <= 2 << 20, "the log grew to \(largest) bytes over \(count) one-asset grants")
        let reopened = try Library.open(at: paths)
        #expect(try reopened.grants(app).count == count)
    }

    /// A small write leaves the log as SQLite keeps it (no checkpoint, no truncation): the
    /// reason the log is kept at all.
    @Test func aSmallWriteLeavesTheLogAlone() throws {
        let dir = TestSupport.tempDir("wal")
        defer { TestSupport.remove(dir) }
        let paths = LibraryPaths(root: dir + "/library")
        do {
            let library = try Library.create(at: paths)
            _ = try library.authorize(AppID("org.example.Small")!, access: .readWrite, status: .limited)
        }
        #expect(walSize(paths) > 0, "the log of a small write was truncated")
    }
}
