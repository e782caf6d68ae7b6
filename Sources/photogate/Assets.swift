import ArgumentParser
import Foundation
import GrantStore
import PhotoLibrary

struct Assets: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "assets",
        abstract: "List assets; with --app, exactly what that app's mount shows.",
        // A short synopsis: argument-parser does not wrap the generated one at 80 columns (issue 16).
        usage: "photogate assets [<options>]",
        discussion: """
            With --app the list is computed by the same policy code the mount uses, and names are the \
            names that app sees.

            --taken-after/--taken-before take a day (YYYY-MM-DD, on the camera's clock: UTC) or an ISO 8601 \
            time; --taken-after includes its moment, --taken-before excludes its own.

            Examples:
              photogate assets --app org.example.Editor --json | jq -r '.[].id'
              photogate assets --taken-after 2024-06-01 --taken-before 2024-07-01 \\
                --kind photo
              photogate assets --owner org.example.Camera
            """)

    @Option(help: "Only the assets of this album.", completion: Complete.albums)
    var album: String?

    @Option(help: "Only what this app may see.", completion: Complete.apps)
    var app: String?

    @Option(help: "With --app: the access level of the view (read-write or add-only).")
    var access: AccessLevel = .readWrite

    @Option(help: "Only the assets this app created (its own files).", completion: Complete.apps)
    var owner: String?

    @OptionGroup var filter: SetFilterOptions

    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag
    @OptionGroup var columns: ColumnsOption

    func execute() throws {
        do {
            let library = try lib.open()
            var rows: [(Asset, String)]
            if let app {
                let id = try parseApp(app)
                let view = try library.view(for: id, access: access)
                rows = view.entries.map { ($0.asset, $0.name) }
                if let album {
                    let members = try Set(library.assets(album: album).map(\.rowID))
                    rows = rows.filter { members.contains($0.0.rowID) }
                }
                rows.sort { ($0.0.captureDate, $0.0.rowID) < ($1.0.captureDate, $1.0.rowID) }
            } else {
                rows = try library.assets(album: album).map { ($0, $0.displayName) }
            }
            if let owner {
                let ownerID = try parseApp(owner)
                rows = rows.filter { $0.0.owner == ownerID }
            }
            if !filter.isEmpty { rows = try rows.filter { try filter.admits($0.0) } }
            if output.json {
                printJSON(rows.map { assetJSON($0.0, name: $0.1) })
            } else {
                try printTable(["ID", "NAME", "TYPE", "SIZE", "CAPTURED", "LOCATION", "OWNER"], rows.map { a, name in
                    [Cell(a.id), Cell(name), Cell(a.mediaKind), .size(a.byteSize), .date(a.captureDate),
                     Cell(a.hasLocation ? "yes" : "-"), Cell(a.owner?.rawValue ?? (a.isShared ? "(shared)" : "-"))]
                }, columns: columns)
            }
        }
    }
}

extension AccessLevel: ExpressibleByArgument {}
extension AuthorizationStatus: ExpressibleByArgument {}
