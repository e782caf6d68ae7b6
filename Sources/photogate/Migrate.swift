import ArgumentParser
import Foundation
import GrantStore
#if canImport(Glibc)
import Glibc
#endif

/// `photogate migrate DEST --catalog URL --store PATH`: a library copied into a new one whose
/// catalog is on PostgreSQL (issue 41), then both verified.
struct Migrate: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Copy a library into a new one whose catalog is on PostgreSQL.",
        usage: "photogate migrate <dest> --catalog <url> --store <path> [<options>]",
        discussion: """
            Makes DEST a library whose catalog is in the PostgreSQL database at URL and whose \
            originals are in PATH/store (as init --catalog does), and copies the library (--library, \
            else $PHOTOGATE_LIBRARY...) into it: first every store file under the same name (copied \
            and synced, never moved), then every row of the catalog in one PostgreSQL transaction, \
            ids, grants, albums, versions, history and change tokens as they are. Originals imported \
            with --reference stay references. The library is not changed and stays usable; while \
            its rows are copied, commands that would change it wait. Then both are checked as \
            `verify` checks them.

            Refused, with nothing changed (exit 68), while mounts of the library run, and when the \
            database holds a catalog that is not empty.

            Interrupted (killed, the server gone): the PostgreSQL catalog gets all of the rows or \
            none. Run the same command again: it goes on with DEST and keeps the files already \
            copied. Once it has said that it is verifying, the copy is complete, and a second run \
            refuses the catalog as not empty: check DEST with verify --library DEST instead. To \
            give up instead: remove DEST, and the files under PATH/store (or run verify --repair \
            --library DEST, which moves them to lost+found/).

            Exit 0 when both libraries verify clean, 76 when verify finds a problem in either (each \
            is printed; the copy is made).

            Example:
              photogate migrate ~/pg-photos --catalog postgresql://nas/db --store /mnt/nas
            """)

    @Argument(help: "The new library folder (or the one an interrupted migrate made with the same --catalog and --store).")
    var dest: String

    @Option(help: ArgumentHelp("The PostgreSQL database to copy the catalog into (postgresql://user@host/db, or postgresql:///db?host=/socket/dir): without a catalog, or with an empty one.", valueName: "url"))
    var catalog: String

    @Option(help: ArgumentHelp("The shared folder (NFS, CephFS...) the originals are copied into, the same on every host.", valueName: "path"))
    var store: String

    @OptionGroup var lib: LibraryOption

    func validate() throws {
        if !(catalog.hasPrefix("postgresql://") || catalog.hasPrefix("postgres://")) {
            throw ValidationError("--catalog must be a postgresql:// URL")
        }
    }

    func execute() throws {
        // Nothing of the library is changed by the copy: no automatic purge either.
        let source = try lib.open(purge: false)
        let target = LibraryPaths.resolve(dest)
        let link = CatalogLink(catalog: catalog, shared: LibraryPaths.resolve(store).root)
        let sourceRoot = Migrate.real(source.paths.root)
        for (what, path) in [("DEST", target.root), ("--store", link.shared)] {
            let p = Migrate.real(path)
            if p == sourceRoot || p.hasPrefix(sourceRoot + "/") || (what == "DEST" && sourceRoot.hasPrefix(p + "/")) {
                throw CommandFailure("\(what) (\(path)) cannot be the library's folder, or inside it\(what == "DEST" ? ", or hold it" : ""): name a folder of its own", .usage)
            }
        }
        if source.paths.link != nil {
            throw CommandFailure("the library at \(source.paths.root) has its catalog on a server already: there is nothing to migrate", .usage)
        }
        // Before anything is made (and again under the library's lock, as it copies).
        try source.refuseRunningMounts()
        let destination: Library
        if target.exists {
            // The folder an interrupted run made: the same catalog and shared folder, nothing committed.
            guard let made = target.link, made.catalog == link.catalog, Migrate.real(made.shared) == Migrate.real(link.shared) else {
                throw CommandFailure("a library already exists at \(target.root): name a new folder (or the one an interrupted migrate made, "
                    + "with the same --catalog and --store)", .conflict)
            }
            let held = try Library.migrationTargetRows(link)
            if !held.isEmpty { throw Library.notEmpty(link, held) }
            destination = try Library.open(at: target)
        } else {
            // Nothing is made when the catalog holds something already.
            let held = try Library.migrationTargetRows(link)
            if !held.isEmpty { throw Library.notEmpty(link, held) }
            destination = try Library.create(at: target, link: link)
        }
        let r = try source.migrate(into: destination)
        let rows = r.rows.reduce(0) { $0 + $1.count }
        say("migrated \(r.assets) asset\(r.assets == 1 ? "" : "s") into \(target.root): \(rows) rows of \(r.rows.count) tables into the catalog at "
            + "\(link.safeCatalog), \(r.filesCopied) store file\(r.filesCopied == 1 ? "" : "s") (\(humanSize(r.bytesCopied))) into \(destination.paths.store)"
            + (r.filesAlreadyThere > 0 ? ", \(r.filesAlreadyThere) there already from an earlier run" : "")
            + (r.referenced > 0 ? "; \(r.referenced) referenced original\(r.referenced == 1 ? " stays where it is" : "s stay where they are")" : ""))
        for m in r.missing { printWarning("\(m), which the catalog names, is not in the library's store: not copied") }
        say("verifying both libraries")
        var clean = true
        for (name, library) in [("the library", source), ("the new library", destination)] {
            let report = try Verifier(library: library).run()
            for p in report.problems {
                say("\(name): \(p.kind.rawValue)  \(p.path.isEmpty ? "-" : p.path)\(p.asset.map { "  " + $0 } ?? "")\(p.name.map { "  " + $0 } ?? ""): \(p.detail)")
            }
            clean = clean && report.ok
            say("\(name) (\(library.paths.root)): \(report.assets) asset\(report.assets == 1 ? "" : "s"), \(report.filesHashed) files hashed, "
                + (report.problems.isEmpty ? "no problems" : "\(report.problems.count) problem\(report.problems.count == 1 ? "" : "s")"))
        }
        if !clean { throw ExitCode(Exit.verifyProblems.rawValue) }
    }

    /// The path with its links resolved; one that does not exist (yet), under its folder's.
    static func real(_ path: String) -> String {
        if let p = realpath(path, nil) {
            defer { free(p) }
            return String(cString: p)
        }
        let parent = (path as NSString).deletingLastPathComponent
        guard !parent.isEmpty, parent != path else { return path }
        let r = real(parent)
        return (r == "/" ? "" : r) + "/" + (path as NSString).lastPathComponent
    }
}
