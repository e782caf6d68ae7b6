import ArgumentParser
import GrantStore

struct Albums: PhotogateCommand {
    static let configuration = CommandConfiguration(commandName: "albums",
                                                    abstract: "List albums and shared albums.",
                                                    discussion: "Example: photogate albums --json")
    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag
    @OptionGroup var columns: ColumnsOption

    func execute() throws {
        do {
            let albums = try lib.open().albums()
            if output.json {
                printJSON(albums.map { ["name": $0.name, "shared": $0.isShared, "count": $0.count, "createdDate": iso($0.createdAt)] as [String: Any] })
            } else {
                try printTable(["NAME", "KIND", "ASSETS"], albums.map { [$0.name, $0.isShared ? "shared" : "album", String($0.count)] }, columns: columns)
            }
        }
    }
}
