// Kept in one file (over ~400 lines): one pipeline (read, scan, hash and copy on workers; catalog and commit in order) whose stages share one window.
import Foundation
import GRDB
import PhotoLibrary
import Redaction
import PGSystem
import Threads
#if canImport(Glibc)
import Glibc
#endif

public struct ImportOptions: Sendable {
    public var reference = false
    public var album: String?
    public var sharedAlbum: String?
    public init(reference: Bool = false, album: String? = nil, sharedAlbum: String? = nil) {
        self.reference = reference
        self.album = album
        self.sharedAlbum = sharedAlbum
    }
}

public enum ImportEvent: Sendable {
    case imported(Asset, source: String)
    case duplicate(Asset, source: String)
    case skipped(source: String, reason: String)
}

public struct ImportSummary: Sendable {
    public var imported: [Asset] = []
    public var duplicates: [Asset] = []
    public var skipped: [(source: String, reason: String)] = []
    /// Known assets this import mended (issue 38): a `--reference` original that changed, taken
    /// as a new version; one that moved, referenced where it is now; a store original that was
    /// missing, restored from these bytes. `what` says which.
    public var repaired: [(asset: Asset, what: String)] = []
}

/// `photogate import`: walks files and folders, copies originals into the store (or references
/// them), and catalogs them in batches.
public final class Importer {
    /// What the last `commitRows` mended (see `ImportSummary.repaired`).
    private var repairedNow: [(asset: Asset, what: String)] = []
    let library: Library
    let options: ImportOptions
    let writer: StoreWriter?

    public init(library: Library, options: ImportOptions) throws {
        self.library = library
        self.options = options
        if let a = options.album { try Library.validateAlbumName(a) }
        if let a = options.sharedAlbum { try Library.validateAlbumName(a) }
        if options.reference {
            writer = nil
            StoreWriter.recover(library)
        } else {
            writer = try StoreWriter(library: library, purpose: "import")
        }
    }

    /// Why a symbolic link met while walking a folder is skipped.
    public static let linkInFolder = "a symbolic link inside a folder (not followed: name it on the command line to import what it leads to)"

    /// Expands the arguments into regular files, recursively, never looping. A symbolic link named
    /// on the command line is followed (the person chose it); one met while walking a folder is
    /// not: it is skipped and reported. A folder can be written by someone else than whoever
    /// imports it (root importing a user's folder into a shared library), and a link there to a
    /// file only the importer may read (/root/..., /etc/shadow) would copy that file into the
    /// library. Problems (missing, unreadable, links, loops) come back as skipped entries.
    public static func collect(_ paths: [String]) -> (files: [String], problems: [(String, String)]) {
        var files: [String] = []
        var problems: [(String, String)] = []
        var visited = Set<[UInt64]>()
        func walk(_ path: String, depth: Int) {
            var st = stat()
            if (depth == 0 ? stat(path, &st) : lstat(path, &st)) != 0 {
                let e = errno
                let why = e == ELOOP ? "symbolic link loop" : e == ENOENT ? "no such file or directory" : String(cString: strerror(e))
                problems.append((path, why))
                return
            }
            if (st.st_mode & S_IFMT) == S_IFLNK {
                problems.append((path, Importer.linkInFolder))
                return
            }
            if (st.st_mode & S_IFMT) == S_IFDIR {
                let key = [UInt64(st.st_dev), UInt64(st.st_ino)]
                guard visited.insert(key).inserted else {
                    problems.append((path, "symbolic link loop (folder already visited)"))
                    return
                }
                guard depth < 64 else { problems.append((path, "folders nested too deep")); return }
                guard let dir = opendir(path) else {
                    problems.append((path, String(cString: strerror(errno))))
                    return
                }
                var names: [String] = []
                while let ent = readdir(dir) {
                    let bytes = withUnsafeBytes(of: ent.pointee.d_name) { raw in Array(raw.prefix { $0 != 0 }) }
                    if bytes == [0x2e] || bytes == [0x2e, 0x2e] { continue }
                    // A name that is not UTF-8 (Latin-1 from a camera or a Windows share) has no
                    // String that names it again: it was skipped as "no such file or directory".
                    // Said as it is instead (photogate names assets in UTF-8).
                    guard let name = String(validating: bytes, as: UTF8.self) else {
                        let shown = String(decoding: bytes, as: UTF8.self)
                        problems.append((path + "/" + shown, "its name is not UTF-8 (photogate names photos in UTF-8): "
                            + "rename it first, e.g. convmv -f latin1 -t utf-8 --notest, then import it"))
                        continue
                    }
                    names.append(name)
                }
                closedir(dir)
                for n in names.sorted() { walk(path + "/" + n, depth: depth + 1) }
            } else if (st.st_mode & S_IFMT) == S_IFREG {
                files.append(path)
            } else {
                problems.append((path, "not a regular file"))
            }
        }
        for p in paths { walk(p, depth: 0) }
        return (files, problems)
    }

