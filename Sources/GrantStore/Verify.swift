// Kept in one file (over ~400 lines): one scan of the store against the catalog, whose findings repair (VerifyRepair.swift) and the report share.
import Foundation
import GRDB
import PhotoLibrary
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `lost+found/` in a library: where `photogate verify --repair` moves files that no asset
/// accounts for (and damaged copies it replaced), one folder per repair run, keeping each file's
/// path inside the library. photogate never deletes them; the person may.
public enum LostAndFound {
    public static let folder = "lost+found"
}

public struct VerifyOptions: Sendable {
    /// Fix what can be fixed (see `Verifier`); without it nothing is changed.
    public var repair: Bool
    /// Hashing threads (nil: one more than the cores, at least 8 and at most 16; or
    /// PHOTOGATE_VERIFY_THREADS).
    public var threads: Int?
    /// With `repair`: move store files no asset names to lost+found/ even when they are most of
    /// the store (which looks like a lost catalog, not stray files: see `Repair`).
    public var force: Bool
    public init(repair: Bool = false, threads: Int? = nil, force: Bool = false) {
        self.repair = repair
        self.threads = threads
        self.force = force
    }
}

/// One thing `verify` found wrong.
public struct VerifyProblem: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable {
        /// A store file whose bytes do not match its asset's catalog hash (or that cannot be read).
        case damaged
        /// An asset whose store file is gone.
        case missing
        /// A `--reference` original whose bytes changed since import.
        case referenceChanged = "reference-changed"
        /// A `--reference` original that vanished (or cannot be read).
        case referenceMissing = "reference-missing"
        /// A file in the store that no asset names.
        case orphan
        /// The temp folder of a process that is gone (a crash or a kill while importing or writing).
        case deadTemp = "dead-temp"
        /// Something in `tmp/` that is not a process's temp folder.
        case strayTemp = "stray-temp"
        /// A folder or file of the library that group or others may read (the library is private).
        case tooOpen = "too-open"
    }
    public var kind: Kind
    /// Relative to the library folder; absolute for referenced originals.
    public var path: String
    /// The asset's id and display name, when the problem is an asset's.
    public var asset: String?
    public var name: String?
    public var detail: String
    /// True once `--repair` fixed it.
    public var repaired: Bool = false
    /// What `--repair` did about it, or why it could not.
    public var action: String?
}

public struct VerifyReport: Sendable {
    public var assets = 0
    /// Files hashed: store originals, referenced originals, and files no asset accounts for.
    public var filesHashed = 0
    public var bytesHashed: UInt64 = 0
    public var problems: [VerifyProblem] = []
    public var repair = false
    /// Files kept in lost+found/ after the run.
    public var lostAndFound = 0
    public var seconds = 0.0
    /// Nothing is wrong (after repair, when asked).
    public var ok: Bool { problems.allSatisfy(\.repaired) }
}

public struct VerifyProgress: Sendable {
    public var filesDone: Int
    public var filesTotal: Int
    public var bytesDone: UInt64
    public var bytesTotal: UInt64
}

/// `photogate verify`: checks every asset's stored bytes against its catalog hash, and that every
/// file in the store and in `tmp/` is accounted for. Changes nothing unless `repair` is set.
///
/// What repair does, in this order (it never deletes a file whose bytes match an asset, and never
/// writes outside the library):
///   1. too-open entries lose their group and other permissions;
///   2. dead temp folders are recovered as `StoreWriter.recover` does at every import and mount
///      (files whose row was committed roll forward into the store, files whose close had
///      succeeded become the app's assets, incomplete files are deleted), except that a file it
///      would delete whose bytes match some asset is moved to lost+found/ first;
///   3. a damaged or missing store original is restored from a file with the asset's exact bytes:
///      a file no asset accounts for (in the store or in lost+found/), else a copy of another
///      asset's verified original; the damaged copy goes to lost+found/. Without such a file the
///      asset stays damaged and is reported (trash it, or import the original again);
///   4. store files no asset names, and stray things in `tmp/`, move to lost+found/.
/// Referenced originals that changed or vanished are reported only: they are the person's files.
public final class Verifier {
    public let library: Library
    public let options: VerifyOptions
    let root: String

    public init(library: Library, options: VerifyOptions = VerifyOptions()) {
        self.library = library
        self.options = options
        // Paths are told from the folder store/ is in: the library's, or a linked library's shared folder.
        root = library.paths.link?.shared ?? library.paths.root
    }

