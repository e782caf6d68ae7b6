import PGSystem
import Foundation
import LibraryRun
#if canImport(Glibc)
import Glibc
#endif

/// The library on disk is private to its owner (issue 14): its folder and every folder in it are
/// 0700, every file 0600, whatever the caller's umask, so no other local user can copy the
/// database (asset names, hashes, grants, history) or read the store.
///
/// Two mechanisms, because files are made in many places (SQLite's WAL and SHM, daemon logs opened
/// by posix_spawn, the mount registry, temp files, ready sidecars, store folders):
/// - the photogate executable sets its umask to at least 077 when it starts (a library call never
///   changes the umask of a process that embeds it), so whatever it creates (and whatever the
///   processes it spawns create) is owner-only, and the code that names a mode names 0700 or 0600;
/// - every open checks the library folder and its top-level entries (a few `lstat`s) and, when one
///   is open to group or others (a library made by an older photogate, or a `chmod` by hand),
///   strips the group and other bits from the whole library if the caller owns it, or refuses it
///   (exit 68) if someone else does: a process that cannot tighten it must not use it.
public enum LibraryPrivacy {
    /// The entries photogate makes in a library folder. Only these are tightened: a library folder
    /// that also holds the person's own files keeps those as they are (the folder itself being
    /// 0700 already hides them).
    static let entries = [LibraryLayout.database] + ["-wal", "-shm", "-journal"].map { LibraryLayout.database + $0 }
        + [LibraryLayout.marker, LibraryLayout.store, LibraryLayout.tmp, LibraryLayout.run, "lost+found",
           LibraryLayout.cache, LibraryLayout.catalogLink]

    /// Group and other permission bits.
    static let openBits: mode_t = 0o077

    /// Makes this process (and the processes it spawns) create owner-only files and folders.
    public static func restrictUmask() {
        let old = umask(0o077)
        umask(old | 0o077)
    }

    /// Checks the library at `paths` and makes it private if it is not. Returns how many entries
    /// were tightened (0 when it was private already, or does not exist yet). Throws `.conflict`
    /// when the library is open to others and the caller cannot tighten it.
    @discardableResult
    public static func ensure(_ paths: LibraryPaths) throws -> Int {
        var st = stat()
        guard stat(paths.root, &st) == 0 else { return 0 }
        var open = (st.st_mode & openBits) != 0
        if !open {
            for e in entries {
                var s = stat()
                if lstat(paths.root + "/" + e, &s) == 0, (s.st_mode & S_IFMT) != S_IFLNK, (s.st_mode & openBits) != 0 {
                    open = true
                    break
                }
            }
        }
        guard open else { return 0 }
        let me = geteuid()
        if st.st_uid != me {
            throw LibraryError.conflict("""
                the library at \(paths.root) is open to other users (its folder or a file in it can be read by them), \
                and it belongs to \(userName(st.st_uid)), not to you (\(userName(me))): photogate refuses to use it. \
                Its owner can make it private by running any photogate command on it, or with \
                `chmod -R go-rwx \(paths.root)`; nothing was changed
                """)
        }
        var tightened = 0
        var failed: [String] = []
        // The folder first: from here on nobody else can reach what is inside.
        if (st.st_mode & openBits) != 0 {
            if chmod(paths.root, st.st_mode & 0o7777 & ~openBits) == 0 { tightened += 1 } else { failed.append(paths.root) }
        }
        for e in entries {
            tighten(paths.root + "/" + e, &tightened, &failed)
        }
        if !failed.isEmpty {
            throw LibraryError.conflict("""
                the library at \(paths.root) is open to other users and photogate could not make it private: \
                \(failed.prefix(5).joined(separator: ", "))\(failed.count > 5 ? " and \(failed.count - 5) more" : "") \
                belong to another user; run `chmod -R go-rwx \(paths.root)` as their owner (or root)
                """)
        }
        if tightened > 0 {
            let line = "photogate: warning: the library at \(paths.root) was open to other users; made it private "
                + "(\(tightened) \(tightened == 1 ? "entry" : "entries") now owner-only)\n"
            _ = line.withCString { write(2, $0, strlen($0)) }
        }
        return tightened
    }

