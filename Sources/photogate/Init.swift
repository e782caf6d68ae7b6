import ArgumentParser
import GrantStore

struct Init: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Create a library: a store folder for originals and the database.",
        usage: "photogate init [<directory>] [--catalog <url> --store <path>]",
        discussion: """
            Example: photogate init ~/Pictures/photogate

            One library on several hosts (docs/admin.md), the same on each host:
              photogate init --catalog postgresql://nas/photos --store /mnt/photos
            """)

    @Argument(help: "The library folder (default: --library, $PHOTOGATE_LIBRARY, $XDG_DATA_HOME/photogate).")
    var directory: String?

    @Option(help: ArgumentHelp("Keep the catalog in this PostgreSQL database (postgresql://user@host/db, or postgresql:///db?host=/socket/dir); the same URL and --store on another host join the same library.", valueName: "url"))
    var catalog: String?

    @Option(help: ArgumentHelp("With --catalog: the shared folder (NFS, CephFS...) the originals go in, the same on every host.", valueName: "path"))
    var store: String?

    @OptionGroup var lib: LibraryOption

    func validate() throws {
        if (catalog == nil) != (store == nil) { throw ValidationError("--catalog and --store go together") }
        if let catalog, !(catalog.hasPrefix("postgresql://") || catalog.hasPrefix("postgres://")) {
            throw ValidationError("--catalog must be a postgresql:// URL")
        }
    }

    func execute() throws {
        do {
            let paths = LibraryPaths.resolve(directory ?? lib.library)
            if let catalog, let store {
                let lib = try Library.create(at: paths, link: CatalogLink(catalog: catalog, shared: LibraryPaths.resolve(store).root))
                say("created library at \(paths.root), its catalog at \(lib.paths.link?.safeCatalog ?? catalog), its originals in \(lib.paths.store)")
                return
            }
            _ = try Library.create(at: paths)
            say("created library at \(paths.root)")
        }
    }
}
