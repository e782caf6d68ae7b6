import ArgumentParser
import GrantStore

struct Trash: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "trash",
        abstract: "List Recently Deleted: assets removed with rm through a mount; --delete deletes some for good.",
        usage: "photogate trash [--delete <asset>...] [<options>]",
        discussion: """
            `photogate restore ASSET` brings one back. `--delete ASSET...` deletes assets in Recently \
            Deleted for good: their catalog rows, versions and stored files (a --reference original \
            is your own file and stays); any asset not in Recently Deleted refuses the whole call \
            (exit 68), nothing deleted. ASSET is an id or a name; - reads more from standard input.

            Examples:
              photogate trash --json
              photogate trash --delete 3f2a9c0d11e4b5a6
            """)
    @Flag(help: "Delete the assets named for good (they must be in Recently Deleted).") var delete = false
    @Argument(help: "With --delete: the assets.") var assets: [String] = []
    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag
    @OptionGroup var columns: ColumnsOption

    func validate() throws {
        if delete && assets.isEmpty { throw ValidationError("--delete needs the assets to delete for good") }
        if !delete && !assets.isEmpty { throw ValidationError("assets are named only with --delete (to list, name none)") }
    }

    func execute() throws {
        if delete {
            let gone = try lib.open().deleteForGood(expandRefs(assets))
            for a in gone { say("deleted for good \(a.id)  \(a.displayName)") }
            return
        }
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
