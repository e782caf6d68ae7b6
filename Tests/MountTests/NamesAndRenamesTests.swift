import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Every name `readdir` returns for `dir`, duplicates kept ("." and ".." and `.photogate` left out).
func rawNames(_ dir: String) -> [String] {
    guard let d = opendir(dir) else { return [] }
    defer { closedir(d) }
    var out: [String] = []
    while let e = readdir(d) {
        let name = withUnsafeBytes(of: e.pointee.d_name) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        if name != "." && name != ".." && name != ".photogate" { out.append(name) }
    }
    return out.sorted()
}

func isDirectory(_ path: String) -> Bool {
    var st = stat()
    return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
}

func renameErrno(_ from: String, _ to: String) -> Int32 { errnoOf { rename(from, to) } }

/// Issue 34, "Names at the top of a view" and "Rename paths that skip the policy": one name at
/// one level of a view names one thing; what an app writes never takes the name of what it
/// already sees; every rename asks the one decision, and `explain` says what the mount does.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct NamesAndRenames {
    /// A file written in an upload folder took a granted photo's name at the top (the person's
    /// photo was relisted as `NAME-1`), though creating that name at the top is EEXIST. Now the
    /// new file keeps its name in its folder and takes a free one at the top; the person's photo
    /// keeps its name. The same for a file renamed in a folder to such a name.
    @Test func aFileWrittenInAFolderNeverTakesTheNameOfAPhotoTheAppSees() throws {
        let f = try MountFixture()
        let src = try f.importPhotos(["IMG_0001.jpg", "IMG_0002.jpg"])
        let app = "org.example.TopNames"
        try f.pg("authorize", app, "--status", "limited")
        try f.pg("grant", app, "IMG_0001.jpg", "IMG_0002.jpg")
        let mp = try f.mount(app)
        let person1 = try #require(readAll(src + "/IMG_0001.jpg")), person2 = try #require(readAll(src + "/IMG_0002.jpg"))
        let mine1 = try TestMedia.jpeg(tag: "the app's own 1"), mine2 = try TestMedia.jpeg(tag: "the app's own 2")
        // At the top, a visible name is taken.
        #expect(openErrno(mp + "/IMG_0001.jpg", O_WRONLY | O_CREAT | O_EXCL) == EEXIST)
        #expect(mkdir(mp + "/P", 0o755) == 0)
        #expect(cpWrite(mine1, to: mp + "/P/IMG_0001.jpg") == 0)
        // In the folder the file has the name it was written under...
        #expect(rawNames(mp + "/P") == ["IMG_0001.jpg"])
        #expect(readAll(mp + "/P/IMG_0001.jpg") == mine1 ? true : false)
        // ...and at the top the person's photo keeps its name; the new file takes a free one.
        #expect(readAll(mp + "/IMG_0001.jpg") == person1 ? true : false, "the person's photo lost its name to a file written in a folder")
        #expect(rawNames(mp) == ["IMG_0001-1.jpg", "IMG_0001.jpg", "IMG_0002.jpg", "P"])
        #expect(readAll(mp + "/IMG_0001-1.jpg") == mine1 ? true : false)
        // A file renamed in the folder to a name the app sees at the top: the same.
        #expect(cpWrite(mine2, to: mp + "/P/t.jpg") == 0)
        #expect(renameErrno(mp + "/P/t.jpg", mp + "/P/IMG_0002.jpg") == 0)
        #expect(rawNames(mp + "/P") == ["IMG_0001.jpg", "IMG_0002.jpg"])
        #expect(readAll(mp + "/P/IMG_0002.jpg") == mine2 ? true : false)
        #expect(readAll(mp + "/IMG_0002.jpg") == person2 ? true : false, "the person's photo lost its name to a file renamed in a folder")
        #expect(readAll(mp + "/IMG_0002-1.jpg") == mine2 ? true : false)
        #expect(rawNames(mp) == ["IMG_0001-1.jpg", "IMG_0001.jpg", "IMG_0002-1.jpg", "IMG_0002.jpg", "P"])
        // Every other surface names them the same way: the person's photos keep their names.
        let seen = try f.assetsJSON("--app", app).compactMap { a -> String? in
            guard let name = a["name"] as? String else { return nil }
            return (a["owner"] as? String) == app ? "own:" + name : name
        }.sorted()
        #expect(seen == ["IMG_0001.jpg", "IMG_0002.jpg", "own:IMG_0001-1.jpg", "own:IMG_0002-1.jpg"], "\(seen)")
        try f.unmount(mp)
    }

    /// A flattened file took the name of a folder at the top (`ls` listed `DUP` twice), and so
    /// could a file renamed at the top. Names at one level are unique across files and folders.
    @Test func aFileNeverTakesTheNameOfAFolderAtTheTop() throws {
        let f = try MountFixture()
        let app = "org.example.TopNames"
        try f.pg("authorize", app, "--status", "authorized")
        let mp = try f.mount(app)
        #expect(mkdir(mp + "/DUP", 0o755) == 0)
        #expect(mkdir(mp + "/P", 0o755) == 0)
        let bytes = try TestMedia.jpeg(tag: "named like a folder")
        // While it is written, and once it is an asset.
        let fd = open(mp + "/P/DUP", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        #expect(fd >= 0)
        #expect(bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count)
        #expect(rawNames(mp).filter { $0 == "DUP" }.count == 1, "while written: \(rawNames(mp))")
        #expect(close(fd) == 0)
        #expect(rawNames(mp) == ["Albums", "DUP", "DUP-1", "P", "Shared"])
        #expect(isDirectory(mp + "/DUP"))
        #expect(readAll(mp + "/DUP-1") == bytes ? true : false)
        #expect(readAll(mp + "/P/DUP") == bytes ? true : false)
        // A file at the top is not renamed onto a folder (rename(2): EISDIR), nor a folder onto it.
        #expect(cpWrite(try TestMedia.jpeg(tag: "at the top"), to: mp + "/x.jpg") == 0)
        #expect(renameErrno(mp + "/x.jpg", mp + "/DUP") == EISDIR)
        #expect(renameErrno(mp + "/DUP", mp + "/x.jpg") == ENOTDIR)
        // The same in a folder.
        #expect(mkdir(mp + "/P/sub", 0o755) == 0)
        #expect(renameErrno(mp + "/P/DUP", mp + "/P/sub") == EISDIR)
        #expect(renameErrno(mp + "/P/sub", mp + "/P/DUP") == ENOTDIR)
        #expect(rawNames(mp) == ["Albums", "DUP", "DUP-1", "P", "Shared", "x.jpg"])
        #expect(rawNames(mp + "/P") == ["DUP", "sub"])
        try f.unmount(mp)
    }

    /// `mv M/P M/P2` of a folder at the top was ENOENT while a nested folder renamed: both
    /// rename now, by the same rules (a name the view shows is taken; an empty folder is replaced,
    /// one with a folder in it is not).
    @Test func aFolderAtTheTopRenamesLikeANestedOne() throws {
        let f = try MountFixture()
        try f.importPhotos(["shown.jpg", "hidden.jpg"])
        let app = "org.example.TopNames"
        try f.pg("authorize", app, "--status", "limited")
        try f.pg("grant", app, "shown.jpg")
        let mp = try f.mount(app)
        let bytes = try TestMedia.jpeg(tag: "in a folder")
        #expect(mkdir(mp + "/P", 0o755) == 0)
        #expect(cpWrite(bytes, to: mp + "/P/a.jpg") == 0)
        #expect(renameErrno(mp + "/P", mp + "/P2") == 0, "mv M/P M/P2")
        #expect(rawNames(mp) == ["P2", "a.jpg", "shown.jpg"])
        #expect(statErrno(mp + "/P") == ENOENT)
        #expect(readAll(mp + "/P2/a.jpg") == bytes ? true : false)
        #expect(mkdir(mp + "/P2/Q", 0o755) == 0)
        #expect(renameErrno(mp + "/P2/Q", mp + "/P2/Q2") == 0, "a nested one")
        #expect(rawNames(mp + "/P2") == ["Q2", "a.jpg"])
        // A name the view shows is taken; a hidden asset's name is free.
        #expect(renameErrno(mp + "/P2", mp + "/shown.jpg") == ENOTDIR)
        #expect(renameErrno(mp + "/P2", mp + "/hidden.jpg") == 0)
        #expect(renameErrno(mp + "/hidden.jpg", mp + "/P3") == 0)
        // Over another folder: replaced when empty, not when it holds a folder.
        #expect(mkdir(mp + "/E", 0o755) == 0)
        #expect(renameErrno(mp + "/P3", mp + "/E") == 0)
        #expect(rawNames(mp) == ["E", "a.jpg", "shown.jpg"])
        #expect(readAll(mp + "/E/a.jpg") == bytes ? true : false)
        #expect(mkdir(mp + "/F", 0o755) == 0 && mkdir(mp + "/F/G", 0o755) == 0)
        #expect(renameErrno(mp + "/E", mp + "/F") == ENOTEMPTY)
        // A folder renamed is one a new one may not take, and its old name is free again.
        #expect(errnoOf { mkdir(mp + "/E", 0o755) } == EEXIST)
        #expect(errnoOf { mkdir(mp + "/P", 0o755) } == 0)
        #expect(errnoOf { rmdir(mp + "/E/Q2") } == 0)
        #expect(errnoOf { rmdir(mp + "/E") } == 0)
        try f.unmount(mp)
    }

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
