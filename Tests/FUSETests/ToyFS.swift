import FUSE
import Glibc
import Synchronization

/// A small in-memory filesystem for the mount tests: directories, regular files (in memory, or
/// served from a backing descriptor through `ReadReply.file`), a pollable file, injectable
/// errors, and counters the tests check (lookup balance, read sizes, readdir calls).
final class ToyFS: FileSystemOperations {
    struct Node {
        var attributes: Attributes
        var data: [UInt8] = []
        /// Children in insertion order (readdir offsets are indexes into this list).
        var childNames: [FileName] = []
        var children: [FileName: Inode] = [:]
        var parent: Inode = .root
        /// Serve reads from this descriptor with ReadReply.file.
        var backingFD: Int32?
        /// Hand this descriptor to the wrapper for kernel passthrough.
        var passthroughFD: Int32?
        var directIO = false
        var keepCache = false
        var noFlush = false
        var openError: Errno?
        var readError: Errno?
        var pollable = false
        var pollReady = false
    }

    struct State {
        var nodes: [Inode: Node] = [:]
        var nextInode: Inode = 2
        var nextHandle: UInt64 = 1
        var lookups: [Inode: UInt64] = [:]
        var forgetUnderflows = 0
        var entriesReturnedByReaddirplus = 0
        var readdirCalls = 0
        var readCalls: [Inode: Int] = [:]
        var flushCalls: [Inode: Int] = [:]
        var maxReadSize = 0
        var lookupErrors: [FileName: Errno] = [:]
        /// Every name looked up, in order.
        var lookupNames: [[UInt8]] = []
        var pollHandles: [Inode: PollHandle] = [:]
        var openHandles: Set<UInt64> = []
    }

    let state = Mutex(State())
    /// Runs inside the unlink handler (after the name is gone), on libfuse's worker thread.
    let unlinkHook = Mutex<(@Sendable (Inode, FileName) -> Void)?>(nil)
    let entryTimeout: Double
    let attrTimeout: Double
    /// Largest number of entries one readdir call returns.
    let readdirPage: Int

    init(entryTimeout: Double = 1.0, attrTimeout: Double = 1.0, readdirPage: Int = 1000) {
        self.entryTimeout = entryTimeout
        self.attrTimeout = attrTimeout
        self.readdirPage = readdirPage
        let now = Timespec.now
        let root = Node(attributes: Attributes(ino: .root, mode: FileMode.directory | 0o755, nlink: 2,
                                               atime: now, mtime: now, ctime: now))
        state.withLock { $0.nodes[.root] = root }
    }

    // MARK: Test-side API (changes "behind the kernel's back")

    @discardableResult
    func addFile(_ name: String, in parent: Inode = .root, data: [UInt8] = [], configure: (inout Node) -> Void = { _ in }) -> Inode {
        addFile(FileName(name), in: parent, data: data, configure: configure)
    }

    @discardableResult
    func addFile(_ name: FileName, in parent: Inode = .root, data: [UInt8] = [], configure: (inout Node) -> Void = { _ in }) -> Inode {
        state.withLock { st in
            var node = Node(attributes: Attributes(ino: 0, mode: FileMode.regular | 0o644, size: UInt64(data.count),
                                                   atime: .now, mtime: .now, ctime: .now))
            node.data = data
            configure(&node)
            return Self.insert(&st, node, name: name, parent: parent)
        }
    }

    @discardableResult
    func addDirectory(_ name: String, in parent: Inode = .root) -> Inode {
        state.withLock { st in
            let node = Node(attributes: Attributes(ino: 0, mode: FileMode.directory | 0o755, nlink: 2,
                                                   atime: .now, mtime: .now, ctime: .now))
            return Self.insert(&st, node, name: FileName(name), parent: parent)
        }
    }

    func mutate<R>(_ body: (inout State) -> R) -> R { state.withLock { body(&$0) } }

    func inode(named name: String, in parent: Inode = .root) -> Inode? {
        state.withLock { $0.nodes[parent]?.children[FileName(name)] }
    }

    /// Removes a name behind the kernel's back (the node stays until forgotten).
    func detach(_ name: FileName, from parent: Inode = .root) {
        state.withLock { st in
            st.nodes[parent]?.children[name] = nil
            st.nodes[parent]?.childNames.removeAll { $0 == name }
        }
    }

