import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

func renameErrno(_ from: String, _ to: String) -> Int32 { errnoOf { rename(from, to) } }

/// Issue 34, "Rename paths that skip the policy": every rename asks the one decision, and
/// `explain` says what the mount does.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct NamesAndRenames {
    /// An upload folder's asset rename asked no policy, and an add-only app renamed a file it
    /// wrote while `explain` said "rename: no". Every rename asks the one decision, and
    /// `explain` says what the mount does: an add-only app renames what it wrote (rsync's temp
    /// name) while it may add, and nothing once denied; a read-write app denied since renames
    /// nothing, in a folder as at the top.
    @Test func everyRenameAsksTheOneDecisionAndExplainSaysTheSame() throws {
        let f = try MountFixture()
        func mayRename(_ app: String, _ id: String, _ access: String) throws -> Bool? {
            let o = try f.pg("explain", app, id, "--access", access, "--json")
            return (try JSONSerialization.jsonObject(with: Data(o.stdout.utf8)) as? [String: Any])?["rename"] as? Bool
        }
        func ownID(_ app: String) throws -> String {
            try #require(try f.assetsJSON().first { $0["owner"] as? String == app }?["id"] as? String)
        }
        func status(_ mp: String) -> String { readAll(mp + "/.photogate/status").map { String(decoding: $0, as: UTF8.self) } ?? "" }

        // An add-only app: it renames the file it wrote, and explain agrees.
        let camera = "org.example.Camera"
        try f.pg("authorize", camera, "--access", "add-only", "--status", "authorized")
        let ma = try f.mount(camera, access: "add-only")
        #expect(cpWrite(try TestMedia.jpeg(tag: "shot"), to: ma + "/.shot.jpg.tmp") == 0)
        #expect(renameErrno(ma + "/.shot.jpg.tmp", ma + "/shot.jpg") == 0, "rsync's temp-then-rename into an add-only mount")
        let shot = try ownID(camera)
        #expect(try mayRename(camera, shot, "add-only") == true, "the mount renamed it: explain must say so")
        // Denied since: neither the mount nor explain lets it rename.
        try f.pg("authorize", camera, "--access", "add-only", "--status", "denied")
        #expect(eventually { status(ma).contains("\"denied\"") })
        #expect(try mayRename(camera, shot, "add-only") == false)
        #expect(renameErrno(ma + "/shot.jpg", ma + "/again.jpg") == EACCES, "a denied add-only app renamed its file")
        #expect(try f.assetsJSON().first { $0["id"] as? String == shot }?["name"] as? String == "shot.jpg")

        // A read-write app's file in an upload folder, picked for it, then the app denied: it
        // still sees the file (picked), and may no longer rename it, in the folder or at the top.
        let editor = "org.example.Editor"
        try f.pg("authorize", editor, "--status", "limited")
        let m = try f.mount(editor)
        #expect(mkdir(m + "/P", 0o755) == 0)
        #expect(cpWrite(try TestMedia.jpeg(tag: "edit"), to: m + "/P/e.jpg") == 0)
        let e = try ownID(editor)
        #expect(try mayRename(editor, e, "read-write") == true)
        #expect(renameErrno(m + "/P/e.jpg", m + "/P/e2.jpg") == 0)
        try f.pg("grant", editor, e, "--picked")
        try f.pg("authorize", editor, "--status", "denied")
        #expect(eventually { status(m).contains("\"denied\"") })
        #expect(readAll(m + "/P/e2.jpg") != nil, "a picked file stays visible")
        #expect(try mayRename(editor, e, "read-write") == false)
        #expect(renameErrno(m + "/P/e2.jpg", m + "/P/e3.jpg") == EACCES, "a denied app renamed its file in an upload folder")
        #expect(renameErrno(m + "/e2.jpg", m + "/e3.jpg") == EACCES, "a denied app renamed its file at the top")
        #expect(try f.assetsJSON().first { $0["id"] as? String == e }?["name"] as? String == "e2.jpg")
        try f.unmount(m)
        try f.unmount(ma)
    }
}
