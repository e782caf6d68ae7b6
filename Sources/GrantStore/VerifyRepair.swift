import PGSystem
import Foundation
import GRDB
import PhotoLibrary
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Step by step, what `--repair` does (see `Verifier`).
struct Repair {
    let verifier: Verifier
    let catalog: [Verifier.CatalogEntry]
    var problems: [VerifyProblem]
    var sources: [String: [String]]
    let sourceOrphan: [String: Int]
    let good: [String: String]
    let wanted: [Int]
    let deadFolders: [(problem: Int, keep: [String])]
    let openEntries: [String]
    let stamp: String
    /// Files in the store (regular or not) when it was listed.
    let storeFiles: Int

    init(verifier: Verifier, catalog: [Verifier.CatalogEntry], problems: [VerifyProblem], sources: [String: [String]],
         sourceOrphan: [String: Int], good: [String: String], wanted: [Int], deadFolders: [(problem: Int, keep: [String])],
         openEntries: [String], storeFiles: Int) {
        self.storeFiles = storeFiles
        self.verifier = verifier
        self.catalog = catalog
        self.problems = problems
        self.sources = sources
        self.sourceOrphan = sourceOrphan
        self.good = good
        self.wanted = wanted
        self.deadFolders = deadFolders
        self.openEntries = openEntries
        var t = time_t(Date().timeIntervalSince1970)
        var tmv = tm()
        gmtime_r(&t, &tmv)
        stamp = String(format: "%04d%02d%02dT%02d%02d%02dZ-%d", tmv.tm_year + 1900, tmv.tm_mon + 1, tmv.tm_mday,
                       tmv.tm_hour, tmv.tm_min, tmv.tm_sec, getpid())
    }

    var root: String { verifier.root }
    var library: Library { verifier.library }

    mutating func run(into out: inout [VerifyProblem]) {
        // 1. Permissions.
        for (k, p) in problems.enumerated() where p.kind == .tooOpen {
            let path = p.path == "." ? root : root + "/" + p.path
            let m = Verifier.mode(path)
            if chmod(path, m & ~LibraryPrivacy.openBits) == 0 {
                problems[k].repaired = true
                problems[k].action = "made owner-only (mode \(String(m & ~LibraryPrivacy.openBits, radix: 8)))"
            } else {
                problems[k].action = "chmod failed: \(String(cString: strerror(errno)))"
            }
        }
        // 2. Dead temp folders: keep what holds an asset's bytes, then recover like StoreWriter.
        var kept: [Int: Int] = [:]
        for (p, keep) in deadFolders {
            var n = 0
            for path in keep {
                if let dest = moveToLostAndFound(path) {
                    n += 1
                    if let h = HashPool.hash(dest, expectedSize: nil, reference: false).hash { sources[h, default: []].append(dest) }
                }
            }
            kept[p] = n
        }
        if !deadFolders.isEmpty {
            let recovered = StoreWriter.recover(library)
            for (p, _) in deadFolders {
                let gone = access(root + "/" + problems[p].path, F_OK) != 0
                problems[p].repaired = gone
                problems[p].action = gone
                    ? "recovered like an import does (\(recovered) temp file\(recovered == 1 ? "" : "s") of dead processes kept as assets, "
                        + "incomplete ones deleted\((kept[p] ?? 0) > 0 ? ", \(kept[p]!) holding an asset's bytes moved to \(LostAndFound.folder)/" : ""))"
                    : "could not be recovered (its process may have come back?)"
            }
        }
        // 3. Damaged and missing store originals.
        for p in wanted { restore(p) }
        // 4. Whatever is still unaccounted for goes to lost+found/; but not most of the store
        // unless forced: that many files no asset names means a catalog that lost its rows (a
        // lost write-ahead log, an old copy put back), and moving the photos away would hide
        // them behind it. `verify --rebuild` makes them assets again instead.
        let unnamed = problems.filter { $0.kind == .orphan && !$0.repaired }.count
        let heldBack = Repair.isMajority(unnamed, of: storeFiles) && !verifier.options.force
        for (k, p) in problems.enumerated() where (p.kind == .orphan || p.kind == .strayTemp) && !p.repaired {
            if heldBack && p.kind == .orphan {
                problems[k].action = Repair.majorityWarning(unnamed, of: storeFiles, forced: true)
                continue
            }
            let path = root + "/" + p.path
            if p.kind == .orphan {
                switch named(String(p.path.dropFirst("store/".count))) {
                case true?:
                    problems[k].action = "an asset names it now; left in place"
                    problems[k].repaired = true
                    continue
                case nil:
                    problems[k].action = "the catalog could not be read; left in place"
                    continue
                case false?: break
                }
            }
            if let dest = moveToLostAndFound(path) {
                problems[k].repaired = true
                problems[k].action = "moved to \(verifier.rel(dest))"
            } else {
                problems[k].action = "could not be moved: \(String(cString: strerror(errno)))"
            }
        }
        out = problems
    }