    struct CatalogEntry {
        var id: String
        var name: String
        var hash: String
        var size: UInt64
        var storePath: String?
        var referencePath: String?
        /// A store path of another shape than photogate writes (`StorePath`), kept only to be
        /// reported: no path is built from it (`storePath` is then nil).
        var badStorePath: String? = nil

        init(id: String, name: String, hash: String, size: UInt64, storePath: String?, referencePath: String?) {
            self.id = id
            self.name = name
            self.hash = hash
            self.size = size
            if let s = storePath, !StorePath.isValid(s) {
                badStorePath = s
            } else {
                self.storePath = storePath
            }
            self.referencePath = referencePath
        }
    }

    /// The store paths the catalog accounts for. The single place to extend when other rows (say,
    /// earlier versions of an asset) come to own store files.
    static func catalog(_ db: Database) throws -> [CatalogEntry] {
        var out: [CatalogEntry] = []
        out.reserveCapacity(try Int.fetchOne(db, sql: "SELECT count(*) FROM assets") ?? 0)
        // A cursor: no copy of each row (fetchAll's copies cost a third of the read).
        let rows = try Row.fetchCursor(db, sql: "SELECT id, display_name, content_hash, byte_size, store_path, reference_path FROM assets ORDER BY rowid")
        while let r = try rows.next() {
            out.append(CatalogEntry(id: r[0], name: r[1], hash: r[2], size: UInt64(max(0, r[3] as Int64)), storePath: r[4], referencePath: r[5]))
        }
        // Versions that are not current (the original after an edit, earlier edits) own store
        // files too: they are checked against their own hashes and are never orphans.
        let versions = try Row.fetchCursor(db, sql: """
            SELECT COALESCE(v.file_id, a.id), a.display_name || ' (version ' || v.version || ')', v.content_hash, v.byte_size, v.store_path
            FROM versions v JOIN assets a ON a.rowid = v.asset_rowid
            WHERE v.store_path IS NOT NULL AND v.store_path IS DISTINCT FROM COALESCE(a.store_path, '')
            ORDER BY v.asset_rowid, v.version
            """)
        while let r = try versions.next() {
            out.append(CatalogEntry(id: r[0], name: r[1], hash: r[2], size: UInt64(max(0, r[3] as Int64)), storePath: r[4], referencePath: nil))
        }
        // Sidecars (issue 37): every version's file, checked against its own hash, never an orphan.
        let sidecars = try Row.fetchCursor(db, sql: """
            SELECT s.file_id, a.display_name || ' (sidecar ' || s.form || ' ' || s.ext || ', version ' || s.version || ')',
                   s.content_hash, s.byte_size, s.store_path
            FROM sidecars s JOIN assets a ON a.rowid = s.asset_rowid
            WHERE s.store_path IS NOT NULL
            ORDER BY s.asset_rowid, s.form, s.ext, s.version
            """)
        while let r = try sidecars.next() {
            out.append(CatalogEntry(id: r[0], name: r[1], hash: r[2], size: UInt64(max(0, r[3] as Int64)), storePath: r[4], referencePath: nil))
        }
        return out
    }

