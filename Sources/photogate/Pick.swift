import ArgumentParser
import Foundation
import GrantStore
import PhotoLibrary
import Picker
#if canImport(Glibc)
import Glibc
#endif

enum PickMode: String, EnumerableFlag {
    case selection, deliver

    static func help(for value: PickMode) -> ArgumentHelp? {
        switch value {
        case .selection:
            return "Edit the app's limited selection, starting from the current one; deselecting revokes (the default for a limited app)."
        case .deliver:
            return "Hand the picked assets to the app as picked: visible whatever its library status (the default for any other app)."
        }
    }
}

enum PickMedia: String, EnumerableFlag {
    case images, videos

    static func help(for value: PickMedia) -> ArgumentHelp? {
        value == .images ? "Offer photos only." : "Offer videos only."
    }
}

struct Pick: PhotogateCommand {
    static let offersNewApp = true
    static let configuration = CommandConfiguration(
        commandName: "pick",
        abstract: "Choose what an app gets in a full-screen picker in the terminal.",
        // A short synopsis: argument-parser does not wrap the generated one at 80 columns (issue 16).
        usage: "photogate pick [<app>] [<options>]",
        discussion: """
            Lists the library (name, capture date, type, size, album, location); \
            search, browse albums and select with the keyboard. `?` shows the keys. \
            Enter confirms; Escape cancels and changes nothing. The footer shows \
            the selection count and strip-location (key s: the picked assets \
            reach the app without location).

            --continuous writes each change at once, so a running mount shows it \
            live (Escape then takes the changes back). --request answers an app's \
            `picker` request from `photogate requests`; confirming removes it.

            The picker needs a terminal (tmux and SSH work). From a script, use `photogate grant` \
            (with --picked to hand assets over as picked).

            Examples:
              photogate pick org.example.Editor      # edit a limited app's selection
              photogate pick org.example.Mail --deliver --images --limit 5
              photogate pick --request 3             # answer a picker request
            """)

    @Argument(help: "The app id (not needed with --request).", completion: Complete.apps) var app: String?
    @Flag(help: "What confirming does (default: --selection for a limited app, else --deliver).") var mode: PickMode?
    @Flag(help: "Apply each change at once, so a running mount shows it live.") var continuous = false
    @Flag var media: PickMedia?
    @Option(help: ArgumentHelp("Select at most this many assets.", valueName: "n")) var limit: Int?
    @Option(help: ArgumentHelp("Answer this picker request (its id in `photogate requests`).", valueName: "id")) var request: Int64?
    @Flag(help: "Start with strip-location on (key s toggles it).") var stripLocation = false
    @Flag(help: "Register the app if it is not known yet (otherwise an unknown app is refused, exit 66).") var newApp = false
    @Flag(help: "Pick in the web app instead (photogate ui, opened on this app's picker; prints its address first).") var web = false
    @Flag(name: .customLong("open"), help: "With --web: open the page in the desktop's browser.") var openBrowser = false
    @OptionGroup var lib: LibraryOption

    func validate() throws {
        if app == nil && request == nil { throw ValidationError("name an app, or answer a request with --request ID") }
        if openBrowser && !web { throw ValidationError("--open goes with --web") }
        if let limit, limit < 1 { throw ValidationError("--limit must be at least 1") }
    }

