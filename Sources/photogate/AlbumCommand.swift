import ArgumentParser
import GrantStore

struct AlbumCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "album",
        abstract: "Create albums and put assets in them.",
        subcommands: [Create.self, Add.self, Remove.self, Delete.self])

    struct Create: PhotogateCommand {
        static let configuration = CommandConfiguration(commandName: "create",
                                                        abstract: "Create a user album.",
                                                        discussion: "Example: photogate album create Holidays")
        @Argument(help: "The album name.") var name: String
        @OptionGroup var lib: LibraryOption
        func execute() throws {
            do {
                try lib.open().createAlbum(name)
                say("created album '\(name)'")
            }
        }
    }

    struct Add: PhotogateCommand {
        static let configuration = CommandConfiguration(commandName: "add",
                                                        abstract: "Add assets (ids or display names; - reads stdin) to an album.",
                                                        discussion: "Example: photogate album add Holidays IMG_0001.jpg 3f2a9c0d1e4b5a6c")
        @Argument(help: "The album name.", completion: Complete.userAlbums) var name: String
        @Argument(help: "Assets: ids or display names; - reads them from standard input.", completion: Complete.assets) var assets: [String]
        @OptionGroup var lib: LibraryOption
        func execute() throws {
            do {
                let n = try lib.open().addToAlbum(name, expandRefs(assets))
                say("added \(n) to '\(name)'")
            }
        }
    }

    struct Remove: PhotogateCommand {
        static let configuration = CommandConfiguration(commandName: "remove",
                                                        abstract: "Remove assets from an album (they stay in the library).",
                                                        discussion: "Example: photogate album remove Holidays IMG_0001.jpg")
        @Argument(help: "The album name.", completion: Complete.userAlbums) var name: String
        @Argument(help: "Assets: ids or display names; - reads them from standard input.", completion: Complete.assets) var assets: [String]
        @OptionGroup var lib: LibraryOption
        func execute() throws {
            do {
                let n = try lib.open().removeFromAlbum(name, expandRefs(assets))
                say("removed \(n) from '\(name)'")
            }
        }
    }

    struct Delete: PhotogateCommand {
        static let configuration = CommandConfiguration(commandName: "delete",
                                                        abstract: "Delete a user album (its assets stay in the library).",
                                                        discussion: "Example: photogate album delete Holidays")
        @Argument(help: "The album name.", completion: Complete.userAlbums) var name: String
        @OptionGroup var lib: LibraryOption
        func execute() throws {
            do {
                try lib.open().deleteAlbum(name, onlyIfEmpty: false)
                say("deleted album '\(name)'")
            }
        }
    }
}