    private static func insert(_ st: inout State, _ node: Node, name: FileName, parent: Inode) -> Inode {
        var node = node
        let ino = st.nextInode
        st.nextInode += 1
        node.attributes.ino = ino
        node.parent = parent
        st.nodes[ino] = node
        st.nodes[parent]!.children[name] = ino
        st.nodes[parent]!.childNames.append(name)
        if node.attributes.isDirectory { st.nodes[parent]!.attributes.nlink += 1 }
        return ino
    }

    private func entry(_ st: inout State, _ ino: Inode) -> Entry {
        st.lookups[ino, default: 0] += 1
        return Entry(attributes: st.nodes[ino]!.attributes, entryTimeout: entryTimeout, attrTimeout: attrTimeout)
    }

    // MARK: FileSystemOperations

    func lookup(parent: Inode, name: FileName, context: RequestContext) throws(Errno) -> Entry {
        try state.withLock { (st: inout State) throws(Errno) -> Entry in
            st.lookupNames.append(name.bytes)
            if let error = st.lookupErrors[name] { throw error }
            guard let dir = st.nodes[parent] else { throw .noEntry }
            guard dir.attributes.isDirectory else { throw .notDirectory }
            guard let ino = dir.children[name] else { throw .noEntry }
            return entry(&st, ino)
        }
    }

    func forget(_ inode: Inode, lookups: UInt64) {
        state.withLock { st in
            let have = st.lookups[inode, default: 0]
            if lookups > have { st.forgetUnderflows += 1 }
            st.lookups[inode] = have > lookups ? have - lookups : nil
        }
    }

    func didReturnEntry(_ inode: Inode) {
        state.withLock { st in
            st.lookups[inode, default: 0] += 1
            st.entriesReturnedByReaddirplus += 1
        }
    }

    func getattr(_ inode: Inode, handle: UInt64?, context: RequestContext) throws(Errno) -> (Attributes, timeout: Double) {
        try state.withLock { (st: inout State) throws(Errno) -> (Attributes, timeout: Double) in
            guard let node = st.nodes[inode] else { throw .noEntry }
            return (node.attributes, attrTimeout)
        }
    }

    func setattr(_ inode: Inode, _ changes: SetAttributes, handle: UInt64?, context: RequestContext) throws(Errno) -> (Attributes, timeout: Double) {
        try state.withLock { (st: inout State) throws(Errno) -> (Attributes, timeout: Double) in
            guard var node = st.nodes[inode] else { throw .noEntry }
            if let mode = changes.mode { node.attributes.mode = (node.attributes.mode & FileMode.typeMask) | (mode & 0o7777) }
            if let uid = changes.uid { node.attributes.uid = uid }
            if let gid = changes.gid { node.attributes.gid = gid }
            if let size = changes.size {
                guard !node.attributes.isDirectory else { throw .isDirectory }
                if size < node.data.count { node.data.removeSubrange(Int(size)...) } else {
                    node.data += [UInt8](repeating: 0, count: Int(size) - node.data.count)
                }
                node.attributes.size = size
                node.attributes.mtime = .now
            }
            if let atime = changes.atime { node.attributes.atime = atime }
            if let mtime = changes.mtime { node.attributes.mtime = mtime }
            if changes.atimeNow { node.attributes.atime = .now }
            if changes.mtimeNow { node.attributes.mtime = .now }
            node.attributes.ctime = .now
            st.nodes[inode] = node
            return (node.attributes, attrTimeout)
        }
    }

    func opendir(_ inode: Inode, flags: Int32, context: RequestContext) throws(Errno) -> OpenReply {
        try state.withLock { (st: inout State) throws(Errno) -> OpenReply in
            guard let node = st.nodes[inode] else { throw .noEntry }
            guard node.attributes.isDirectory else { throw .notDirectory }
            return OpenReply(handle: 0)
        }
    }

