import ArgumentParser
import Foundation
import GrantStore

struct Changes: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "changes",
        abstract: "List the persistent change history of an app's view.",
        // A short synopsis: argument-parser does not wrap the generated one at 80 columns (issue 16).
        usage: "photogate changes <app> [--since <since>] [<options>]",
        discussion: """
            As PhotoKit's persistent change tokens do. Each entry has a token, a kind (inserted, removed, updated, status), the asset's id and \
            the name the app sees (the app's own files under the names it gave them: use the id to \
            act on an asset from a script). Pass the last token you processed to --since to get only what came after it. Tokens \
            survive daemon restarts. A token older than the retained history is expired (exit 73): \
            refetch everything with `photogate assets --app APP`, as PhotoKit asks. A \
            token beyond the app's latest was never issued (a typo, another app's or another \
            library's token): it is refused (exit 64) rather than taken as the latest. \
            A "status" entry means the app's status or options changed: its whole view may differ.

            Example: photogate changes org.example.Editor --since 41 --json
            """)

    @Argument(help: "The app id.", completion: Complete.apps) var app: String
    @Option(help: "Only changes after this token.") var since: Int64 = 0
    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag
    @OptionGroup var columns: ColumnsOption

    func execute() throws {
        do {
            let id = try parseApp(app)
            if since < 0 { throw CommandFailure("--since \(since): tokens are 1 and up (0, the default: the whole retained history)", .usage) }
            let library = try lib.open()
            switch try library.changes(id, since: since) {
            case .expired(let oldest):
                if output.json {
                    printJSON(["expired": true, "oldestValidToken": oldest] as [String: Any])
                }
                throw CommandFailure("token \(since) has expired (history before \(oldest) was discarded): refetch everything with `photogate assets --app \(id)`", .expired)
            case .changes(let list, let latest):
                // The library answers a token beyond the latest with that token as the latest:
                // a script would then wait for ever for changes after a token that does not exist.
                // (Read after the changes: tokens only grow, so one beyond it was never issued.)
                if since > 0, list.isEmpty, case let issued = try library.latestChangeToken(id), issued < since {
                    throw CommandFailure("token \(since) was never issued for \(id) (its latest is \(issued)): pass a token "
                        + "`photogate changes \(id)` printed, or none for the whole retained history", .usage)
                }
                if output.json {
                    printJSON([
                        "token": latest,
                        "changes": list.map { c -> [String: Any] in
                            var d: [String: Any] = ["token": c.token, "kind": c.kind.rawValue, "date": iso(c.date)]
                            if let n = c.name { d["name"] = n }
                            if let a = c.assetID { d["id"] = a }
                            if let x = c.detail { d["detail"] = x }
                            return d
                        },
                    ] as [String: Any])
                } else {
                    try printTable(["TOKEN", "KIND", "ID", "NAME"], list.map { [String($0.token), $0.kind.rawValue, $0.assetID ?? "-", $0.name ?? $0.detail ?? ""] }, columns: columns)
                    sayNote("latest token: \(latest)")
                }
            }
        }
    }
}