    /// Strips the group and other bits of `path` and, for a folder, of everything under it.
    /// Symbolic links are left alone (their mode means nothing) and never followed.
    /// `parentDevice`: the device of the folder holding it, when known.
    static func tighten(_ path: String, parentDevice: dev_t? = nil, _ tightened: inout Int, _ failed: inout [String]) {
        var st = stat()
        guard lstat(path, &st) == 0 else { return }
        let type = st.st_mode & S_IFMT
        if type == S_IFLNK { return }
        // A FUSE mount inside the library (a view `photogate run` mounted in run/sandbox/): its
        // modes are its daemon's, not files of the library's. Asked only of a folder on another
        // device than its parent's (a mount point), not of every folder.
        if type == S_IFDIR && parentDevice != st.st_dev && pg_is_fuse(path) == 1 { return }
        if (st.st_mode & openBits) != 0 {
            if chmod(path, st.st_mode & 0o7777 & ~openBits) == 0 { tightened += 1 } else { failed.append(path) }
        }
        if type == S_IFDIR {
            for (name, _) in Directory.entries(path) { tighten(path + "/" + name, parentDevice: st.st_dev, &tightened, &failed) }
        }
    }

    /// True when group or others have any permission on the entry at `path` (not following links).
    static func isOpen(_ path: String) -> Bool {
        var st = stat()
        guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) != S_IFLNK else { return false }
        return (st.st_mode & openBits) != 0
    }

    static func userName(_ uid: uid_t) -> String {
        if let n = accountName(uid) { return "\(n) (uid \(uid))" }
        return "uid \(uid)"
    }

    /// The login name of `uid`, if the system knows one.
    static func accountName(_ uid: uid_t) -> String? {
        guard let pw = getpwuid(uid), let n = pw.pointee.pw_name else { return nil }
        return String(cString: n)
    }
}

/// Whose library a process may use, as git's `safe.directory` decides whose repository: one that
/// belongs to the process's effective user, or to root. Whoever owns a library folder decides
/// everything photogate reads there: the catalog (whose store paths name the files photogate
/// renames, copies, serves and deletes, and whose referenced originals a mount serves), the temp
/// files crash recovery moves into the store, the bell and the logs it writes. A process of
/// another user that trusted it (root above all: `sudo photogate ...`, the photogate-shared@
/// unit, a mount with allow_other) would do with its own rights whatever that owner chose:
/// rename a file of theirs to /etc/ld.so.preload, append to any file, serve /etc/shadow to every
/// user. So such a library is refused (exit 74) before anything in it is read or written, and its
/// owner is named: the command is to be run as them (runuser, sudo -u). A library of root's may be
/// opened by others (it is 0700: only root gets in), since root can change any file anyway.
public enum LibraryOwnership {
    /// Throws `LibraryError.notOwner` when the library folder, or an entry photogate makes in it
    /// (`LibraryPrivacy.entries`: the database and its WAL, store/, tmp/, run/...), belongs to
    /// someone other than `uid` (the effective uid) and root. A symbolic link is checked, and so
    /// is what it leads to: another user's link could be turned to anything at any moment.
    /// Nothing there yet (a library to be created) passes; a path that cannot be examined (no
    /// permission on a folder above it) is left to the open that follows, which fails.
    public static func check(_ paths: LibraryPaths, uid: uid_t = geteuid()) throws {
        try checkFoldersAbove(paths.root, uid: uid)
        try checkEntry(paths.root, library: paths.root, uid: uid)
        for e in LibraryPrivacy.entries {
            try checkEntry(paths.root + "/" + e, library: paths.root, uid: uid)
        }
        // A library whose catalog is on a server: the shared folder its originals and temps are
        // in is trusted as the library's own folder is (its owner chooses what is renamed and served).
        if let shared = paths.link?.shared { try checkShared(shared, library: paths.root, uid: uid) }
    }

