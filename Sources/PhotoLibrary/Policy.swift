/// What the decision (`AppContext.decide`) needs to know about one asset, relative to one app:
/// the asset's own facts and the app's grants on it. GrantStore builds these in one place
/// (`FactsReader`), for one asset or for all.
public struct AssetFacts: Equatable, Sendable {
    public var isShared: Bool
    public var isTrashed: Bool
    public var isOwned: Bool      // created by this app
    public var isSelected: Bool   // in this app's limited selection
    public var isPicked: Bool     // handed to this app through the picker
    /// The selection's grant strips location (meaningful when `isSelected`).
    public var selectionStripsLocation: Bool
    /// The pick strips location (meaningful when `isPicked`).
    public var pickStripsLocation: Bool
    /// The person allowed this app to edit this asset (`grant APP --edit ASSET`).
    public var editConsent: Bool
    /// The asset's metadata holds a GPS position.
    public var hasLocation: Bool
    /// Its current version is a HEIF image (HEIC, HEIF, AVIF): an app with the `compatible`
    /// option reads it as a JPEG.
    public var isHEIF: Bool

    public init(isShared: Bool = false, isTrashed: Bool = false, isOwned: Bool = false,
                isSelected: Bool = false, isPicked: Bool = false, selectionStripsLocation: Bool = false,
                pickStripsLocation: Bool = false, editConsent: Bool = false, hasLocation: Bool = false, isHEIF: Bool = false) {
        self.isShared = isShared
        self.isTrashed = isTrashed
        self.isOwned = isOwned
        self.isSelected = isSelected
        self.isPicked = isPicked
        self.selectionStripsLocation = selectionStripsLocation
        self.pickStripsLocation = pickStripsLocation
        self.editConsent = editConsent
        self.hasLocation = hasLocation
        self.isHEIF = isHEIF
    }
}

/// How a mount of one app at one access level behaves: the table in the README's "What a mount shows".
/// `AppContext.decide` (Decision.swift) asks it, and everything else asks that.
public struct ViewPolicy: Equatable, Sendable {
    public let access: AccessLevel
    public let status: AuthorizationStatus

    public init(access: AccessLevel, status: AuthorizationStatus) {
        self.access = access
        self.status = status
    }

    public enum Scope: Equatable, Sendable {
        case everything     // authorized read-write
        case limited        // selection + own + picked, never shared
        case pickedOnly     // denied, restricted, not-determined read-write
        case nothing        // add-only
    }

    public var scope: Scope {
        switch (access, status) {
        case (.addOnly, _): return .nothing
        case (.readWrite, .authorized): return .everything
        case (.readWrite, .limited): return .limited
        case (.readWrite, _): return .pickedOnly
        }
    }

    /// Whether the app sees this asset in its view.
    public func isVisible(_ f: AssetFacts) -> Bool {
        if f.isTrashed { return false }
        switch scope {
        case .everything: return true
        case .limited: return !f.isShared && (f.isSelected || f.isOwned || f.isPicked)
        case .pickedOnly: return f.isPicked
        case .nothing: return false
        }
    }

    /// Which assets a store must read for `isVisible` to find every visible one (the build of a
    /// whole view reads only these, then asks `isVisible` of each; a patch of a few rows reads
    /// them by id and asks `isVisible` alone): a condition every asset `isVisible`
    /// shows meets. It may let in more (a limited view reads the shared assets it was granted and
    /// drops them), never fewer; written here, beside the rule it narrows, and held to it by a
    /// property test over random catalogs (`GrantStoreTests.ViewPreFilter`). GrantStore writes it
    /// as SQL (`FactsReader.condition`).
    public var candidates: Candidates {
        switch scope {
        case .everything: return Candidates(untrashed: true, ties: nil)
        case .limited: return Candidates(untrashed: true, ties: [.selected, .picked, .owned])
        case .pickedOnly: return Candidates(untrashed: true, ties: [.picked])
        case .nothing: return Candidates(untrashed: true, ties: [])
        }
    }

    /// A necessary condition of visibility, in facts a store keeps in its own tables.
    public struct Candidates: Equatable, Sendable {
        /// How an asset is tied to the app.
        public enum Tie: CaseIterable, Sendable {
            case selected, picked, owned
        }

        /// Only assets not in Recently Deleted.
        public var untrashed: Bool
        /// Only assets tied to the app in one of these ways (none: no asset); nil: any asset.
        public var ties: Set<Tie>?

        public init(untrashed: Bool, ties: Set<Tie>?) {
            self.untrashed = untrashed
            self.ties = ties
        }

        /// Whether an asset with these facts meets the condition.
        public func admits(_ f: AssetFacts) -> Bool {
            if untrashed && f.isTrashed { return false }
            guard let ties else { return true }
            return ties.contains { tie in
                switch tie {
                case .selected: return f.isSelected
                case .picked: return f.isPicked
                case .owned: return f.isOwned
                }
            }
        }
    }

    /// New files may be created (they become assets owned by the app).
    public var canCreate: Bool {
        switch access {
        case .readWrite: return status == .authorized || status == .limited
        case .addOnly: return status == .authorized
        }
    }

    /// `rm` of a visible asset moves it to Recently Deleted.
    public func canDelete(_ f: AssetFacts) -> Bool {
        guard isVisible(f), !f.isShared else { return false }
        switch scope {
        case .everything: return true
        case .limited: return f.isOwned
        case .pickedOnly, .nothing: return false
        }
    }

