import Foundation
import LibraryRun
#if canImport(Glibc)
import Glibc
#endif

/// Where a path can be reached in this mount namespace, from the kernel's mount table: what
/// `SandboxHiding.masks` matches the folders bound into a run's sandbox against (RunSandbox.swift).
extension SandboxHiding {
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