    /// A folder named on the command line, open (following links: the person named it) while its
    /// files are imported; nil when it is not a folder that can be opened.
    final class NamedFolder: Sendable {
        let path: String
        let fd: Int32
        init?(_ path: String) {
            fd = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard fd >= 0 else { return nil }
            self.path = path
        }
        deinit { Glibc.close(fd) }
    }

    struct Pending {
        var source: String
        var id: String
        var temp: String?
        var facts: NewAssetFacts
        var name: String
    }

    /// Imports files; `event` is called for each file in order, `progress` with (done, total).
    public func run(_ paths: [String], event: (ImportEvent) -> Void = { _ in },
                    progress: (Int, Int) -> Void = { _, _ in }) throws -> ImportSummary {
        var summary = ImportSummary()
        let (files, problems) = Importer.collect(paths)
        // Files named on the command line may be symbolic links; files found in folders are
        // opened following none (one swapped for a link since the walk is refused then).
        let named = Set(paths)
        for (p, why) in problems {
            summary.skipped.append((p, why))
            event(.skipped(source: p, reason: why))
        }
        var batch: [Pending] = []
        var batchBytes: UInt64 = 0
        var done = 0
        // Reading, hashing and copying is CPU and disk work: files are prepared on worker threads,
        // a bounded window ahead, while this thread catalogs them in their order and flushes
        // batches (so a batch's syncs and transaction overlap the next files' preparation).
        nonisolated(unsafe) let importer = self   // prepare touches only its own file and temp
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let workers = files.count < 2 ? 1 : max(1, min(8, Importer.workerCount ?? (cores + 1)))
        // Each folder named on the command line is opened once, for all the files found in it.
        let folders = Dictionary(named.compactMap { p in NamedFolder(p).map { (p, $0) } }, uniquingKeysWith: { a, _ in a })
        let pipeline = PreparePipeline(count: files.count, workers: workers, window: 4 * workers) { i in
            if named.contains(files[i]) { return try importer.prepare(files[i]) }
            guard let root = Importer.namedRoot(of: files[i], among: paths), let folder = folders[root] else {
                throw LibraryError.badInput("the folder it was found in can no longer be opened")
            }
            return try importer.prepare(files[i], beneath: folder)
        }
        pipeline.start()
        // On a fatal error, the temp copies not yet handed to `flush` go (and however this
        // returns, no worker goes on preparing files).
        func dropUnflushed(_ batch: [Pending]) {
            for r in pipeline.stop() { if case .success(let p?) = r, let t = p.temp { unlink(t) } }
            for p in batch { if let t = p.temp { unlink(t) } }
        }
        defer { dropUnflushed([]) }
        for (k, path) in files.enumerated() {
            do {
                if let p = try pipeline.take(k).get() {
                    batch.append(p)
                    batchBytes += p.facts.byteSize
                }
            } catch let e as LibraryError {
                if case .noSpace = e {
                    dropUnflushed([])
                    try? flush(&batch, &summary, event)
                    throw e
                }
                summary.skipped.append((path, e.description))
                event(.skipped(source: path, reason: e.description))
            } catch {
                dropUnflushed(batch)
                throw error
            }
            done += 1
            progress(done, files.count)
            if batch.count >= 256 || batchBytes >= 256 << 20 {
                do { try flush(&batch, &summary, event) } catch {
                    dropUnflushed([])
                    throw error
                }
                batchBytes = 0
            }
        }
        try flush(&batch, &summary, event)
        return summary
    }

