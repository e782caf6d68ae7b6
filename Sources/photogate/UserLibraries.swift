import Foundation
import GrantStore
#if canImport(Glibc)
import Glibc
#endif

/// The libraries a user's mounts have served (issue 38: `photogate mounts --all`). Each library
/// keeps its own registry of views (run/mounts/, written by the daemons), but nothing listed the
/// libraries: every mount daemon notes its library here, one small file per library (named by a
/// hash of its path, holding the path), in the user's state folder ($XDG_STATE_HOME/photogate/
/// libraries, else ~/.local/state/photogate/libraries). What a library's views are is still its
/// registry's answer; this only says where to ask. An entry goes once its library is gone.
enum UserLibraries {
    /// The folder, from the environment as the XDG base directories say (an absolute
    /// XDG_STATE_HOME, else HOME, else the account's home).
    static func folder(_ env: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let s = env["XDG_STATE_HOME"], s.hasPrefix("/") { return s + "/photogate/libraries" }
        let home = env["HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? getpwuid(geteuid()).flatMap { $0.pointee.pw_dir.map { String(cString: $0) } } ?? "/"
        return home + "/.local/state/photogate/libraries"
    }

    /// The library's path as it resolves (one library, however spelled, is one entry).
    static func canonical(_ root: String) -> String? {
        guard let r = realpath(root, nil) else { return nil }
        defer { free(r) }
        return String(cString: r)
    }

    static func entryName(_ root: String) -> String { hexString(Array(SHA256.hash(Array(root.utf8)).prefix(16))) }

    /// Notes a library (a mount daemon, before it mounts). Best effort: a failure only leaves
    /// this library out of `mounts --all`, and says why.
    static func note(_ root: String) -> String? {
        guard let root = canonical(root) else { return "cannot resolve \(root)" }
        let dir = folder()
        let path = dir + "/" + entryName(root)
        let text = root + "\n"
        if (try? String(contentsOfFile: path, encoding: .utf8)) == text { return nil }
        do {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            let tmp = path + ".\(getpid()).tmp"
            guard FileManager.default.createFile(atPath: tmp, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
                return "cannot write \(tmp)"
            }
            guard rename(tmp, path) == 0 else {
                let why = String(cString: strerror(errno))
                unlink(tmp)
                return "cannot write \(path): \(why)"
            }
            return nil
        } catch {
            return "cannot make \(dir): \(error.localizedDescription)"
        }
    }

    /// The libraries noted, as they resolve now; entries of libraries that are gone (no catalog
    /// there any more) are removed.
    static func list() -> [String] {
        let dir = folder()
        var out: [String] = []
        for name in (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [] where !name.hasPrefix(".") && !name.hasSuffix(".tmp") {
            guard let text = try? String(contentsOfFile: dir + "/" + name, encoding: .utf8) else { continue }
            let root = text.trimmingCharacters(in: .newlines)
            guard root.hasPrefix("/") else { unlink(dir + "/" + name); continue }
            // Its SQLite catalog, or its link to a server's (issue 41).
            let paths = LibraryPaths(root: root)
            if access(paths.database, F_OK) != 0 && access(paths.linkFile, F_OK) != 0 {
                if errno == ENOENT { unlink(dir + "/" + name) }
                continue
            }
            out.append(canonical(root) ?? root)
        }
        return out
    }
}
