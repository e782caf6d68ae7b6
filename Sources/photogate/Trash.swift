import ArgumentParser
import GrantStore

struct Trash: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "trash",
        abstract: "List Recently Deleted: assets removed with rm through a mount.",
        discussion: "Example: photogate trash --json")
    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag
    @OptionGroup var columns: ColumnsOption

    func execute() throws {
        do {
            let assets = try lib.open().trash()
            if output.json {
                printJSON(assets.map { assetJSON($0) })
            } else {
                try printTable(["ID", "NAME", "DELETED"], assets.map { [Cell($0.id), Cell($0.displayName), $0.trashedDate.map(Cell.date) ?? "-"] }, columns: columns)
            }
        }
    }
}
