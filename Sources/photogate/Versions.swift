import ArgumentParser
import Foundation
import GrantStore
import PhotoLibrary

struct Versions: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "versions",
        abstract: "List the versions of an asset: the original and each edit an app saved.",
        discussion: """
            Version 0 is the original, which no edit ever modifies or deletes; 1, 2, 3... are the edits, \
            in the order they were saved, each with the app that saved it, its date, size and hash. The \
            current version (what every app reads) is marked. `photogate revert` goes back to the \
            original (or, with --to, to another version).

            Example: photogate versions IMG_0001.jpg --json
            """)

    @Argument(help: "The asset: id or display name.") var asset: String
    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag
    @OptionGroup var columns: ColumnsOption

    func execute() throws {
        do {
            let (a, versions) = try lib.open().versions(asset)
            if output.json {
                printJSON(versions.map { versionJSON($0) })
            } else {
                sayNote("\(a.displayName) (\(a.id))")
                try printTable(["VERSION", "APP", "DATE", "SIZE", "TYPE", "HASH", "CURRENT"], versions.map { v in
                    [Cell(v.isOriginal ? "0 original" : String(v.version)), Cell(v.app?.rawValue ?? "-"), .date(v.date), .size(v.byteSize),
                     Cell(v.mediaKind), Cell(v.contentHash), Cell(v.isCurrent ? "*" : "")]
                }, columns: columns)
            }
        }
    }
}

func versionJSON(_ v: AssetVersion) -> [String: Any] {
    [
        "version": v.version, "original": v.isOriginal, "current": v.isCurrent, "app": v.app?.rawValue ?? NSNull(),
        "date": iso(v.date), "size": v.byteSize, "type": v.mediaKind, "hash": v.contentHash,
        "captureDate": iso(v.captureDate), "hasLocation": v.hasLocation,
    ]
}
