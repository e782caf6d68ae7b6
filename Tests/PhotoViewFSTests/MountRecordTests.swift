import Foundation
import Testing
@testable import PhotoViewFS

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
