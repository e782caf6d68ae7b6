import Foundation
import LibraryRun
#if canImport(Glibc)
import Glibc
#endif

/// What `photogate run` keeps out of the sandbox, and how, for the folders the user passes in with
/// --bind and --ro-bind (bubblewrap binds them recursively, with every mount below them).
///
/// A hidden path is matched by where it really is, not by how it is spelled. Each bound folder is
/// opened once and bound by that descriptor; its place is the kernel's path of the descriptor.
/// Each hidden path's places are where it resolves, on the mount the kernel says it is on, plus
/// every other place the mount table shows the same folder or a part of it (bind mounts of it, of
/// a folder above or inside it, and mounts inside it). Then, for each bound folder:
/// - a place of the photo library (or of a proc mount) inside it gets an empty tmpfs on top, if
///   it is bound read-only; bound writable, it refuses the run: the command could rename the
///   folders between it and the library, and so move the library out from under where the next
///   run puts the mask (where a library it made itself, a decoy, would then be masked instead);
/// - a place of another app's view inside it refuses the run: a mask would leave that mount in
///   the sandbox's mount table, with its app id;
/// - a bound folder inside any hidden place refuses the run (it would bypass the mask).
/// Paths are compared as bytes, as the kernel names files (String's comparison calls canonically
/// equivalent names equal, folds a combining mark after "/" into the "/", and cannot hold a name
/// that is not UTF-8).
struct SandboxHiding {
    struct Hidden {
        /// What a bound folder holding it gets.
        enum Policy {
            /// A tmpfs on top.
            case mask
            /// A tmpfs on top where the folder is bound read-only; a writable bind is refused.
            case maskReadOnly
            /// The bind is refused.
            case refuse
        }
        let path: [UInt8]
        /// What it is, for the error message ("the photo library", ...).
        let what: String
        let policy: Policy
    }

    struct Refusal: Error, CustomStringConvertible {
        let description: String
    }

    /// A folder to bind, opened once (O_PATH, following symlinks as bubblewrap would): the checks
    /// run on what the descriptor is, and bubblewrap binds that descriptor (--bind-fd), so a
    /// symlink swapped after the check, or a path that reads differently in bubblewrap's process
    /// (/dev/fd/N), cannot put something else in its place.
    struct Source {
        let spelled: String
        let fd: Int32
        /// Where it is in this mount namespace (the kernel's path of the descriptor).
        let real: [UInt8]
    }

    /// A sandbox path to cover: a folder with an empty tmpfs, a file with /dev/null.
    struct Mask: Hashable {
        let path: [UInt8]
        let isFolder: Bool
    }

