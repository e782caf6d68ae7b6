import ArgumentParser
import GrantStore
import PhotoLibrary

struct Grants: PhotogateCommand {
    static let configuration = CommandConfiguration(commandName: "grants",
                                                    abstract: "List an app's selection and picked assets.",
                                                    discussion: """
                                                        Names are those the app sees (as in `photogate assets --app APP`); --json adds displayName.
                                                        Example: photogate grants org.example.Editor --json
                                                        """)
    @Argument(help: "The app id.") var app: String
    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag
    @OptionGroup var columns: ColumnsOption

    func execute() throws {
        do {
            let library = try lib.open()
            let id = try parseApp(app)
            let grants = try library.grants(id)
            // Names as the app sees them (its own files under the names it gave them), like
            // `assets --app`: a name from this listing means the same asset to `revoke APP`.
            let viewNames = try library.viewNames(id)
            func name(_ a: Asset) -> String { viewNames?[a.rowID] ?? a.displayName }
            if output.json {
                printJSON(grants.map { g -> [String: Any] in
                    var d = assetJSON(g.asset, name: name(g.asset))
                    d["grant"] = g.kind.rawValue
                    d["stripLocation"] = g.stripLocation
                    d["grantedDate"] = iso(g.grantedAt)
                    return d
                })
            } else {
                try printTable(["ID", "NAME", "GRANT", "STRIP-LOCATION"], grants.map {
                    [$0.asset.id, name($0.asset), $0.kind.rawValue, $0.stripLocation ? "yes" : "-"]
                }, columns: columns)
            }
        }
    }
}