    func readdir(_ inode: Inode, handle: UInt64, offset: Int64, plus: Bool, context: RequestContext) throws(Errno) -> [DirectoryEntry] {
        try state.withLock { (st: inout State) throws(Errno) -> [DirectoryEntry] in
            st.readdirCalls += 1
            guard let dir = st.nodes[inode] else { throw .noEntry }
            // Offsets: 0 = ".", 1 = "..", 2 + i = childNames[i].
            var out: [DirectoryEntry] = []
            var index = Int(offset)
            while out.count < readdirPage {
                if index == 0 {
                    out.append(DirectoryEntry(name: ".", attributes: dir.attributes, nextOffset: 1))
                } else if index == 1 {
                    let parent = st.nodes[dir.parent]?.attributes ?? dir.attributes
                    out.append(DirectoryEntry(name: "..", attributes: parent, nextOffset: 2))
                } else {
                    let i = index - 2
                    guard i < dir.childNames.count else { break }
                    let name = dir.childNames[i]
                    let child = st.nodes[dir.children[name]!]!
                    out.append(DirectoryEntry(name: name.bytes, attributes: child.attributes, nextOffset: Int64(index + 1),
                                              entryTimeout: entryTimeout, attrTimeout: attrTimeout))
                }
                index += 1
            }
            return out
        }
    }

    func open(_ inode: Inode, flags: Int32, context: RequestContext) throws(Errno) -> OpenReply {
        try state.withLock { (st: inout State) throws(Errno) -> OpenReply in
            guard let node = st.nodes[inode] else { throw .noEntry }
            if let error = node.openError { throw error }
            guard !node.attributes.isDirectory else { throw .isDirectory }
            let handle = st.nextHandle
            st.nextHandle += 1
            st.openHandles.insert(handle)
            return OpenReply(handle: handle, directIO: node.directIO, keepCache: node.keepCache,
                             nonSeekable: false, passthroughFD: node.passthroughFD, noFlush: node.noFlush)
        }
    }

    func flush(_ inode: Inode, handle: UInt64, context: RequestContext) throws(Errno) {
        state.withLock { $0.flushCalls[inode, default: 0] += 1 }
    }

    func release(_ inode: Inode, handle: UInt64, flags: Int32) {
        state.withLock { _ = $0.openHandles.remove(handle) }
    }

    func read(_ inode: Inode, handle: UInt64, offset: Int64, size: Int) throws(Errno) -> ReadReply {
        try state.withLock { (st: inout State) throws(Errno) -> ReadReply in
            guard st.openHandles.contains(handle) else { throw .badFile }
            guard let node = st.nodes[inode] else { throw .noEntry }
            st.readCalls[inode, default: 0] += 1
            st.maxReadSize = max(st.maxReadSize, size)
            if let error = node.readError { throw error }
            if let fd = node.backingFD { return .file(fd: fd, offset: offset, count: size) }
            let start = min(Int(offset), node.data.count)
            let end = min(start + size, node.data.count)
            return .bytes(Array(node.data[start..<end]))
        }
    }

    func write(_ inode: Inode, handle: UInt64, offset: Int64, data: UnsafeRawBufferPointer, context: RequestContext) throws(Errno) -> Int {
        try state.withLock { (st: inout State) throws(Errno) -> Int in
            guard st.openHandles.contains(handle) else { throw .badFile }
            guard var node = st.nodes[inode] else { throw .noEntry }
            let end = Int(offset) + data.count
            if end > node.data.count { node.data += [UInt8](repeating: 0, count: end - node.data.count) }
            node.data.replaceSubrange(Int(offset)..<end, with: data)
            node.attributes.size = UInt64(node.data.count)
            node.attributes.mtime = .now
            st.nodes[inode] = node
            return data.count
        }
    }

    func create(parent: Inode, name: FileName, mode: UInt32, flags: Int32, context: RequestContext) throws(Errno) -> (Entry, OpenReply) {
        try state.withLock { (st: inout State) throws(Errno) -> (Entry, OpenReply) in
            guard let dir = st.nodes[parent], dir.attributes.isDirectory else { throw .noEntry }
            if dir.children[name] != nil { throw .exists }
            let node = Node(attributes: Attributes(ino: 0, mode: FileMode.regular | (mode & 0o7777),
                                                   uid: context.uid, gid: context.gid,
                                                   atime: .now, mtime: .now, ctime: .now))
            let ino = Self.insert(&st, node, name: name, parent: parent)
            let handle = st.nextHandle
            st.nextHandle += 1
            st.openHandles.insert(handle)
            return (entry(&st, ino), OpenReply(handle: handle))
        }
    }