    /// The shared folder of a library whose catalog is on a server (`check`); also asked by
    /// `init` before it makes anything there, since catalog.conf does not name it yet.
    static func checkShared(_ shared: String, library: String, uid: uid_t = geteuid()) throws {
        try checkFoldersAbove(shared, uid: uid)
        for p in [shared, shared + "/" + LibraryLayout.store, shared + "/" + LibraryLayout.tmp, shared + "/lost+found",
                  shared + "/" + LibraryLayout.sharedMarker] {
            try checkEntry(p, library: library, uid: uid)
        }
    }

    /// The folders above the library must be as much the caller's as the library itself: who
    /// can rename an entry in one of them can put a library of their own (or a link to one) in
    /// its place between two commands, or under a running daemon's next open. So the path is
    /// resolved one name at a time, symbolic links spliced in as the kernel would, and every
    /// folder it passes through belongs to the caller or root and is writable by no one else: not
    /// by others, not by a group that is not its owner's alone, not through an ACL entry, unless
    /// it is sticky (/tmp: there no one renames an entry that is not theirs, and the entry below
    /// is checked in turn). Every symbolic link on the way belongs to the caller or root too.
    /// The walk ends at the first name that does not exist yet (a library being created: `create`
    /// checks again once it has made its folders). The library folder itself is `checkEntry`'s.
    static func checkFoldersAbove(_ root: String, uid: uid_t) throws {
        do {
            _ = try walk(root, uid: uid, folders: true)
        } catch {
            switch error.kind {
            case .foreignLink(let owner), .foreignFolder(let owner):
                throw LibraryError.notOwner(library: root, path: error.path, owner: owner, caller: uid)
            case .openFolder(let why):
                throw LibraryError.openFolder(library: root, path: error.path, why: why)
            case .tooManyLinks:
                return   // the open that follows fails the same way
            }
        }
    }

    /// `path` resolved one name at a time as the kernel would, following only symbolic links
    /// that belong to `uid` or root, and (with `folders`) passing only through folders that
    /// belong to `uid` or root and that no one else may change (`checkFolder`): the walk of
    /// `checkFoldersAbove`, for any path whose meaning must not be another user's to change
    /// (the library, and the places the CLI mounts on, unmounts and binds into a sandbox). The
    /// last name, when it is not a symbolic link, is not checked: it is what the path names.
    /// Returns the path with every link spliced in (none left); from the first name that does not
    /// exist (or cannot be examined) on, the rest is appended as spelled (`complete` false).
    /// Without `folders`, only the links are checked (for a caller that finds what it acts on
    /// by descriptor, not by path).
    public static func walk(_ path: String, uid: uid_t = geteuid(), folders: Bool) throws(UntrustedPath) -> (resolved: String, complete: Bool) {
        func parts(_ path: String) -> [String] {
            path.split(separator: "/", omittingEmptySubsequences: true).map(String.init).filter { $0 != "." }
        }
        func joined(_ base: String, _ rest: [String]) -> String {
            rest.reduce(base) { $0 == "/" ? "/" + $1 : $0 + "/" + $1 }
        }
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        var pending = parts(absolute)
        var resolved = "/"
        var st = stat()
        guard lstat("/", &st) == 0 else { return (joined("/", pending), false) }
        if folders { try checkFolder("/", st, uid: uid) }
        var links = 0
        while !pending.isEmpty {
            let part = pending.removeFirst()
            if part == ".." {
                resolved = (resolved as NSString).deletingLastPathComponent
                continue
            }
            let next = resolved == "/" ? "/" + part : resolved + "/" + part
            // Missing: made later (and checked again then); unreadable: the open that follows
            // fails the same way.
            guard lstat(next, &st) == 0 else { return (joined(next, pending), false) }
            let isLink = (st.st_mode & S_IFMT) == S_IFLNK
            // What the path names (the last name, resolved) is the caller's to judge.
            if pending.isEmpty && !isLink { return (next, true) }
            if (folders || isLink) && st.st_uid != uid && st.st_uid != 0 {
                throw UntrustedPath(path: next, kind: isLink ? .foreignLink(owner: st.st_uid) : .foreignFolder(owner: st.st_uid))
            }
            if isLink {
                links += 1
                guard links <= 40, let target = try? FileManager.default.destinationOfSymbolicLink(atPath: next) else {
                    throw UntrustedPath(path: next, kind: .tooManyLinks)
                }
                pending = parts(target) + pending
                if target.hasPrefix("/") { resolved = "/" }
                continue
            }
            if folders && (st.st_mode & S_IFMT) == S_IFDIR { try checkFolder(next, st, uid: uid) }
            resolved = next
        }
        return (resolved, true)
    }

