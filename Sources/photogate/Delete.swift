import ArgumentParser
import GrantStore

struct Delete: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Delete assets: to Recently Deleted, where they can be restored.",
        usage: "photogate delete <assets> ...",
        discussion: """
            As an rm through an authorized app's mount: the asset leaves every view at once and goes \
            to Recently Deleted, recorded as deleted by you (photogate trash says who deleted each \
            asset, and when). photogate restore brings it back; photogate trash --delete, or \
            --empty, deletes it for good. ASSET is an id or a display name; - reads more from \
            standard input, one per line. A call naming any unknown asset deletes nothing and \
            names the unknown ones (exit 66); an asset already in Recently Deleted is left there.

            Examples:
              photogate delete IMG_0001.jpg
              photogate assets --json | jq -r '.[] | select(.size > 50000000) | .id' \\
                | photogate delete -
            """)
    @Argument(help: "Assets: ids or display names; - reads them from standard input.", completion: Complete.assets) var assets: [String] = []
    @OptionGroup var lib: LibraryOption

    func validate() throws {
        if assets.isEmpty { throw ValidationError("name at least one asset (or - to read them from standard input)") }
    }

    func execute() throws {
        let refs = expandRefs(assets)
        if refs.isEmpty { throw CommandFailure("no assets given", .usage) }
        let r = try lib.open().delete(refs)
        for a in r.deleted { say("deleted \(a.id)  \(a.displayName)") }
        if !r.already.isEmpty {
            printNote("already in Recently Deleted: \(r.already.prefix(10).map { "\($0.displayName) (\($0.id))" }.joined(separator: ", "))"
                + (r.already.count > 10 ? " and \(r.already.count - 10) more" : ""))
        }
    }
}