    func execute() throws {
        do {
            // A typo must not pick for nobody: checked before the terminal, so scripts learn it too.
            if request == nil, let app, !newApp, try lib.open().app(parseApp(app)) == nil {
                throw CommandFailure("unknown app '\(app)' (a typo picks for nobody); register it with --new-app, or with `photogate authorize`", .notFound)
            }
            if web {
                let library = try lib.open()
                var target = try app.map { try parseApp($0) }
                var query = ""
                if let rid = request {
                    let r = try library.request(id: rid)
                    target = r.app
                    query = "?request=\(rid)&kind=\(r.kind.rawValue)"
                }
                if let limit { query += (query.isEmpty ? "?" : "&") + "limit=\(limit)" }
                guard let target else { throw CommandFailure("name an app", .usage) }
                if try library.app(target) == nil { _ = try library.registerApp(target) }
                try UI.serve(library: library, pickApp: target, query: query, port: 0, open: openBrowser)
                return
            }
            guard Terminal.isInteractive() else {
                throw CommandFailure("""
                    photogate pick is a full-screen picker and needs a terminal (standard input and output \
                    are not a TTY); from a script, grant assets by id or name with `photogate grant APP ASSET...` \
                    (add --picked to hand them over as picked)
                    """, .usage)
            }
            let library = try lib.open()
            try library.markInUse()   // held open while the person chooses (CatalogFiles)
            var answering: RequestRecord?
            if let rid = request {
                let r = try library.request(id: rid)
                guard r.kind == .picker else {
                    throw CommandFailure("request \(rid) asks for \(r.kind.rawValue) access, not for the picker; answer it with `photogate authorize \(r.app) --access \(r.kind.rawValue) --status STATUS`", .usage)
                }
                if let app, app != r.app.rawValue {
                    throw CommandFailure("request \(rid) is from \(r.app), not from \(app)", .usage)
                }
                answering = r
            }
            let id = try answering?.app ?? parseApp(app ?? "")
            let record = try library.app(id)
            let status = record?.readWrite ?? .notDetermined
            let pickMode: PickerMode
            switch mode {
            case .selection: pickMode = .selection
            case .deliver: pickMode = .deliver
            case nil: pickMode = status == .limited ? .selection : .deliver
            }
            let filter: MediaFilter = media == .images ? .images : media == .videos ? .videos : .all

            let catalog = try library.pickerCatalog(for: id)
            let albums = catalog.albums.map { PickerAlbum(name: $0.name, isShared: $0.isShared) }
            let assets = catalog.items.map { i in
                PickerAsset(key: i.rowID, name: i.displayName, captureDate: i.captureDate, mediaKind: i.mediaKind,
                            isVideo: i.mediaClass == .video, size: i.byteSize, hasLocation: i.hasLocation,
                            isShared: i.isShared,
                            offeredIn: Set([i.selectable ? PickerMode.selection : nil, i.pickable ? .deliver : nil].compactMap { $0 }),
                            albums: catalog.albumsOfAsset[i.rowID] ?? [])
            }
            let model = PickerModel(assets: assets, albums: albums,
                                    grants: pickMode == .selection ? catalog.selection : catalog.picks,
                                    config: PickerConfig(mode: pickMode, filter: filter, limit: limit, stripLocation: stripLocation))
            var controller = PickerController(model: model, continuous: continuous)
            if let r = answering {
                controller.message = "answering request \(r.id) from \(r.app)" + (r.reason.isEmpty ? "" : ": \(r.reason)")
            } else if pickMode == .selection && status != .limited {
                controller.message = "note: \(id) is \(status.rawValue), so its selection shows only once it is limited"
            }

            let writer = GrantWriter(library: library, app: id, picked: pickMode == .deliver, ids: catalog.ids, registering: newApp)
            let hooks = PickerHooks(
                apply: { try writer.apply($0) },
                details: { a, m in PickDetails.lines(library: library, asset: a, albums: albums, model: m) },
                openExternally: ExternalViewer.available().map { tool in
                    { a in
                        guard let asset = try? library.asset(rowID: a.key) else { return "cannot find \(a.name)" }
                        let path: String
                        do { path = try library.previewFile(of: asset) } catch { return "not opened: \(error)" }
                        return ExternalViewer.open(path, with: tool)
                            ? "opened \(a.name) with xdg-open" : "xdg-open could not open \(a.name)"
                    }
                })
            let header = PickerHeader(app: id.rawValue, status: record == nil ? "new app" : status.rawValue,
                                      request: answering.map { "request \($0.id)" })

            let outcome: PickerOutcome
            // The copies made for the viewer go with the picker (they are private, but need not stay).
            defer { library.clearPreviews() }
            do {
                outcome = try PickerSession.run(&controller, header: header, hooks: hooks)
            } catch let e as TerminalError {
                throw CommandFailure(e.description, .failure)
            }
            let final = controller.model
            // The last write runs to its end: an interrupt now would leave half of it done.
            let ignored = [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP]
            let previous = ignored.map { signal($0, SIG_IGN) }
            defer { for (sig, h) in zip(ignored, previous) { signal(sig, h) } }
            switch outcome {
            case .confirmed:
                try writer.apply(final.pendingDiff(), announce: true)
                if let r = answering {
                    do { try library.removeRequest(id: r.id) } catch LibraryError.unknownRequest {
                        // Answered meanwhile (e.g. by `photogate authorize`): nothing left to remove.
                    }
                }
                say(summary(final, app: id, request: answering))
            case .cancelled:
                try revert(final, writer)
                say("cancelled: nothing changed")
            case .signalled(let sig):
                try? revert(final, writer)
                printError("interrupted by signal \(sig): nothing changed")
                throw ExitCode(128 + sig)
            }
        }
    }

