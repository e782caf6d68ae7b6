// Kept in one file (over ~400 lines): opening a library and letting go of it, and the checks that keep its catalog durable (the log synced, removed or replaced under the process), which share its state.
import Foundation
import GRDB
import LibraryRun
import PhotoLibrary
import PGSystem
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The folders of a library (named in `LibraryLayout`, shared with every module that reads them).
public struct LibraryPaths: Sendable {
    public let root: String
    /// Where its catalog and shared store are, for a library whose catalog is on a server.
    public let link: CatalogLink?
    public var database: String { root + "/" + LibraryLayout.database }
    /// The originals: in the library's folder, or in the shared folder a linked library names.
    public var store: String { (link?.shared ?? root) + "/" + LibraryLayout.store }
    /// Temp files beside the store (a rename into it never crosses filesystems).
    public var tmp: String { (link?.shared ?? root) + "/" + LibraryLayout.tmp }
    /// The catalog's link file (`catalog.conf`).
    public var linkFile: String { root + "/" + LibraryLayout.catalogLink }
    /// Whether a library is here: its SQLite catalog, or a link to a server's.
    public var exists: Bool { access(database, F_OK) == 0 || access(linkFile, F_OK) == 0 }
    public var run: String { root + "/" + LibraryLayout.run }
    /// The run folder, where the library and its running mounts meet (`RunFolder`).
    public var runFolder: RunFolder { RunFolder(run) }
    /// What the library makes from its photos and can make again (`CompatibleCache`).
    public var cache: String { root + "/" + LibraryLayout.cache }
    /// Written after every committed change; mount daemons watch it with inotify.
    public var bell: String { run + "/" + RunFolder.bell }
    public var marker: String { root + "/" + LibraryLayout.marker }

    public init(root: String) {
        var r = root
        while r.count > 1 && r.hasSuffix("/") { r.removeLast() }
        self.root = r
        link = CatalogLink.read(r + "/" + LibraryLayout.catalogLink)
    }

    /// `--library`, else `$PHOTOGATE_LIBRARY`, else `$XDG_DATA_HOME/photogate`, else `~/.local/share/photogate`.
    public static func resolve(_ explicit: String?, environment: [String: String] = ProcessInfo.processInfo.environment) -> LibraryPaths {
        if let e = explicit, !e.isEmpty { return LibraryPaths(root: absolute(e)) }
        if let e = environment["PHOTOGATE_LIBRARY"], !e.isEmpty { return LibraryPaths(root: absolute(e)) }
        if let x = environment["XDG_DATA_HOME"], !x.isEmpty { return LibraryPaths(root: absolute(x) + "/photogate") }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return LibraryPaths(root: home + "/.local/share/photogate")
    }

    static func absolute(_ p: String) -> String {
        if p.hasPrefix("/") { return p }
        return FileManager.default.currentDirectoryPath + "/" + p
    }
}

extension LibraryPaths: LibraryLocations {
    public var storeRoot: String { store }
    public var runDir: String { run }
    public var cacheRoot: String { cache }
}

/// One photo library: the store of originals plus the catalog and grant database.
/// Intention-named methods (`grant`, `revoke`, `authorize`, ...) are the only way to change it;
/// each runs in one transaction and appends to the change log.
public final class Library: Sendable {
    public let paths: LibraryPaths
    /// The SQLite catalog (nil for a library whose catalog is on a server).
    let pool: DatabasePool?
    /// The server's catalog (PostgreSQL), for a library with a `catalog.conf`.
    let server: ServerCatalog?

    /// How long a statement waits for another connection's lock before failing busy.
    static let busyTimeout: TimeInterval = 15

