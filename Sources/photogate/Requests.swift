import ArgumentParser
import GrantStore

struct Requests: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List pending authorization requests (prompts).",
        discussion: """
            A request is recorded when a not-determined app touches its mount, or when an app writes to
            .photogate/request. `photogate authorize` answers one and clears it. An edit request names
            the asset an app opened for writing without consent; `photogate grant APP --edit ASSET`
            (or `options APP --edit-any on`) answers it.

            Example: photogate requests --json
            """)
    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag

    func run() throws {
        try photogate.run {
            let reqs = try lib.open().requests()
            if output.json {
                printJSON(reqs.map { r -> [String: Any] in
                    var d: [String: Any] = ["id": r.id, "app": r.app.rawValue, "kind": r.kind.rawValue, "reason": r.reason, "date": iso(r.createdAt)]
                    if let a = r.asset { d["asset"] = assetJSON(a) }
                    return d
                })
            } else {
                printTable(["ID", "APP", "KIND", "DATE", "ASSET", "REASON"], reqs.map { r in
                    [String(r.id), r.app.rawValue, r.kind.rawValue, shortDate(r.createdAt),
                     r.asset.map { "\($0.id) \($0.displayName)" } ?? "-", r.reason]
                })
            }
        }
    }
}
