import ArgumentParser
import GrantStore

struct Grants: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List an app's selection and picked assets.",
                                                    discussion: "Example: photogate grants org.example.Editor --json")
    @Argument(help: "The app id.") var app: String
    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag

    func run() throws {
        try photogate.run {
            let grants = try lib.open().grants(parseApp(app))
            if output.json {
                printJSON(grants.map { g -> [String: Any] in
                    var d = assetJSON(g.asset)
                    d["grant"] = g.kind.rawValue
                    d["stripLocation"] = g.stripLocation
                    d["grantedDate"] = iso(g.grantedAt)
                    return d
                })
            } else {
                printTable(["ID", "NAME", "GRANT", "STRIP-LOCATION"], grants.map {
                    [$0.asset.id, $0.asset.displayName, $0.kind.rawValue, $0.stripLocation ? "yes" : "-"]
                })
            }
        }
    }
}