    /// Worker threads for `prepare` (nil: one more than the cores, so that a thread waiting for
    /// the disk leaves the cores busy). For measurements: PHOTOGATE_IMPORT_THREADS.
    static let workerCount: Int? = ProcessInfo.processInfo.environment["PHOTOGATE_IMPORT_THREADS"].flatMap { Int($0) }

    /// The folder named on the command line that a walked file was found in (the longest).
    static func namedRoot(of file: String, among named: [String]) -> String? {
        // By bytes: String's comparison joins a combining mark (or a ZWJ, a tag character) at
        // the start of a name with the "/" before it, so `folder/` was no prefix of such a file.
        named.filter { file.utf8.starts(with: ($0.hasSuffix("/") ? $0 : $0 + "/").utf8) }.max { $0.utf8.count < $1.utf8.count }
    }

    /// Reads, scans, hashes and (unless referencing) copies one file into a fsynced temp file.
    /// `beneath`: the folder named on the command line it was found in, nil for a file named
    /// there (which may be a symbolic link: the person chose it). A walked file is opened from
    /// that folder with no symbolic link on the way: a folder swapped for a link between the walk
    /// and the open (to /root, by whoever may write the folder) is skipped, not followed.
    func prepare(_ path: String, beneath root: NamedFolder? = nil) throws -> Pending? {
        let fd: Int32
        // O_NONBLOCK: a FIFO (or a device) put where a file was found must not hold the import
        // (it hung, and nothing of the run was committed); what is not a regular file is refused
        // below. It changes nothing for regular files.
        let flags = O_RDONLY | O_NONBLOCK | O_NOCTTY
        if let root {
            let base = root.path.hasSuffix("/") ? root.path : root.path + "/"
            // By bytes, as namedRoot (a count of Characters cut a name starting with a combining
            // mark in the wrong place: "Invalid cross-device link").
            var rel = path.utf8.dropFirst(base.utf8.count)
            while rel.first == UInt8(ascii: "/") { rel = rel.dropFirst() }
            fd = pg_openat_no_symlinks(root.fd, String(decoding: rel, as: UTF8.self), flags)
        } else {
            fd = Glibc.open(path, flags | O_CLOEXEC)
        }
        guard fd >= 0 else {
            let e = errno
            if e == ELOOP && root != nil { throw LibraryError.badInput(Importer.linkInFolder) }
            throw LibraryError.badInput(e == EACCES ? "permission denied" : String(cString: strerror(e)))
        }
        defer { Glibc.close(fd) }
        var before = stat()
        guard fstat(fd, &before) == 0 else { throw StoreWriter.ioError(errno, "stat \(path)") }
        guard before.st_mode & S_IFMT == S_IFREG else { throw LibraryError.badInput("not a regular file (a FIFO, a device or a socket)") }
        let (scan, size, date) = try StoreWriter.scan(fd: fd)
        let name = (path as NSString).lastPathComponent
        if options.reference {
            let hash = try StoreWriter.hash(fd: fd, size: size)
            // The row describes the file as it was scanned and hashed: one written meanwhile (its
            // ctime moves with every write) is refused, not cataloged with facts of other bytes.
            var after = stat()
            guard fstat(fd, &after) == 0, after.st_size == before.st_size, after.st_ctim.tv_sec == before.st_ctim.tv_sec,
                  after.st_ctim.tv_nsec == before.st_ctim.tv_nsec else {
                throw LibraryError.badInput("the file changed while it was being imported")
            }
            // Where the file opened really is (no link on the way), not where its path leads now.
            var buf = [CChar](repeating: 0, count: 4096)
            let real = pg_fd_path(fd, &buf, UInt(buf.count)) > 0 && buf[0] == 0x2f
                ? String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : URL(fileURLWithPath: LibraryPaths.absolute(path)).resolvingSymlinksInPath().path
            return Pending(source: real, id: StoreWriter.randomID(), temp: nil,
                           facts: NewAssetFacts(scan: scan, byteSize: size, contentHash: hash, fileDate: date), name: name)
        }
        guard let writer else { return nil }
        let (id, temp, out) = try writer.makeTemp(extension: scan.kind.preferredExtension)
        var ok = false
        defer {
            Glibc.close(out)
            if !ok { unlink(temp) }
        }
        let h = SHA256()
        let chunk = 1 << 20
        let buf = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 4096)
        defer { buf.deallocate() }
        // Written through the page cache. Whole chunks used to be written with direct I/O (a third
        // of import's CPU time was the copy into the page cache and its writeback), but the copy
        // is scanned again below, and what was written direct is not in the page cache: that
        // scan read it back from the disk (a JPEG's scan reads it all), and import of 200 photos
        // took 1.08 s against 0.89 s this way (0.91 s before the second scan).
        var off: UInt64 = 0
        while true {
            let n = pread(fd, buf.baseAddress, chunk, off_t(off))
            if n < 0 { if errno == EINTR { continue }; throw StoreWriter.ioError(errno, "read \(path)") }
            if n == 0 { break }
            h.update(UnsafeRawBufferPointer(rebasing: buf[0..<n]))
            var w = 0
            while w < n {
                let m = pwrite(out, buf.baseAddress! + w, n - w, off_t(off) + w)
                if m < 0 { if errno == EINTR { continue }; throw StoreWriter.ioError(errno, "write into the library") }
                w += m
            }
            off += UInt64(n)
        }
        guard off == size else { throw LibraryError.badInput("the file changed while it was being imported") }
        // The catalog describes the bytes stored, not the ones scanned first (a file changed in
        // place between the scan and the copy was stored with a location its row did not know
        // of, and a strip-location app got it): the copy is scanned again.
        let stored = try StoreWriter.scan(fd: out).0
        guard stored.kind == scan.kind else { throw LibraryError.badInput("the file changed while it was being imported") }
        // Durable before its row commits: `flush` syncs the whole batch with one syncfs (one
        // journal commit for up to 256 files, where a fsync each cost one each). Start now.
        _ = pg_start_writeback(out)
        ok = true
        return Pending(source: path, id: id, temp: temp,
                       facts: NewAssetFacts(scan: stored, byteSize: size, contentHash: "sha256:" + hexString(h.finalize()), fileDate: date),
                       name: name)
    }

    /// Commits a batch: catalog rows in one transaction, then temp files renamed into the store.
    func flush(_ batch: inout [Pending], _ summary: inout ImportSummary, _ event: (ImportEvent) -> Void) throws {
        guard !batch.isEmpty else { return }
        let items = batch
        batch.removeAll()
        // The copies are durable before their rows commit.
        if let writer, items.contains(where: { $0.temp != nil }) {
            do { try writer.syncFilesystem() } catch {
                for p in items { if let t = p.temp { unlink(t) } }
                throw error
            }
        }
        let shared = options.sharedAlbum != nil
        // A transaction that fails (no space left for the log, say) commits none of them: their
        // copies go, as the ones not yet flushed do.
        let results: [(Pending, Asset, Bool, String?)]
        do { results = try commitRows(items, shared: shared) } catch {
            // Committed or not, not known (a server catalog's COMMIT whose answer was lost, and
            // the server not to be asked since): the copies stay, named by their assets' ids, for
            // the recovery of this writer's folder to move in if the rows are there, else delete.
            // Deleted here, a batch that had committed was up to 256 rows without their files.
            if !(error is CommitOutcomeUnknown) {
                for p in items { if let t = p.temp { unlink(t) } }
            }
            throw error
        }
        try install(results, into: &summary, event)
        summary.repaired += repairedNow
        let mended = Set(repairedNow.map(\.asset.rowID))
        summary.duplicates.removeAll { mended.contains($0.rowID) }
    }

    private func commitRows(_ items: [Pending], shared: Bool) throws -> [(Pending, Asset, Bool, String?)] {
        var repaired: [(asset: Asset, what: String)] = []
        defer { repairedNow = repaired }
        return try library.write { db in
            var albumID: Int64? = nil
            if let a = options.album { albumID = try Library.createAlbum(db, a, shared: false, mustBeNew: false) }
            var sharedID: Int64? = nil
            if let s = options.sharedAlbum { sharedID = try Library.createAlbum(db, s, shared: true, mustBeNew: false) }
            // Content already in the library is one of the person's own assets (owner_app IS
            // NULL), in Recently Deleted too (importing a deleted photo again restores it).
            // Never an app's: matching one handed the person's photo to the app (its name, its
            // edits, restored from its trash) and told the app, through its history, that the
            // person has those exact bytes. Such an import is a new asset of the person's, with
            // its own store file (files are named by asset id); the app's is left alone.
            let byHash = try db.cachedStatement(sql: """
                SELECT \(Library.assetColumns) FROM assets WHERE content_hash = ? AND owner_app IS NULL ORDER BY rowid LIMIT 1
                """)
            // The person's asset that references this very file (import --reference of a known path).
            let byReference = try db.cachedStatement(sql: """
                SELECT \(Library.assetColumns) FROM assets WHERE reference_path = ? AND owner_app IS NULL ORDER BY rowid LIMIT 1
                """)
            var out: [(Pending, Asset, Bool, String?)] = []
            var restored = Set<Int64>()
            var madeHere = Set<Int64>()
            for p in items {
                var asset: Asset
                var isNew = false
                // A copy that becomes the stored original of an asset that had only a
                // referenced one: its store path.
                var stores: String? = nil
                if p.temp == nil, let row = try Row.fetchOne(byReference, arguments: [p.source]),
                   Library.asset(row).contentHash != p.facts.contentHash {
                    // A referenced original edited by another program (tagged in a photo
                    // manager): accepted as a new version of the same asset (id, name, albums,
                    // grants kept), read from where it is. Before, every app was refused it for
                    // good and importing it again made a second asset without them.
                    asset = try Library.acceptChangedReference(db, Library.asset(row), facts: p.facts, path: p.source)
                    repaired.append((asset, "the referenced original changed: its new content is a new version (photogate versions \(asset.id))"))
                    out.append((p, asset, false, nil))
                    continue
                }
                if let row = try Row.fetchOne(byHash, arguments: [p.facts.contentHash]) {
                    asset = Library.asset(row)
                    if let old = asset.referencePath, p.temp == nil, old != p.source, access(old, F_OK) != 0 {
                        // Its referenced original moved: referenced where it is now.
                        // Checked from now (its move changed its inode change time: `OriginalCheck`):
                        // its bytes were just hashed and are the asset's.
                        try db.execute(sql: "UPDATE assets SET reference_path = ?, added_at = (SELECT max(v) FROM (SELECT added_at AS v UNION ALL SELECT ?) AS t) WHERE rowid = ?",
                                       arguments: [p.source, Library.now(), asset.rowID])
                        try db.execute(sql: """
                            UPDATE versions SET reference_path = ? WHERE asset_rowid = ? AND version = (SELECT current_version FROM assets WHERE rowid = ?)
                            """, arguments: [p.source, asset.rowID, asset.rowID])
                        try Library.record(db, .version, asset: asset.rowID)
                        asset.referencePath = p.source
                        repaired.append((asset, "its referenced original, missing at \(old), is referenced at \(p.source) now"))
                    }
                    // (Not one this batch made: its file moves into the store after the commit.)
                    if let rel = asset.storePath, p.temp != nil, !madeHere.contains(asset.rowID),
                       !library.storeFileIsWhole(rel, size: asset.byteSize) {
                        // Its store original is missing (or not its size): these bytes, the
                        // asset's by their hash, become it again.
                        stores = rel
                        repaired.append((asset, "its missing original was restored from \(p.source)"))
                    }
                    // Those bytes are in the library only as a file elsewhere (import
                    // --reference): a copying import is the person keeping them, and the file
                    // they referenced may go (another user cleans a download folder) once the
                    // card they came from is wiped. The copy becomes the asset's stored original,
                    // named by the temp file's id (recovery finds it by that name).
                    if asset.storePath == nil, p.temp != nil {
                        let rel = StoreWriter.storeRelativePath(id: p.id, kind: p.facts.scan.kind)
                        try db.execute(sql: "UPDATE assets SET store_path = ?, reference_path = NULL WHERE rowid = ?",
                                       arguments: [rel, asset.rowID])
                        try Library.record(db, .version, asset: asset.rowID)
                        stores = rel
                    }
                    if shared && !asset.isShared {
                        // Imported again as cloud-shared: it is shared now, however it arrived
                        // first (before any restore below, so the history sees it once).
                        try Library.markShared(db, asset.rowID)
                        asset.isShared = true
                    }
                    if asset.isTrashed {
                        restored.insert(asset.rowID)
                        try db.execute(sql: "UPDATE assets SET trashed_at = NULL, trashed_by = NULL WHERE rowid = ?", arguments: [asset.rowID])
                        try Library.record(db, .restore, asset: asset.rowID)
                        asset.trashedDate = nil
                    }
                } else {
                    let rel = p.temp == nil ? nil : StoreWriter.storeRelativePath(id: p.id, kind: p.facts.scan.kind)
                    try Library.reclaimName(db, DisplayName.sanitize(Array(p.name.utf8)))
                    asset = try StoreWriter.insertRow(db, id: p.id, name: p.name, owner: nil, ownerName: nil, facts: p.facts,
                                                      storePath: rel, referencePath: p.temp == nil ? p.source : nil, shared: shared)
                    isNew = true
                    madeHere.insert(asset.rowID)
                }
                if let albumID { _ = try Library.addToAlbum(db, albumID, [asset.rowID]) }
                if let sharedID { _ = try Library.addToAlbum(db, sharedID, [asset.rowID]) }
                out.append((p, asset, isNew, stores))
            }
            // New (or restored) assets appear in every view that may see them.
            try ViewDelta.record(db, before: [:], after: ViewDelta.visibility(db, out.filter { $0.2 || restored.contains($0.1.rowID) }.map(\.1.rowID)))
            return out
        }
    }

    private func install(_ results: [(Pending, Asset, Bool, String?)], into summary: inout ImportSummary, _ event: (ImportEvent) -> Void) throws {
        for (p, asset, isNew, stores) in results {
            if isNew {
                if let temp = p.temp, let writer, let rel = asset.storePath {
                    try writer.install(tempPath: temp, storePath: rel, durable: false)
                }
                summary.imported.append(asset)
                event(.imported(asset, source: p.source))
            } else {
                if let temp = p.temp {
                    if let rel = stores, let writer { try writer.install(tempPath: temp, storePath: rel, durable: false) } else { unlink(temp) }
                }
                summary.duplicates.append(asset)
                event(.duplicate(asset, source: p.source))
            }
        }
        // The renames into the store, durable at once (a crash before this is rolled forward by
        // recovery: the rows and the synced temp files are there).
        if let writer, results.contains(where: { $0.0.temp != nil }) { try writer.syncFilesystem() }
    }
}