    static func configuration(readonly: Bool = false) -> Configuration {
        var c = Configuration()
        c.foreignKeysEnabled = true
        c.busyMode = .timeout(busyTimeout)
        c.readonly = readonly
        c.journalMode = .wal
        c.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            // The WAL is cut back to this after a checkpoint restarts it, and to nothing when the
            // last connection closes (checkpointIfLast): the WAL file is kept (pg_sqlite_keep_wal).
            try db.execute(sql: "PRAGMA journal_size_limit = 4194304")
            // Keep the WAL between processes (see pg_sqlite_keep_wal): a CLI command then opens,
            // reads and closes without a single fsync. What it commits is made durable by one
            // fdatasync of the WAL when the library is released (`deinit`), not by a checkpoint.
            if let connection = db.sqliteConnection { _ = pg_sqlite_keep_wal(UnsafeMutableRawPointer(connection)) }
        }
        return c
    }

    /// Creates a library whose catalog is on a server (issue 41): this folder holds what is local
    /// to this host and `catalog.conf`; the originals are under `link.shared`. When the server's
    /// database already holds a photogate catalog (another host made it), this joins it.
    public static func create(at paths: LibraryPaths, link: CatalogLink) throws -> Library {
        try LibraryOwnership.check(paths)
        try LibraryOwnership.checkShared(link.shared, library: paths.root)
        if paths.exists { throw LibraryError.libraryExists(paths.root) }
        guard link.shared.hasPrefix("/") else { throw LibraryError.invalid("--store must be an absolute path: \(link.shared)") }
        let fm = FileManager.default
        var made: [String] = []
        do {
            for d in [paths.root, paths.run, paths.cache] where access(d, F_OK) != 0 {
                try fm.createDirectory(atPath: d, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
                made.append(d)
            }
            try LibraryOwnership.check(paths)
            for d in [link.shared, link.shared + "/" + LibraryLayout.store, link.shared + "/" + LibraryLayout.tmp] where access(d, F_OK) != 0 {
                try fm.createDirectory(atPath: d, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            }
            try LibraryOwnership.checkShared(link.shared, library: paths.root)
            let fd = Glibc.open(paths.linkFile, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
            guard fd >= 0 else { throw LibraryError.io("cannot create \(paths.linkFile): \(String(cString: strerror(errno)))") }
            let bytes = Array(link.text.utf8)
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            let synced = fsync(fd) == 0
            Glibc.close(fd)
            guard n == bytes.count, synced else { throw LibraryError.io("cannot write \(paths.linkFile)") }
            made.append(paths.linkFile)
            try "photogate library\n".write(toFile: paths.marker, atomically: true, encoding: .utf8)
            chmod(paths.marker, 0o600)
            made.append(paths.marker)
        } catch {
            for m in made.reversed() { try? fm.removeItem(atPath: m) }
            if let e = error as? LibraryError { throw e }
            throw LibraryError.io("cannot create library at \(paths.root): \(error.localizedDescription)")
        }
        do {
            return try Library(paths: LibraryPaths(root: paths.root), creating: true)
        } catch {
            // Nothing half made is left: a second try starts afresh.
            for m in made.reversed() { try? fm.removeItem(atPath: m) }
            throw error
        }
    }

    /// Creates a new library (fails if one exists).
    public static func create(at paths: LibraryPaths) throws -> Library {
        // Another user's folder is theirs to make a library in (see LibraryOwnership).
        try LibraryOwnership.check(paths)
        let fm = FileManager.default
        // A library whose catalog is on a server is here.
        if paths.link != nil || access(paths.linkFile, F_OK) == 0 { throw LibraryError.libraryExists(paths.root) }
        if fm.fileExists(atPath: paths.database) {
            // Said to be damaged if it is (as every other command says), else that it exists.
            do { _ = try Library.open(at: paths) } catch let e as LibraryError {
                switch e {
                case .catalogDamaged, .libraryDamaged: throw e
                default: break
                }
            }
            throw LibraryError.libraryExists(paths.root)
        }
        // A library whose catalog is gone: a new one made here would hide its photos.
        if hasLibraryBesidesCatalog(paths) {
            throw LibraryError.catalogDamaged(library: paths.root, why: "its database, photogate.sqlite, is missing")
        }
        // Private to its owner whatever the umask (see LibraryPrivacy): folders 0700, files 0600,
        // by explicit modes. (Never by changing the umask here: it is the whole process's, and a
        // library call must not change it under the threads of a process that embeds it.)
        do {
            for d in [paths.root, paths.store, paths.tmp, paths.run] {
                try fm.createDirectory(atPath: d, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            }
            // The folders above that did not exist at the first check may have been made by
            // someone else meanwhile: check again before anything is written or tightened.
            try LibraryOwnership.check(paths)
            try "photogate library\n".write(toFile: paths.marker, atomically: true, encoding: .utf8)
            chmod(paths.marker, 0o600)
            // SQLite gives its WAL and shared-memory files the database file's mode: make that 0600.
            let fd = Glibc.open(paths.database, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw LibraryError.io("cannot create \(paths.database): \(String(cString: strerror(errno)))") }
            fchmod(fd, 0o600)
            Glibc.close(fd)
        } catch let e as LibraryError {
            throw e
        } catch {
            throw LibraryError.io("cannot create library at \(paths.root): \(error.localizedDescription)")
        }
        // A folder that existed already (made by hand, say) may be open: tighten it, or refuse.
        try LibraryPrivacy.ensure(paths)
        let lib = try Library(paths: paths, creating: true)
        return lib
    }

    /// Opens an existing library.
    public static func open(at paths: LibraryPaths) throws -> Library {
        if paths.link != nil {
            try LibraryOwnership.check(paths)
            try LibraryPrivacy.ensure(paths)
            return try Library(paths: paths, creating: false)
        }
        guard access(paths.database, F_OK) == 0 else {
            // A library (its marker, or originals in its store) whose database is gone is
            // damaged, not missing: `init` would make an empty catalog over its photos.
            if hasLibraryBesidesCatalog(paths) {
                try LibraryOwnership.check(paths)
                throw LibraryError.catalogDamaged(library: paths.root, why: "its database, photogate.sqlite, is missing")
            }
            throw LibraryError.libraryMissing(paths.root)
        }
        // First of all: nothing of a library another user owns is read, written or trusted (its
        // catalog, crash recovery, migrations, the mount registry, the bell, the logs).
        try LibraryOwnership.check(paths)
        try LibraryPrivacy.ensure(paths)
        var st = stat()
        if lstat(paths.database, &st) == 0, st.st_size == 0 {
            throw LibraryError.catalogDamaged(library: paths.root, why: "its database, photogate.sqlite, is empty (0 bytes)")
        }
        return try Library(paths: paths, creating: false)
    }

    /// Whether `paths` holds a library's marker or any file in its store.
    static func hasLibraryBesidesCatalog(_ paths: LibraryPaths) -> Bool {
        if access(paths.marker, F_OK) == 0 { return true }
        return Directory.entries(paths.store).contains { $0.1 == .directory || $0.1 == .file }
    }

    init(paths: LibraryPaths, creating: Bool) throws {
        self.paths = paths
        if let link = paths.link {
            pool = nil
            let server = try ServerCatalog.open(link, library: paths.root, creating: creating)
            self.server = server
            try SharedIdentity.check(server, link: link, library: paths.root, creating: creating)
            for d in [paths.run, paths.cache] where access(d, F_OK) != 0 {
                try? FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            }
            return
        }
        server = nil
        // Never beside a running process that holds a log or index no longer at its name.
        if !creating {
            try CatalogFiles.checkNotOrphaned(paths)
            try CatalogFiles.checkLogNotLost(paths, accept: Library.acceptLostLog.load(ordering: .relaxed))
        }
        // Without a WAL file, or with an empty one (the last process to let go emptied it:
        // checkpointIfLast), opening the pool writes (GRDB fills the file with a transaction of
        // its own): a catalog without its schema is told first, by a connection that writes
        // nothing, so that nothing is made over it.
        var wal = stat()
        if !creating && (lstat(paths.database + "-wal", &wal) != 0 || wal.st_size == 0) {
            let hasSchema: Bool
            do {
                // Kept as it is at its close, like every connection of photogate's (no
                // checkpoint, the log file not removed): see `configuration`.
                var probeConfiguration = Configuration()
                // It waits for a lock as every connection does (the last process to let go holds
                // one while it checkpoints): 20 concurrent grants had one fail "busy".
                probeConfiguration.busyMode = .timeout(Library.busyTimeout)
                probeConfiguration.prepareDatabase { db in
                    if let connection = db.sqliteConnection { _ = pg_sqlite_keep_wal(UnsafeMutableRawPointer(connection)) }
                }
                let probe = try DatabaseQueue(path: paths.database, configuration: probeConfiguration)
                hasSchema = try probe.read { db in try db.tableExists("grdb_migrations") }
                try probe.close()
            } catch let e as DatabaseError {
                throw Library.map(e, paths: paths)
            }
            if !hasSchema {
                throw LibraryError.catalogDamaged(library: paths.root, why: "its database holds no catalog "
                    + "(its write-ahead log, photogate.sqlite-wal, was lost or damaged, or the file was replaced)")
            }
        }
        let pool: DatabasePool
        do {
            pool = try DatabasePool(path: paths.database, configuration: Library.configuration())
        } catch let e as DatabaseError {
            throw Library.map(e, paths: paths)
        }
        self.pool = pool
        let migrator = Schema.migrator
        do {
            // One query on the writer connection the pool opened anyway (a pool.read would open a
            // reader connection just for this): the applied migrations, against the known ones.
            let applied = try pool.writeWithoutTransaction { db in try migrator.appliedIdentifiers(db) }
            let known = migrator.migrations
            if applied.contains(where: { !known.contains($0) }) { throw LibraryError.libraryTooNew(paths.root) }
            // A library's catalog always has its schema (init makes it): one without is what is
            // left when the write-ahead log that held it was lost, truncated or damaged, or the
            // database was replaced. Carrying on would make an empty schema over the photos.
            if !creating && applied.isEmpty {
                throw LibraryError.catalogDamaged(library: paths.root, why: "its database holds no catalog "
                    + "(its write-ahead log, photogate.sqlite-wal, was lost or damaged, or the file was replaced)")
            }
            if creating || applied.count != known.count {
                try markInUse()
                try migrator.migrate(pool)
                wrote.store(true, ordering: .relaxed)
            }
        } catch let e as DatabaseError {
            throw Library.map(e, paths: paths)
        }
        noteLogIdentity()
        for d in [paths.store, paths.tmp, paths.run] where access(d, F_OK) != 0 {
            try? FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
    }

    static func map(_ e: DatabaseError, paths: LibraryPaths) -> LibraryError {
        switch e.resultCode {
        case .SQLITE_BUSY, .SQLITE_LOCKED: return .libraryBusy(paths.root)
        case .SQLITE_FULL: return .noSpace(paths.database)
        case .SQLITE_READONLY:
            // A library on read-only media (a backup on a write-protected disk, a snapshot):
            // SQLite writes even to read (its log and index); said plainly, not "attempt to write".
            return .io("the library at \(paths.root) cannot be written (its disk or files are read-only: a snapshot, a "
                + "write-protected disk?); photogate writes its catalog's log even to read it. Copy the library to a writable "
                + "place (cp -a) and use that copy with --library")
        case .SQLITE_CORRUPT, .SQLITE_NOTADB: return .libraryDamaged(e.message ?? "\(e)")
        case .SQLITE_CONSTRAINT: return .conflict(e.message ?? "constraint failed")
        default: return .io("database error: \(e.message ?? "\(e)")")
        }
    }

    /// Runs a write transaction, maps database errors, and rings the change bell after commit.
    @discardableResult
    func write<T>(_ body: (Database) throws -> T) throws -> T {
        let result = try server.map { try $0.write(notify: true, body) } ?? quietWrite(body)
        ringBell()
        if Library.notesCommits.load(ordering: .relaxed), let seq = try? lastChange() {
            Library.committed.withLock { c in
                if (c[paths.run] ?? -1) < seq { c[paths.run] = seq }
            }
        }
        return result
    }

    /// Set by the CLI (never by a mount): each change it commits is noted, so that before it
    /// returns it can wait for the running mounts to have applied it (`takeCommitted`).
    public static let notesCommits = Atomic<Bool>(false)
    private static let committed = Mutex<[String: Int64]>([:])

    /// The newest change this process committed in each library (its run folder and change
    /// sequence number), forgotten once taken.
    public static func takeCommitted() -> [(run: RunFolder, seq: Int64)] {
        committed.withLock { c in
            defer { c = [:] }
            return c.map { (RunFolder($0.key), $0.value) }
        }
    }

    /// A write transaction that does not ring the bell: for what no view shows (requests), so
    /// that it wakes no mount. It must not append to `changes` either (mounts follow that log).
    @discardableResult
    func quietWrite<T>(_ body: (Database) throws -> T) throws -> T {
        if let server { return try server.write(notify: false, body) }
        guard let pool else { throw LibraryError.io("the library is closed") }
        try markInUse()
        do {
            let result = try pool.write { g in try body(Database(sqlite: g)) }
            wrote.store(true, ordering: .relaxed)
            if logGone.load(ordering: .relaxed) { _ = saveGoneLog() }
            return result
        } catch let e as DatabaseError {
            throw Library.map(e, paths: paths)
        }
    }

    /// Set by `photogate verify --accept-lost-log` before it opens the library: a log lost after a
    /// kill is accepted (`CatalogFiles.checkLogNotLost`).
    public static let acceptLostLog = Atomic<Bool>(false)

    /// Before this process's first commit: the library is marked in use by its log, so that the
    /// log's loss before the last process lets go is seen (`CatalogFiles`). One lstat, once.
    /// A mount's daemon calls it at its start (it holds the library for long; a log replaced
    /// under it before its first commit was not told otherwise).
    public func markInUse() throws {
        guard server == nil, !marked.load(ordering: .relaxed) else { return }
        var st = stat()
        guard lstat(paths.database + "-wal", &st) == 0 else { return }
        let log = Library.identity(st)
        if CatalogFiles.markedFiles(paths) != CatalogFiles.currentMark(paths, log: log) { try CatalogFiles.mark(paths, log: log) }
        marked.store(true, ordering: .relaxed)
    }
    private let marked = Atomic<Bool>(false)

    /// Set by a commit; the library syncs the WAL once when it is released (see `deinit`).
    private let wrote = Atomic<Bool>(false)

    /// What a process committed is durable once it lets go of its library (a CLI command: before
    /// it exits), as when the last connection's checkpoint at close synced it; now it is one
    /// fdatasync of the WAL, also when mounts hold the database open (then no checkpoint ran).
    deinit { letGo() }

    /// What a process does when it is done with the library (its release, or a daemon's end,
    /// whose threads may still hold it): what it committed is synced, and the last process to let
    /// go checkpoints the log into the database (`checkpointIfLast`). Once; the library is closed
    /// after it (later calls fail as a closed database does).
    public func letGo() {
        guard !letGoDone.exchange(true, ordering: .relaxed) else { return }
        if let server { server.close(); return }
        if wrote.load(ordering: .relaxed), !checkpointLargeLog() { try? syncLog(rescue: false) }
        checkpointIfLast()
    }
    private let letGoDone = Atomic<Bool>(false)

    /// The catalog lives in the database file, not only in its write-ahead log, once the last
    /// process lets go of it: anyone who copies or backs up `photogate.sqlite` alone then copies
    /// every committed transaction, and a lost or damaged WAL loses nothing that was there
    /// before. SQLite does it at close when the closing connection is the last one to the
    /// database, in any process (it takes an exclusive lock to know): the reader connections
    /// close first, and the writer closes last with that checkpoint allowed. While other
    /// processes hold the database (running mounts), nothing is checkpointed here and a CLI
    /// command costs what it did; the last of them to end does it. The checkpoint writes the
    /// log's pages into the database and syncs it (synchronous=NORMAL).
    func checkpointIfLast() {
        guard let pool else { return }
        // A log damaged in place would put the zeros of its hole into the database.
        if logDamaged.load(ordering: .relaxed) { try? pool.close(); return }
        // A log removed or replaced under this process: what it holds goes into the database now
        // (the close below checkpoints only a log that is still at its name).
        var st = stat()
        let known = walIdentity.withLock { $0 }
        let gone = lstat(paths.database + "-wal", &st) != 0 || (known != nil && known != Library.identity(st))
        let goneButSaved = gone && saveGoneLog()
        pool.releaseMemory()
        pool.writeWithoutTransaction { db in
            if let c = db.sqliteConnection { _ = pg_sqlite_checkpoint_on_close(UnsafeMutableRawPointer(c)) }
        }
        try? pool.close()
        // Another file put at the log's name while this process held its own (a copy moved over
        // it): once nobody holds the library, it must not be replayed over the database that now
        // holds everything (its frames are older): moved aside, never deleted.
        if goneButSaved, lstat(paths.database + "-wal", &st) == 0, CatalogFiles.otherHolders(of: paths.database).isEmpty {
            let aside = paths.database + "-wal.replaced-" + Library.stampNow()
            if rename(paths.database + "-wal", aside) == 0 {
                FileHandle.standardError.write(Data("photogate: warning: another file was put at \(paths.database)-wal while photogate used its own; it was moved to \(aside)\n".utf8))
            }
        }
        CatalogFiles.unmarkIfLast(paths, logSaved: goneButSaved)
    }

    /// A WAL past this size after a process's writes is checkpointed and truncated when the
    /// library is released. Not SQLite's own 4 MB (1,000 pages): with no other connection open
    /// (no mount running), each process rebuilds the WAL's index from the whole file and forgets
    /// what was checkpointed, so between 1 MiB and 4 MB every CLI command read more of it at its
    /// start, and past 4 MB every commit's automatic checkpoint copied all of it into the
    /// database again (~1,000 page writes and 2,200 reads for a one-asset grant, 18.6 ms against
    /// 12.8 ms with a short log). A small log is truncated about once per 250 pages written.
    static let largeLog: Int64 = 1 << 20

    /// Left alone, a large WAL costs every later process: with no checkpoint at close (see
    /// `configuration`) the first connection of each process rebuilds the WAL's index by reading
    /// all of it (0.5 s for 375 MB here, for every CLI command and mount), and forgets what was
    /// checkpointed, so the next commit's checkpoint copies it all again. Truncating once ends
    /// that. Never waits: with readers in the way (mounts), the checkpoint copies what it can and
    /// SQLite's own checkpoints restart the log later. Returns true when the log was synced.
    func checkpointLargeLog() -> Bool {
        guard let pool else { return false }
        var st = stat()
        guard lstat(paths.database + "-wal", &st) == 0, Int64(st.st_size) > Library.largeLog else { return false }
        do {
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA busy_timeout = 0")
                defer { try? db.execute(sql: "PRAGMA busy_timeout = \(Int(Library.busyTimeout * 1000))") }
                _ = try? db.checkpoint(.truncate)
            }
        } catch {
            return false
        }
        // A truncating checkpoint synced the database; one that could not finish left the log.
        return lstat(paths.database + "-wal", &st) == 0 && st.st_size == 0
    }

    func read<T>(_ body: (Database) throws -> T) throws -> T {
        if let server { return try server.read(body) }
        guard let pool else { throw LibraryError.io("the library is closed") }
        do {
            return try pool.read { g in try body(Database(sqlite: g)) }
        } catch let e as DatabaseError {
            throw Library.map(e, paths: paths)
        }
    }

    /// Tells every running mount that the database changed (`RunFolder.ringBell`). In a mount's
    /// daemon (`ringsBellAside`) from a thread of its own, right after (`BellRinger`).
    public func ringBell() {
        if Library.ringsBellAside.load(ordering: .relaxed) {
            BellRinger.for(paths.runFolder).ring()
        } else {
            paths.runFolder.ringBell()
        }
    }

    /// Set by a mount's daemon before it serves a request: its commits ring the bell from a
    /// thread of their own (`BellRinger`), not from the close that committed. A command rings it
    /// itself before it returns (it may exit right after).
    public static let ringsBellAside = Atomic<Bool>(false)

    /// Makes every committed transaction durable now (the database runs with synchronous=NORMAL:
    /// the write-ahead log is synced lazily, at checkpoints). Throws when the log at its path is
    /// not the one SQLite writes to (removed or replaced while this process had it open): what
    /// was committed is then in a file that is gone once this process ends, and nobody may be
    /// told it is saved (an app's close fails with EIO instead).
    /// `rescue`: when the log is not the one SQLite writes to, checkpoint what it holds into the
    /// database file (`rescueLog`) instead of failing; not at the end of a process's use of the
    /// library (its last close checkpoints anyway, and its folder may be gone by then).
    ///
    /// Callers at once share syncs (`SyncCoalescer`): each returns once a sync that began after
    /// it asked has succeeded. Eight `cp` writers into one mount each waited for the log's
    /// `fdatasync` in turn (one file: the syncs run one at a time), and took 0.81 of one
    /// writer's time where a file system without a catalog took 0.42.
    public func syncLog(rescue: Bool = true) throws {
        // A server's commit is durable when it returns (the server's own log).
        guard pool != nil else { return }
        guard rescue else { return try syncLogNow(rescue: false) }
        try logSyncs.run { try syncLogNow(rescue: true) }
    }

    /// One sync of the log, with its checks (`syncLog`).
    private func syncLogNow(rescue: Bool) throws {
        let path = paths.database + "-wal"
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else {
            let e = errno
            if rescue && saveGoneLog() { return }
            throw LibraryError.notDurable("the catalog's write-ahead log \(path) cannot be opened (\(String(cString: strerror(e)))): "
                + "it was removed while photogate had it open, so this change cannot be made durable; stop the library's "
                + "processes (unmount its views) and check it with photogate verify")
        }
        defer { Glibc.close(fd) }
        var st = stat()
        // The database itself replaced by a rename (a restore over a running mount): this
        // process's commits go into the file it holds, which is gone once it ends.
        if stat(paths.database, &st) == 0, let db = dbIdentity.withLock({ $0 }), db != Library.identity(st) {
            throw LibraryError.notDurable("the catalog's database \(paths.database) was replaced by another file while photogate had it open, "
                + "so this change cannot be made durable; stop the library's processes (unmount its views) and check it with photogate verify")
        }
        if fstat(fd, &st) == 0, let known = walIdentity.withLock({ $0 }), known != Library.identity(st) {
            if rescue && saveGoneLog() { return }
            throw LibraryError.notDurable("the catalog's write-ahead log \(path) was replaced while photogate had it open, "
                + "so this change cannot be made durable; stop the library's processes (unmount its views) and check it with photogate verify")
        }
        // The same file, but no longer a whole log (truncated, or overwritten, in place): what it
        // held is gone, and a checkpoint would copy the zeros of the hole into the database. Nothing more goes into the database from this log (no
        // checkpoint at this process's end); the database keeps its last checkpoint.
        if !Library.logLooksWhole(fd: fd, size: Int(st.st_size)) && !logWholeUnderWriteLock(fd: fd) {
            logDamaged.store(true, ordering: .relaxed)
            throw LibraryError.notDurable("the catalog's write-ahead log \(path) was truncated or overwritten while photogate had it open, "
                + "so this change cannot be made durable; stop the library's processes (unmount its views) and check it with photogate verify")
        }
        guard fdatasync(fd) == 0 else { throw StoreWriter.ioError(errno, "cannot sync \(path)") }
    }

    /// Whether the log file (`fd`, `size` bytes) still looks like the log SQLite writes: empty,
    /// or a log header (magic 0x377f0682 or 0x377f0683, big-endian, at 0; page size at 8; salts
    /// at 16) whose salts the first frame (24-byte frame header, then a page) carries too. A log
    /// truncated in place under SQLite (`: > photogate.sqlite-wal`), which then wrote its next
    /// frames further on, has a hole of zeros where its header was. Read from the log alone:
    /// never the `-shm` index, whose descriptors SQLite holds POSIX locks through (a close of
    /// any other descriptor of that file drops them all, and another process then truncated the
    /// index under this one: SIGBUS).
    static func logLooksWhole(fd: Int32, size: Int) -> Bool {
        guard size > 0 else { return true }
        var header = [UInt8](repeating: 0, count: 32)
        guard size >= 32, pread(fd, &header, 32, 0) == 32 else { return false }
        let magic = header[0..<4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        guard magic == 0x377f_0682 || magic == 0x377f_0683 else { return false }
        let page = Int(header[8..<12].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
        guard page >= 512, page <= 65536 else { return false }
        guard size >= 32 + page + 24 else { return true }
        // The first frame: written with the header at every restart of the log (frames further
        // on may be an earlier round's, with its salts).
        var first = [UInt8](repeating: 0, count: 24)
        guard pread(fd, &first, 24, 32) == 24 else { return false }
        return first[8..<16].elementsEqual(header[16..<24])
    }

    /// The same look, taken again while this process holds the database's write lock (BEGIN
    /// IMMEDIATE): no other connection then restarts or truncates the log, which between the
    /// header's write and the first frame's, or between a stat and a read, looks like a damaged
    /// log (a hostile review measured 262 such reads in 10,901 under a busy writer). True when it
    /// is whole, or when the lock cannot be had (then nothing is claimed damaged).
    func logWholeUnderWriteLock(fd: Int32) -> Bool {
        (try? pool?.writeWithoutTransaction { db -> Bool in
            try db.execute(sql: "BEGIN IMMEDIATE")
            defer { try? db.execute(sql: "ROLLBACK") }
            var st = stat()
            guard fstat(fd, &st) == 0 else { return true }
            return Library.logLooksWhole(fd: fd, size: Int(st.st_size))
        }) ?? true
    }

    /// A running mount's look every few seconds (its change watcher calls it): when the log was
    /// removed or replaced under this process, what it committed is checkpointed into the database
    /// now (`rescueLog`), not at its next commit or at its end: a kill before then would lose it.
    /// Commands are refused meanwhile (`CatalogFiles.checkNotOrphaned`). One lstat when all is well.
    public func rescueIfLogGone() {
        guard pool != nil else { return }
        // The mark removed under a running mount (run/ cleaned away and made again): written
        // again, or a kill and a lost log after it would go untold.
        var st = stat()
        if marked.load(ordering: .relaxed), !logGone.load(ordering: .relaxed), CatalogFiles.markedFiles(paths) == nil,
           lstat(paths.database + "-wal", &st) == 0 {
            try? CatalogFiles.mark(paths, log: Library.identity(st))   // retried at the next look if run/ is not back yet
        }
        let known = walIdentity.withLock { $0 }
        let gone = lstat(paths.database + "-wal", &st) != 0 || (known != nil && known != Library.identity(st))
        if gone && !logDamaged.load(ordering: .relaxed) { _ = saveGoneLog() }
    }

    /// Set when the log was found truncated or overwritten in place: no checkpoint from it.
    private let logDamaged = Atomic<Bool>(false)
    /// The log's syncs, shared by the callers that ask at once (`syncLog`).
    let logSyncs = SyncCoalescer()

    /// With the log removed or replaced under this process, what it committed is only in the log
    /// file SQLite still has open: a checkpoint through the writer copies it all into the database
    /// file and syncs that (and resets the shared index, so that other processes stop reading a
    /// log that is not there). True when it all went in: durable after all.
    /// The log this process writes is no longer at its name: from now on every commit is
    /// checkpointed into the database as it is made (`quietWrite`), since a kill would lose what
    /// the removed file holds; this empties it now. Once it is empty and no other process holds
    /// the library, the in-use mark goes (`CatalogFiles`): what this process committed is all in
    /// the database. True when it all went in.
    func saveGoneLog() -> Bool {
        logGone.store(true, ordering: .relaxed)
        let saved = rescueLog()
        if saved && CatalogFiles.otherHolders(of: paths.database).isEmpty { CatalogFiles.unmark(paths) }
        return saved
    }
    private let logGone = Atomic<Bool>(false)

    func rescueLog() -> Bool {
        var frames = 0
        let done = (try? pool?.writeWithoutTransaction { db -> Bool in
            // What the log holds (a truncating checkpoint reports the emptied log: 0 frames).
            frames = try db.checkpoint(.passive).walFrameCount
            guard frames > 0 else { return true }
            let r = try db.checkpoint(.truncate)
            return r.walFrameCount == r.checkpointedFrameCount
        }) ?? false
        if done && frames > 0 {
            FileHandle.standardError.write(Data("photogate: warning: the catalog's write-ahead log \(paths.database)-wal was removed or replaced while in use; what was committed was checkpointed into the database file\n".utf8))
        }
        return done
    }

    /// The write-ahead log SQLite opened (device and inode), noted once the pool is open: with
    /// the log kept between processes (pg_sqlite_keep_wal) it is the same file for as long as
    /// this process has the library open, unless someone removes or replaces it.
    private let walIdentity = Mutex<[UInt64]?>(nil)

    static func identity(_ st: stat) -> [UInt64] { [UInt64(st.st_dev), UInt64(st.st_ino)] }

    func noteLogIdentity() {
        var st = stat()
        if lstat(paths.database + "-wal", &st) == 0 { walIdentity.withLock { $0 = Library.identity(st) } }
        if stat(paths.database, &st) == 0 { dbIdentity.withLock { $0 = Library.identity(st) } }
    }

    /// The database file this process opened (device and inode).
    private let dbIdentity = Mutex<[UInt64]?>(nil)

    static func now() -> Double { Date().timeIntervalSince1970 }

    static func record(_ db: Database, _ kind: ChangeKind, app: String? = nil, asset: Int64? = nil, detail: String? = nil) throws {
        // Cached: a grant of 10,000 assets records 10,000 changes (parsing each cost ~25% of it).
        try db.cachedStatement(sql: "INSERT INTO changes (at, kind, app_id, asset_rowid, detail) VALUES (?, ?, ?, ?, ?)")
            .execute(arguments: [now(), kind.rawValue, app, asset, detail])
    }

    /// The newest change sequence number.
    public func lastChange() throws -> Int64 {
        // Cached: every mount asks this whenever anything in run/ changes.
        try read { db in try Library.lastChange(db) }
    }

    /// The newest change sequence number, in an access (sequence numbers of deleted rows count).
    static func lastChange(_ db: Database) throws -> Int64 {
        if db.isPostgres { return try Int64.fetchOne(db.cachedStatement(sql: ServerCatalog.lastChangeSQL)) ?? 0 }
        return try Int64.fetchOne(db.cachedStatement(sql: "SELECT seq FROM sqlite_sequence WHERE name = 'changes'")) ?? 0
    }
}
