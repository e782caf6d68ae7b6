import FUSE

/// Fixed inodes, the same in every mount (they reveal nothing).
enum FixedInode {
    static let root: Inode = 1
    static let albums: Inode = 2
    static let shared: Inode = 3
    static let control: Inode = 4      // .photogate/
    static let status: Inode = 5
    static let changes: Inode = 6
    static let request: Inode = 7
    static let refused: Inode = 8     // .photogate/refused
    static let all: Set<Inode> = [root, albums, shared, control, status, changes, request, refused]
}

/// One visible asset in a mount.
struct AssetNode: Sendable, Equatable {
    let rowID: Int64
    let assetID: String
    let name: String
    let ino: Inode
    let size: UInt64
    let mtime: Int
    let ctime: Int
    let path: String
    /// Its original was copied into the store (else it is referenced in place, imported with
    /// `--reference`, and checked for changes at each open). From the catalog, not from the path.
    let inStore: Bool
    let strip: Bool
    let owned: Bool
    let shared: Bool
    let selected: Bool
    let picked: Bool
    /// The app may save over it (the library's one edit decision, at the view's last refresh):
    /// its mode says writable. The open for writing asks the library again, and enforces.
    let editable: Bool
    /// Served as a JPEG made from its HEIF original (Compatible/): its size is the JPEG's.
    var compatible: Bool = false
    /// `rm` moves it to Recently Deleted, and `mv` may rename it: the library's one decision on
    /// its facts, at the view's last refresh (the mount keeps no facts to ask it with). A rename
    /// is asked again, and enforced, by the library.
    var deletable = false, renamable = false
    /// 1 + the albums of the view it is listed in: one inode, listed in several folders, counted
    /// once by `du`, `tar` and `rsync -H`.
    var nlink: UInt32 = 1
}

struct AlbumNode: Sendable {
    let name: String
    let ino: Inode
    let isShared: Bool
    /// member name -> row id
    var byName: [String: Int64]
    var listing: [Int64]
}
