import PGSystem
import Foundation
import LibraryRun
#if canImport(Glibc)
import Glibc
#endif

/// Who the command of a `photogate run` started by root runs as: never root. As uid 0, even
/// without a capability, it could write whatever root owns and the sandbox shows (the host's
/// /proc/sys: kernel.core_pattern names a program the kernel then runs as root), and peers that
/// trust uid 0 (a socket's credentials) would trust it. So root's runs drop to an unprivileged
/// id: by default one of the app's own that no account has, and so owns nothing outside the
/// sandbox (what the command saves in a folder passed in with --bind is owned by it; such a
/// folder must be writable to those ids, which `run APP --show-user` prints).
enum SandboxUser {
    /// A uid and gid, written "UID:GID" as a view's owner is (`MountOwner`).
    typealias ID = MountOwner

    /// The top of root runs' ids: 2^31 - 2, no account's.
    static let defaultID: UInt32 = 2_147_483_646
    /// Root runs' ids: one uid, and the same gid, per library and app, in the 2^24 ids below
    /// `defaultID` (past every range Debian allots to accounts and to containers' subordinate
    /// ids). Per app, not one for all: a command that left a set-user-id (or set-group-id)
    /// program in a folder passed in (the host's disks are not nosuid) gave any local user its
    /// ids, and with one for all that opened every root run's view, processes and folders; now it
    /// opens only what that app already had. Two apps share ids with a chance of 1 in 2^24.
    static let uidRange: ClosedRange<UInt32> = (defaultID - (1 << 24))...(defaultID - 1)

    /// The uid of `app`'s runs in the library at `library` (FNV-1a of its real path and the app
    /// id, into `uidRange`): the same however the library's path is spelled.
    static func uid(library: String, app: String) -> UInt32 {
        let real = realpath(library, nil).map { p -> String in defer { free(p) }; return String(cString: p) } ?? library
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in Array(real.utf8) + [0] + Array(app.utf8) { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01b3 }
        return uidRange.lowerBound + UInt32(h % UInt64(uidRange.count))
    }

    /// The id `--user` names (a name, UID or UID:GID), or the app's own; never root's.
    static func resolve(_ spec: String?, library: String, app: String) throws -> ID {
        guard let spec else {
            let own = uid(library: library, app: app)
            let id = ID(uid: own, gid: own)
            if let pw = getpwuid(id.uid) {
                throw CommandFailure("uid \(id.uid), photogate run's own for \(app) when started as root, belongs to the account \(String(cString: pw.pointee.pw_name)): pass the user the command should run as with --user", .failure)
            }
            for (file, value) in [("/etc/subuid", id.uid), ("/etc/subgid", id.gid)] {
                if let owner = subordinateOwner(of: value, in: file) {
                    throw CommandFailure("id \(value), photogate run's own for \(app) when started as root, is in \(owner)'s subordinate ids (\(file)): \(owner) could take it in a user namespace; pass the user the command should run as with --user", .failure)
                }
            }
            return id
        }
        let id: ID
        let parts = spec.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        if let uid = UInt32(parts[0]) {
            guard parts.count == 1 || UInt32(parts[1]) != nil else { throw CommandFailure("--user \(spec): give a name, UID or UID:GID", .usage) }
            let gid = parts.count > 1 ? UInt32(parts[1])! : (getpwuid(uid).map { $0.pointee.pw_gid } ?? uid)
            id = ID(uid: uid, gid: gid)
        } else if parts.count == 1, let pw = getpwnam(spec) {
            id = ID(uid: pw.pointee.pw_uid, gid: pw.pointee.pw_gid)
        } else {
            throw CommandFailure("--user \(spec): no such user", .notFound)
        }
        guard id.uid != 0, id.gid != 0, id.uid != UInt32.max, id.gid != UInt32.max else {
            throw CommandFailure("--user \(spec): the command never runs as root (uid or gid 0)", .usage)
        }
        return id
    }

