import FUSE
import Foundation
import PhotoLibrary
import Redaction

/// A visible sidecar (issue 37): the current version of a sidecar of a visible asset, under the
/// name this view gives it (after the name it shows the photo under), beside the photo.
struct SidecarNode: Sendable, Equatable {
    let key: SidecarKey
    let name: String
    let ino: Inode
    let size: UInt64
    /// The stored file's absolute path.
    let path: String
    let mtime: Int
    let version: Int
    /// The photo is read with its location stripped: so is its sidecar.
    let strip: Bool
    /// The app may edit the photo: it may write its sidecar (the mode says writable).
    let editable: Bool
    let redaction: ViewSidecar.Redaction
}

extension ViewModel {
    /// A sidecar's inode: its stored file's (each version its own, as an edit's), and another for
    /// a strip-location view (a redacted file never shares pages with the original).
    static func sidecarInode(key: (UInt64, UInt64), fileID: String, strip: Bool) -> Inode {
        inode(key: key, "sidecar/" + fileID + (strip ? "/redacted" : ""))
    }

    /// Names and nodes for the sidecars the view carries (`sidecarRows`): each named after the
    /// name the view gives its photo now (`Sidecars.assignNames`). Called after every change of
    /// the assets or the sidecars: a photo renamed moves its sidecars with it.
    mutating func nameSidecars() {
        var nodes: [SidecarKey: SidecarNode] = [:]
        var byName: [String: SidecarKey] = [:]
        var byIno: [Inode: SidecarKey] = [:]
        guard !sidecarRows.isEmpty else {
            sidecars = [:]; sidecarByName = [:]; sidecarByIno = [:]
            return
        }
        let st = store, key = app.inodeKey
        let names = Sidecars.assignNames(Array(sidecarRows.keys), photoName: { r in st.index(ofRow: r).map { st.string($0, 1) } },
                                         taken: { st.index(ofName: $0) != nil })
        for (k, name) in names {
            guard let v = sidecarRows[k], let i = st.index(ofRow: k.rowID) else { continue }
            let bits = st.bits[i]
            let strip = bits & NodeStore.strip != 0
            let ino = ViewModel.sidecarInode(key: key, fileID: v.fileID, strip: strip)
            guard !FixedInode.all.contains(ino), st.index(ofIno: ino) == nil, byIno[ino] == nil else { continue }
            let node = SidecarNode(key: k, name: name, ino: ino, size: v.size, path: st.storeRoot + "/" + v.storePath,
                                   mtime: Int(v.date.timeIntervalSince1970), version: v.version, strip: strip,
                                   editable: bits & NodeStore.editable != 0, redaction: v.redaction)
            nodes[k] = node
            byName[name] = k
            byIno[ino] = k
        }
        sidecars = nodes; sidecarByName = byName; sidecarByIno = byIno
    }

    /// The sidecars of a whole snapshot.
    mutating func setSidecars(_ list: [ViewSidecar]) {
        sidecarRows = Dictionary(list.map { ($0.key, $0) }, uniquingKeysWith: { a, _ in a })
        nameSidecars()
    }

    /// A patch's sidecars: those of its affected rows are replaced by what it carries.
    mutating func patchSidecars(affected: Set<Int64>, _ list: [ViewSidecar]) {
        if sidecarRows.isEmpty && list.isEmpty { return }
        sidecarRows = sidecarRows.filter { !affected.contains($0.key.rowID) }
        for v in list { sidecarRows[v.key] = v }
        nameSidecars()
    }

    /// The sidecars listed beside the photos of `rows` (an album's members), by name.
    func sidecars(besideRows rows: Set<Int64>) -> [SidecarNode] {
        sidecars.values.filter { rows.contains($0.key.rowID) }.sorted { $0.name < $1.name }
    }
}