    public func run(progress: (VerifyProgress) -> Void = { _ in }) throws -> VerifyReport {
        let started = Date()
        // The catalog first: one that fails SQLite's checks is damaged (exit 75), whatever the
        // store holds; nothing is repaired against it.
        guard try library.passesQuickCheck() else {
            throw LibraryError.libraryDamaged("it fails SQLite's quick_check")
        }
        var report = VerifyReport()
        report.repair = options.repair
        let store = library.paths.store

        // 1. The store, listed before the catalog is read: a file moves into the store only after
        // its row committed, so a new asset is never mistaken for an orphan.
        var storeFiles: [String] = []
        var storeOdd: [String] = []        // symbolic links, sockets...: nothing photogate makes
        var storeDirs: [String] = []
        func walk(_ rel: String, depth: Int) {
            for (name, kind) in Directory.entries(rel.isEmpty ? store : store + "/" + rel) {
                let r = rel.isEmpty ? name : rel + "/" + name
                switch kind {
                case .file: storeFiles.append(r)
                case .directory:
                    storeDirs.append(r)
                    if depth < 16 { walk(r, depth: depth + 1) } else { storeOdd.append(r) }
                default: storeOdd.append(r)
                }
            }
        }
        walk("", depth: 0)

        // 2. The catalog.
        let catalog = try library.read { db in try Verifier.catalog(db) }
        report.assets = catalog.count
        var byStorePath: [String: Int] = [:]
        byStorePath.reserveCapacity(catalog.count)
        for (i, a) in catalog.enumerated() {
            if let s = a.storePath { byStorePath[s] = i }
        }
        // Indexes only a library with problems needs, built on first use (each costs a tenth of
        // a second at 100,000 assets).
        var byHashIndex: [String: Int]? = nil
        func byHash(_ h: String) -> Int? {
            if byHashIndex == nil {
                var d = [String: Int](minimumCapacity: catalog.count)
                for (i, a) in catalog.enumerated() where d[a.hash] == nil { d[a.hash] = i }
                byHashIndex = d
            }
            return byHashIndex![h]
        }
        var byIDIndex: [String: Int]? = nil
        func byID(_ id: String) -> Int? {
            if byIDIndex == nil {
                var d = [String: Int](minimumCapacity: catalog.count)
                for (i, a) in catalog.enumerated() { d[a.id] = i }
                byIDIndex = d
            }
            return byIDIndex![id]
        }
        /// The entry whose store file is named by `id` (`<id>.<ext>`): an asset's own id, or the
        /// file id of a version, the current one included. A committed temp file is named by it
        /// too, which is how recovery knows it (`StoreWriter.recover`).
        var byStoreIDIndex: [String: Int]? = nil
        func byStoreID(_ id: String) -> Int? {
            if byStoreIDIndex == nil {
                var d = [String: Int](minimumCapacity: catalog.count)
                for (i, a) in catalog.enumerated() {
                    guard let s = a.storePath else { continue }
                    d[String(s.split(separator: "/").last?.prefix { $0 != "." } ?? "")] = i
                }
                byStoreIDIndex = d
            }
            return byStoreIDIndex![id]
        }
        var sizesIndex: Set<UInt64>? = nil
        func hasSize(_ n: UInt64) -> Bool {
            if sizesIndex == nil { sizesIndex = Set(catalog.map(\.size)) }
            return sizesIndex!.contains(n)
        }

        // 3. Hash every original and every unaccounted store file, on several threads.
        var jobs: [HashJob] = []
        jobs.reserveCapacity(catalog.count + 16)
        var jobOfAsset = [Int](repeating: -1, count: catalog.count)
        let listed = Set(storeFiles)
        for (i, a) in catalog.enumerated() {
            if let s = a.storePath {
                // Not listed: missing, unless it moved into the store after the listing.
                guard listed.contains(s) || access(store + "/" + s, F_OK) == 0 else { continue }
                jobOfAsset[i] = jobs.count
                jobs.append(HashJob(path: store + "/" + s, expectedSize: a.size, reference: false))
            } else if let r = a.referencePath {
                jobOfAsset[i] = jobs.count
                jobs.append(HashJob(path: r, expectedSize: a.size, reference: true))
            }
        }
        let orphans = storeFiles.filter { byStorePath[$0] == nil }
        let firstOrphanJob = jobs.count
        for o in orphans { jobs.append(HashJob(path: store + "/" + o, expectedSize: nil, reference: false)) }
        let results = HashPool.run(jobs, threads: options.threads ?? Verifier.defaultThreads, progress: progress)
        report.filesHashed = results.filter { $0.hash != nil }.count
        report.bytesHashed = results.reduce(0) { $0 + ($1.hash != nil ? $1.size : 0) }

        // Files with bytes that some asset needs: unaccounted store files, then lost+found/.
        var sources: [String: [String]] = [:]    // hash -> absolute paths
        var sourceOrphan: [String: Int] = [:]    // absolute path -> index in `problems` (an orphan)

        // Files in live writers' temp folders (this host's or another's, tmp/ is shared), by
        // their id: listed on first use, after the catalog was read.
        var inFlightIndex: Set<String>? = nil
        func inFlight(_ storePath: String) -> Bool {
            if inFlightIndex == nil { inFlightIndex = Verifier.liveTempIDs(library.paths.tmp) }
            let id = String((storePath as NSString).lastPathComponent.prefix { $0 != "." })
            // Listed in a live folder, or moved into the store since it was first looked for.
            return inFlightIndex!.contains(id) || access(store + "/" + storePath, F_OK) == 0
        }

        // 4. Assets.
        var problems: [VerifyProblem] = []
        var wanted: [Int] = []                    // problem indexes of damaged or missing store originals
        for (i, a) in catalog.enumerated() {
            if let s = a.storePath {
                let rel = "store/" + s
                // Not in the store yet: a writer (on any host) between its row's commit and the
                // rename into the store, which it has still to do (or its recovery will).
                if jobOfAsset[i] < 0, inFlight(s) { continue }
                guard jobOfAsset[i] >= 0 else {
                    wanted.append(problems.count)
                    problems.append(VerifyProblem(kind: .missing, path: rel, asset: a.id, name: a.name,
                                                  detail: "the store has no file for this asset"))
                    continue
                }
                let r = results[jobOfAsset[i]]
                if r.hash == a.hash { continue }
                wanted.append(problems.count)
                problems.append(VerifyProblem(kind: .damaged, path: rel, asset: a.id, name: a.name, detail: r.mismatch(a)))
            } else if let ref = a.referencePath {
                let r = results[jobOfAsset[i]]
                if r.hash == a.hash { continue }
                if r.error == ENOENT || r.error == ENOTDIR {
                    problems.append(VerifyProblem(kind: .referenceMissing, path: ref, asset: a.id, name: a.name,
                                                  detail: "the referenced original is gone",
                                                  action: "if it moved: photogate import --reference NEWPATH (the same bytes find this asset); else photogate delete \(a.id)"))
                } else if r.error != 0 {
                    problems.append(VerifyProblem(kind: .referenceMissing, path: ref, asset: a.id, name: a.name,
                                                  detail: "the referenced original cannot be read: \(String(cString: strerror(r.error)))"))
                } else {
                    problems.append(VerifyProblem(kind: .referenceChanged, path: ref, asset: a.id, name: a.name,
                                                  detail: "the referenced original changed since it was imported (" + r.mismatch(a) + ")",
                                                  action: "to accept the file as it is now (a new version; grants kept): photogate import --reference '\(ref)'"))
                }
            } else if let bad = a.badStorePath {
                // Not for repair either: it would write where that path leads.
                problems.append(VerifyProblem(kind: .missing, path: "", asset: a.id, name: a.name,
                                              detail: "the catalog names the store file '\(bad)', which is not a path photogate makes "
                                                  + "(xx/<16 hex digits>.<extension>, inside store/): the asset is treated as missing",
                                              action: "nothing to repair: trash the asset, or import its original again"))
            } else {
                wanted.append(problems.count)
                problems.append(VerifyProblem(kind: .missing, path: "", asset: a.id, name: a.name, detail: "the catalog names no original"))
            }
        }

        // Verified originals with the bytes of a damaged or missing one: sources of a copy.
        var good: [String: String] = [:]
        if !wanted.isEmpty {
            let hashes = Set(wanted.compactMap { problems[$0].asset.flatMap { byID($0) }.map { catalog[$0].hash } })
            for (i, a) in catalog.enumerated() where jobOfAsset[i] >= 0 && hashes.contains(a.hash) && good[a.hash] == nil {
                if results[jobOfAsset[i]].hash == a.hash { good[a.hash] = a.storePath.map { store + "/" + $0 } ?? a.referencePath }
            }
        }

        // 5. Store files no asset names.
        for (k, o) in orphans.enumerated() {
            let r = results[firstOrphanJob + k]
            var detail = "no asset names this file"
            if let h = r.hash {
                let path = store + "/" + o
                sources[h, default: []].append(path)
                sourceOrphan[path] = problems.count
                if let i = byHash(h) { detail += "; its bytes are those of asset \(catalog[i].id) (\(catalog[i].name))" }
            }
            problems.append(VerifyProblem(kind: .orphan, path: "store/" + o, detail: detail))
        }
        for o in storeOdd {
            problems.append(VerifyProblem(kind: .orphan, path: "store/" + o, detail: "not a regular file; photogate makes none here"))
        }

        // 6. tmp/: folders of dead processes, and anything that is not a folder.
        var deadFolders: [(problem: Int, keep: [String])] = []
        var rollsForward: [String: String] = [:]   // asset id -> its committed temp file    // files recovery would delete whose bytes match an asset
        let tmp = library.paths.tmp
        for (name, kind) in Directory.entries(tmp) {
            let dir = tmp + "/" + name
            guard kind == .directory else {
                problems.append(VerifyProblem(kind: .strayTemp, path: "tmp/" + name, detail: "not a process's temp folder"))
                continue
            }
            // A folder being made, or taken from its dead maker: it holds nothing of a writer's,
            // and the next recovery removes it (`StoreWriter.removeAbandoned`).
            if name.hasPrefix(StoreWriter.newFolderPrefix) || name.hasPrefix(StoreWriter.goneFolderPrefix) { continue }
            guard Verifier.isDead(dir) else { continue }
            var forward = 0, commit = 0, discard = 0
            var keep: [String] = []
            for (f, _) in Directory.entries(dir) where f != ".lock" && !f.hasSuffix(".ready") {
                let path = dir + "/" + f
                let id = String(f.prefix { $0 != "." })
                var deleted = true
                if id.count == 16, let i = byStoreID(id), let s = catalog[i].storePath {
                    if access(store + "/" + s, F_OK) != 0 {
                        forward += 1
                        deleted = false
                        rollsForward[catalog[i].id] = "tmp/" + name + "/" + f
                    }
                } else if ReadyMarker.find(temp: path) != nil {
                    commit += 1
                    deleted = false
                }
                if deleted {
                    discard += 1
                    var st = stat()
                    if lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, hasSize(UInt64(st.st_size)),
                       let h = HashPool.hash(path, expectedSize: nil, reference: false).hash, byHash(h) != nil {
                        keep.append(path)
                    }
                }
            }
            var detail = "\(Verifier.writer(of: dir, name)) is gone: \(forward) file\(forward == 1 ? "" : "s") to roll forward into the store, "
                + "\(commit) to commit as an app's asset (its close had succeeded), \(discard) incomplete to discard"
            if !keep.isEmpty { detail += " (\(keep.count) of them hold an asset's bytes and would be kept in lost+found)" }
            deadFolders.append((problems.count, keep))
            problems.append(VerifyProblem(kind: .deadTemp, path: "tmp/" + name, detail: detail))
        }

        // 7. lost+found/: the files an earlier repair kept, as sources for what is damaged now.
        let lostRoot = root + "/" + LostAndFound.folder
        let wantedSizes = Set(wanted.compactMap { p in problems[p].asset.flatMap { byID($0) }.map { catalog[$0].size } })
        func lostFiles() -> [String] {
            var out: [String] = []
            func walkLost(_ dir: String, _ depth: Int) {
                for (n, k) in Directory.entries(dir) {
                    if k == .file { out.append(dir + "/" + n) } else if k == .directory, depth < 32 { walkLost(dir + "/" + n, depth + 1) }
                }
            }
            walkLost(lostRoot, 0)
            return out
        }
        if !wanted.isEmpty {
            for path in lostFiles() {
                var st = stat()
                guard lstat(path, &st) == 0, wantedSizes.contains(UInt64(st.st_size)),
                      let h = HashPool.hash(path, expectedSize: nil, reference: false).hash else { continue }
                sources[h, default: []].append(path)
            }
        }

        // 8. Permissions: the library is private to its owner.
        var openEntries: [String] = []
        if LibraryPrivacy.isOpen(root) { openEntries.append("") }
        for e in LibraryPrivacy.entries where e != "store" {
            Verifier.collectOpen(root, e, &openEntries)
        }
        if LibraryPrivacy.isOpen(store) { openEntries.append("store") }
        for d in storeDirs where LibraryPrivacy.isOpen(store + "/" + d) { openEntries.append("store/" + d) }
        for (k, r) in results.enumerated() where r.error == 0 && (r.mode & LibraryPrivacy.openBits) != 0 && !jobs[k].reference {
            openEntries.append(String(jobs[k].path.dropFirst(root.count + 1)))
        }
        for e in openEntries {
            problems.append(VerifyProblem(kind: .tooOpen, path: e.isEmpty ? "." : e,
                                          detail: "other users may read it (mode \(String(Verifier.mode(root + "/" + e), radix: 8)))"))
        }

        // What repair would do about damaged and missing originals.
        if !options.repair {
            let unnamed = problems.filter { $0.kind == .orphan }.count
            if Repair.isMajority(unnamed, of: storeFiles.count + storeOdd.count) {
                for k in problems.indices where problems[k].kind == .orphan {
                    problems[k].action = Repair.majorityWarning(unnamed, of: storeFiles.count + storeOdd.count, forced: false)
                }
            }
            for p in wanted {
                guard let i = problems[p].asset.flatMap({ byID($0) }) else { continue }
                let a = catalog[i]
                if let t = rollsForward[a.id] {
                    problems[p].action = "--repair rolls it forward from \(t), as the next import or mount would"
                } else if let s = sources[a.hash]?.first {
                    problems[p].action = "--repair restores it from \(rel(s))"
                } else if let g = good[a.hash] {
                    problems[p].action = "--repair restores it from a copy of \(rel(g))"
                } else {
                    problems[p].action = "no file with its bytes was found: --repair cannot restore it; importing the original again (photogate import FILE) restores it"
                }
            }
        } else {
            var repair = Repair(verifier: self, catalog: catalog, problems: problems, sources: sources, sourceOrphan: sourceOrphan,
                                good: good, wanted: wanted, deadFolders: deadFolders, openEntries: openEntries,
                                storeFiles: storeFiles.count + storeOdd.count)
            repair.run(into: &problems)
        }
        report.problems = problems
        report.lostAndFound = lostFiles().count
        report.seconds = Date().timeIntervalSince(started)
        return report
    }

