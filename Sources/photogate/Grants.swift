import ArgumentParser
import GrantStore
import PhotoLibrary

struct Grants: PhotogateCommand {
    static let configuration = CommandConfiguration(commandName: "grants",
                                                    abstract: "List an app's selection and picked assets, or its set grants.",
                                                    usage: "photogate grants <app> [--sets] [<options>]",
                                                    discussion: """
                                                        Names are those the app sees (as in `photogate assets --app APP`); --json adds displayName. \
                                                        GRANT is selected, picked, or "set N" for a photo selected only through \
                                                        set grant N (an album, a date range, a kind: `photogate grant APP --album`); \
                                                        --sets lists those grants.

                                                        Examples:
                                                          photogate grants org.example.Editor --json
                                                          photogate grants org.example.Frame --sets
                                                        """)
    @Argument(help: "The app id.", completion: Complete.apps) var app: String
    @Flag(help: "List the app's set grants (album, date range, kind) instead, with the number of assets each covers now.") var sets = false
    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag
    @OptionGroup var columns: ColumnsOption

    func execute() throws {
        do {
            let library = try lib.open()
            let id = try parseApp(app)
            if sets { return try printSets(library.setGrants(id)) }
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
                    if !g.throughSets.isEmpty { d["sets"] = g.throughSets }
                    return d
                })
            } else {
                try printTable(["ID", "NAME", "GRANT", "STRIP-LOCATION"], grants.map {
                    [$0.asset.id, name($0.asset), $0.throughSets.first.map { "set \($0)" } ?? $0.kind.rawValue, $0.stripLocation ? "yes" : "-"]
                }, columns: columns)
            }
        }
    }

    func printSets(_ sets: [SetGrant]) throws {
        if output.json {
            printJSON(sets.map { s -> [String: Any] in
                var d: [String: Any] = ["set": s.id, "members": s.members, "stripLocation": s.stripLocation, "grantedDate": iso(s.grantedAt),
                                        "description": s.summary]
                if let a = s.album { d["album"] = a }
                if let t = s.takenAfter { d["takenAfter"] = iso(t) }
                if let t = s.takenBefore { d["takenBefore"] = iso(t) }
                if let k = s.mediaClass { d["kind"] = k.rawValue }
                return d
            })
        } else {
            try printTable(["SET", "ALBUM", "TAKEN-AFTER", "TAKEN-BEFORE", "KIND", "MEMBERS", "STRIP-LOCATION"], sets.map { s in
                [Cell(String(s.id)), Cell(s.album ?? "-"), s.takenAfter.map { Cell.date($0) } ?? Cell("-"),
                 s.takenBefore.map { Cell.date($0) } ?? Cell("-"), Cell(s.mediaClass?.rawValue ?? "-"), Cell(String(s.members)),
                 Cell(s.stripLocation ? "yes" : "-")]
            }, columns: columns)
        }
    }
}
