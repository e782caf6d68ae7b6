import CSystem
import Foundation
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
    static let entries = ["photogate.sqlite", "photogate.sqlite-wal", "photogate.sqlite-shm", "photogate.sqlite-journal",
                          "LIBRARY", "store", "tmp", "run", "lost+found"]

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
        try checkEntry(paths.root, library: paths.root, uid: uid)
        for e in LibraryPrivacy.entries {
            try checkEntry(paths.root + "/" + e, library: paths.root, uid: uid)
        }
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
