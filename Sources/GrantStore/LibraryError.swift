import Foundation

/// Every way a library operation can fail, each with a message for a person and a stable exit code
/// for a script (the table is `Exit` in the CLI, printed by `photogate help exit-codes` and docs/exit-codes.md).
public enum LibraryError: Error, Equatable, CustomStringConvertible, Sendable {
    case libraryMissing(String)
    case libraryExists(String)
    case libraryTooNew(String)
    case libraryBusy(String)
    case libraryDamaged(String)
    /// The library's catalog is missing, empty or holds no schema while the library is there
    /// (its marker, its store): nothing may be made over it.
    case catalogDamaged(library: String, why: String)
    /// The same of a catalog on a server (`catalog`, its URL without a password): restored with
    /// the server's tools, not from a photogate.sqlite.
    case serverCatalogDamaged(library: String, catalog: String, why: String)
    /// The library folder at `library`, or one of its parts (`path`), belongs to the user `owner`,
    /// who is neither the caller (`caller`, the effective uid) nor root (`LibraryOwnership`).
    case notOwner(library: String, path: String, owner: UInt32, caller: UInt32)
    /// A folder above the library (`path`) lets others rename what is in it (`why`), so the
    /// library could be swapped for theirs (`LibraryOwnership.checkFoldersAbove`).
    case openFolder(library: String, path: String, why: String)
    case invalidAppID(String)
    case unknownApp(String)
    case unknownAssets([String])
    case unknownAlbum(String)
    case unknownRequest(String)
    case albumExists(String)
    case conflict(String)
    /// An app has as many pending requests of one kind as it may (`maxPendingRequestsPerKind`).
    case tooManyRequests(app: String, kind: String, limit: Int)
    case invalid(String)
    case badInput(String)
    case noSpace(String)
    case io(String)
    /// A change committed that cannot be made durable (the write-ahead log is gone or replaced).
    case notDurable(String)
    /// The catalog's write-ahead log or shared index (`file`) is gone from its place while other
    /// processes (`holders`: pid and what it is) hold the library open through the one they
    /// opened: a process opening it now would make a new one beside theirs, and the two would
    /// write over each other's commits (`CatalogFiles.checkNotOrphaned`).
    case catalogFileGone(library: String, file: String, replaced: Bool, holders: [String])
    /// The catalog's write-ahead log was removed or replaced after a process that had committed to
    /// it ended without closing the library: what it held may be lost (`CatalogFiles.checkLogNotLost`).
    case catalogLogLost(library: String, replaced: Bool)

