import ArgumentParser
import GrantStore

struct Grant: PhotogateCommand {
    /// A grant only adds to what an app sees, so it waits for no running mount: it stays one
    /// commit (~14 ms with 10 mounts running; waiting for them all doubled it), and its mounts
    /// show it within a millisecond. Except with --strip-location, which can take a location
    /// away from a photo the app already sees (or from a set's members): then it waits, as a
    /// revoke does, so that the next open gets no location.
    var waitsForRunningMounts: Bool { stripLocation }
    static let offersNewApp = true
    static let configuration = CommandConfiguration(
        commandName: "grant",
        abstract: "Add assets to an app's selection, or hand them over as picked.",
        // A short synopsis: argument-parser does not wrap the generated one at 80 columns (issue 16).
        usage: "photogate grant <app> [<assets> ...] [<options>]",
        discussion: """
            ASSET is an id or a name; - reads more from standard input, one per line. A name is read \
            first as the app sees it (the names of `photogate assets --app APP`), else as a library \
            display name (`photogate assets`); a name that means different assets in different \
            listings (an app named its own file like another photo) is refused (exit 68): use the \
            id. The same holds for `photogate revoke`. A call naming any unknown asset changes nothing and names the unknown ones (exit \
            66). Granting is idempotent. Shared-album assets cannot be put in a limited selection, \
            nor picked for a limited app, which never sees them (exit 68). \
            The app must be known (authorized, mounted or granted before): an unknown app id is \
            refused (exit 66), so that a typo grants nothing; --new-app registers it. The selection \
            shows only to an app whose read-write status is limited: granting to any other says \
            so (on stderr) and what to run; the grant is kept for when it is.

            --album NAME, --taken-after, --taken-before and --kind grant a set that stays live: the \
            app sees the set's members as they change (a photo added to the album later, or imported \
            later with a date in the range), in running mounts too; every condition given must hold. \
            `photogate grants APP` lists the sets with their numbers, `photogate revoke APP --set N` \
            (or --album NAME) takes one back, and `photogate explain` names the set a photo is \
            granted through. A photo also granted by name stays granted when its set goes. Days are \
            midnight on the camera's clock (UTC); --taken-before excludes its own moment.

            --edit gives the person's consent to edits instead: the app may save new versions of these \
            assets whenever it can see them (it may always edit what it created). It answers the app's \
            pending edit requests for them. Shared-album assets cannot be edited (exit 68).

            Examples:
              photogate grant org.example.Editor IMG_0001.jpg IMG_0002.jpg
              photogate assets --json | jq -r '.[] | select(.type == "heif") | .id' \\
                | photogate grant org.example.Editor -
              photogate grant org.example.Editor --edit IMG_0001.jpg
              photogate grant org.example.Frame --album "Summer 2024"
              photogate grant org.example.Frame --taken-after 2024-06-01 \\
                --taken-before 2024-07-01 --kind photo
              photogate grant org.example.NewApp --new-app 3f2a9c0d1e4b5a6c
            """)

    @Argument(help: "The app id.", completion: Complete.apps) var app: String
    @Argument(help: "Assets: ids or display names; - reads them from standard input.", completion: Complete.assets) var assets: [String] = []
    @Flag(help: "Hand the assets over as picked (PHPicker): visible whatever the app's library status.") var picked = false
    @Flag(help: "Strip location from these assets when this app reads them.") var stripLocation = false
    @Flag(help: "Consent to the app editing these assets (saving new versions); answers its edit requests.") var edit = false
    @Flag(help: "Register the app if it is not known yet (otherwise an unknown app is refused, exit 66).") var newApp = false
    @Option(help: "Grant the members of this album, as they change (a set grant that stays live).", completion: Complete.albums) var album: String?
    @OptionGroup var filter: SetFilterOptions
    @OptionGroup var lib: LibraryOption

    var isSet: Bool { album != nil || !filter.isEmpty }

    func validate() throws {
        if isSet {
            if !assets.isEmpty { throw ValidationError("grant either assets by name or a set (--album, --taken-after, --taken-before, --kind), not both") }
            if edit || picked { throw ValidationError("a set grant is a selection: not with --edit or --picked") }
            return
        }
        if assets.isEmpty { throw ValidationError("name at least one asset (or - to read them from standard input), or a set (--album, --taken-after, --taken-before, --kind)") }
        if edit && (picked || stripLocation) { throw ValidationError("--edit gives edit consent only: grant --picked or --strip-location separately") }
    }

    func execute() throws {
        do {
            let id = try parseApp(app)
            if isSet {
                let r = try lib.open().grantSet(id, filter.set(album: album, stripLocation: stripLocation), registering: newApp)
                say("granted set \(r.id) to \(id): \(r.members) asset\(r.members == 1 ? "" : "s") in it now (\(r.added) newly selected); it stays live")
                return
            }
            let refs = expandRefs(assets)
            if refs.isEmpty { throw CommandFailure("no assets given", .usage) }
            if edit {
                let r = try lib.open().grantEdit(id, refs)
                say("may edit \(r.changed) more (\(r.unchanged) already) for \(id)")
                return
            }
            let library = try lib.open()
            let r = try library.grant(id, refs, picked: picked, stripLocation: stripLocation, registering: newApp)
            say("granted \(r.changed) (\(r.unchanged) already granted) to \(id)")
            // A selection shows only to a limited app: say so, or "granted 1" reads as if the app
            // now sees the photo (issue 38). Picked assets show whatever the status.
            if !picked, let status = try library.app(id)?.status(for: .readWrite), status != .limited {
                printNote(status == .authorized
                    ? "\(id) is authorized for the whole library and sees every photo already; its selection takes effect if it is limited (photogate authorize \(id) --status limited)"
                    : "\(id) is \(status.rawValue) for read-write, so it sees none of its selection; the selection takes effect once it is limited: photogate authorize \(id) --status limited")
            }
        }
    }
}