    /// Renaming is allowed for the app's own assets only (it names what it created), while it may
    /// create files, and never one in Recently Deleted. A read-write app renames those it sees; an
    /// add-only app, which sees nothing, renames the files it wrote (its mount knows their names
    /// for a while: `rsync` writes a temp name, closes it, then renames it). Every rename asks
    /// this, in the transaction that renames (`Library.renameOwnAsset`), and `explain` prints it
    /// with `renameRefusal`'s reason.
    public func canRename(_ f: AssetFacts) -> Bool { renameRefusal(f) == nil }

    /// Why the app may not rename the asset (nil: it may); the rule `canRename` answers.
    ///
    /// A photo the app did not create is never renamed by it, even with edit consent or full
    /// access (issue 37 decided it): its name is the person's (for an import, the camera's file
    /// name), the one every other app that sees it and the person's commands use, and it has no
    /// versions (an edit makes a version the person can revert; a rename could not be undone).
    /// And display names are unique across the library: a limited app naming a photo after one it
    /// cannot see would learn that one exists, whether the rename then failed or took a suffix.
    /// (PhotoKit gives apps no way to rename an asset either: content editing is about content.)
    /// The app's own files escape both: it sees its own name for them whatever the library does.
    public func renameRefusal(_ f: AssetFacts) -> String? {
        if !f.isOwned {
            return "only the app that created a photo renames it; this one's name is the person's (seen by every app that sees it, kept by no version), so edit consent or full access do not cover it"
        }
        if f.isTrashed { return "it is in Recently Deleted" }
        if !canCreate { return "the app may not create files now (status \(status.rawValue))" }
        if access != .addOnly && !isVisible(f) { return "the app cannot see it" }
        return nil
    }

    /// `Albums/` and `Shared/` exist, and `mkdir Albums/X` creates an album.
    public var showsAlbums: Bool { scope == .everything }
    public var canEditAlbums: Bool { scope == .everything }

    /// Touching the mount while `not-determined` records a prompt (unless prevent-prompt).
    public var recordsRequestOnAccess: Bool { status == .notDetermined }
}

/// Whether an app may change an asset's content (save a new version of it), and why: the answer
/// the mount acts on when a visible asset is opened for writing, and what `explain` prints.
public enum EditDecision: Sendable, Equatable {
    /// The save makes a new version.
    case allowed(reason: String)
    /// Opening for writing fails with EACCES and records an `edit` request naming the asset.
    case needsConsent(reason: String)
    /// Opening for writing fails (EACCES, or ENOENT where the asset is hidden); no request.
    case never(reason: String)

    public var isAllowed: Bool { if case .allowed = self { return true }; return false }

    public var reason: String {
        switch self {
        case .allowed(let r), .needsConsent(let r), .never(let r): return r
        }
    }

    /// `allowed`, `needs-consent` or `never` (the `edit` field of `explain --json`).
    public var label: String {
        switch self {
        case .allowed: return "allowed"
        case .needsConsent: return "needs-consent"
        case .never: return "never"
        }
    }
}

extension ViewPolicy {
    /// Who may edit what (issue 15): an app may always edit the assets it created; any other
    /// asset it can see needs the person's consent, given per asset (`grant APP --edit ASSET`,
    /// `consented`) or for every asset it can see (the app's `edit-any` option). An add-only view
    /// edits nothing, a hidden asset cannot be edited (the mount answers ENOENT for it anyway), and
    /// nobody edits a cloud-shared asset: it belongs to the person who shared it (a limited app
    /// never sees one; an authorized app reads it, as it may not delete it either). The only rule:
    /// the mount, `explain` and the library all ask this function.
    public func editDecision(_ f: AssetFacts, consented: Bool, editAny: Bool) -> EditDecision {
        if access == .addOnly { return .never(reason: "an add-only app edits nothing") }
        if f.isTrashed { return .never(reason: "it is in Recently Deleted") }
        if !isVisible(f) { return .never(reason: "the app cannot see it") }
        if f.isShared { return .never(reason: "it is a cloud-shared asset, which belongs to the person who shared it: no app edits it") }
        if f.isOwned { return .allowed(reason: "the app created it") }
        if consented { return .allowed(reason: "the person allowed this app to edit it (grant --edit)") }
        if editAny { return .allowed(reason: "the app's edit-any option is on") }
        return .needsConsent(reason: "the app did not create it and has no consent to edit it (photogate grant APP --edit ASSET, or options APP --edit-any on)")
    }
}

extension ViewPolicy {
    /// Whether an app may write (or remove) a sidecar of an asset (issue 37): a sidecar is an edit
    /// of its photo, so the same consent (`editDecision`): its own files always, others with the
    /// person's consent or `edit-any`. Also an add-only app for the photos it created while it may
    /// add (a camera card copied with its `.XMP` and `.THM` files: the sidecars come with the
    /// photos, as the photos do), which it cannot read back.
    public func sidecarDecision(_ f: AssetFacts, consented: Bool, editAny: Bool) -> EditDecision {
        if access == .addOnly && f.isOwned && !f.isTrashed && !f.isShared && canCreate {
            return .allowed(reason: "the app created the photo (an add-only app writes its own photos' sidecars, and reads none)")
        }
        return editDecision(f, consented: consented, editAny: editAny)
    }
}
