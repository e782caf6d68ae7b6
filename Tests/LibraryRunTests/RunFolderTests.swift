import Foundation
import Testing
@testable import LibraryRun
#if canImport(Glibc)
import Glibc
#endif

/// A temp folder holding a library's run/ folder, removed at the end.
private func withRunFolder(_ body: (RunFolder, String) throws -> Void) throws {
    let dir = NSTemporaryDirectory() + "/photogate-run-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: dir) }
    try FileManager.default.createDirectory(atPath: dir + "/run", withIntermediateDirectories: true)
    try body(RunFolder(library: dir), dir)
}

/// The acknowledgments a running mount publishes in run/acks/<pid> are what a command that waits
/// for running mounts reads back: the sequence number as written, none once the daemon removed its
/// file, and 0 for a file too short to hold one.
@Suite struct MountAckFiles {
    @Test func whatADaemonPublishesIsWhatACommandReads() throws {
        try withRunFolder { run, dir in
            #expect(run.path == dir + "/run")
            let publisher = try #require(MountAcks.Publisher(run: run))
            #expect(MountAcks.acknowledged(run: run, pid: getpid()) == 0)
            publisher.publish(42)
            #expect(MountAcks.acknowledged(run: run, pid: getpid()) == 42)
            publisher.publish(1 << 40)
            #expect(MountAcks.acknowledged(run: run, pid: getpid()) == 1 << 40)
            publisher.remove()
            #expect(MountAcks.acknowledged(run: run, pid: getpid()) == nil)
            // Nothing registered: nothing to wait for.
            #expect(MountAcks.wait(for: 42, run: run, timeout: 0).isEmpty)
        }
    }
}

/// The bell is a regular file in run/ rung by one byte; a symbolic link left at its name takes
/// nothing elsewhere.
@Suite struct BellFile {
    @Test func ringingWritesTheBellAndFollowsNoLink() throws {
        try withRunFolder { run, dir in
            run.ringBell()
            #expect(FileManager.default.contents(atPath: dir + "/run/bell") == Data("!".utf8))
            #expect(RunFolder.isBell(Array("bell".utf8)))
            #expect(!RunFolder.isBell(Array("bellows".utf8)))
            unlink(dir + "/run/bell")
            let victim = dir + "/victim"
            try Data("kept\n".utf8).write(to: URL(fileURLWithPath: victim))
            #expect(symlink(victim, dir + "/run/bell") == 0)
            run.ringBell()
            #expect(FileManager.default.contents(atPath: victim) == Data("kept\n".utf8), "the bell was rung through a symlink")
        }
    }
}
