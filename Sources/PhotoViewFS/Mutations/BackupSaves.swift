import FUSE
import Foundation
import PhotoLibrary

/// Saves by backup (issue 37): ImageMagick's `mogrify`, jhead and editors that keep a backup while
/// they save write a file they may write over this way: rename it to a backup name (`X~`,
/// `X.t`), create `X` anew, write and close it, then unlink the backup. On a folder that is one
/// file saved; in the library it was an asset renamed, a new asset, and the first one sent to
/// Recently Deleted (a new id, its albums and grants left behind). Since an app's own files show
/// writable (they are: Namespace/Attributes.swift), these tools take this path for them.
/// jhead's rotation saves another way: it writes the rotated file under a temp name, unlinks the
/// file, and renames the temp to its name.
///
/// So the unlink of the backup, when it is the app's own asset this mount renamed away from a
/// name that now holds a file this mount wrote after that rename, is the save it stands for: the
/// new file's bytes become the renamed asset's new version (a save by rename, `renameOver`: the
/// new file's own asset is dissolved into it), and the asset takes its name back. A backup that
/// is kept (an editor's `X~` left in place) is left alone; a backup deleted with nothing written
/// under its old name goes to Recently Deleted as any other `rm`. Likewise a rename of a file
/// this mount wrote to the name of the app's own asset it sent to Recently Deleted the moment
/// before (the last thing it did, within `deleteThenRename` seconds) takes that asset back and
/// saves the file as its new version: `rm X; mv T X` is `mv T X`.
struct BackupTrail {
    /// Own assets this mount renamed: the name they left (and the upload folder, nil at the top).
    var renamed: [Int64: (name: String, folder: Inode?, tick: UInt64)] = [:]
    /// Assets this mount's files became, by row.
    var created: [Int64: UInt64] = [:]
    /// The app's own asset this mount last sent to Recently Deleted, by name: only while it is
    /// the last thing noted (`tick`).
    var trashed: (row: Int64, name: String, folder: Inode?, tick: UInt64, at: Timespec)?
    var tick: UInt64 = 0
    static let deleteThenRename = 10
    /// Only the newest of each are kept: the three steps follow each other closely.
    static let capacity = 256

    mutating func noteRenamed(_ row: Int64, from name: String, folder: Inode?) {
        tick += 1
        renamed[row] = (name, folder, tick)
        if renamed.count > BackupTrail.capacity, let oldest = renamed.min(by: { $0.value.tick < $1.value.tick }) {
            renamed[oldest.key] = nil
        }
    }

    mutating func noteTrashed(_ row: Int64, name: String, folder: Inode?) {
        tick += 1
        trashed = (row, name, folder, tick, .now)
    }

    /// The asset just sent to Recently Deleted under `name` (in `folder`), if that was the last
    /// thing noted and recent.
    func justTrashed(_ name: String, folder: Inode?) -> Int64? {
        guard let t = trashed, t.tick == tick, t.name == name, t.folder == folder,
              Timespec.now.seconds - t.at.seconds <= BackupTrail.deleteThenRename else { return nil }
        return t.row
    }

    mutating func noteCreated(_ row: Int64) {
        tick += 1
        created[row] = tick
        if created.count > BackupTrail.capacity, let oldest = created.min(by: { $0.value < $1.value }) {
            created[oldest.key] = nil
        }
    }
}

extension PhotoFS {
    /// The unlink of `backup` (the app's own asset `rowID`, at the top or in upload folder
    /// `folder`) when it ends a save by backup (see `BackupTrail`): the file now under the name
    /// the backup left becomes the backup's new version, and the backup its name again. False
    /// when this unlink is no such save (the caller deletes as usual).
    func saveByBackup(rowID: Int64, backup: String, folder: Inode?) throws(Errno) -> Bool {
        guard access == .readWrite, let left = backupTrail.withLock({ $0.renamed[rowID] }), left.folder == folder else { return false }
        // What the old name holds now: a file this mount wrote after the rename.
        let newRow: Int64?
        if let folder {
            newRow = switch folders.withLock({ $0[folder]?.children[left.name] }) {
            case .asset(let r)?: r
            case .session(let s)?: session(s).flatMap { f in f.run { f.committedRowID } }
            default: nil
            }
        } else {
            newRow = model.withLock { $0.byName[left.name] }
        }
        guard let newRow, newRow != rowID, let written = backupTrail.withLock({ $0.created[newRow] }), written > left.tick,
              let (source, target) = model.withLock({ m in m.nodes[newRow].flatMap { s in m.nodes[rowID].map { (s, $0) } } }),
              source.owned, target.owned else { return false }
        guard try renameOver(sourceRow: newRow, sourceIno: source.ino, target: target) else { return false }
        backupTrail.withLock { t in t.renamed[rowID] = nil; t.created[newRow] = nil }
        // Saved. The asset takes back the name it left (as the app's own name, like any rename).
        let name = folder == nil ? left.name : flattenedName(left.name, renaming: rowID)
        do { try library.renameOwnAsset(rowID: rowID, app: appID, access: access, to: name) } catch {
            log("\(backup) saved as the new version of \(target.name), which keeps that name: \(error)")
            return true
        }
        if let folder {
            setFolderChild(folder, backup, nil, ifCurrently: .asset(rowID: rowID))
            setFolderChild(folder, left.name, .asset(rowID: rowID))
        }
        log("\(left.name) saved over its backup \(backup) by \(appID): a new version of it")
        refresh(handled: [rowID])
        invalidator?.invalidateEntry(parent: folder ?? FixedInode.root, name: Array(left.name.utf8))
        return true
    }

    /// The rename of a file this mount wrote (the app's asset `sourceRow`) to `name` (at the top,
    /// or in upload folder `folder`), when the app's own asset of that name was sent to Recently
    /// Deleted by this mount just before (see `BackupTrail`): that asset comes back, and the file
    /// becomes its new version. False when this rename is no such save (the caller renames).
    func saveOverJustDeleted(sourceRow: Int64, name: String, folder: Inode?) throws(Errno) -> Bool {
        guard access == .readWrite, let (row, wrote) = backupTrail.withLock({ t in t.justTrashed(name, folder: folder).map { ($0, t.created[sourceRow] != nil) } }),
              wrote, row != sourceRow else { return false }
        do { try library.restoreOwnAsset(rowID: row, app: appID) } catch {
            log("\(name) is not taken back from Recently Deleted: \(error)")
            return false
        }
        backupTrail.withLock { $0.trashed = nil }
        refresh()
        guard let (source, target) = model.withLock({ m in m.nodes[sourceRow].flatMap { s in m.nodes[row].map { (s, $0) } } }),
              try renameOver(sourceRow: sourceRow, sourceIno: source.ino, target: target) else {
            // Back as it was before the unlink; the file keeps its own name.
            return false
        }
        backupTrail.withLock { $0.created[sourceRow] = nil }
        if let folder { setFolderChild(folder, name, .asset(rowID: row)) }
        log("\(source.name) saved as the new version of \(name), which \(appID) had just deleted")
        return true
    }
}