/// Runs `prepare(i)` for i in 0..<count on worker threads, at most `window` items ahead of the
/// consumer, which takes the results in order.
final class PreparePipeline: @unchecked Sendable {
    private let count: Int
    private let workers: Int
    private let window: Int
    private let prepare: (Int) throws -> Importer.Pending?
    private let cond = NSCondition()
    // All below under `cond`.
    private var results: [Int: Result<Importer.Pending?, Error>] = [:]
    private var next = 0
    private var consumed = 0
    private var running = 0
    private var stopped = false
    private var inline = false

    init(count: Int, workers: Int, window: Int, prepare: @escaping (Int) throws -> Importer.Pending?) {
        self.count = count
        self.workers = max(1, workers)
        self.window = max(1, window)
        self.prepare = prepare
    }

    func start() {
        let n = min(workers, count)
        cond.lock()
        running = n
        cond.unlock()
        var started = 0
        for _ in 0..<n {
            guard let t = NativeThread.spawn(name: "photogate-import", { [self] in work() }) else { continue }
            t.detach()
            started += 1
        }
        cond.lock()
        running -= n - started
        inline = started == 0
        cond.unlock()
    }

    private func work() {
        cond.lock()
        while true {
            while !stopped && next < count && next >= consumed + window { cond.wait() }
            if stopped || next >= count { break }
            let i = next
            next += 1
            cond.unlock()
            let r = Result { try prepare(i) }
            cond.lock()
            results[i] = r
            cond.broadcast()
        }
        running -= 1
        cond.broadcast()
        cond.unlock()
    }

