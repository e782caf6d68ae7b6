import Foundation
import LibraryRun
#if canImport(Glibc)
import Glibc
#endif

/// How `photogate run` keeps what it hides (RunHidden.swift: the library, /proc, other views) out
/// of the sandbox, for the folders the user passes in with --bind and --ro-bind (bubblewrap binds
/// them recursively, with every mount below them).
///
/// A hidden path is matched by where it really is, not by how it is spelled. Each bound folder is
/// opened once and bound by that descriptor; its place is the kernel's path of the descriptor.
/// Each hidden path's places are where it resolves, on the mount the kernel says it is on, plus
/// every other place the mount table shows the same folder or a part of it (bind mounts of it, of
/// a folder above or inside it, and mounts inside it: SandboxPlaces.swift). Then, for each bound
/// folder:
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
}
