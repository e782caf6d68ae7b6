import Foundation
import Testing
@testable import LibraryRun

/// A mount's record in the library's run/mounts: who opens its files is read back as written, a
/// record of an older daemon (no such field) is a mount whose daemon opens files, and a name this
/// version does not know (a newer daemon's) keeps the record, as an unknown kind that `run` does
/// not reuse.
@Suite struct MountRecordOpens {
    func decode(_ opens: String?) throws -> MountRecord {
        let field = opens.map { ", \"opens\": \"\($0)\"" } ?? ""
        let json = """
        {"app": "org.example.A", "access": "read-write", "mountpoint": "/m", "pid": 7, "readPath": "daemon",
         "libfuse": "3.17.2", "started": 0\(field)}
        """
        return try JSONDecoder().decode(MountRecord.self, from: Data(json.utf8))
    }

    @Test func whoOpensFilesIsReadBackAndToleratesOldAndNewRecords() throws {
        #expect(try decode("kernel").opensFiles == .kernel)
        #expect(try decode("daemon").opensFiles == .daemon)
        #expect(try decode(nil).opensFiles == .daemon)
        #expect(try decode("io_uring").opensFiles == .unknown)
        var r = try decode("kernel")
        r.opens = .kernel
        let again = try JSONDecoder().decode(MountRecord.self, from: JSONEncoder().encode(r))
        #expect(again == r)
        #expect(String(decoding: try JSONEncoder().encode(r), as: UTF8.self).contains("\"opens\":\"kernel\""))
    }
}

/// The owner of a view mounted for another user ("UID:GID"): one text, made and read in one place,
/// for `run --show-user`, the `--owner` option and the registry's `owner`, which `run` matches.
@Suite struct MountOwnerText {
    @Test func readsBackWhatItWritesAndNothingElse() {
        let o = MountOwner(uid: 2_130_000_001, gid: 2_130_000_002)
        #expect(o.description == "2130000001:2130000002")
        #expect(MountOwner(o.description) == o)
        for bad in ["", "1000", "1000:", ":1000", "a:b", "1:2:3", "-1:5", "1000 :1000", "4294967296:1"] {
            #expect(MountOwner(bad) == nil, "\(bad)")
        }
    }
}

/// A mount's record is written in run/mounts/ following no symbolic link: a link left at the name
/// of its temp file takes no byte elsewhere, and a record that is a link is not read.
@Suite struct MountRecordFiles {
    @Test func recordsFollowNoSymbolicLink() throws {
        let dir = NSTemporaryDirectory() + "/photogate-records-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let run = RunFolder(dir + "/run")
        try FileManager.default.createDirectory(atPath: dir + "/run/mounts", withIntermediateDirectories: true)
        let victim = dir + "/victim"
        try Data("root's own bytes\n".utf8).write(to: URL(fileURLWithPath: victim))
        let record = MountRecord(app: "org.example.A", access: "read-write", mountpoint: "/m", pid: 424242, readPath: "daemon",
                                 libfuse: "3.17.2", started: 0)
        #expect(symlink(victim, dir + "/run/mounts/.424242.json.tmp") == 0)
        MountRegistry.write(record, run: run)
        #expect(FileManager.default.contents(atPath: victim) == Data("root's own bytes\n".utf8), "the record was written through the symlink")
        #expect(MountRegistry.records(run).isEmpty)
        // Its final name a link to a record elsewhere: not read either.
        let elsewhere = dir + "/elsewhere.json"
        try JSONEncoder().encode(record).write(to: URL(fileURLWithPath: elsewhere))
        #expect(symlink(elsewhere, dir + "/run/mounts/424242.json") == 0)
        #expect(MountRegistry.records(run).isEmpty)
        // Control: written and read back where nothing is in the way.
        unlink(dir + "/run/mounts/.424242.json.tmp")
        unlink(dir + "/run/mounts/424242.json")
        MountRegistry.write(record, run: run)
        #expect(MountRegistry.records(run).map(\.record) == [record])
    }
}