    /// Whether `n` of the store's `total` files is most of it.
    static func isMajority(_ n: Int, of total: Int) -> Bool { n > 0 && n * 2 > total }

    static func majorityWarning(_ n: Int, of total: Int, forced: Bool) -> String {
        "not moved: \(n) of the store's \(total) files have no asset, which looks like a catalog that lost its rows, not stray files; "
            + "`photogate verify --rebuild` makes them assets again\(forced ? ", and `verify --repair --force` moves them to lost+found/" : "")"
    }

    /// Restores the original of a damaged or missing asset from a file with its exact bytes.
    mutating func restore(_ p: Int) {
        guard let a = catalog.first(where: { $0.id == problems[p].asset }), let s = a.storePath else {
            problems[p].action = "the catalog names no original; nothing to restore from"
            return
        }
        let store = library.paths.store
        let dest = store + "/" + s
        // Still this asset's path? (It may have been trashed and gone, or recovery just fixed it.)
        let current = try? library.read { db in
            try String.fetchOne(db, sql: "SELECT store_path FROM assets WHERE id = ?", arguments: [a.id])
        }
        guard current == s else {
            problems[p].repaired = true
            problems[p].action = "the asset changed while verifying; left alone"
            return
        }
        if HashPool.hash(dest, expectedSize: a.size, reference: false).hash == a.hash {
            problems[p].repaired = true
            problems[p].action = "restored by the recovery of a dead temp folder"
            return
        }
        let dir = (dest as NSString).deletingLastPathComponent
        if mkdir(dir, 0o700) != 0 && errno != EEXIST {
            problems[p].action = "cannot create \(verifier.rel(dir)): \(String(cString: strerror(errno)))"
            return
        }
        // A file nobody accounts for, moved into place.
        while let src = sources[a.hash]?.first {
            sources[a.hash]?.removeFirst()
            guard access(src, F_OK) == 0 else { continue }
            var damagedCopy: String? = nil
            if access(dest, F_OK) == 0 {
                guard let moved = moveToLostAndFound(dest) else {
                    problems[p].action = "cannot move the damaged copy aside: \(String(cString: strerror(errno)))"
                    return
                }
                damagedCopy = moved
            }
            guard rename(src, dest) == 0 else {
                let e = errno
                if let damagedCopy { rename(damagedCopy, dest) }
                problems[p].action = "cannot move \(verifier.rel(src)) into place: \(String(cString: strerror(e)))"
                return
            }
            // What was moved is what was hashed (a file changed or swapped since is put back).
            guard HashPool.hash(dest, expectedSize: a.size, reference: false).hash == a.hash else {
                rename(dest, src)
                if let damagedCopy { rename(damagedCopy, dest) }
                problems[p].action = "\(verifier.rel(src)) changed after it was hashed; left where it was"
                continue
            }
            fsyncDirectory(of: dest)
            fsyncDirectory(of: src)
            problems[p].repaired = true
            problems[p].action = "restored from \(verifier.rel(src))" + (damagedCopy.map { "; the damaged copy is in \(verifier.rel($0))" } ?? "")
            if let o = sourceOrphan[src] {
                problems[o].repaired = true
                problems[o].action = "moved into place as the original of asset \(a.id) (\(a.name))"
            }
            return
        }
        // Else a copy of another asset's verified original with the same bytes.
        if let g = good[a.hash] {
            let tmp = dir + "/.verify-\(StoreWriter.randomID()).part"
            // A referenced original is the person's file, in a folder others may change: opened
            // as every reader opens one (no symlink anywhere on its path, a regular file), and
            // the copy is hashed before it takes the place of the original.
            let fromReference = !g.hasPrefix(library.paths.store + "/")
            guard copyFile(g, tmp, reference: fromReference) else {
                problems[p].action = "cannot copy \(verifier.rel(g)): \(String(cString: strerror(errno)))"
                unlink(tmp)
                return
            }
            guard HashPool.hash(tmp, expectedSize: a.size, reference: false).hash == a.hash else {
                unlink(tmp)
                problems[p].action = "the copy of \(verifier.rel(g)) does not have the asset's bytes (it changed, or was swapped, since it was hashed): not restored"
                return
            }
            var damagedCopy: String? = nil
            if access(dest, F_OK) == 0 {
                guard let moved = moveToLostAndFound(dest) else { unlink(tmp); return }
                damagedCopy = moved
            }
            guard rename(tmp, dest) == 0 else {
                unlink(tmp)
                if let damagedCopy { rename(damagedCopy, dest) }
                problems[p].action = "cannot move the copy into place: \(String(cString: strerror(errno)))"
                return
            }
            fsyncDirectory(of: dest)
            problems[p].repaired = true
            problems[p].action = "restored from a copy of \(verifier.rel(g))" + (damagedCopy.map { "; the damaged copy is in \(verifier.rel($0))" } ?? "")
            return
        }
        problems[p].action = "no file with its bytes was found: it stays \(problems[p].kind == .missing ? "missing" : "damaged") (import the original again: photogate import FILE restores it; or photogate delete \(problems[p].asset ?? "ID"))"
    }