    public var description: String {
        switch self {
        case .libraryMissing(let p):
            return "no photogate library at \(p) (create one with `photogate init \(p)`, or pass --library DIR)"
        case .libraryExists(let p): return "a photogate library already exists at \(p)"
        case .libraryTooNew(let p):
            return "the library at \(p) was written by a newer photogate; this version refuses to open it so that nothing is damaged"
        case .libraryBusy(let p): return "the library at \(p) is busy (locked by another process); try again"
        case .libraryDamaged(let m):
            return "the library's catalog (photogate.sqlite) is damaged: \(m); nothing was changed. "
                + "Restore it from a backup (photogate backup), or rebuild the assets from the store (photogate verify --rebuild)"
        case .serverCatalogDamaged(let library, let catalog, let why):
            return "the catalog of the library at \(library) is damaged: its catalog at \(catalog) \(why); nothing was changed. Restore the server's database "
                + "from its backup (pg_dump or a base backup), or restore a backup `photogate backup DEST` made and move it onto a "
                + "server with `photogate migrate` (see docs/admin.md, \"Several machines\")"
        case .catalogDamaged(let library, let why):
            return "the catalog of the library at \(library) is damaged: \(why); nothing was changed. Restore photogate.sqlite "
                + "from a backup (`photogate backup DEST` makes one; see docs/guide.md, \"Backups, and a damaged catalog\"), or rebuild the assets from "
                + "the store with `photogate verify --rebuild` (grants, albums and history cannot be rebuilt)"
        case .notOwner(let library, let path, let owner, let caller):
            let what = path == library ? "the library at \(library)"
                : path.hasPrefix(library + "/") ? "\(path) in the library at \(library)"
                : "\(path), a folder above the library at \(library),"
            let name = LibraryPrivacy.accountName(owner)
            let how = name.map { "e.g. `runuser -u \($0) -- photogate ...` or `sudo -u \($0) photogate ...`" }
                ?? "e.g. `sudo -u '#\(owner)' photogate ...`"
            return """
                \(what) belongs to \(LibraryPrivacy.userName(owner)), and you are \(LibraryPrivacy.userName(caller)): \
                photogate refuses to use a library that another user owns, since its owner decides what photogate \
                would read and write there with your rights. Run the command as its owner instead, \(how); \
                nothing was changed
                """
        case .openFolder(let library, let path, let why):
            return """
                \(path), a folder on the way to the library at \(library), is not its owner's alone (\(why)): \
                photogate refuses a library that someone else could swap for theirs. Make the folder \
                writable by its owner only (chmod go-w, or chmod +t to make it sticky as /tmp is), or move \
                the library; nothing was changed
                """
        case .invalidAppID(let id): return "invalid app id '\(id)': \(PhotoLibraryRule.appID)"
        case .unknownApp(let id): return "unknown app '\(id)'"
        case .unknownAssets(let names):
            let shown = names.prefix(20).map { "'\($0)'" }.joined(separator: ", ")
            return "unknown asset\(names.count == 1 ? "" : "s"): \(shown)\(names.count > 20 ? " and \(names.count - 20) more" : ""); nothing was changed"
        case .unknownAlbum(let n): return "unknown album '\(n)'"
        case .unknownRequest(let n): return "unknown request '\(n)'"
        case .albumExists(let n): return "an album named '\(n)' already exists"
        case .conflict(let m): return m
        case .tooManyRequests(let app, let kind, let limit):
            return "\(app) already has \(limit) pending \(kind) requests; answer them first (photogate requests, photogate authorize)"
        case .invalid(let m): return m
        case .badInput(let m): return m
        case .noSpace(let m): return "no space left on device: \(m)"
        case .io(let m): return m
        case .notDurable(let m): return m
        case .catalogFileGone(let library, let file, let replaced, let holders):
            let what = file.hasSuffix("-wal") ? "write-ahead log" : file.hasSuffix("-shm") ? "shared index" : "database"
            let who = holders.prefix(5).joined(separator: "; ") + (holders.count > 5 ? "; and \(holders.count - 5) more" : "")
            return "the catalog's \(what) \(file) was \(replaced ? "replaced by another file" : "removed") while photogate processes had "
                + "the library at \(library) open (\(who)). What they committed is safe in the file they still hold, but a command "
                + "now would use another one beside it and the two would overwrite each other's changes, so nothing was done. End those "
                + "processes first (`photogate unmount` their views: `photogate mounts` lists them); the last to end "
                + "writes everything into the database it holds. Then run the command again"
        case .catalogLogLost(let library, let replaced):
            return """
                the catalog of the library at \(library) may have lost changes: its write-ahead log, photogate.sqlite-wal, was \
                \(replaced ? "replaced" : "removed") after a photogate process ended without closing the library (it was killed, \
                or the machine stopped), so the changes made since the log was last written into photogate.sqlite may be lost \
                (grants, revokes, photos saved through a view); nothing was changed. If you restored photogate.sqlite from a \
                backup, this is expected. To go on with the catalog as the database file holds it, run `photogate verify \
                --accept-lost-log`: it checks the store against it and lists photos whose asset was lost as orphans; \
                `photogate verify --rebuild` then makes them assets again and keeps the rest of the catalog
                """
        }
    }
}

import PhotoLibrary
enum PhotoLibraryRule { static let appID = AppID.rule }
