import Foundation
import GRDB
import PhotoLibrary
import Redaction
#if canImport(Glibc)
import Glibc
#endif

/// A file indexed in place, scanned once and then catalogued as many times as a bulk fill asks
/// (`Library.insertReferenced`): what `import --reference` learns from a file, without the hash.
public struct ReferencedOriginal: Sendable {
    public let path: String
    public let facts: NewAssetFacts

    /// Scans `path` as `import --reference` does (media kind, capture date, location, redaction
    /// plan, size). The content hash is a placeholder built from each row's id (see
    /// `insertReferenced`): hashing a benchmark's gigabytes would take minutes.
    public init(scanning path: String) throws {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw StoreWriter.ioError(errno, "open \(path)") }
        defer { Glibc.close(fd) }
        let (scan, size, date) = try StoreWriter.scan(fd: fd)
        self.path = URL(fileURLWithPath: LibraryPaths.absolute(path)).resolvingSymlinksInPath().path
        facts = NewAssetFacts(scan: scan, byteSize: size, contentHash: "", fileDate: date)
    }
}

/// One row of a bulk fill.
public struct BulkAsset: Sendable {
    /// The display name; must be valid and not in the catalog yet (the fill renames nothing).
    public var name: String
    /// Index into the fill's originals: the file this asset's bytes are read from.
    public var original: Int
    /// Overrides the capture date the scan found (so that a fill's assets sort apart).
    public var captureDate: Date?
    /// Cloud-shared: the asset joins the fill's shared album, as with `import --shared`.
    public var shared: Bool
    /// The app that made it (as if it wrote the photo into an add-only mount), and when it was
    /// added (default: now).
    public var owner: AppID?
    public var addedAt: Date?

    public init(name: String, original: Int, captureDate: Date? = nil, shared: Bool = false, owner: AppID? = nil, addedAt: Date? = nil) {
        self.name = name
        self.original = original
        self.owner = owner
        self.addedAt = addedAt
        self.captureDate = captureDate
        self.shared = shared
    }
}

extension Library {
    /// Adds `count` assets indexed in place, in one transaction, for catalogs of benchmark size
    /// (a million rows in seconds; `photogate debug-fill-catalog`). Each row is the one
    /// `import --reference` would add for a new file — the same columns, an `insert` in the change
    /// log, the apps' history — with two differences: names must be free (a name already taken
    /// fails the whole fill; nothing is renamed or deduplicated), and the content hash is a
    /// placeholder (`sha256:` and zeros and the id), which `verify` reports as a mismatch.
    /// All rows go in first, then their change log entries, so the assets' pages stay together.
    @discardableResult
    public func insertReferenced(_ originals: [ReferencedOriginal], count: Int, sharedAlbum: String = "Shared photos",
                                 _ row: (Int) -> BulkAsset) throws -> Int {
        guard count > 0 else { return 0 }
        // Per original: what every row made from it shares (the plan serialized once).
        struct Shared { var kind: String; var mediaClass: String; var plan: Data?; var refusal: String? }
        let common: [Shared] = originals.map { o in
            let s = o.facts.scan
            switch s.redaction {
            case .plan(let p): return Shared(kind: s.kind.rawValue, mediaClass: s.kind.isVideo ? "video" : "photo",
                                             plan: Data(p.serialized()), refusal: nil)
            case .refuse(let why): return Shared(kind: s.kind.rawValue, mediaClass: s.kind.isVideo ? "video" : "photo",
                                                 plan: nil, refusal: why)
            }
        }
        let zeros = String(repeating: "0", count: 48)
        // Random ids, as every asset gets, but handed out in ascending order: the id and hash
        // indexes then grow at their ends instead of being written all over (34 s -> a few for a
        // million rows on a 2-vCPU machine).
        var rng = SystemRandomNumberGenerator()
        var idValues = Set<UInt64>(minimumCapacity: count)
        while idValues.count < count { idValues.insert(UInt64.random(in: 0...UInt64.max, using: &rng)) }
        let ids = idValues.sorted()
        idValues = []
        let hexDigits = Array("0123456789abcdef".utf8)
        func hex(_ v: UInt64) -> String {
            String(unsafeUninitializedCapacity: 16) { buf in
                for k in 0..<16 { buf[k] = hexDigits[Int((v >> UInt64(60 - 4 * k)) & 0xF)] }
                return 16
            }
        }
        return try write { db in
            let insert = try db.cachedStatement(sql: """
                INSERT INTO assets (rowid, id, display_name, owner_app, owner_name, media_kind, media_class, byte_size, capture_date,
                    added_at, has_location, content_hash, is_shared, store_path, reference_path, redaction, redaction_refusal,
                    redaction_version)
                VALUES (\(Library.nextAssetRowIDSQL), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?)
                """)
            let now = Library.now()
            var rowIDs: [Int64] = []
            rowIDs.reserveCapacity(count)
            var shared: [Int64] = []
            for i in 0..<count {
                let a = row(i)
                guard originals.indices.contains(a.original) else {
                    throw LibraryError.invalid("bulk fill: row \(i) names original \(a.original) of \(originals.count)")
                }
                guard case .success = DisplayName.validate(Array(a.name.utf8)) else {
                    throw LibraryError.invalid("bulk fill: invalid name '\(a.name)'")
                }
                let o = originals[a.original], c = common[a.original]
                let id = hex(ids[i])
                let capture = (a.captureDate ?? o.facts.scan.captureDate ?? o.facts.fileDate).timeIntervalSince1970
                if let owner = a.owner { _ = try Library.ensureApp(db, owner) }
                try insert.execute(arguments: [id, a.name, a.owner?.rawValue, a.owner.map { _ in a.name }, c.kind, c.mediaClass,
                                               Int64(o.facts.byteSize), capture, a.addedAt.map { $0.timeIntervalSince1970 } ?? now,
                                               o.facts.scan.hasLocation, "sha256:" + zeros + id, a.shared, o.path,
                                               c.plan, c.refusal, MediaScanner.version])
                rowIDs.append(db.lastInsertedRowID)
                if a.shared { shared.append(db.lastInsertedRowID) }
            }
            let change = try db.cachedStatement(sql: "INSERT INTO changes (at, kind, app_id, asset_rowid, detail) VALUES (?, '\(ChangeKind.insert.rawValue)', NULL, ?, NULL)")
            for r in rowIDs { try change.execute(arguments: [now, r]) }
            if !shared.isEmpty {
                try Library.validateAlbumName(sharedAlbum)
                let album = try Library.createAlbum(db, sharedAlbum, shared: true, mustBeNew: false)
                _ = try Library.addToAlbum(db, album, shared)
            }
            try Library.refreshSetSelections(db, rowIDs)
            try ViewDelta.record(db, before: [:], after: ViewDelta.visibility(db, rowIDs))
            return count
        }
    }
}
