import PGSystem
#if canImport(Glibc)
import Glibc
#endif

/// A library's folder on disk, as every module that reads or writes it names its parts: the
/// library (GrantStore), the CLI, and running mounts (PhotoViewFS), which know the library only
/// through `LibraryPort` and these names.
///
///     <library>/photogate.sqlite   the catalog and grants (and its -wal and -shm)
///     <library>/LIBRARY            the marker that says the folder is a library
///     <library>/store/             originals, at `storeRelativePath` (StoreWriter)
///     <library>/tmp/               files being written, one folder per writing process; on the
///                                  store's filesystem: a file moves into store/ by rename(2), and a
///                                  mount hard-links a stored original into tmp/ to make it a new
///                                  version of another asset (a rename over it), with no byte copied
///     <library>/run/               where the library and its running mounts meet (`RunFolder`)
///     <library>/cache/             what the library makes from its photos and can make again
public enum LibraryLayout {
    public static let database = "photogate.sqlite"
    public static let marker = "LIBRARY"
    public static let store = "store"
    public static let tmp = "tmp"
    public static let run = "run"
    public static let cache = "cache"
    /// In a library whose catalog is on a server (PostgreSQL): where the catalog and the shared
    /// store are (`CatalogLink`). The library's folder then holds only what is local to one host.
    public static let catalogLink = "catalog.conf"
    /// In a linked library's shared folder: the id of the catalog whose originals it holds (the
    /// catalog holds it too), so that a host whose --store is another folder (a typo, a share
    /// not mounted) is refused instead of writing where no other host looks.
    public static let sharedMarker = "CATALOG"

    /// Where an original with id `id` and extension `ext` is kept inside store/: a folder per
    /// first two characters of the id (`3f/3fa2...e1.jpg`).
    public static func storeRelativePath(id: String, ext: String) -> String {
        "\(id.prefix(2))/\(id).\(ext)"
    }
}

/// A library's run/ folder: the files by which photogate processes of one library tell each other
/// what happened. Every name and format in it is here, and every file is opened following no
/// symbolic link (`pg_open_in_folder`):
///
///     bell                  rung (one byte written, then closed) after every committed change;
///                           mount daemons watch run/ with inotify and refresh their view
///     acks/<pid>            what each mount daemon's view has applied of the change log: the
///                           change sequence number, 8 bytes little-endian (`MountAcks`); a command
///                           that changed the library waits for these
///     mounts/<pid>.json     each running mount's record (`MountRecord`, `MountRegistry`): how
///                           `mounts`, `unmount`, `run` and `verify` find the views of this library
///     catalog-in-use        the catalog's in-use mark (GrantStore's CatalogFiles)
///     logs/                 background mount daemons' logs (DaemonLog)
///     sandbox/              folders `photogate run` mounts its views in
///     preview/              copies of referenced originals being previewed (`photogate ui`)
///     ui-port               the address of a running `photogate ui`: "PORT PID HOST"
///
/// acks/ and mounts/ are folders so that what daemons write there wakes no daemon: they watch
/// run/ itself, and only the bell counts (`isBell`).
public struct RunFolder: Sendable, Equatable {
    public static let bell = "bell"
    public static let acks = "acks"
    public static let mounts = "mounts"
    public static let catalogInUse = "catalog-in-use"
    public static let logs = "logs"
    public static let sandbox = "sandbox"
    public static let preview = "preview"
    public static let uiPort = "ui-port"

    /// The run folder's path (`<library>/run`).
    public let path: String

    public init(_ path: String) { self.path = path }

    /// The run folder of the library at `root`.
    public init(library root: String) { self.init(root + "/" + LibraryLayout.run) }

    /// Tells every running mount that the library changed. Cheap: one small write to a file the
    /// daemons watch with inotify (IN_CLOSE_WRITE). A lost ring is harmless: a daemon also compares
    /// change sequence numbers whenever 2 s pass with nothing happening in run/ (PhotoViewFS's
    /// ChangeWatcher; another file's event in run/ does not make it look). The bell is opened in
    /// run/ following no symbolic link, and only a regular file is written: a link left at its
    /// name never takes the byte to another file.
    public func ringBell() {
        let fd = pg_open_in_folder(path, nil, RunFolder.bell, O_WRONLY | O_CREAT, 0o600)
        if fd >= 0 {
            var b: UInt8 = 0x21
            _ = pwrite(fd, &b, 1, 0)
            close(fd)
        }
    }

    /// Whether a file name in run/ (as inotify reports it: bytes) is the bell's.
    public static func isBell<C: Collection>(_ name: C) -> Bool where C.Element == UInt8 {
        name.elementsEqual(bell.utf8)
    }
}
