import ArgumentParser
import Foundation
import GrantStore
import PhotoLibrary

struct Versions: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "versions",
        abstract: "List an asset's versions: its original and each edit an app saved.",
        discussion: """
            Version 0 is the original, which no edit ever modifies or deletes; 1, 2, 3... are the edits, \
            in the order they were saved, each with the app that saved it, its date, size and hash. The \
            current version (what every app reads) is marked. `photogate revert` goes back to the \
            original (or, with --to, to another version).

            Then the asset's sidecars (photo.jpg.xmp, IMG_1.XMP, .pp3, .dop, .THM, .AAE), each write \
            of one a version of it, with the photo's version current when it was written (PHOTO); a \
            version without a hash removed it (rm). JSON: each version of the photo has `sidecars`, the \
            sidecar versions written while it was current.

            Example: photogate versions IMG_0001.jpg --json
            """)

    @Argument(help: "The asset: id or display name.", completion: Complete.assets) var asset: String
    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag
    @OptionGroup var columns: ColumnsOption

    func execute() throws {
        do {
            let library = try lib.open()
            let (a, versions) = try library.versions(asset)
            let sidecars = try library.sidecarVersions(a.id)
            if output.json {
                printJSON(versions.map { v in
                    var d = versionJSON(v)
                    d["sidecars"] = sidecars.filter { $0.photoVersion == v.version }.map(sidecarVersionJSON)
                    return d
                })
            } else {
                sayNote("\(a.displayName) (\(a.id))")
                try printTable(["VERSION", "APP", "DATE", "SIZE", "TYPE", "HASH", "CURRENT"], versions.map { v in
                    [Cell(v.isOriginal ? "0 original" : String(v.version)), Cell(v.app?.rawValue ?? "-"), .date(v.date), .size(v.byteSize),
                     Cell(v.mediaKind), Cell(v.contentHash), Cell(v.isCurrent ? "*" : "")]
                }, columns: columns)
                if !sidecars.isEmpty {
                    say("")
                    try printTable(["SIDECAR", "VERSION", "APP", "DATE", "SIZE", "HASH", "PHOTO", "CURRENT"], sidecars.map { s in
                        [Cell(s.name), Cell(String(s.version)), Cell(s.app?.rawValue ?? "-"), .date(s.date),
                         s.contentHash == nil ? Cell("-") : .size(s.byteSize), Cell(s.contentHash ?? "(removed)"),
                         Cell(String(s.photoVersion)), Cell(s.isCurrent ? "*" : "")]
                    }, columns: columns)
                }
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

func sidecarVersionJSON(_ s: SidecarVersion) -> [String: Any] {
    [
        "name": s.name, "form": s.key.form.rawValue, "extension": s.key.ext, "version": s.version, "current": s.isCurrent,
        "app": s.app?.rawValue ?? NSNull(), "date": iso(s.date), "size": s.byteSize, "hash": s.contentHash ?? NSNull(),
        "removed": s.contentHash == nil, "photoVersion": s.photoVersion, "hasLocation": s.hasLocation,
    ]
}
