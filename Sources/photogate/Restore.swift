import ArgumentParser
import GrantStore

struct Restore: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Bring assets back from Recently Deleted.",
        discussion: "Example: photogate restore IMG_0001.jpg")
    @Argument(help: "Assets: ids or display names; - reads them from standard input.", completion: Complete.trashedAssets) var assets: [String]
    @OptionGroup var lib: LibraryOption

    func execute() throws {
        do {
            // No automatic purge first: it could delete the photo being rescued.
            let restored = try lib.open(purge: false).restore(expandRefs(assets))
            for a in restored { say("restored \(a.id)  \(a.displayName)") }
        }
    }
}
