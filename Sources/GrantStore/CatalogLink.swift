import Foundation
import LibraryRun
#if canImport(Glibc)
import Glibc
#endif

/// A library whose catalog is on a server (issue 41): its folder holds `catalog.conf`, naming the
/// catalog (a PostgreSQL URL) and the shared folder its originals are in (store/ and tmp/ there).
/// Every host that mounts the library has such a folder of its own (run/, cache/), and they share
/// only the server and the shared folder.
///
///     catalog=postgresql://user@host/db
///     shared=/mnt/nas/photos
///
/// The file is the owner's and private (0600): the URL may hold a password.
public struct CatalogLink: Sendable, Equatable {
    public var catalog: String
    public var shared: String

    public init(catalog: String, shared: String) {
        self.catalog = catalog
        self.shared = shared
    }

    /// The link in a library's `catalog.conf`, or nil when there is none (or it names no catalog).
    /// Never follows a symbolic link; a file over 64 KiB is not a link.
    public static func read(_ path: String) -> CatalogLink? {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_size < 65_536 else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size))
        let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        guard n == bytes.count else { return nil }
        return parse(String(decoding: bytes, as: UTF8.self))
    }

    static func parse(_ text: String) -> CatalogLink? {
        var catalog: String?, shared: String?
        for line in text.split(whereSeparator: \.isNewline) {
            let t = line.trimmingCharacters(in: .whitespaces)
            if t.isEmpty || t.hasPrefix("#") { continue }
            guard let eq = t.firstIndex(of: "=") else { continue }
            let key = t[..<eq].trimmingCharacters(in: .whitespaces), value = t[t.index(after: eq)...].trimmingCharacters(in: .whitespaces)
            switch key {
            case "catalog": catalog = value
            case "shared": shared = value
            default: continue
            }
        }
        guard let catalog, let shared, shared.hasPrefix("/") else { return nil }
        return CatalogLink(catalog: catalog, shared: shared)
    }

    var text: String { "# photogate: this library's catalog and shared folder (issue 41)\ncatalog=\(catalog)\nshared=\(shared)\n" }

    /// The URL with its password (if any) left out, for messages: the one in its user info
    /// (`user:PASSWORD@host`) and a `password=` parameter (`?user=u&password=PASSWORD`), each
    /// read where the URL's parser (PGURL) reads it.
    public var safeCatalog: String {
        var s = catalog
        if let scheme = s.range(of: "://") {
            let rest = s[scheme.upperBound...]
            let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? s.endIndex
            let authority = s[scheme.upperBound..<authorityEnd]
            if let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") {
                s = String(s[...colon]) + "***" + String(s[at...])
            }
        }
        if let q = s.firstIndex(of: "?") {
            let query = s[s.index(after: q)...].split(separator: "&", omittingEmptySubsequences: false).map { pair -> String in
                let key = pair.prefix { $0 != "=" }
                guard key.count < pair.count, (String(key).removingPercentEncoding ?? String(key)) == "password" else { return String(pair) }
                return key + "=***"
            }
            s = String(s[...q]) + query.joined(separator: "&")
        }
        return s
    }
}
