import ArgumentParser

@main
struct Photogate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "photogate",
        abstract: "Give every app its own limited view of a photo library, as a FUSE filesystem.",
        discussion: """
            A library is a folder with the original files (the store) and a database of assets, albums,
            apps and their grants. Each app mounts its own view: only what the person granted it,
            plus what it created. Grants change live from this command line.

            Exit codes are stable: see `photogate help exit-codes`.
            """,
        subcommands: [
            Init.self, Import.self, Assets.self, AlbumCommand.self, Albums.self,
            Apps.self, Authorize.self, Status.self, Grant.self, Revoke.self, Grants.self, Options.self, Pick.self,
            Requests.self, Trash.self, Restore.self, Mount.self, Unmount.self, Mounts.self, Changes.self, Explain.self, Versions.self, Revert.self, Verify.self,
            ExitCodes.self,
        ]
    )
}