    /// The user whose subordinate ids (/etc/subuid, /etc/subgid: `name:start:count`) hold `id`.
    static func subordinateOwner(of id: UInt32, in file: String) -> String? {
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") {
            let f = line.split(separator: ":")
            guard f.count == 3, let start = UInt64(f[1]), let count = UInt64(f[2]) else { continue }
            if UInt64(id) >= start && UInt64(id) < start + count { return String(f[0]) }
        }
        return nil
    }

    /// The first folder on the way to `path` (an absolute path, as bytes) that `id` cannot pass
    /// through, by mode bits (bubblewrap resolves a bound folder's path as the command's user):
    /// nil when it can. A folder with an ACL counts as passable (the ACL decides).
    static func blocked(_ path: [UInt8], for id: ID) -> (folder: String, mode: mode_t, owner: uid_t)? {
        var prefix: [UInt8] = []
        let parts = path.split(separator: UInt8(ascii: "/"))
        for part in [ArraySlice<UInt8>()] + parts.dropLast() {
            prefix += part.isEmpty && prefix.isEmpty ? [UInt8(ascii: "/")] : (prefix == [UInt8(ascii: "/")] ? [] : [UInt8(ascii: "/")]) + part
            var st = stat()
            let ok = (prefix + [0]).withUnsafeBufferPointer { b in
                lstat(UnsafeRawPointer(b.baseAddress!).assumingMemoryBound(to: CChar.self), &st) == 0
            }
            guard ok, st.st_mode & S_IFMT == S_IFDIR else { continue }
            let bit: mode_t = st.st_uid == id.uid ? S_IXUSR : st.st_gid == id.gid ? S_IXGRP : S_IXOTH
            if st.st_mode & bit != 0 { continue }
            let hasACL = (prefix + [0]).withUnsafeBufferPointer { b in
                pg_has_access_acl(UnsafeRawPointer(b.baseAddress!).assumingMemoryBound(to: CChar.self)) == 1
            }
            if hasACL { continue }
            return (String(decoding: prefix, as: UTF8.self), st.st_mode & 0o7777, st.st_uid)
        }
        return nil
    }
}

/// The command's environment: not the caller's (its tokens, SSH_AUTH_SOCK, the D-Bus address),
/// but a short allow-list of what describes the terminal and the locale, plus what `--env` names.
enum SandboxEnvironment {
    /// Passed in with their values here, when set.
    static let allowed: Set<String> = ["PATH", "LANG", "LANGUAGE", "TERM", "COLORTERM", "TZ", "NO_COLOR"]
    /// LC_ALL, LC_CTYPE, ... (every locale category).
    static func allowedByPrefix(_ name: String) -> Bool { name.hasPrefix("LC_") }

    static func isName(_ s: String) -> Bool {
        guard let first = s.unicodeScalars.first, first == "_" || (first.isASCII && CharacterSet.letters.contains(first)) else { return false }
        return s.unicodeScalars.allSatisfy { $0 == "_" || ($0.isASCII && CharacterSet.alphanumerics.contains($0)) }
    }

    /// The environment for the sandbox's processes (setpriv, unshare, bubblewrap, the command;
    /// bubblewrap then sets HOME and PHOTOGATE_APP): the allow-list's variables set here, then
    /// each `--env` (NAME: its value here, if set; NAME=VALUE: that value).
    static func make(passing extra: [String], from env: [String: String]) throws -> [String: String] {
        var out = env.filter { allowed.contains($0.key) || allowedByPrefix($0.key) }
        if out["PATH"] == nil { out["PATH"] = "/usr/local/bin:/usr/bin:/bin" }
        for e in extra {
            if let eq = e.firstIndex(of: "=") {
                out[String(e[..<eq])] = String(e[e.index(after: eq)...])
            } else if let v = env[e] {
                out[e] = v
            }
        }
        return out
    }
}

/// Where `photogate run` mounts the view it makes for its command.
enum RunFolders {
    /// Root's runs (the command runs as another user, who must be able to pass through): root's,
    /// 0711, each run's folder 0711 in it. Everyone else's: the library's run/sandbox/, 0700.
    static let rootBase = "/run/photogate-run"
}
