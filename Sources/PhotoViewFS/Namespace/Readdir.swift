import FUSE
import Foundation
import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

extension PhotoFS {
    // MARK: directories

    public func opendir(_ inode: Inode, flags: Int32, context: RequestContext) throws(Errno) -> OpenReply {
        noteAccess()
        let (a, _) = try attributesOrStale(of: inode)
        guard a.isDirectory else { throw .notDirectory }
        // The kernel may keep listings: `invalidate` drops them when names change.
        return OpenReply(handle: 0, keepCache: true, cacheReaddir: true)
    }

    /// Assets returned per readdir call (a kernel buffer holds ~30 readdirplus entries).
    static let readdirBatch = 128

    public func readdir(_ inode: Inode, handle: UInt64, offset: Int64, plus: Bool, context: RequestContext) throws(Errno) -> [DirectoryEntry] {
        let t = PhotoFS.longTimeout
        var out: [DirectoryEntry] = []
        var index: Int64 = 0
        func add(_ name: String, _ a: Attributes, attrTimeout: Double = t) {
            index += 1
            if index > offset {
                out.append(DirectoryEntry(name: Array(name.utf8), attributes: a, nextOffset: index, entryTimeout: t, attrTimeout: attrTimeout))
            }
        }
        guard let node = resolve(inode) else { throw .noEntry }
        let own = dirAttributes(inode, writable: false)
        add(".", own)
        add("..", dirAttributes(FixedInode.root, writable: false))
        switch node {
        case .root:
            let (showsAlbums, canEdit) = model.withLock { m in (m.policy.showsAlbums, m.policy.canEditAlbums) }
            // `.photogate/` is reachable by path but not listed: backups (`rsync -a M/ b/`,
            // `cp -a M/. b/`, `tar c -C M .`) copy the photos, not the app's control files.
            if showsAlbums {
                add("Albums", dirAttributes(FixedInode.albums, writable: canEdit))
                add("Shared", dirAttributes(FixedInode.shared, writable: false))
            }
            // Assets: only a batch after `offset` (the wrapper asks again from the last offset), so
            // listing n assets costs O(n), not O(n^2): a call used to copy the whole listing.
            // listing[k] has index fixed + k + 1.
            let fixed = index
            let (nodes, start, total) = model.withLock { m -> ([AssetNode], Int, Int) in
                let start = Int(max(0, offset - fixed))
                guard start < m.listing.count else { return ([], start, m.listing.count) }
                let end = min(m.listing.count, start + PhotoFS.readdirBatch)
                return (m.listing[start..<end].compactMap { m.nodes[$0] }, start, m.listing.count)
            }
            index = fixed + Int64(min(start, total))
            for n in nodes {
                index += 1
                // A JPEG not made yet (Compatible/) is listed without a cache time for its size.
                let (a, at) = listedAttributes(n)
                out.append(DirectoryEntry(name: Array(n.name.utf8), attributes: a, nextOffset: index, entryTimeout: t, attrTimeout: at))
            }
            if start + nodes.count < total { return out }
            // Sidecars, beside their photos (issue 37): after the assets, sorted by name.
            for n in model.withLock({ m in m.sidecars.values.sorted { $0.name < $1.name } }) {
                add(n.name, sidecarAttributes(n))
            }
            // Files this mount is writing (not yet assets) are listed in a read-write mount only,
            // those at the top (one being written in a folder is listed there: it has its name
            // at the top once it is an asset, `flattenedName`, and no lookup there finds it).
            if access == .readWrite {
                let all = files.withLock { fs in fs.values.filter { $0.album == nil && $0.folder == nil } }
                let pending = all.compactMap { f in f.run { f.isWriting && !f.hidden ? (f.name, sessionAttributes(f)) : nil } }
                    .sorted { $0.0 < $1.0 }
                let shown = model.withLock { m in Set(pending.map(\.0).filter { m.byName[$0] != nil }) }
                for (name, a) in pending where !shown.contains(name) { add(name, a) }
                // Sorted once per change (rootFolderNames); attributes only for what this call
                // returns (each call listed every folder's, and sorted them all again).
                let names = rootFolderNames.withLock { cached -> [String] in
                    if let cached { return cached }
                    let made = rootFolders.withLock { Array($0.keys) }.sorted()
                    cached = made
                    return made
                }
                for name in names where !shown.contains(name) {
                    index += 1
                    guard index > offset else { continue }
                    if out.count >= PhotoFS.readdirBatch { return out }
                    // A name the view has (an asset a grant showed since the folder was made)
                    // leads to that asset, as a lookup finds it: listed once.
                    guard let ino = rootFolders.withLock({ $0[name] }), model.withLock({ $0.byName[name] == nil }),
                          let a = folderAttributes(ino) else { continue }
                    out.append(DirectoryEntry(name: Array(name.utf8), attributes: a, nextOffset: index, entryTimeout: t, attrTimeout: t))
                }
            }
        case .albumsFolder(let shared):
            let list = model.withLock { m in
                (shared ? m.shared : m.albums).values.sorted { $0.name < $1.name }
                    .map { ($0.name, dirAttributes($0.ino, writable: !$0.isShared && m.policy.canEditAlbums)) }
            }
            for (name, a) in list { add(name, a) }
        case .control:
            add("status", specialAttributes(FixedInode.status))
            if !noOpen { add("changes", specialAttributes(FixedInode.changes)) }
            add("request", specialAttributes(FixedInode.request))
            add("refused", specialAttributes(FixedInode.refused))
        case .uploadFolder:
            // A batch after `offset`, from names sorted once per change: entry k of the sorted
            // names has index fixed + k + 1 (so a listing of n costs O(n), not O(n^2 log n)).
            let fixed = index
            var start = Int(max(0, offset - fixed))
            while true {
                guard let (entries, total) = folderListing(inode, from: start, limit: PhotoFS.readdirBatch) else { throw .noEntry }
                for e in entries {
                    out.append(DirectoryEntry(name: Array(e.name.utf8), attributes: e.attributes, nextOffset: fixed + Int64(e.position) + 1,
                                              entryTimeout: t, attrTimeout: t))
                }
                start += PhotoFS.readdirBatch
                // A batch whose entries were all left out (files no longer being written) is not
                // the end of the listing: go on until one lists something, or the names end.
                if !out.isEmpty || start >= total { break }
            }
        case .album:
            // A batch after `offset`, as for the root: members[k] has index 2 + k + 1.
            let fixed = index
            guard let (members, start, total) = model.withLock({ m -> ([AssetNode], Int, Int)? in
                guard let al = m.album(ino: inode) else { return nil }
                let start = Int(max(0, offset - fixed))
                guard start < al.listing.count else { return ([], start, al.listing.count) }
                return (al.listing[start..<min(al.listing.count, start + PhotoFS.readdirBatch)].compactMap { m.nodes[$0] }, start, al.listing.count)
            }) else { throw .noEntry }
            // Offsets: members[k] is fixed + k + 1, then the files being written in the album.
            index = fixed + Int64(min(start, total))
            for n in members {
                let (a, at) = listedAttributes(n)
                add(n.name, a, attrTimeout: at)
            }
            if start + members.count < total { return out }
            // The members' sidecars, beside them (issue 37).
            for n in model.withLock({ m in m.album(ino: inode).map { m.sidecars(besideRows: Set($0.listing)) } ?? [] }) {
                add(n.name, sidecarAttributes(n))
            }
            if access == .readWrite,
               let (album, memberNames) = model.withLock({ m in m.album(ino: inode).map { ($0.name, Set($0.byName.keys)) } }) {
                let pending = albumSessions.withLock { $0[album] ?? [:] }.sorted { $0.key < $1.key }
                for (name, ino) in pending where !memberNames.contains(name) {
                    if let f = session(ino), let a = f.run({ f.isWriting && !f.hidden ? sessionAttributes(f) : nil }) { add(name, a) }
                }
            }
        case .controlFile, .asset, .aliased, .session, .sidecar:
            throw .notDirectory
        }
        return out
    }
}
