import ArgumentParser
import Foundation
import GrantStore
#if canImport(Glibc)
import Glibc
#endif

/// `photogate backup DEST`: a consistent copy of the library, safe while mounts run.
struct Backup: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Copy the library into a new folder, consistently, while mounts run.",
        usage: "photogate backup <dest> [<options>]",
        discussion: """
            The catalog is copied as of one moment through SQLite's online backup (mounts and \
            commands may write meanwhile; what they commit after that moment is not in the copy), \
            then every store file that catalog names (store files never change once written). DEST \
            must not exist; it is made private (0700) and is a library of its own: `photogate \
            assets --library DEST` reads it. Originals imported with --reference live outside the \
            library and are not copied (they are counted).

            A library whose catalog is on a server (init --catalog) is backed up the same way into \
            an SQLite library of its own: every table of the server's catalog read in one \
            transaction (one snapshot; writers on every host go on), then every file of the shared \
            folder's store that it names. The backup is not linked to the server or the shared \
            folder, and gives no id the server gave (its numbers go on past the server's). DEST \
            must be outside the library's folder and the shared folder. The server's own tools \
            (pg_dump) back up the server's database itself.

            To restore: stop the mounts, move the damaged library aside, and move (or copy) the \
            backup into its place; or keep using the backup where it is with --library. Copying \
            photogate.sqlite by hand is consistent only when no photogate process has the library \
            open (then the database file holds every committed change).

            Examples:
              photogate backup /media/disk/photos-2026-11-28
            """)

    @Argument(help: "A new folder for the copy.") var dest: String
    @OptionGroup var lib: LibraryOption

    func execute() throws {
        let library = try lib.open()
        let spelled = dest.hasPrefix("/") ? dest : FileManager.default.currentDirectoryPath + "/" + dest
        // Made in its folder as that folder really is: reached following no other user's link
        // and through no folder another user may change (trustedPath, exit 74), and not inside
        // the library however it is spelled (a link to it, "..").
        let name = (spelled as NSString).lastPathComponent
        guard !name.isEmpty, name != ".", name != ".." else { throw CommandFailure("name a new folder for the backup", .usage) }
        let parent = try trustedPath((spelled as NSString).deletingLastPathComponent, "back up into")
        guard let realParent = realpath(parent, nil).map({ p -> String in defer { free(p) }; return String(cString: p) }) else {
            throw CommandFailure("\((spelled as NSString).deletingLastPathComponent) does not exist: make it first", .usage)
        }
        let target = (realParent == "/" ? "" : realParent) + "/" + name
        // Nor inside the shared folder of a library whose catalog is on a server: a backup is
        // never written into the store it copies.
        for folder in [library.paths.root] + (library.paths.link.map { [$0.shared] } ?? []) {
            let real = realpath(folder, nil).map { p in defer { free(p) }; return String(cString: p) } ?? folder
            if target == real || target.hasPrefix(real + "/") {
                throw CommandFailure("the backup cannot go inside the \(folder == library.paths.root ? "library" : "shared folder") it copies: name a folder outside \(real)", .usage)
            }
        }
        let r = try library.backup(to: target)
        for m in r.missing { printWarning("\(m) was gone by the time it was copied (its asset was deleted for good meanwhile?)") }
        say("backed up \(r.assets) asset\(r.assets == 1 ? "" : "s") to \(target): the catalog and \(r.filesCopied) store file\(r.filesCopied == 1 ? "" : "s") (\(humanSize(r.bytesCopied)))"
            + (r.referenced > 0 ? "; \(r.referenced) referenced original\(r.referenced == 1 ? "" : "s") outside the library not copied" : ""))
        if !r.missing.isEmpty { throw ExitCode(Exit.failure.rawValue) }
    }
}