    let hidden: [Hidden]
    let mounts: [MountTable.Entry]
    /// A folder opened to be named, not read (O_PATH), not following a final symlink.
    static func openFolder(_ path: String) -> Int32 { Glibc.open(path, oPath | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }

    /// Symlinks on the way to the library as its path is spelled (`symlinks(along:)`): every run
    /// finds the library by that path, so a command that could point one elsewhere (a writable
    /// bind holding it) could have the next run find, and cover, a library of its own instead.
    var links: [[UInt8]] = []

    /// Every symlink met in resolving `path` (an absolute path), one name at a time as the kernel
    /// does: on the path as spelled, and on the way through each link's target (a link to a
    /// folder holding a link to the library counts both), each as the path where it is.
    static func symlinks(along path: [UInt8]) -> [[UInt8]] {
        let slash = UInt8(ascii: "/")
        var out: [[UInt8]] = []
        var pending = path.split(separator: slash).map(Array.init)
        var at: [UInt8] = [slash]   // resolved so far: no symlink in it
        var hops = 0
        while !pending.isEmpty {
            let c = pending.removeFirst()
            if c == [UInt8(ascii: ".")] { continue }
            if c == [UInt8(ascii: "."), UInt8(ascii: ".")] {
                if let i = at.lastIndex(of: slash) { at = i == 0 ? [slash] : Array(at[..<i]) }
                continue
            }
            let next = joinedPath(at, [slash] + c)
            var st = stat()
            guard withCPath(next, { lstat($0, &st) }) == 0, st.st_mode & S_IFMT == S_IFLNK else {
                at = next
                continue
            }
            out.append(next)
            hops += 1
            // A loop, or gone meanwhile: the kernel would fail too.
            guard hops <= 40, let target = readLink(next), !target.isEmpty else { break }
            if target.first == slash { at = [slash] }
            pending = target.split(separator: slash).map(Array.init) + pending
        }
        return out
    }

    static func open(_ path: String) throws(Refusal) -> Source {
        let fd = Glibc.open(path, oPath | O_CLOEXEC)
        guard fd >= 0 else { throw Refusal(description: "\(path): \(String(cString: strerror(errno)))") }
        guard let real = realPath(fd: fd) else {
            Glibc.close(fd)
            throw Refusal(description: "\(path): cannot tell where it is")
        }
        return Source(spelled: path, fd: fd, real: real)
    }

    /// The app's view at `path`, opened once and checked to be it: the root of a photogate mount
    /// whose daemon says it serves `app` with `access`. Bound by that descriptor, like the user's
    /// folders: the mount point is a path, and a process that can rename in its parent could swap
    /// it, between the mount and bubblewrap's bind, for a symlink to the library or to another
    /// app's view (a run's own folder is in the library, out of every sandbox's reach; a view
    /// mounted by the user may be anywhere).
    /// `folder`: a descriptor of the folder the run made for its mount, opened before the mount,
    /// so that the view is found in that folder whatever it is called by then; nil for a mount
    /// that was already there (found by its path).
    static func openView(_ path: String, in folder: Int32?, app: String, access: String,
                         mounts: [MountTable.Entry]) throws(Refusal) -> (source: Source, mount: MountTable.Entry) {
        let flags = oPath | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
        let fd = folder.map { openat($0, (path as NSString).lastPathComponent, flags) } ?? Glibc.open(path, flags)
        guard fd >= 0 else { throw Refusal(description: "the view at \(path): \(String(cString: strerror(errno)))") }
        func refuse(_ why: String) -> Refusal {
            Glibc.close(fd)
            return Refusal(description: "the view at \(path) \(why)")
        }
        guard let real = realPath(fd: fd), let m = mount(of: fd, in: mounts) else { throw refuse("cannot be told apart from what took its place") }
        guard m.type == "fuse.photogate", m.rootBytes == [UInt8(ascii: "/")], m.mountPointBytes == real else {
            throw refuse("is not a photogate mount any more (\(m.type) at \(String(decoding: real, as: UTF8.self)))")
        }
        // The daemon behind it names its app and access (read through the descriptor, not the path).
        let sfd = openat(fd, ".photogate/status", O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard sfd >= 0 else { throw refuse("does not answer for its app: \(String(cString: strerror(errno)))") }
        let bytes = MountTable.readWholeBytes(fd: sfd) ?? []
        Glibc.close(sfd)
        let status = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any]
        guard status?["app"] as? String == app, status?["access"] as? String == access else {
            throw refuse("is another view (\(status?["app"] as? String ?? "?"), \(status?["access"] as? String ?? "?"))")
        }
        return (Source(spelled: path, fd: fd, real: real), m)
    }

    /// The tmpfs masks (sandbox paths, as bytes: a name need not be UTF-8) for `bound` folders,
    /// the outermost only (a mask inside another would show up there as an empty folder).
    func masks(for bound: [(src: Source, dest: String, writable: Bool)]) throws(Refusal) -> [Mask] {
        let overlays = Self.overlays(mounts)
        // A refusal names the first place of a hidden path a bound folder holds: the path itself
        // where it resolves, then the outer places before those inside them (the library before
        // a view mounted in its run/ folder), whatever order the set of places came in.
        let places = hidden.map { h -> (h: Hidden, at: [Place]) in
            let own = Self.resolved(h.path)
            return (h, Self.places(of: h.path, mounts: mounts, overlays: overlays).sorted { a, b in
                let ka = (a.path == own ? 0 : 1, a.path.count), kb = (b.path == own ? 0 : 1, b.path.count)
                return ka != kb ? ka < kb : a.path.lexicographicallyPrecedes(b.path)
            })
        }
        var masks: [[UInt8]: Bool] = [:]
        // The bound folders' places a mask is for (a mask can be for several).
        var producers: [[UInt8]: [[UInt8]]] = [:]
        for b in bound {
            for (h, at) in places {
                for p in at {
                    if let rest = pathBytes(p.path, within: b.src.real) {
                        let at = String(decoding: p.path, as: UTF8.self)
                        switch h.policy {
                        case .refuse:
                            throw Refusal(description: "\(b.src.spelled) holds \(h.what) at \(at); "
                                + "it cannot be hidden inside the sandbox without showing in its mount table: "
                                + "unmount it, or pass a folder beside it")
                        case .maskReadOnly where b.writable:
                            throw Refusal(description: "\(b.src.spelled) holds \(h.what) at \(at); "
                                + "passed writable, the command could move the folders around it, and the library with them "
                                + "out from under its cover: pass it with --ro-bind, or pass a folder beside it")
                        case .mask, .maskReadOnly:
                            break
                        }
                        let path = joinedPath(Array(b.dest.utf8), rest)
                        masks[path] = p.isFolder
                        producers[path, default: []].append(Array(b.dest.utf8))
                    } else if pathBytes(b.src.real, within: p.path) != nil {
                        throw Refusal(description: "\(b.src.spelled) is inside \(h.what) (\(String(decoding: p.path, as: UTF8.self))), "
                            + "which the sandbox must not reach")
                    }
                }
            }
        }
        // A symlink on the way to the library is where its folder shows, plus its name.
        for l in links {
            guard let slash = l.lastIndex(of: UInt8(ascii: "/")) else { continue }
            let name = Array(l[slash...])
            let folders = Self.places(of: slash == 0 ? [UInt8(ascii: "/")] : Array(l[..<slash]), mounts: mounts, overlays: overlays).filter(\.isFolder)
            for b in bound where b.writable {
                guard let at = folders.map({ joinedPath($0.path, name) }).first(where: { pathBytes($0, within: b.src.real) != nil }) else { continue }
                throw Refusal(description: "\(b.src.spelled) holds \(String(decoding: at, as: UTF8.self)), a symlink on the way to the photo library; "
                    + "passed writable, the command could point it at a library of its own, for the next run to find and cover instead: "
                    + "pass it with --ro-bind, or pass a folder beside it")
            }
        }
        // A mask is left out where a folder passed in deeper than every bound folder it is for
        // covers its place (binds go outer first): the hidden place cannot show there, and the
        // mask would be made inside that folder, creating a folder in it on the host.
        let dests = bound.map { Array($0.dest.utf8) }
        masks = masks.filter { m in
            (producers[m.key] ?? []).contains { from in
                !dests.contains { d in d != from && pathBytes(d, within: from) != nil && pathBytes(m.key, within: d) != nil }
            }
        }
        let outermost = masks.filter { m in !masks.keys.contains { $0 != m.key && pathBytes(m.key, within: $0) != nil } }
        return outermost.map { Mask(path: $0.key, isFolder: $0.value) }.sorted { $0.path.lexicographicallyPrecedes($1.path) }
    }

    /// A place and whether it is a folder (else a file).
    struct Place { let path: [UInt8]; let isFolder: Bool }

    /// Where `path` resolves now (symlinks followed), or nil.
    static func resolved(_ path: [UInt8]) -> [UInt8]? {
        let fd = withCPath(path) { Glibc.open($0, oPath | O_CLOEXEC) }
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        return realPath(fd: fd)
    }

    /// Every place in this mount namespace where `path`, or a part of it, can be reached: where it
    /// is (resolved, and on the mount it really is on, from the kernel: overmounts and symlinks
    /// included); the same folder under every mount of its filesystem whose root holds it (bind
    /// mounts of it or of a folder above it); the mount points of mounts of its filesystem whose
    /// root is inside it (bind mounts of a folder inside it); and the same for every mount inside it
    /// (a disk or tmpfs mounted on a part of it). Places that are neither folders nor files (a
    /// device node bound over a file of /proc, as containers do) are left out: nothing to hide.
    static func places(of path: [UInt8], mounts: [MountTable.Entry], overlays: [Overlay] = []) -> [Place] {
        var out = reach(path, mounts: mounts)
        guard !out.isEmpty else { return [] }
        overlaid(into: &out, mounts: mounts, overlays: overlays)
        return Set(out.map(lexicallyNormal)).compactMap { p in
            var st = stat()
            let found = withCPath(p) { stat($0, &st) == 0 }
            // One we cannot stat (closed to us): hidden as a folder all the same.
            guard found else { return Place(path: p, isFolder: true) }
            switch st.st_mode & S_IFMT {
            case S_IFDIR: return Place(path: p, isFolder: true)
            case S_IFREG: return Place(path: p, isFolder: false)
            default: return nil
            }
        }
    }

    /// Where `path` is and every other place it shows (`spread`): empty when it is not there
    /// (nothing to hide); the path as spelled when it is there but closed to us (another user's
    /// view) or cannot be told where it is.
    static func reach(_ path: [UInt8], mounts: [MountTable.Entry]) -> Set<[UInt8]> {
        let fd = withCPath(path) { Glibc.open($0, oPath | O_CLOEXEC) }
        guard fd >= 0 else { return errno == ENOENT ? [] : [path] }
        defer { Glibc.close(fd) }
        guard let real = realPath(fd: fd) else { return [path] }
        var out: Set<[UInt8]> = [real]
        spread(fd: fd, real: real, mounts: mounts, into: &out)
        return out
    }

    /// The other places of an open place (`real` is where it is): the same folder under every
    /// mount of its filesystem whose root holds it, the mount points of those whose root is inside
    /// it, and the same for every mount inside it.
    static func spread(fd: Int32, real: [UInt8], mounts: [MountTable.Entry], into out: inout Set<[UInt8]>) {
        guard let home = mount(of: fd, in: mounts), let below = pathBytes(real, within: home.mountPointBytes) else { return }
        aliases(device: home.device, of: joinedPath(home.rootBytes, below), mounts: mounts, into: &out)
        for m in mounts where m.id != home.id && pathBytes(m.mountPointBytes, within: real) != nil {
            out.insert(m.mountPointBytes)
            aliases(device: m.device, of: m.rootBytes, mounts: mounts, into: &out)
        }
    }

    /// The mount an open descriptor is on, from the mount table read for this run.
    static func mount(of fd: Int32, in mounts: [MountTable.Entry]) -> MountTable.Entry? {
        mountID(fd: fd).flatMap { id in mounts.first { $0.id == id } }
    }

    /// The mount `path` leads to now: nil when it cannot be opened (errno says why), else the
    /// mount, or nil inside when it is not in the table.
    static func mount(at path: [UInt8], in mounts: [MountTable.Entry]) -> MountTable.Entry?? {
        let fd = withCPath(path) { Glibc.open($0, oPath | O_CLOEXEC) }
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        return .some(mount(of: fd, in: mounts))
    }

    /// An overlay mount and where its layers can be reached: for each layer it could place, every
    /// path that shows that folder (`layerPlaces`); a layer it cannot place is left out.
    struct Overlay { let mount: MountTable.Entry; let layers: [Set<[UInt8]>] }

    /// The overlays of the mount table, their layers placed once for every hidden path. One per
    /// filesystem: a bind of an overlay (or of a folder on it) is another entry of the same one,
    /// named by its first entry (where it was mounted).
    static func overlays(_ mounts: [MountTable.Entry]) -> [Overlay] {
        var seen = Set<String>()
        return mounts.filter { $0.type == "overlay" && seen.insert($0.device).inserted }.map { o in
            Overlay(mount: o, layers: o.overlayLayers.compactMap { layerPlaces($0, of: o, mounts: mounts) })
        }
    }

    /// Where a layer of overlay `o`, named `spelled` in the mount table, can be reached, or nil.
    /// The mount table keeps only the text its mounter gave: resolved here as it is now (symlinks
    /// followed), it is taken to name the folder mounted. A name that cannot be resolved (relative,
    /// through /proc, gone, closed to us) is left out: that layer is not recognized (a container's
    /// root, named as the host sees it; systemd-sysext's, in a folder unmounted since). A name
    /// that resolves onto the overlay itself (`lowerdir=/usr` mounted on /usr, as sysext does)
    /// names the folder beneath it, reached only through other mounts of that filesystem.
    static func layerPlaces(_ spelled: [UInt8], of o: MountTable.Entry, mounts: [MountTable.Entry]) -> Set<[UInt8]>? {
        guard spelled.first == UInt8(ascii: "/"), pathBytes(lexicallyNormal(spelled), within: Array("/proc".utf8)) == nil else { return nil }
        let fd = withCPath(spelled) { Glibc.open($0, oPath | O_CLOEXEC) }
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        guard let real = realPath(fd: fd) else { return nil }
        var out: Set<[UInt8]> = [real]
        if mount(of: fd, in: mounts)?.device != o.device {
            spread(fd: fd, real: real, mounts: mounts, into: &out)
            return out
        }
        guard let parent = mounts.first(where: { $0.id == o.parentID }),
              let below = pathBytes(real, within: parent.mountPointBytes) else { return [] }
        out = []
        aliases(device: parent.device, of: joinedPath(parent.rootBytes, below), mounts: mounts, into: &out)
        // Not where the overlay covers it.
        return out.filter { pathBytes($0, within: o.mountPointBytes) == nil }
    }

    /// An overlay shows its layers merged at its mount point (and wherever that is bound). What it
    /// shows of a layer's folder cannot be told by name: a rename in the overlay (redirect_dir)
    /// shows it under another. So an overlay counts as a place, whole (its mount and every bind
    /// of it), when one of its layers holds a place or lies inside one; and a place on an overlay
    /// makes each of its layers a place, whole (the upper one holds what changed, the lower ones
    /// the rest, under any name a rename gave). Until nothing new turns up (an overlay of an
    /// overlay). Layers it cannot place are not recognized (`layerPlaces`), nor a layer named by
    /// a path that has since come to name another folder (a bind mount unmounted after).
    static func overlaid(into out: inout Set<[UInt8]>, mounts: [MountTable.Entry], overlays: [Overlay]) {
        guard !overlays.isEmpty else { return }
        // Per overlay (by its device: every entry of it), the places found through it (its layers,
        // or it whole): they are that overlay's own, never a reason to count it whole.
        var through: [String: Set<[UInt8]>] = [:]
        // Every place of a place added (new or not), once.
        var placesOf: [[UInt8]: Set<[UInt8]>] = [:]
        var next = out
        for _ in 0..<16 where !next.isEmpty {
            var found: Set<[UInt8]> = []
            /// Adds a place and its other places; returns all of them, new or not.
            func add(_ spelled: [UInt8]) -> Set<[UInt8]> {
                let q = lexicallyNormal(spelled)
                if let known = placesOf[q] { return known }
                var all = reach(q, mounts: mounts)
                if !all.isEmpty { all.insert(q) }
                placesOf[q] = all
                found.formUnion(all.subtracting(out))
                return all
            }
            var devices: [[UInt8]: String] = [:]
            for p in next { devices[p] = mount(at: p, in: mounts)??.device }
            for ov in overlays {
                let o = ov.mount
                let own = through[o.device] ?? []
                let fresh = next.filter { !own.contains($0) }
                let whole = fresh.contains { p in ov.layers.contains { $0.contains { l in pathBytes(p, within: l) != nil || pathBytes(l, within: p) != nil } } }
                if fresh.contains(where: { devices[$0] == o.device }) {
                    for l in ov.layers.joined() { through[o.device, default: []].formUnion(add(l)) }
                }
                if whole {
                    var here: Set<[UInt8]> = []
                    aliases(device: o.device, of: [UInt8(ascii: "/")], mounts: mounts, into: &here)
                    for q in here { through[o.device, default: []].formUnion(add(q)) }
                }
            }
            found.subtract(out)
            out.formUnion(found)
            next = found
        }
    }

    /// Where the folder `inside` of the filesystem `device` shows, or a part of it.
    /// Only where it shows now: a path another mount covers (an overlay mounted on its own layer)
    /// leads to that mount instead.
    static func aliases(device: String, of inside: [UInt8], mounts: [MountTable.Entry], into out: inout Set<[UInt8]>) {
        for m in mounts where m.device == device {
            let at: [UInt8]
            if let rest = pathBytes(inside, within: m.rootBytes) {
                at = joinedPath(m.mountPointBytes, rest)
            } else if pathBytes(m.rootBytes, within: inside) != nil {
                at = m.mountPointBytes
            } else { continue }
            if leads(at, to: device, mounts: mounts) { out.insert(at) }
        }
    }

    /// Whether `path` leads to the filesystem `device` now; one closed to us counts.
    static func leads(_ path: [UInt8], to device: String, mounts: [MountTable.Entry]) -> Bool {
        guard let found = mount(at: path, in: mounts) else { return errno != ENOENT }
        return found.map { $0.device == device } ?? true
    }

    /// The kernel's path of an open descriptor (/proc/self/fd/N).
    static func realPath(fd: Int32) -> [UInt8]? {
        guard let p = readLink(Array("/proc/self/fd/\(fd)".utf8)), p.first == UInt8(ascii: "/") else { return nil }
        return p
    }

    /// What a symlink holds, as bytes (nil when `path` is no symlink, or it does not fit PATH_MAX).
    static func readLink(_ path: [UInt8]) -> [UInt8]? {
        var buf = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = withCPath(path) { p in
            buf.withUnsafeMutableBufferPointer { b in readlink(p, UnsafeMutableRawPointer(b.baseAddress!).assumingMemoryBound(to: CChar.self), b.count) }
        }
        guard n >= 0, n < buf.count else { return nil }
        return Array(buf[0..<n])
    }

    /// The id of the mount a descriptor is on (`mnt_id` in /proc/self/fdinfo/N), as mountinfo
    /// numbers them.
    static func mountID(fd: Int32) -> Int? {
        guard let text = MountTable.readWhole("/proc/self/fdinfo/\(fd)") else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("mnt_id:") {
            return Int(line.dropFirst("mnt_id:".count).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }
}

/// A path of bytes (not necessarily UTF-8) as the C string a system call takes.
private func withCPath<R>(_ path: [UInt8], _ body: (UnsafePointer<CChar>) -> R) -> R {
    (path + [0]).withUnsafeBufferPointer { b in body(UnsafeRawPointer(b.baseAddress!).assumingMemoryBound(to: CChar.self)) }
}

/// O_PATH (Linux; Glibc hides it behind _GNU_SOURCE): a descriptor that names a file without
/// opening it for reading, for any file the caller can look up.
let oPath: Int32 = 0o10000000   // O_PATH (not imported from Glibc)

/// The bytes of `path` after `folder` (empty when they are the same folder, else starting with
/// "/") when `path` is `folder` or inside it, else nil. Byte for byte, as the kernel names files:
/// String's comparison would call canonically equivalent names (`café` and `cafe` + U+0301, two
/// folders on disk) the same, and folds a combining mark that follows a "/" into the "/", so a
/// path inside a folder (`folder/` + U+0301 `lib`) would not have `folder/` as its prefix.
func pathBytes<P: Collection, F: Collection>(_ path: P, within folder: F) -> [UInt8]?
where P.Element == UInt8, F.Element == UInt8 {
    var f = Array(folder)
    while f.count > 1 && f.last == UInt8(ascii: "/") { f.removeLast() }
    let p = Array(path)
    guard p.starts(with: f) else { return nil }
    let rest = p[f.count...]
    if rest.isEmpty { return [] }
    if f == [UInt8(ascii: "/")] { return p }
    return rest.first == UInt8(ascii: "/") ? Array(rest) : nil
}

/// An absolute path with ".", ".." and repeated "/" taken out, by its text (for sandbox paths,
/// which cannot be resolved from here).
func lexicallyNormal(_ path: [UInt8]) -> [UInt8] {
    var parts: [ArraySlice<UInt8>] = []
    for c in path.split(separator: UInt8(ascii: "/")) {
        if c.elementsEqual([UInt8(ascii: ".")]) { continue }
        if c.elementsEqual([UInt8(ascii: "."), UInt8(ascii: ".")]) { _ = parts.popLast(); continue }
        parts.append(c)
    }
    return parts.isEmpty ? [UInt8(ascii: "/")] : parts.flatMap { [UInt8(ascii: "/")] + $0 }
}

/// `folder` followed by `rest` (empty, or starting with "/"), with no doubled "/".
func joinedPath(_ folder: [UInt8], _ rest: [UInt8]) -> [UInt8] {
    var f = folder
    while !f.isEmpty && f.last == UInt8(ascii: "/") { f.removeLast() }
    if f.isEmpty && rest.isEmpty { return [UInt8(ascii: "/")] }
    return f + rest
}
