import Foundation
import LibraryRun
#if canImport(Glibc)
import Glibc
#endif

/// A linked library's shared folder belongs to one catalog (issue 41): `SHARED/CATALOG` holds the
/// catalog's identity (`ServerCatalog.identity`), written by the `init` that made the catalog.
/// Every host's every command checks it: `init` on a second host with another `--store` (a typo,
/// another mount point) joined the catalog, and that host then wrote its originals where no other
/// host looks, while every other host's `verify` found them missing and its own found every other
/// photo missing; a share not mounted at its path (an empty folder in its place) did the same.
enum SharedIdentity {
    static func markerPath(_ shared: String) -> String { shared + "/" + LibraryLayout.sharedMarker }

    /// Checks (and, for a catalog made or named just now, writes) the shared folder's marker.
    /// `creating`: `init` (a wrong folder is the caller's mistake, exit 64), else any command
    /// (the folder is not what it was: exit 1, as an unreachable catalog).
    static func check(_ server: ServerCatalog, link: CatalogLink, library: String, creating: Bool) throws {
        let path = markerPath(link.shared)
        let marker = try read(path)
        var id = server.identity
        var mayWrite = server.madeNow
        if id == nil {
            // A catalog made before catalogs had an identity: named now, by the first host to
            // open it, whose folder must then have no marker either, and must hold the catalog's
            // originals (an empty folder where a share is not mounted would otherwise be marked
            // as the catalog's, and every host with the real share refused).
            if let marker {
                throw mismatch(link, library: library, creating: creating, why: "its \(LibraryLayout.sharedMarker) names catalog \(marker), and this catalog "
                    + "has none (lost in a restore?); if this is its folder, name the catalog so on its server: "
                    + "COMMENT ON TABLE photogate_schema IS '\(ServerCatalog.identityPrefix)\(marker)'")
            }
            guard try server.storeHoldsSome(link.shared + "/" + LibraryLayout.store) else {
                throw mismatch(link, library: library, creating: creating,
                               why: "none of the catalog's originals is in it (is the share mounted there?)")
            }
            id = try server.adoptIdentity()
            mayWrite = true
        }
        guard let id else { return }
        switch marker {
        case id?:
            return
        case nil where mayWrite:
            try write(path, id)
        case nil:
            throw mismatch(link, library: library, creating: creating,
                           why: "it has no \(LibraryLayout.sharedMarker) file naming this catalog (\(id)): it is not the folder the first host gave (is the share mounted there?)")
        case let other?:
            // A catalog made by this very init into a folder that is another's: it goes without
            // an identity, so that an init with a right folder can still name it.
            if server.madeNow { try? server.forgetIdentity() }
            throw mismatch(link, library: library, creating: creating, why: "it holds the originals of another catalog (\(other), this one is \(id))")
        }
    }

    static func mismatch(_ link: CatalogLink, library: String, creating: Bool, why: String) -> LibraryError {
        let text = "the shared folder \(link.shared) is not the one of the catalog at \(link.safeCatalog): \(why)"
        return creating ? .invalid(text + "; pass the --store every other host of this catalog uses; nothing was made")
                        : .io(text + "; check that the shared folder is mounted at \(link.shared) (catalog.conf of \(library) names it)")
    }

    /// The marker's id, nil when there is none. Never through a symbolic link; a regular file of
    /// a hex id and a newline only (it is made whole, by a link: `write`).
    static func read(_ path: String) throws -> String? {
        let fd = Glibc.open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw LibraryError.io("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        defer { Glibc.close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_size <= 256 else {
            throw LibraryError.io("\(path) is not a catalog marker (not a small regular file): move it away")
        }
        var buf = [UInt8](repeating: 0, count: 257)
        let n = Glibc.read(fd, &buf, buf.count)
        guard n >= 0 else { throw LibraryError.io("cannot read \(path): \(String(cString: strerror(errno)))") }
        let text = String(decoding: buf.prefix(n), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty, text.allSatisfy({ $0.isHexDigit }) else {
            throw LibraryError.io("\(path) is not a catalog marker (it holds no catalog id): move it away")
        }
        return text
    }

    /// Writes the marker whole: into a file of its own, synced, then linked to its name (which
    /// fails if another host's is there first: its id is then read and compared by `check`'s
    /// caller). Made in place, a crash or a reader between its creation and its write left an
    /// empty marker, which every host then refused.
    static func write(_ path: String, _ id: String) throws {
        let part = path + ".\(StoreWriter.randomID())"
        let fd = Glibc.open(part, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw LibraryError.io("cannot write \(part): \(String(cString: strerror(errno)))") }
        defer { unlink(part) }
        let bytes = Array((id + "\n").utf8)
        let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        Glibc.close(fd)
        guard n == bytes.count, synced else { throw LibraryError.io("cannot write \(part)") }
        if link(part, path) != 0 {
            let e = errno
            if e == EEXIST, try read(path) == id { return }
            throw LibraryError.io("cannot write \(path): \(String(cString: strerror(e)))")
        }
        fsyncDirectory(of: path)
    }
}