    /// A path for people: relative to the library folder when inside it.
    func rel(_ path: String) -> String {
        path.hasPrefix(root + "/") ? String(path.dropFirst(root.count + 1)) : path
    }

    static var defaultThreads: Int {
        if let s = ProcessInfo.processInfo.environment["PHOTOGATE_VERIFY_THREADS"], let n = Int(s), n > 0 { return min(n, 64) }
        // Warm, hashing is CPU work (cores + 1 would do); cold, a verify is mostly small reads all
        // over the disk, and more of them in flight keep it busy: 100,000 small files with a cold
        // cache took 9.6 s with 3 threads, 6.6 s with 8 and 6.0 s with 16 on 2 vCPUs.
        return max(8, min(16, ProcessInfo.processInfo.activeProcessorCount + 1))
    }

    /// Who wrote in a temp folder, for people: "process PID on host HOST", from its lock file
    /// (a host's pid alone names nothing in a folder several hosts share), else from its name.
    static func writer(of dir: String, _ name: String) -> String {
        let words = (FileManager.default.contents(atPath: dir + "/.lock").map { String(decoding: $0.prefix(300), as: UTF8.self) } ?? "")
            .split(whereSeparator: \.isWhitespace).map(String.init)
        if words.count >= 4, words[0] == "host", words[2] == "pid" { return "process \(words[3]) on host \(words[1])" }
        return "process \(name.split(separator: "-").dropFirst().first.map(String.init) ?? "?")"
    }

