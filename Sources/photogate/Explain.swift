import ArgumentParser
import Foundation
import GrantStore
import PhotoLibrary
import Redaction

struct Explain: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "explain",
        abstract: "Say what an app gets for an asset, and why.",
        // A short synopsis: argument-parser does not wrap the generated one at 80 columns (issue 16).
        usage: "photogate explain <app> <asset> [<options>]",
        discussion: """
            Whether the app sees it, which byte ranges it reads redacted, or why it is refused. \
            With strip-location (the app's option or the asset's grant), an app reads the file with \
            its location bytes zeroed in place: same size, every other byte unchanged. If the file's \
            metadata cannot be parsed with confidence, the app cannot open it at all (EACCES).

            Example: photogate explain org.example.Editor IMG_0001.jpg --json
            """)

    @Argument(help: "The app id.", completion: Complete.apps) var app: String
    @Argument(help: "The asset: an id, or a name as the app sees it, else a library display name (see `photogate help grant`).", completion: Complete.assets) var asset: String
    @Option(help: "read-write or add-only.") var access: AccessLevel = .readWrite
    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag

    func execute() throws {
        do {
            let e = try lib.open().explain(parseApp(app), asset: asset, access: access)
            var verdict = e.visible ? "visible" : "hidden (ENOENT)"
            var ranges: [[String: Any]] = []
            var refused: String? = nil
            if e.visible, e.stripLocation {
                switch e.redaction {
                case .plan(let p)?:
                    verdict = p.isEmpty ? "visible, no location to strip" : "visible, location stripped"
                    ranges = p.patches.map { ["offset": $0.offset, "length": $0.length, "kind": $0.replacement == nil ? "zero" : "replace"] }
                case .refuse(let why)?:
                    verdict = "refused (EACCES): strip-location is on and the metadata cannot be parsed with confidence"
                    refused = why
                case nil: break
                }
            }
            // What the mount's open finds (the same check): refused or damaged whatever else holds.
            if e.visible {
                switch e.original {
                case .referenceChanged?:
                    verdict = "refused (EACCES): its referenced original changed after it was imported (photogate verify reports it)"
                case .storeDamaged?:
                    verdict = "unreadable (EIO): its store file is not the size the catalog says (damaged; photogate verify reports it)"
                case .same?: break
                case nil: verdict = "unreadable (EIO): its original cannot be opened (\(e.openError ?? "?"))"
                }
            }
            if output.json {
                var d: [String: Any] = [
                    "app": e.app.id.rawValue, "access": e.access.rawValue, "asset": assetJSON(e.asset, name: e.name), "name": e.name, "visible": e.visible,
                    "verdict": verdict, "reason": e.reason, "stripLocation": e.stripLocation, "redactedRanges": ranges,
                ]
                if let s = e.stripReason { d["stripReason"] = s }
                if let r = refused { d["refusal"] = r }
                d["edit"] = ["decision": e.edit.label, "reason": e.edit.reason] as [String: Any]
                d["compatible"] = e.decision.compatible
                d["delete"] = e.decision.canDelete
                d["rename"] = e.decision.canRename
                d["renameReason"] = e.decision.renameReason
                d["version"] = e.currentVersion
                d["edits"] = e.edits
                d["sidecars"] = e.sidecars.map { s -> [String: Any] in
                    var o: [String: Any] = ["name": s.name, "version": s.sidecar.version, "size": s.sidecar.size, "hasLocation": s.sidecar.hasLocation]
                    if e.stripLocation {
                        switch s.sidecar.redaction {
                        case .plan(let p): o["redaction"] = p.isEmpty ? "none" : "location removed"
                        case .refuse(let why): o["redaction"] = "refused: \(why)"
                        }
                    }
                    return o
                }
                d["sidecarEdit"] = ["decision": e.sidecarEdit.label, "reason": e.sidecarEdit.reason] as [String: Any]
                printJSON(d)
            } else {
                say("\(e.asset.displayName) (\(e.asset.id)) for \(e.app.id) (\(e.access.rawValue), status \(e.app.status(for: e.access).rawValue)): \(verdict)")
                if e.name != e.asset.displayName {
                    say(e.facts.isOwned && e.name == e.asset.ownerName ? "  name: \(e.app.id) created it and sees it as '\(e.name)'"
                                                                       : "  name: \(e.app.id) sees it as '\(e.name)'")
                }
                say("  why: \(e.reason)")
                if let s = e.stripReason { say("  strip-location: \(s)") }
                if e.decision.compatible { say("  compatible: read as a JPEG made from it (the app's compatible option is on)") }
                if let r = refused { say("  refusal: \(r)") }
                say("  edit: \(e.edit.label) (\(e.edit.reason))")
                say("  delete: \(e.decision.canDelete ? "allowed (to Recently Deleted)" : "no")")
                say("  rename: \(e.decision.canRename ? "allowed" : "no (EACCES)") (\(e.decision.renameReason))")
                if e.edits > 0 { say("  version: \(e.currentVersion == 0 ? "the original" : "edit \(e.currentVersion)") of \(e.edits) edit\(e.edits == 1 ? "" : "s")") }
                for s in e.sidecars {
                    var how = "version \(s.sidecar.version), \(s.sidecar.size) bytes"
                    if e.stripLocation {
                        switch s.sidecar.redaction {
                        case .plan(let p) where !p.isEmpty: how += "; read with its location removed"
                        case .refuse(let why): how += "; refused (EACCES): \(why)"
                        default: break
                        }
                    }
                    say("  sidecar: \(s.name) (\(how))")
                }
                if e.visible { say("  sidecars: \(e.sidecarEdit.isAllowed ? "may write" : "may not write (EACCES)") (\(e.sidecarEdit.reason))") }
                if !ranges.isEmpty {
                    say("  redacted ranges (\(ranges.count)):")
                    for r in ranges { say("    offset \(r["offset"]!)  length \(r["length"]!)  \(r["kind"]!)") }
                }
            }
        }
    }
}
