import Foundation
import Testing
import TestSupport

/// Issue 38: `photogate mounts` listed only the current library's views; `mounts --all` lists
/// every library of the user's, each library's views as its own registry has them.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct MountsAllTests {
    @Test func allListsTheViewsOfEveryLibrary() throws {
        // A state folder of the test's own: the libraries noted here are these two only.
        let state = TestSupport.tempDir("state")
        defer { TestSupport.remove(state) }
        let one = try MountFixture(libraryName: "one"), two = try MountFixture(libraryName: "two")
        for f in [one, two] { f.extraEnvironment["XDG_STATE_HOME"] = state }
        try one.pg("authorize", "org.example.One", "--status", "authorized")
        try two.pg("authorize", "org.example.Two", "--status", "authorized")
        let m1 = try one.mount("org.example.One"), m2 = try two.mount("org.example.Two")

        func listing(_ f: MountFixture, _ args: String...) throws -> [[String: Any]] {
            let o = try f.pg(["mounts", "--json"] + args)
            return try #require(try JSONSerialization.jsonObject(with: Data(o.stdout.utf8)) as? [[String: Any]])
        }
        // This library's views only, as before (each row now names its library).
        let mine = try listing(one)
        #expect(mine.map { $0["mountpoint"] as? String } == [m1], "\(mine)")
        #expect(mine.first?["library"] as? String == one.library)
        // Every library's, from either, each row naming its library as it resolves.
        for f in [one, two] {
            let all = try listing(f, "--all")
            #expect(Set(all.compactMap { $0["mountpoint"] as? String }) == [m1, m2], "\(all)")
            let byApp = Dictionary(uniqueKeysWithValues: all.map { ($0["app"] as? String ?? "", $0["library"] as? String ?? "") })
            #expect(byApp == ["org.example.One": one.library, "org.example.Two": two.library], "\(byApp)")
        }
        // Without a library of its own where the command runs: still every noted library's.
        let nowhere = try TestSupport.run(TestSupport.photogateBinary, ["mounts", "--all"],
                                          environment: ["XDG_STATE_HOME": state, "PHOTOGATE_LIBRARY": one.dir + "/none"])
        #expect(nowhere.status == 0, "\(nowhere.stderr)")
        let rows = nowhere.stdout.split(separator: "\n").map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
        #expect(rows.first == ["LIBRARY", "APP", "ACCESS", "MOUNTPOINT", "PID", "STATE", "READS"], "\(nowhere.stdout)")
        #expect(Set(rows.dropFirst().map { $0[0] + " " + $0[3] }) == ["\(one.library) \(m1)", "\(two.library) \(m2)"], "\(nowhere.stdout)")
        // Another user's state folder knows none of them.
        let other = TestSupport.tempDir("state-other")
        defer { TestSupport.remove(other) }
        let none = try TestSupport.run(TestSupport.photogateBinary, ["mounts", "--all"],
                                       environment: ["XDG_STATE_HOME": other, "PHOTOGATE_LIBRARY": one.dir + "/none"])
        #expect(none.stdout == "LIBRARY\tAPP\tACCESS\tMOUNTPOINT\tPID\tSTATE\tREADS\n", "\(none.stdout)")

        // Unmounted, a view leaves the listing; a library removed leaves the state folder.
        try two.unmount(m2)
        #expect(try listing(one, "--all").compactMap { $0["mountpoint"] as? String } == [m1])
        TestSupport.remove(two.library)
        #expect(try listing(one, "--all").compactMap { $0["library"] as? String } == [one.library])
        let noted = try FileManager.default.contentsOfDirectory(atPath: state + "/photogate/libraries")
        #expect(noted.count == 1, "\(noted)")
        try one.unmount(m1)
    }
}
