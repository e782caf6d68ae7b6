import ArgumentParser
import Foundation
import GrantStore

struct Revert: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "revert",
        abstract: "Revert an asset to its original (PhotoKit's Revert to Original).",
        discussion: """
            The original becomes what every app reads again: same id, name, albums and grants; its hash, \
            size, capture date, location and strip-location plan are the catalog's again. Running mounts \
            see the change at once, and the history of every app that sees the asset records `updated`. \
            The edits stay listed by `photogate versions` (their files stay in the store), so --to N \
            can make edit N current again. Reverting to the version already current changes nothing \
            (exit 0). An unknown version is a usage error (exit 64).

            Examples:
              photogate revert IMG_0001.jpg
              photogate revert IMG_0001.jpg --to 2
            """)

    @Argument(help: "The asset: id or display name.", completion: Complete.assets) var asset: String
    @Option(help: "The version to make current (0, the original, by default).") var to: Int = 0
    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag

    func validate() throws {
        if to < 0 { throw ValidationError("--to takes a version number: 0 (the original) or an edit's number") }
    }

    func execute() throws {
        do {
            let r = try lib.open().revert(asset, to: to)
            if output.json {
                var d = assetJSON(r.asset)
                d["version"] = to
                d["changed"] = r.changed
                printJSON(d)
            } else if r.changed {
                say("\(r.asset.displayName) (\(r.asset.id)) is now \(to == 0 ? "the original" : "version \(to)")")
            } else {
                say("\(r.asset.displayName) (\(r.asset.id)) already shows \(to == 0 ? "the original" : "version \(to)"): nothing changed")
            }
        }
    }
}