    /// A temp folder whose lock can be taken belongs to a dead process (the test of
    /// `StoreWriter.recover`, whose lock is released at once here).
    static func isDead(_ dir: String) -> Bool {
        let fd = Glibc.open(dir + "/.lock", O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { return true }
        defer { Glibc.close(fd) }
        return flock(fd, LOCK_EX | LOCK_NB) == 0
    }

    /// The ids of the files in the temp folders of live writers (whose lock is held).
    static func liveTempIDs(_ tmp: String) -> Set<String> {
        var ids = Set<String>()
        for (name, kind) in Directory.entries(tmp) where kind == .directory && !name.hasPrefix(".") {
            let dir = tmp + "/" + name
            guard !isDead(dir) else { continue }
            for (f, _) in Directory.entries(dir) where f != ".lock" { ids.insert(String(f.prefix { $0 != "." })) }
        }
        return ids
    }

    static func mode(_ path: String) -> mode_t {
        var st = stat()
        return lstat(path, &st) == 0 ? st.st_mode & 0o7777 : 0
    }

    static func collectOpen(_ root: String, _ rel: String, _ out: inout [String]) {
        let path = root + "/" + rel
        if LibraryPrivacy.isOpen(path) { out.append(rel) }
        var st = stat()
        guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { return }
        for (n, _) in Directory.entries(path) { collectOpen(root, rel + "/" + n, &out) }
    }
}
