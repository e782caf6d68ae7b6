import FUSE
import Foundation
import PhotoLibrary
import Redaction
#if canImport(Glibc)
import Glibc
#endif

/// What a mount does with a node it serves as a JPEG (`AssetNode.compatible`: the app's
/// `compatible` option, a HEIF photo it did not create; the view names it `<stem>.jpg`). Its
/// attributes, opens and reads are those of the JPEG (`CompatibleFiles`), never of the original;
/// opening it for writing is refused (EACCES): the JPEG is not the photo, so a save of it cannot
/// be a version of it (the library's edit decision says `never` too, for renames over it).
extension PhotoFS {
    /// The node's JPEG, made now if needed (the request waits; CompatibleFiles.swift).
    func compatibleJPEG(_ n: AssetNode) throws(Errno) -> (path: String, size: UInt64) {
        try compatibles.jpeg(n) { () throws(Errno) -> Int32 in try openOriginal(n) }
    }

    /// Its attributes for a lookup or GETATTR: the JPEG's size, made first. A version that
    /// cannot be converted shows 0 bytes (and opening it fails with EIO); one that cannot be made
    /// now for another reason (a referenced original that changed, no descriptor left, a full
    /// disk) shows 0 bytes with no cache time, so that the next `stat` asks again.
    func compatibleAttributes(_ n: AssetNode) -> (Attributes, Double) {
        var a = attributes(n)
        do {
            a.size = try compatibleJPEG(n).size
            return (a, PhotoFS.longTimeout)
        } catch {
            a.size = 0
            return (a, compatibles.failedBefore(n) ? PhotoFS.longTimeout : 0)
        }
    }

    /// A node's attributes in a listing (readdirplus): a listing makes no JPEG, so one not made
    /// yet is listed with no cache time (the kernel asks GETATTR, which makes it, before it
    /// trusts the size).
    func listedAttributes(_ n: AssetNode) -> (Attributes, Double) {
        guard n.compatible else { return (attributes(n), PhotoFS.longTimeout) }
        var a = attributes(n)
        if let size = compatibles.sizeIfMade(n) {
            a.size = size
            return (a, PhotoFS.longTimeout)
        }
        a.size = 0
        return (a, compatibles.failedBefore(n) ? PhotoFS.longTimeout : 0)
    }

    /// A read open of a compatible node: its JPEG, opened from the cache (read by the kernel
    /// directly where passthrough is on). A JPEG evicted between the two is made again.
    func openCompatible(_ inode: Inode, _ node: AssetNode, aliased: Bool, user: UInt32?) throws(Errno) -> OpenReply {
        let (fd, path) = try openCompatibleFile(node)
        if user == nil { recorder.note(node.rowID, .read) }   // another user's read is not the app's
        var p = path
        let key = p.withUTF8 { PhotoFS.pathKey(UnsafeRawBufferPointer($0)) }
        return readOpened(inode, AssetHandle(rowID: node.rowID, ino: node.ino, fd: fd, plan: nil, user: user), owned: node.owned,
                          aliased: aliased, pathKey: key)
    }

    /// Opens the node's JPEG (within the descriptor budget), made first if needed.
    func openCompatibleFile(_ node: AssetNode) throws(Errno) -> (fd: Int32, path: String) {
        for _ in 0..<2 {
            let made = try compatibleJPEG(node)
            let fd = try FDBudget.mount.opening { Glibc.open(made.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) }
            if fd < 0 {
                let e = errno
                if e == EMFILE || e == ENFILE { throw .system(e) }
                if e == ENOENT { continue }   // evicted meanwhile: made again
                log("cannot open the JPEG of \(node.name): \(String(cString: strerror(e)))")
                throw .io
            }
            var st = stat()
            // The size the kernel was told is the JPEG's: a file of another size is not served.
            guard fstat(fd, &st) == 0, UInt64(st.st_size) == made.size else {
                FDBudget.mount.close(fd)
                throw .io
            }
            return (fd, made.path)
        }
        throw .io
    }

    /// A read of a compatible node in a no-open mount (NoOpen.swift).
    func readCompatibleWithoutHandle(_ node: AssetNode, offset: Int64, size: Int) throws(Errno) -> [UInt8] {
        let (fd, _) = try openCompatibleFile(node)
        defer { FDBudget.mount.close(fd) }
        return try AssetHandle.readBytes(fd, offset: offset, size: size, zeroing: nil)
    }
}
