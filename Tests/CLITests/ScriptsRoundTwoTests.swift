import Foundation
import Testing
import TestSupport

/// Issue 38: what a person scripting their library reached for and did not find, or found wrong.
@Suite(.serialized) struct CLIScriptsRoundTwo {
    static let app = "org.example.Editor"

    /// A token beyond the app's latest was never issued: refused (64), not echoed as the latest.
    @Test func aTokenNeverIssuedIsAUsageError() throws {
        let c = try CLI()
        try c.ok("import", try c.photos(["a.jpg"]))
        try c.ok("authorize", Self.app, "--status", "limited")
        try c.ok("grant", Self.app, "a.jpg")
        let all = try #require(try c.json("changes", Self.app) as? [String: Any])
        let latest = try #require(all["token"] as? Int)
        #expect(latest >= 1)
        // The latest itself, and 0, are tokens the library issued (or the start).
        let atLatest = try #require(try c.json("changes", Self.app, "--since", String(latest)) as? [String: Any])
        #expect((atLatest["changes"] as? [Any])?.isEmpty == true)
        #expect(atLatest["token"] as? Int == latest)
        for bad in [String(latest + 1), "999999", "-1"] {
            for json in [false, true] {
                let o = try c.run(["changes", Self.app, "--since=\(bad)"] + (json ? ["--json"] : []))
                #expect(o.status == Code.usage, "--since \(bad): \(o.status) \(o.stdout)")
                #expect(o.stdout.isEmpty, "--since \(bad): \(o.stdout)")
                #expect(o.stderr.contains(bad == "-1" ? "tokens are 1 and up" : "token \(bad) was never issued for \(Self.app) (its latest is \(latest))"),
                        "\(o.stderr)")
            }
        }
        // Once the history reaches it, the token is fine.
        try c.ok("revoke", Self.app, "a.jpg")
        #expect(try c.run("changes", Self.app, "--since", String(latest + 1)).status == 0)
    }
}
