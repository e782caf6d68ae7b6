import FUSE
import Foundation
import Redaction
#if canImport(Glibc)
import Glibc
#endif

/// Reads in a no-open mount (`photogate mount --no-open`). The kernel opens files itself there,
/// so a read comes without a handle, and everything the open would have decided is decided here,
/// on every read the kernel sends: whether the inode is still the view's (revoked, replaced or an
/// alias: EACCES, as for a handle opened before), the redaction plan, a referenced original that
/// changed. Warm reads never get here: the kernel keeps each file's pages (FOPEN_KEEP_CACHE is
/// its default without OPEN), and a revoke, a new version or a strip-location change drops them
/// (Refresh.swift), so the next read asks again.
extension PhotoFS {
    /// `user`: another user's read (allow_other): served alike, but not the app's access.
    func readWithoutHandle(_ inode: Inode, offset: Int64, size: Int, user: UInt32?) throws(Errno) -> ReadReply {
        let node: AssetNode
        switch resolve(inode) {
        case .asset(let n)?: node = n
        // An old inode standing for a newer version (Aliases.swift): in a normal mount, a new open
        // through a name the kernel has not looked up again yet. Here it is as likely a
        // descriptor opened on the old version, and the kernel keeps the pages a read puts in
        // its cache: they would outlive later revokes and strip-location changes of the row,
        // which drop the row's current inode only. Refused, as a --no-passthrough mount refuses
        // an old handle's reads; a new open looks the name up again and reaches the new inode.
        case .aliased?: throw .accessDenied
        // Their content as it is now. Their attributes have no cache time and their mtime follows
        // their content (specialAttributes), so the kernel drops pages of an older content.
        case .controlFile(FixedInode.status)?: return .bytes(Self.slice(statusContent(), offset, size))
        case .controlFile(FixedInode.refused)?: return .bytes(Self.slice(refusedContent(), offset, size))
        // `.photogate/changes` reads from where its open got to, and `request` is written: both
        // need an open of their own.
        case .controlFile?: throw .notSupported
        case .sidecar(let n)?:
            let plan = try sidecarPlan(n, user: user)
            let fd = try openSidecarFile(n)
            defer { FDBudget.mount.close(fd) }
            if user == nil { recorder.note(n.key.rowID, .read, counts: offset == 0) }
            return .bytes(try AssetHandle.readBytes(fd, offset: offset, size: size, zeroing: plan))
        case nil: throw .accessDenied
        default: throw .isDirectory
        }
        if node.compatible {
            let bytes = try readCompatibleWithoutHandle(node, offset: offset, size: size)
            if user == nil { recorder.note(node.rowID, .read, counts: offset == 0) }
            return .bytes(bytes)
        }
        let plan = try readPlan(for: node, user: user)
        let fd = try openOriginal(node, user: user)
        defer { FDBudget.mount.close(fd) }
        let bytes = try AssetHandle.readBytes(fd, offset: offset, size: size, zeroing: plan)
        // The first read the daemon serves is the access (the kernel opened the file itself);
        // a read of the file's start counts one more, later reads only move the last time.
        if user == nil { recorder.note(node.rowID, .read, counts: offset == 0) }
        return .bytes(bytes)
    }

    static func slice(_ content: [UInt8], _ offset: Int64, _ size: Int) -> [UInt8] {
        let start = min(max(Int(offset), 0), content.count)
        return Array(content[start..<min(start + size, content.count)])
    }
}
