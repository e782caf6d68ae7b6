import ArgumentParser
import GrantStore
import PhotoLibrary

struct Authorize: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "authorize",
        abstract: "Set an app's authorization status for one access level.",
        // A short synopsis: argument-parser does not wrap the generated one at 80 columns (issue 16).
        usage: "photogate authorize <app> --status <status> [<options>]",
        discussion: """
            Statuses: not-determined, restricted, denied, authorized, limited (read-write only). \
            Running mounts of the app change at once. It answers the app's pending requests for that \
            access level.

            Example: photogate authorize org.example.Editor --status limited
            """)

    @Argument(help: "The app id (reverse-DNS).", completion: Complete.apps) var app: String
    @Option(help: "read-write or add-only.") var access: AccessLevel = .readWrite
    @Option(help: "not-determined, restricted, denied, authorized or limited.") var status: AuthorizationStatus
    @OptionGroup var lib: LibraryOption

    func validate() throws {
        if !status.isValid(for: access) {
            throw ValidationError("'limited' is a read-write status only")
        }
    }

    func execute() throws {
        do {
            let id = try parseApp(app)
            let record = try lib.open().authorize(id, access: access, status: status)
            say("\(record.id): \(access.rawValue) \(record.status(for: access).rawValue)")
        }
    }
}