    /// Continuous mode wrote as it went: cancelling takes it all back.
    func revert(_ m: PickerModel, _ writer: GrantWriter) throws {
        if m.hasAppliedChanges { try writer.apply(m.revertDiff(), announce: true) }
    }

    func summary(_ m: PickerModel, app: AppID, request: RequestRecord?) -> String {
        let target = m.target()
        let added = target.keys.filter { m.before[$0] == nil }.count
        let removed = m.before.keys.filter { target[$0] == nil }.count
        var s: String
        switch m.mode {
        case .selection:
            s = "selection of \(app): \(target.count) asset\(target.count == 1 ? "" : "s") (+\(added), -\(removed))"
        case .deliver:
            s = "delivered \(m.selectedCount) asset\(m.selectedCount == 1 ? "" : "s") to \(app) as picked (\(added) new)"
        }
        if m.stripLocation { s += ", location stripped" }
        if let r = request { s += "; request \(r.id) answered" }
        return s
    }
}

/// Writes the picker's grant changes: revokes, then grants (with and without strip-location).
struct GrantWriter: Sendable {
    let library: Library
    let app: AppID
    let picked: Bool
    let ids: [Int64: String]
    var registering = false

    func apply(_ d: GrantDiff, announce: Bool = false) throws {
        func refs(_ keys: [Int64]) -> [String] { keys.compactMap { ids[$0] } }
        let n = d.revoke.count + d.grant.count + d.grantStripped.count
        if announce && n >= 1000 {
            let line = "writing \(n) grant changes for \(app)...\n"
            _ = line.withCString { Glibc.write(2, $0, strlen($0)) }
        }
        if !d.revoke.isEmpty { try library.revoke(app, refs(d.revoke), picked: picked) }
        if !d.grant.isEmpty { try library.grant(app, refs(d.grant), picked: picked, stripLocation: false, registering: registering) }
        if !d.grantStripped.isEmpty { try library.grant(app, refs(d.grantStripped), picked: picked, stripLocation: true, registering: registering) }
    }
}

/// The details panel: the preview where there is no desktop viewer.
enum PickDetails {
    static func lines(library: Library, asset a: PickerAsset, albums: [PickerAlbum], model: PickerModel) -> (title: String, lines: [String]) {
        let full = try? library.asset(rowID: a.key)
        func row(_ label: String, _ value: String) -> String { label.padding(toLength: 12, withPad: " ", startingAt: 0) + value }
        var out = [
            row("Name", a.name),
            row("Id", full?.id ?? "?"),
            row("Type", "\(a.mediaKind) (\(a.isVideo ? "video" : "photo")), \(humanSize(a.size)) (\(a.size) bytes)"),
            row("Captured", UTCDate.format(a.captureDate) + " UTC"),
        ]
        if let f = full { out.append(row("Added", shortDate(f.addedDate) + " UTC")) }
        out.append(row("Location", a.hasLocation ? "yes (GPS position in its metadata)" : "no"))
        let names = a.albums.compactMap { Int($0) < albums.count ? (albums[Int($0)].isShared ? "Shared: " : "") + albums[Int($0)].name : nil }
        out.append(row("Albums", names.isEmpty ? "-" : names.joined(separator: ", ")))
        out.append(row("Shared", a.isShared ? "yes (cloud-shared)" : "no"))
        if let f = full {
            out.append(row("Owner", f.owner?.rawValue ?? "-"))
            out.append(row("Hash", f.contentHash))
            out.append(row("File", (try? library.originalPath(f)) ?? "- (damaged: see photogate verify)"))
        }
        let granted = model.isGranted(a)
        let kind = model.mode == .selection ? "in the selection" : "picked"
        out.append(row("Now", granted ? kind : "not \(kind)"))
        out.append(row("Selected", model.isSelected(a) ? "yes" : "no"))
        if ExternalViewer.available() == nil {
            out.append("")
            out.append("(no desktop viewer: $DISPLAY/$WAYLAND_DISPLAY unset or xdg-open missing)")
        }
        return ("Details of " + a.name, out)
    }
}
