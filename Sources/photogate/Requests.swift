import ArgumentParser
import GrantStore

struct Requests: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "requests",
        abstract: "List pending authorization requests (prompts).",
        discussion: """
            A request is recorded when a not-determined app touches its mount, or when an app writes to \
            .photogate/request. `photogate authorize` answers one and clears it. An edit request names \
            the asset an app opened for writing without consent; `photogate grant APP --edit ASSET` \
            (or `options APP --edit-any on`) answers it.

            Example: photogate requests --json
            """)
    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag
    @OptionGroup var columns: ColumnsOption

    func execute() throws {
        do {
            let reqs = try lib.open().requests()
            if output.json {
                printJSON(reqs.map { r -> [String: Any] in
                    var d: [String: Any] = ["id": r.id, "app": r.app.rawValue, "kind": r.kind.rawValue, "reason": r.reason, "date": iso(r.createdAt)]
                    if let a = r.asset { d["asset"] = assetJSON(a) }
                    return d
                })
            } else {
                try printTable(["ID", "APP", "KIND", "DATE", "ASSET", "REASON"], reqs.map { r in
                    [Cell(String(r.id)), Cell(r.app.rawValue), Cell(r.kind.rawValue), .date(r.createdAt),
                     Cell(r.asset.map { "\($0.id) \($0.displayName)" } ?? "-"), Cell(r.reason)]
                }, columns: columns)
            }
        }
    }
}
