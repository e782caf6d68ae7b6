/// The one decision (issue 17): for one app at one access level and one asset's facts, whether
/// the app sees the asset, whether it reads it with its location stripped, whether it may edit,
/// delete or rename it, whether the asset may be granted to it, and why. The mount's view build,
/// `assets --app`, `explain`, the history, the library's grants and the picker's offer list all
/// ask this type; the rules themselves are `ViewPolicy`'s, written once.
public struct AppContext: Equatable, Sendable {
    public var access: AccessLevel
    /// The app's status for `access`.
    public var status: AuthorizationStatus
    public var options: AppOptions

    public init(access: AccessLevel, status: AuthorizationStatus, options: AppOptions = AppOptions()) {
        self.access = access
        self.status = status
        self.options = options
    }

    public var policy: ViewPolicy { ViewPolicy(access: access, status: status) }

    /// An app the library does not know yet (never authorized, granted or mounted): every
    /// status is `not-determined`, no option is on. Its facts say it owns, was granted and was
    /// picked nothing, so it sees nothing and edits nothing; the picker offers it what a new app
    /// may be handed.
    public static func unknownApp(_ access: AccessLevel) -> AppContext {
        AppContext(access: access, status: .notDetermined)
    }
}

/// How an asset is handed to an app: added to its limited selection, picked for it, or given
/// to it to edit (`grant APP --edit ASSET`, a consent ahead of time or answering its request).
public enum GrantWay: String, Sendable, Equatable {
    case selection, pick, edit
}

/// The answer for one asset.
public struct AssetDecision: Equatable, Sendable {
    public var visible: Bool
    /// Why it is visible or hidden, as `explain` prints them (joined by "; ").
    public var reasons: [String]
    /// The app reads the asset with its location bytes zeroed (the app's option or a grant).
    public var stripLocation: Bool
    /// Why location is stripped; empty when it is not.
    public var stripReasons: [String]
    public var edit: EditDecision
    public var canDelete: Bool
    public var canRename: Bool
    /// Why it may or may not be renamed (`explain` prints it).
    public var renameReason: String
    /// The app reads the asset as a JPEG made from it (its `compatible` option, a HEIF photo it
    /// did not create), under the name's stem with `.jpg`.
    public var compatible: Bool = false

    public var reason: String { reasons.joined(separator: "; ") }
    public var stripReason: String? { stripReasons.isEmpty ? nil : stripReasons.joined(separator: "; ") }
    /// Visible, stripped, and there is a location to strip.
    public func removesLocation(_ f: AssetFacts) -> Bool { visible && stripLocation && f.hasLocation }
}

extension AppContext {
    /// Whether the app sees the asset: `ViewPolicy.isVisible`. The mount's view build calls this
    /// (and `stripsLocation`) for every row, so it builds no strings.
    @inline(__always)
    public func isVisible(_ f: AssetFacts) -> Bool { policy.isVisible(f) }

    /// Whether the app reads the asset with its location stripped: its strip-location option,
    /// or the grant (selection or pick) that shows the asset to it says so.
    @inline(__always)
    public func stripsLocation(_ f: AssetFacts) -> Bool {
        options.stripLocation || (f.isSelected && f.selectionStripsLocation) || (f.isPicked && f.pickStripsLocation)
    }

    /// Whether the app may change the asset's content (save a new version of it), and why:
    /// `ViewPolicy.editDecision` with the asset's edit consent and the app's `edit-any` option.
    /// What an open for writing acts on, what `explain` prints, and what a mount's file modes say
    /// (writable exactly where this allows: jhead and exiftran look at the mode or ask
    /// `access(W_OK)` before they save).
    /// A photo the app reads as a compatible JPEG is never: the JPEG the library made is not the
    /// photo, and a save of it would put a re-encoding in place of the HEIC for every app (EACCES,
    /// no request).
    @inline(__always)
    public func editDecision(_ f: AssetFacts) -> EditDecision {
        let edit = policy.editDecision(f, consented: f.editConsent, editAny: options.editAny)
        if case .never = edit { return edit }
        guard policy.isVisible(f), servesCompatible(f) else { return edit }
        return .never(reason: "the app reads it as a JPEG made from the HEIF original (its compatible option is on): that JPEG is not the photo, so it cannot be saved as a version of it")
    }

    /// Whether the app reads the asset as a JPEG made from it: its `compatible` option is on and
    /// the asset is a HEIF photo it sees and did not create. The app's own files stay as it wrote
    /// them (it wrote HEIC, and its `rsync` or `cp -a` run again must find the same names).
    @inline(__always)
    public func servesCompatible(_ f: AssetFacts) -> Bool {
        options.compatible && f.isHEIF && !f.isOwned
    }

    /// The whole answer, with the reasons `explain` prints.
    public func decide(_ f: AssetFacts) -> AssetDecision {
        let p = policy
        let visible = p.isVisible(f)
        var why: [String] = []
        if f.isTrashed { why.append("it is in Recently Deleted") }
        switch p.scope {
        case .nothing: why.append("an add-only view shows nothing")
        case .everything: if !f.isTrashed { why.append("the app is authorized for the whole library") }
        case .limited:
            if f.isShared { why.append("it is a cloud-shared asset, which a limited app never sees") }
            if f.isSelected { why.append("it is in the app's selection") }
            if f.isOwned { why.append("the app created it") }
            if f.isPicked { why.append("it was picked for the app") }
            if !f.isSelected && !f.isOwned && !f.isPicked { why.append("it is not in the app's selection, not picked, not created by the app") }
        case .pickedOnly:
            why.append(f.isPicked ? "it was picked for the app (status \(status.rawValue) shows picked assets only)"
                                  : "status \(status.rawValue) shows picked assets only, and it was not picked")
        }
        var stripWhy: [String] = []
        if options.stripLocation { stripWhy.append("the app's strip-location option is on") }
        if f.isSelected && f.selectionStripsLocation { stripWhy.append("its grant strips location") }
        if f.isPicked && f.pickStripsLocation { stripWhy.append("it was picked without location") }
        var d = AssetDecision(visible: visible, reasons: why, stripLocation: stripsLocation(f), stripReasons: stripWhy,
                              edit: editDecision(f),
                              canDelete: p.canDelete(f), canRename: p.canRename(f),
                              renameReason: p.renameRefusal(f) ?? "the app created it, and names what it created")
        d.compatible = visible && servesCompatible(f)
        return d
    }

    /// Why the asset may not be granted to the app this way, or nil when it may. A limited
    /// selection never holds a cloud-shared asset, and a limited app never sees one even picked:
    /// such a grant could never show, so the library refuses it and the picker does not offer it.
    /// Nobody edits a cloud-shared asset (`ViewPolicy.editDecision`), so no consent to edit one
    /// is kept either. Asked with the app's read-write status (grants are read-write things).
    public func grantRefusal(_ f: AssetFacts, _ way: GrantWay) -> String? {
        guard f.isShared else { return nil }
        switch way {
        case .selection: return "a limited selection never holds cloud-shared assets"
        case .pick where status == .limited: return "the app is limited, and a limited app never sees cloud-shared assets, even picked ones"
        case .pick: return nil
        case .edit: return "no app edits a cloud-shared asset"
        }
    }
}