    /// A folder on the way to a library: no one but its owner (the caller or root, checked before)
    /// may rename what is in it, unless it is sticky.
    static func checkFolder(_ path: String, _ st: stat, uid: uid_t) throws(UntrustedPath) {
        guard (st.st_mode & S_ISVTX) == 0 else { return }
        if (st.st_mode & S_IWOTH) != 0 {
            throw UntrustedPath(path: path, kind: .openFolder(why: "anyone may rename what is in it"))
        }
        guard (st.st_mode & S_IWGRP) != 0 else { return }
        // With an access ACL the group bits are its mask, and named users and groups may write.
        if let acl = accessACL(path) {
            guard acl.contains(where: { $0.tag == 0x10 && $0.perm & 2 != 0 }) else { return }
            for e in acl where e.perm & 2 != 0 {
                switch e.tag {
                case 0x02 where e.id != st.st_uid && e.id != uid:   // ACL_USER
                    throw UntrustedPath(path: path, kind: .openFolder(why: "an ACL lets \(LibraryPrivacy.userName(e.id)) rename what is in it"))
                case 0x04 where !groupIsOwnersAlone(st.st_gid, owner: st.st_uid),   // ACL_GROUP_OBJ
                     0x08 where !groupIsOwnersAlone(e.id, owner: st.st_uid):        // ACL_GROUP
                    let gid = e.tag == 0x04 ? st.st_gid : e.id
                    throw UntrustedPath(path: path, kind: .openFolder(why: "its group \(groupName(gid)) may rename what is in it"))
                default: continue
                }
            }
            return
        }
        if !groupIsOwnersAlone(st.st_gid, owner: st.st_uid) {
            throw UntrustedPath(path: path, kind: .openFolder(why: "its group \(groupName(st.st_gid)) may rename what is in it"))
        }
    }

