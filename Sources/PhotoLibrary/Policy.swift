/// What the policy needs to know about one asset, relative to one app.
public struct AssetFacts: Equatable, Sendable {
    public var isShared: Bool
    public var isTrashed: Bool
    public var isOwned: Bool      // created by this app
    public var isSelected: Bool   // in this app's limited selection
    public var isPicked: Bool     // handed to this app through the picker

    public init(isShared: Bool = false, isTrashed: Bool = false, isOwned: Bool = false,
                isSelected: Bool = false, isPicked: Bool = false) {
        self.isShared = isShared
        self.isTrashed = isTrashed
        self.isOwned = isOwned
        self.isSelected = isSelected
        self.isPicked = isPicked
    }
}

/// How a mount of one app at one access level behaves: the "What a mount shows" table of DESIGN.md.
/// The CLI (`assets --app`), the mount daemon and the picker all ask this type; nothing else decides.
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

    /// Renaming is allowed for the app's own assets only (it names what it created).
    public func canRename(_ f: AssetFacts) -> Bool {
        isVisible(f) && f.isOwned && canCreate
    }

    /// `Albums/` and `Shared/` exist, and `mkdir Albums/X` creates an album.
    public var showsAlbums: Bool { scope == .everything }
    public var canEditAlbums: Bool { scope == .everything }

    /// Touching the mount while `not-determined` records a prompt (unless prevent-prompt).
    public var recordsRequestOnAccess: Bool { status == .notDetermined }
}
