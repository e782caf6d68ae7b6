/// What one entry of the library's change log (`changes.kind`) says happened. Every writer of the
/// log and its one reader (`viewUpdate`, which decides what a mount recomputes) use these names;
/// the raw values are what the database stores.
enum ChangeKind: String, CaseIterable, Sendable {
    // An app's limited selection or picks: change that app's view only.
    case grant, revoke, pick, unpick
    // Edit consent: changes no visibility, only what a view says about editing.
    case editGrant = "edit-grant", editRevoke = "edit-revoke"
    // One asset changed for everyone who sees it.
    // `date`: the capture date an app set on its own file after closing it (a file time).
    case insert, rename, trash, restore, version, shared, date
    // A sidecar of the asset written or removed (issue 37): its views show another sidecar.
    case sidecar
    // An asset in Recently Deleted deleted for good (by the person, or the automatic purge): no
    // view shows a trashed asset, so none changes; the log keeps who and what (`detail`).
    case purge
    // Albums (membership or the album itself).
    case albumAdd = "album-add", albumRemove = "album-remove", album
    // An app's record: its status, its options, or the app itself.
    case status, options, app
    // A request for access: changes no view.
    case request
}
