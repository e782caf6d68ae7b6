import ArgumentParser
import Foundation
import GrantStore

/// `photogate debug-fill-catalog`: big catalogs for scripts/bench, through the library's own
/// insert API (`Library.insertReferenced`) rather than SQL that copies the schema. Hidden from
/// --help: it is a tool for measuring, not for people's libraries.
struct DebugFillCatalog: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "debug-fill-catalog",
        abstract: "Add many assets indexed in place, in one transaction (for scripts/bench).",
        discussion: """
            Scans each file once, as `import --reference` does, then adds --count assets that read \
            their bytes from those files in turn. Without --name-prefix each asset takes its file's \
            name (at most one asset per file); with it, assets are named PREFIX0000000.jpg, \
            PREFIX0000001.jpg... Capture dates are --capture-start plus --capture-step seconds per \
            asset. Content hashes are placeholders (verify reports them): not for real libraries.
            """,
        shouldDisplay: false)

    @Argument(help: "Photos or videos (files or folders) the assets read from.")
    var paths: [String]

    @Option(help: "How many assets to add (default: one per file).")
    var count: Int?

    @Option(help: "Name the assets PREFIX and a 7-digit number, with the file's extension.")
    var namePrefix: String?

    @Option(help: "Capture date of the first asset (seconds since 1970).")
    var captureStart: Double = 1_500_000_000

    @Option(help: "Seconds between the capture dates of consecutive assets.")
    var captureStep: Double = 60

    @Option(help: "Fraction (0 to 1) of the assets that are cloud-shared, spread evenly.")
    var sharedFraction: Double = 0

    @Option(help: "The shared album the cloud-shared assets join.")
    var sharedAlbum = "Shared photos"

    @Option(help: "The app that made the assets (as if it wrote them into an add-only mount).")
    var owner: String?

    @Option(help: "Seconds between the times consecutive assets were added, back from now (default: all added now).")
    var addedStep: Double?

    @OptionGroup var lib: LibraryOption

    func validate() throws {
        if paths.isEmpty { throw ValidationError("name at least one photo or folder") }
        if let count, count < 0 { throw ValidationError("--count must be 0 or more") }
        if !(0...1).contains(sharedFraction) { throw ValidationError("--shared-fraction is between 0 and 1") }
    }

    func execute() throws {
        do {
            let library = try lib.open()
            let (files, problems) = Importer.collect(paths)
            if let p = problems.first { throw LibraryError.badInput("\(p.0): \(p.1)") }
            let originals = try files.map { try ReferencedOriginal(scanning: $0) }
            guard !originals.isEmpty else { throw LibraryError.badInput("no files") }
            let n = count ?? originals.count
            if namePrefix == nil && n > originals.count {
                throw LibraryError.invalid("\(n) assets from \(originals.count) files need --name-prefix")
            }
            let names = files.map { ($0 as NSString).lastPathComponent }
            let exts = files.map { name -> String in
                let e = (name as NSString).pathExtension
                return e.isEmpty ? "" : "." + e
            }
            let app = try owner.map { o -> AppID in
                guard let a = AppID(o) else { throw LibraryError.badInput("\(o) is not an app id") }
                return a
            }
            let started = Date()
            let added = try library.insertReferenced(originals, count: n, sharedAlbum: sharedAlbum) { i in
                let o = i % originals.count
                let name = namePrefix.map { $0 + sevenDigits(i) + exts[o] } ?? names[o]
                // Row i is shared when the running total of the fraction passes a whole number.
                let shared = Int(Double(i + 1) * sharedFraction) > Int(Double(i) * sharedFraction)
                return BulkAsset(name: name, original: o, captureDate: Date(timeIntervalSince1970: captureStart + Double(i) * captureStep),
                                 shared: shared, owner: app, addedAt: addedStep.map { started.addingTimeInterval(-Double(i) * $0) })
            }
            say("added \(added) assets from \(originals.count) files in \(String(format: "%.2f", Date().timeIntervalSince(started))) s")
        }
    }
}

/// `i` with leading zeros to 7 digits (String(format:) costs microseconds, a million times).
private func sevenDigits(_ i: Int) -> String {
    let s = String(i)
    return s.count >= 7 ? s : String(repeating: "0", count: 7 - s.count) + s
}
