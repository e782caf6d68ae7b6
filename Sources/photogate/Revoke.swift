import ArgumentParser
import GrantStore

struct Revoke: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke",
        abstract: "Remove assets from an app's selection (or from its picked assets).",
        // A short synopsis: argument-parser does not wrap the generated one at 80 columns (issue 16).
        usage: "photogate revoke <app> [<assets> ...] [<options>]",
        discussion: """
            Running mounts stop showing them at once, and handles opened before fail their next read. \
            Names are read as for `photogate grant`: a name that means different assets in different \
            listings is refused (exit 68), so a revoke never silently misses; ids always work.

            Examples:
              photogate revoke org.example.Editor IMG_0001.jpg
              photogate revoke org.example.Editor --all
              photogate revoke org.example.Editor --edit IMG_0001.jpg   # edit consent
              photogate revoke org.example.Frame --album "Summer 2024"  # a set grant
              photogate revoke org.example.Frame --set 2   # its number in `grants --sets`
            """)

    @Argument(help: "The app id.", completion: Complete.apps) var app: String
    @Argument(help: "Assets: ids or display names; - reads them from standard input.", completion: Complete.assets) var assets: [String] = []
    @Flag(help: "Revoke the whole selection (with --picked, the picked assets too).") var all = false
    @Flag(help: "Revoke picked assets instead of the selection.") var picked = false
    @Flag(help: "Take back edit consent for these assets (the versions already saved stay).") var edit = false
    @Option(help: "Take back the app's set grants of this album.", completion: Complete.albums) var album: String?
    @Option(help: "Take back the set grant with this number (photogate grants APP lists them).") var set: Int64?
    @OptionGroup var lib: LibraryOption

    func validate() throws {
        if album != nil || set != nil {
            if album != nil && set != nil { throw ValidationError("use either --album or --set") }
            if all || picked || edit || !assets.isEmpty { throw ValidationError("--album and --set take back a set grant: not with assets, --all, --picked or --edit") }
            return
        }
        if all && !assets.isEmpty { throw ValidationError("use either --all or a list of assets") }
        if !all && assets.isEmpty { throw ValidationError("name assets to revoke, or --all") }
        if edit && (all || picked) { throw ValidationError("--edit takes back edit consent for named assets: not with --all or --picked") }
    }

    func execute() throws {
        do {
            let id = try parseApp(app)
            let library = try lib.open()
            if album != nil || set != nil {
                let r = try library.revokeSet(id, id: set, album: album)
                say("revoked \(r.sets) set grant\(r.sets == 1 ? "" : "s") from \(id): \(r.removed) asset\(r.removed == 1 ? "" : "s") left its selection")
            } else if edit {
                let r = try library.revokeEdit(id, expandRefs(assets))
                say("may no longer edit \(r.changed) (\(r.unchanged) had no edit consent) for \(id)")
            } else if all {
                let n = try library.revokeAll(id, includePicked: picked)
                say("revoked \(n) from \(id)")
            } else {
                let r = try library.revoke(id, expandRefs(assets), picked: picked)
                say("revoked \(r.changed) (\(r.unchanged) were not granted) from \(id)")
                if r.stillInSets > 0 {
                    printWarning("\(r.stillInSets) of them stay\(r.stillInSets == 1 ? "s" : "") visible through a set grant (photogate grants \(id) lists the sets; photogate revoke \(id) --set N)")
                }
            }
        }
    }
}