    /// Whether an asset names this store path now (asked again just before moving the file);
    /// nil when the catalog cannot be read.
    func named(_ storePath: String) -> Bool? {
        do {
            return try library.read { db in
                try Bool.fetchOne(db, sql: "WITH p(v) AS (SELECT CAST(? AS TEXT)) SELECT 1 FROM assets WHERE store_path = (SELECT v FROM p) UNION ALL SELECT 1 FROM versions WHERE store_path = (SELECT v FROM p) UNION ALL SELECT 1 FROM sidecars WHERE store_path = (SELECT v FROM p)",
                                  arguments: [storePath]) != nil
            }
        } catch {
            return nil
        }
    }

    /// Moves a file of the library into lost+found/<stamp>/, keeping its path; returns where.
    func moveToLostAndFound(_ path: String) -> String? {
        let relPath = verifier.rel(path)
        var dest = root + "/" + LostAndFound.folder + "/" + stamp + "/" + relPath
        let dir = (dest as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            errno = EIO
            return nil
        }
        var n = 1
        while access(dest, F_OK) == 0 { dest = root + "/" + LostAndFound.folder + "/" + stamp + "/" + relPath + ".\(n)"; n += 1 }
        guard rename(path, dest) == 0 else { return nil }
        fsyncDirectory(of: dest)
        fsyncDirectory(of: path)
        return dest
    }

    /// Copies a file durably (0600).
    func copyFile(_ from: String, _ to: String, reference: Bool) -> Bool {
        // The one checked open of originals (no symlink followed; for a referenced one, none on
        // the whole path, and no FIFO to block on).
        let src = pg_open_original(from, reference ? 1 : 0)
        guard src >= 0 else { return false }
        defer { Glibc.close(src) }
        var st = stat()
        guard fstat(src, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { errno = EINVAL; return false }
        let dst = Glibc.open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard dst >= 0 else { return false }
        defer { Glibc.close(dst) }
        return pg_copy_fd(src, dst) >= 0 && fsync(dst) == 0
    }
}
