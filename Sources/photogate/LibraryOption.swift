import ArgumentParser
import Foundation
import GrantStore
import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

// The arguments commands share: --library (and opening the library it names), --json, app ids,
// asset references.

struct LibraryOption: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The library folder (default: $PHOTOGATE_LIBRARY, else $XDG_DATA_HOME/photogate, else ~/.local/share/photogate).", valueName: "dir"),
            completion: .directory)
    var library: String?

    var paths: LibraryPaths { LibraryPaths.resolve(library) }

    /// Opens the library, and runs the automatic purge of Recently Deleted when it is on and due
    /// (at most hourly; `photogate trash --purge-after`), saying what it deleted. `purge: false`
    /// for a command that must not lose a photo by running (`restore`).
    func open(purge: Bool = true) throws -> Library {
        let library = try Library.open(at: paths)
        if purge { runAutomaticPurge(library) }
        return library
    }

    /// The library's folders, for what reads only its mount registry (`mounts`, `unmount`): the
    /// library is opened (its ownership and catalog checked), and a catalog whose log or index
    /// was removed under running mounts still lets them be listed and unmounted, which is what
    /// the person is told to do then.
    func registryLocations() throws -> LibraryPaths {
        do { return try open(purge: false).paths } catch LibraryError.catalogFileGone { return paths }
    }
}

/// The automatic purge of Recently Deleted, run by any command that opens the library (issue 38):
/// never silent, it says on stderr what it deleted for good; a failure is a warning, and the
/// command goes on. `force`: whether an hour has passed or not (`photogate trash` lists what is
/// left after it).
func runAutomaticPurge(_ library: Library, force: Bool = false) {
    do {
        guard let done = try library.purgeRecentlyDeleted(force: force), !done.assets.isEmpty else { return }
        let n = done.assets.count
        let names = done.assets.prefix(10).map { "\($0.displayName) (\($0.id))" }.joined(separator: ", ")
        printNote("deleted for good \(n) photo\(n == 1 ? "" : "s") in Recently Deleted for more than \(done.days) day\(done.days == 1 ? "" : "s") "
            + "(the automatic purge; photogate trash --purge-after off stops it): \(names)\(n > 10 ? " and \(n - 10) more" : "")")
    } catch {
        printWarning("the automatic purge of Recently Deleted did not run: \(error)")
    }
}

struct JSONFlag: ParsableArguments {
    @Flag(name: .long, help: "Print JSON (stable fields, documented in docs/guide.md).")
    var json = false
}

func parseApp(_ raw: String) throws -> AppID {
    guard let id = AppID(raw) else { throw LibraryError.invalidAppID(raw) }
    return id
}

/// Asset references from the command line; "-" reads more from standard input, one per line.
func expandRefs(_ refs: [String]) -> [String] {
    var out: [String] = []
    for r in refs {
        if r == "-" {
            while let line = readLine(strippingNewline: true) {
                let t = line.trimmingCharacters(in: .whitespaces)
                if !t.isEmpty { out.append(t) }
            }
        } else {
            out.append(r)
        }
    }
    return out
}