    /// The result for item `k` (items are taken in order), waiting until it is ready.
    func take(_ k: Int) -> Result<Importer.Pending?, Error> {
        cond.lock()
        defer { cond.unlock() }
        if inline, results[k] == nil, k < count {
            // No worker thread could be started: the consumer prepares each item itself.
            results[k] = Result { try prepare(k) }
        }
        while results[k] == nil { cond.wait() }
        consumed = k + 1
        cond.broadcast()
        return results.removeValue(forKey: k)!
    }

    /// Stops handing out items, waits for the workers, and returns the results nobody took.
    func stop() -> [Result<Importer.Pending?, Error>] {
        cond.lock()
        defer { cond.unlock() }
        stopped = true
        cond.broadcast()
        while running > 0 { cond.wait() }
        let rest = Array(results.values)
        results = [:]
        return rest
    }
}

extension Library {
    /// The person's own files take their names back from app-created files (issue 14): an app
    /// that names a file like a photo the person has not imported yet must not make a later
    /// `photogate grant B NAME` hand over the app's file. The app-owned asset holding `name`
    /// moves to an alternative display name (`NAME-1.jpg`...); its app keeps seeing the name it
    /// chose (owner_name), other apps see the rename like any other, and mounts follow at once.
    /// The app that created it sees nothing change, so nothing reaches its history or its mount:
    /// an `updated` there would tell it the person now has a photo of that name, and when, though
    /// it may not see that photo.
    static func reclaimName(_ db: Database, _ name: String) throws {
        guard let r = try Row.fetchOne(db, sql: "SELECT rowid FROM assets WHERE display_name = ? AND owner_app IS NOT NULL",
                                       arguments: [name]) else { return }
        let rowID: Int64 = r[0]
        let taken = try db.cachedStatement(sql: "SELECT 1 FROM assets WHERE display_name = ?")
        let moved = DisplayName.unique(name) { (try? Bool.fetchOne(taken, arguments: [$0])) != nil }
        try ViewDelta.tracking(db, [rowID], renamed: [rowID]) {
            try db.execute(sql: "UPDATE assets SET display_name = ? WHERE rowid = ?", arguments: [moved, rowID])
        }
        try record(db, .rename, asset: rowID, detail: "import took its name")
    }