    func mkdir(parent: Inode, name: FileName, mode: UInt32, context: RequestContext) throws(Errno) -> Entry {
        try state.withLock { (st: inout State) throws(Errno) -> Entry in
            guard let dir = st.nodes[parent], dir.attributes.isDirectory else { throw .noEntry }
            if dir.children[name] != nil { throw .exists }
            let node = Node(attributes: Attributes(ino: 0, mode: FileMode.directory | (mode & 0o7777), nlink: 2,
                                                   atime: .now, mtime: .now, ctime: .now))
            let ino = Self.insert(&st, node, name: name, parent: parent)
            return entry(&st, ino)
        }
    }

    private func remove(_ st: inout State, parent: Inode, name: FileName, directory: Bool) throws(Errno) {
        guard let dir = st.nodes[parent] else { throw .noEntry }
        guard let ino = dir.children[name], let node = st.nodes[ino] else { throw .noEntry }
        if directory {
            guard node.attributes.isDirectory else { throw .notDirectory }
            guard node.children.isEmpty else { throw .notEmpty }
            st.nodes[parent]!.attributes.nlink -= 1
        } else if node.attributes.isDirectory {
            throw .isDirectory
        }
        st.nodes[parent]!.children[name] = nil
        st.nodes[parent]!.childNames.removeAll { $0 == name }
    }

    func unlink(parent: Inode, name: FileName, context: RequestContext) throws(Errno) {
        try state.withLock { (st: inout State) throws(Errno) in try remove(&st, parent: parent, name: name, directory: false) }
        if let hook = unlinkHook.withLock({ $0 }) { hook(parent, name) }
    }

    func rmdir(parent: Inode, name: FileName, context: RequestContext) throws(Errno) {
        try state.withLock { (st: inout State) throws(Errno) in try remove(&st, parent: parent, name: name, directory: true) }
    }

    func rename(parent: Inode, name: FileName, newParent: Inode, newName: FileName, flags: RenameFlags, context: RequestContext) throws(Errno) {
        try state.withLock { (st: inout State) throws(Errno) in
            guard let ino = st.nodes[parent]?.children[name] else { throw .noEntry }
            guard st.nodes[newParent]?.attributes.isDirectory == true else { throw .noEntry }
            let existing = st.nodes[newParent]!.children[newName]
            if flags.contains(.noReplace), existing != nil { throw .exists }
            if flags.contains(.exchange) {
                guard let other = existing else { throw .noEntry }
                st.nodes[parent]!.children[name] = other
                st.nodes[newParent]!.children[newName] = ino
                return
            }
            if let existing, existing != ino {
                try remove(&st, parent: newParent, name: newName, directory: st.nodes[existing]!.attributes.isDirectory)
            }
            st.nodes[parent]!.children[name] = nil
            st.nodes[parent]!.childNames.removeAll { $0 == name }
            st.nodes[newParent]!.children[newName] = ino
            st.nodes[newParent]!.childNames.append(newName)
            st.nodes[ino]!.parent = newParent
        }
    }

    func statfs(_ inode: Inode) throws(Errno) -> StatFS {
        StatFS(blockSize: 4096, blocks: 1000, blocksFree: 600, blocksAvailable: 500, files: 100, filesFree: 50)
    }

    func poll(_ inode: Inode, handle: UInt64, pollHandle: PollHandle?) throws(Errno) -> Int16 {
        state.withLock { st in
            guard let node = st.nodes[inode], node.pollable else { return Int16(POLLIN | POLLOUT) }
            if node.pollReady { return Int16(POLLIN) }
            if let pollHandle { st.pollHandles[inode] = pollHandle }
            return 0
        }
    }

    /// Makes a pollable file readable and wakes its poller (from any thread).
    func makeReady(_ inode: Inode) {
        let handle = state.withLock { st -> PollHandle? in
            st.nodes[inode]?.pollReady = true
            return st.pollHandles.removeValue(forKey: inode)
        }
        handle?.notify()
    }
}
