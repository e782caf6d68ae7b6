import ArgumentParser
import GrantStore

struct Requests: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List pending authorization requests (prompts).",
        discussion: """
            A request is recorded when a not-determined app touches its mount, or when an app writes to
            .photogate/request. `photogate authorize` answers one and clears it.

            Example: photogate requests --json
            """)
    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag

    func run() throws {
        try photogate.run {
            let reqs = try lib.open().requests()
            if output.json {
                printJSON(reqs.map { ["id": $0.id, "app": $0.app.rawValue, "kind": $0.kind.rawValue, "reason": $0.reason, "date": iso($0.createdAt)] as [String: Any] })
            } else {
                printTable(["ID", "APP", "KIND", "DATE", "REASON"], reqs.map {
                    [String($0.id), $0.app.rawValue, $0.kind.rawValue, shortDate($0.createdAt), $0.reason]
                })
            }
        }
    }
}