    /// Marks an asset cloud-shared (import --shared of content already in the library). Every
    /// grant of it the library would now refuse (`AppContext.grantRefusal`: any selection, a pick
    /// for a limited app) goes, each removal recorded like a revoke or an unpick: such a grant
    /// could never show. Every view that shows the asset sees it change, and mounts follow at once.
    static func markShared(_ db: Database, _ rowID: Int64) throws {
        try ViewDelta.tracking(db, [rowID], updated: [rowID]) {
            try db.execute(sql: "UPDATE assets SET is_shared = 1 WHERE rowid = ?", arguments: [rowID])
            for (way, table, kind) in [(GrantWay.selection, "selections", ChangeKind.revoke), (.pick, "picks", .unpick)] {
                let apps = try String.fetchAll(db, sql: "SELECT app_id FROM \(table) WHERE asset_rowid = ? ORDER BY app_id", arguments: [rowID])
                for app in apps.compactMap(AppID.init) {
                    guard let facts = try facts(db, app: app, rowID: rowID),
                          try context(db, app, .readWrite).grantRefusal(facts, way) != nil else { continue }
                    try db.execute(sql: "DELETE FROM \(table) WHERE app_id = ? AND asset_rowid = ?", arguments: [app.rawValue, rowID])
                    try record(db, kind, app: app.rawValue, asset: rowID, detail: "shared")
                }
            }
        }
        try record(db, .shared, asset: rowID)
    }
}
