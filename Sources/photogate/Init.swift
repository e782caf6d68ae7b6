import ArgumentParser
import GrantStore

struct Init: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Create a library: a store folder for originals and the database.",
        discussion: "Example: photogate init ~/Pictures/photogate")

    @Argument(help: "The library folder (default: --library, $PHOTOGATE_LIBRARY, $XDG_DATA_HOME/photogate).")
    var directory: String?

    @OptionGroup var lib: LibraryOption

    func execute() throws {
        do {
            let paths = LibraryPaths.resolve(directory ?? lib.library)
            _ = try Library.create(at: paths)
            say("created library at \(paths.root)")
        }
    }
}