    /// The entries of a folder's access ACL (tag, permissions, id), or nil when it has none
    /// beyond its mode.
    static func accessACL(_ path: String) -> [(tag: UInt16, perm: UInt16, id: UInt32)]? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBytes { pg_getxattr(path, "system.posix_acl_access", $0.baseAddress, UInt($0.count)) }
        guard n >= 4 else { return nil }
        func le16(_ i: Int) -> UInt16 { UInt16(buffer[i]) | UInt16(buffer[i + 1]) << 8 }
        func le32(_ i: Int) -> UInt32 { UInt32(le16(i)) | UInt32(le16(i + 2)) << 16 }
        var out: [(tag: UInt16, perm: UInt16, id: UInt32)] = []
        var i = 4
        while i + 8 <= n {
            out.append((le16(i), le16(i + 2), le32(i + 4)))
            i += 8
        }
        return out
    }

    private static let accounts = NSLock()

    /// True when `gid` is the owner's own group: the owner's primary group, no other account's
    /// primary group, and with no other member listed. Unknown: false.
    static func groupIsOwnersAlone(_ gid: gid_t, owner: uid_t) -> Bool {
        accounts.lock()
        defer { accounts.unlock() }
        guard let pw = getpwuid(owner), pw.pointee.pw_gid == gid, let n = pw.pointee.pw_name else { return false }
        let name = String(cString: n)
        guard let gr = getgrgid(gid) else { return false }
        var member = gr.pointee.gr_mem
        while let m = member?.pointee {
            if String(cString: m) != name { return false }
            member = member?.advanced(by: 1)
        }
        setpwent()
        defer { endpwent() }
        while let other = getpwent() {
            if other.pointee.pw_gid == gid && other.pointee.pw_uid != owner { return false }
        }
        return true
    }

    static func groupName(_ gid: gid_t) -> String {
        if let gr = getgrgid(gid), let n = gr.pointee.gr_name { return "\(String(cString: n)), gid \(gid)" }
        return "gid \(gid)"
    }

    static func checkEntry(_ path: String, library: String, uid: uid_t) throws {
        var st = stat()
        guard lstat(path, &st) == 0 else { return }
        if st.st_uid != uid && st.st_uid != 0 {
            throw LibraryError.notOwner(library: library, path: path, owner: st.st_uid, caller: uid)
        }
        guard (st.st_mode & S_IFMT) == S_IFLNK else { return }
        guard stat(path, &st) == 0 else { return }
        if st.st_uid != uid && st.st_uid != 0 {
            throw LibraryError.notOwner(library: library, path: path, owner: st.st_uid, caller: uid)
        }
    }
}

/// A path refused by `LibraryOwnership.walk`: on the way, at `path`, a symbolic link or a folder
/// of another user (neither the caller nor root), or a folder others may change, which could make
/// the path lead somewhere else at any moment; or too many symbolic links.
public struct UntrustedPath: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        case foreignLink(owner: uid_t)
        case foreignFolder(owner: uid_t)
        case openFolder(why: String)
        case tooManyLinks
    }
    public let path: String
    public let kind: Kind

    public var description: String {
        switch kind {
        case .foreignLink(let owner):
            return "\(path) is a symbolic link that belongs to \(LibraryPrivacy.userName(owner)), who may point it anywhere at any moment"
        case .foreignFolder(let owner):
            return "\(path), a folder on the way, belongs to \(LibraryPrivacy.userName(owner)), who may rename what is in it (and leave a symbolic link in its place) at any moment"
        case .openFolder(let why):
            return "\(path), a folder on the way, is not its owner's alone (\(why))"
        case .tooManyLinks:
            return "\(path): too many symbolic links, or one that cannot be read"
        }
    }
}

/// Reading folders with readdir: names and types without a stat per entry (a store holds one
/// file per asset; FileManager's listing costs several times more).
enum Directory {
    enum Kind { case file, directory, symlink, other }

    /// The entries of a folder, without "." and "..". Empty when it cannot be read.
    static func entries(_ path: String) -> [(String, Kind)] {
        guard let dir = opendir(path) else { return [] }
        defer { closedir(dir) }
        var out: [(String, Kind)] = []
        while let ent = readdir(dir) {
            let name = withUnsafeBytes(of: ent.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name == "." || name == ".." { continue }
            var kind: Kind
            switch Int32(ent.pointee.d_type) {
            case Int32(DT_REG): kind = .file
            case Int32(DT_DIR): kind = .directory
            case Int32(DT_LNK): kind = .symlink
            case Int32(DT_UNKNOWN):
                var st = stat()
                if lstat(path + "/" + name, &st) != 0 { kind = .other; break }
                switch st.st_mode & S_IFMT {
                case S_IFREG: kind = .file
                case S_IFDIR: kind = .directory
                case S_IFLNK: kind = .symlink
                default: kind = .other
                }
            default: kind = .other
            }
            out.append((name, kind))
        }
        return out
    }
}
