import ArgumentParser
import GrantStore
import PhotoLibrary

struct Refused: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "refused",
        abstract: "List files apps wrote that were refused at their close, and why.",
        discussion: """
            A file an app writes through its mount becomes an asset when its writer closes it; one that \
            is not a photo or video, is incomplete (a writer killed mid-write) or whose write failed (a \
            full disk) is refused: the app's close(2) fails (EINVAL, ENOSPC) and nothing stays. The \
            last 100 refusals of each app are kept here; the app reads its own in .photogate/refused.

            Example: photogate refused org.example.Camera --json
            """)
    @Argument(help: "Only this app's.", completion: Complete.apps) var app: String?
    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag
    @OptionGroup var columns: ColumnsOption

    func execute() throws {
        do {
            let id = try app.map { try parseApp($0) }
            let list = try lib.open().refusals(id)
            if output.json {
                printJSON(list.map { r -> [String: Any] in
                    ["id": r.id, "app": r.app.rawValue, "date": iso(r.date), "name": r.name, "reason": r.reason]
                })
            } else {
                try printTable(["DATE", "APP", "NAME", "REASON"], list.map { r in [.date(r.date), Cell(r.app.rawValue), Cell(r.name), Cell(r.reason)] }, columns: columns)
            }
        }
    }
}
