import ArgumentParser
import GrantStore

struct Trash: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List Recently Deleted: assets removed with rm through a mount.",
        discussion: "Example: photogate trash --json")
    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag

    func run() throws {
        try photogate.run {
            let assets = try lib.open().trash()
            if output.json {
                printJSON(assets.map { assetJSON($0) })
            } else {
                printTable(["ID", "NAME", "DELETED"], assets.map { [$0.id, $0.displayName, $0.trashedDate.map(shortDate) ?? "-"] })
            }
        }
    }
}
