import ArgumentParser
import Foundation
import GrantStore
#if canImport(Glibc)
import Glibc
#endif

struct Import: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Add photos and videos (files, or folders recursively) to the library.",
        // A short synopsis: argument-parser does not wrap the generated one at 80 columns (issue 16).
        usage: "photogate import <paths> ... [<options>]",
        discussion: """
            Originals are copied into the store durably (temporary file, fsync, rename); --reference \
            indexes them where they are instead. The media type comes from the content. The same \
            content imported twice is one asset (one in Recently Deleted comes back); a file with \
            the bytes of an app's file is a new asset of yours, and the app's is left alone. Files that are not photos or videos are skipped \
            with a warning naming each; the exit code is then 65 and everything else was imported. \
            Symbolic links inside a folder are skipped the same way (not followed); a symbolic link \
            named on the command line is followed.

            Example: photogate import ~/DCIM --album "Summer 2024"
            """)

    @Argument(help: "Files or folders to import.")
    var paths: [String]

    @Flag(help: "Index the files where they are instead of copying them into the library.")
    var reference = false

    @Option(help: "Put the imported assets in this album (created if needed).", completion: Complete.userAlbums)
    var album: String?

    @Option(help: "Import as cloud-shared assets in this shared album (created if needed).", completion: Complete.sharedAlbums)
    var shared: String?

    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag

    func validate() throws {
        if paths.isEmpty { throw ValidationError("name at least one file or folder to import") }
    }

    func execute() throws {
        var skippedAny = false
        do {
            let library = try lib.open()
            let importer = try Importer(library: library, options: ImportOptions(reference: reference, album: album, sharedAlbum: shared))
            let tty = isatty(2) == 1
            var lastDraw = Date.distantPast
            let summary = try importer.run(paths, event: { e in
                if case .skipped(let source, let reason) = e {
                    if tty { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
                    printWarning("skipped \(source): \(reason)")
                }
            }, progress: { done, total in
                guard tty, total >= 20 else { return }
                let now = Date()
                if now.timeIntervalSince(lastDraw) > 0.1 || done == total {
                    lastDraw = now
                    FileHandle.standardError.write(Data("\r\u{1B}[Kimporting \(done)/\(total)".utf8))
                    if done == total { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
                }
            })
            skippedAny = !summary.skipped.isEmpty
            if output.json {
                printJSON([
                    "imported": summary.imported.map { assetJSON($0) },
                    "duplicates": summary.duplicates.map { assetJSON($0) },
                    "repaired": summary.repaired.map { r -> [String: Any] in var d = assetJSON(r.asset); d["repair"] = r.what; return d },
                    "skipped": summary.skipped.map { ["path": $0.source, "reason": $0.reason] },
                ])
            } else {
                for a in summary.imported { say("imported \(a.id)  \(a.displayName)") }
                for r in summary.repaired { say("repaired \(r.asset.id)  \(r.asset.displayName): \(r.what)") }
                say("\(summary.imported.count) imported, \(summary.duplicates.count) already in the library, \(summary.skipped.count) skipped")
            }
        }
        if skippedAny { throw ExitCode(Exit.badInput.rawValue) }
    }
}
