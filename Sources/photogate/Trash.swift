import ArgumentParser
import Foundation
import GrantStore

struct Trash: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "trash",
        abstract: "List Recently Deleted, and delete some or all of it for good.",
        usage: "photogate trash [--delete <asset> ... | --empty] [<options>]",
        discussion: """
            Assets go to Recently Deleted when you delete them (photogate delete) or an app does (rm \
            through its mount); the listing says who (BY: an app id, or "person") and when. \
            photogate restore ASSET brings one back.

            --delete ASSET... deletes assets in Recently Deleted for good: their catalog rows, \
            versions and stored files (a --reference original is your own file and stays); any \
            asset not in Recently Deleted refuses the whole call (exit 68), nothing deleted. ASSET \
            is an id or a name; - reads more from standard input. --empty deletes everything in \
            Recently Deleted for good, or with --older-than DAYS what was deleted more than DAYS \
            days ago.

            --purge-after DAYS turns on the automatic purge, as iOS does after 30 days: what has \
            been in Recently Deleted for more than DAYS days (1 to 3650) is deleted for good. It is \
            off unless turned on (--purge-after off turns it off again). It runs when a photogate \
            command opens the library, at most once an hour (restore never runs it), and each time \
            photogate trash lists; it says on stderr what it deleted, and the library's change log \
            records each deletion. Running mounts never run it. PURGE says when each asset goes.

            Examples:
              photogate trash --json
              photogate trash --delete 3f2a9c0d11e4b5a6
              photogate trash --empty --older-than 30
              photogate trash --purge-after 30
            """)
    @Flag(help: "Delete the assets named for good (they must be in Recently Deleted).") var delete = false
    @Flag(help: "Delete everything in Recently Deleted for good (with --older-than: what was deleted before).") var empty = false
    @Option(help: ArgumentHelp("With --empty: only what was deleted more than this many days ago.", valueName: "days"))
    var olderThan: Int?
    @Option(help: ArgumentHelp("Delete for good, automatically, what has been in Recently Deleted for more than this many days; off: never (the default).",
                               valueName: "days|off"))
    var purgeAfter: String?
    @Argument(help: "With --delete: the assets.", completion: Complete.trashedAssets) var assets: [String] = []
    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag
    @OptionGroup var columns: ColumnsOption

    func validate() throws {
        if [delete, empty, purgeAfter != nil].filter({ $0 }).count > 1 {
            throw ValidationError("--delete, --empty and --purge-after are three commands: give one")
        }
        if delete && assets.isEmpty { throw ValidationError("--delete needs the assets to delete for good") }
        if !delete && !assets.isEmpty { throw ValidationError("assets are named only with --delete (to list, name none)") }
        if olderThan != nil && !empty { throw ValidationError("--older-than goes with --empty") }
        if let d = olderThan, d < 0 { throw ValidationError("--older-than takes a number of days, 0 or more") }
    }

    func execute() throws {
        if let purgeAfter {
            let days: Int?
            switch purgeAfter.lowercased() {
            case "off", "never": days = nil
            default:
                guard let d = Int(purgeAfter) else { throw CommandFailure("--purge-after takes a number of days or off, not '\(purgeAfter)'", .usage) }
                days = d
            }
            let library = try lib.open(purge: false)
            try library.setTrashPurge(afterDays: days)
            say(Trash.describe(days))
            // Turned on: what is past its days goes now, said as every purge is.
            if days != nil { runAutomaticPurge(library, force: true) }
            return
        }
        if delete {
            let gone = try lib.open(purge: false).deleteForGood(expandRefs(assets))
            for a in gone { say("deleted for good \(a.id)  \(a.displayName)") }
            return
        }
        if empty {
            let gone = try lib.open(purge: false).emptyTrash(olderThanDays: olderThan.map(Double.init))
            for a in gone { say("deleted for good \(a.id)  \(a.displayName)") }
            sayNote("deleted for good \(gone.count) asset\(gone.count == 1 ? "" : "s") from Recently Deleted")
            return
        }
        let library = try lib.open(purge: false)
        runAutomaticPurge(library, force: true)
        let entries = try library.trashEntries()
        func by(_ d: DeletedBy) -> String? {
            switch d {
            case .person: return "person"
            case .app(let id): return id.rawValue
            case .unknown: return nil
            }
        }
        if output.json {
            printJSON(entries.map { e -> [String: Any] in
                var d = assetJSON(e.asset)
                d["deletedBy"] = by(e.deletedBy) ?? NSNull()
                d["purgeDate"] = e.purgeDate.map(iso) ?? NSNull()
                return d
            })
            return
        }
        try printTable(["ID", "NAME", "DELETED", "BY", "PURGE"], entries.map { e in
            [Cell(e.asset.id), Cell(e.asset.displayName), e.asset.trashedDate.map(Cell.date) ?? "-", Cell(by(e.deletedBy) ?? "-"),
             e.purgeDate.map(Cell.date) ?? "-"]
        }, columns: columns)
        if !outputIsPiped { sayNote(Trash.describe(try library.trashSettings().purgeAfterDays)) }
    }

    static func describe(_ days: Int?) -> String {
        guard let days else { return "Recently Deleted keeps what it holds until you delete it for good (the automatic purge is off)" }
        return "what has been in Recently Deleted for more than \(days) day\(days == 1 ? "" : "s") is deleted for good automatically "
            + "(photogate trash --purge-after off stops it)"
    }
}
