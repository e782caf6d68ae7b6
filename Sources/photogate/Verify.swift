import ArgumentParser
import Foundation
import GrantStore
import PhotoLibrary
import LibraryRun
#if canImport(Glibc)
import Glibc
#endif

struct Verify: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check every original's hash, and that every file is accounted for.",
        // A short synopsis: argument-parser does not wrap the generated one at 80 columns (issue 16).
        usage: "photogate verify [--repair] [<options>]",
        discussion: """
            Hashes every asset's original (store files, and --reference originals where they are) on \
            several threads and compares it with the catalog; reports store files no asset names, temp \
            folders left by processes that died, and anything in the library other users could read. \
            Changes nothing unless --repair. Exit 0 when nothing is wrong (after --repair: when \
            everything was repaired), 76 when something is (each problem is printed), the usual codes \
            when the library cannot be opened.

            --repair: makes owner-only what others could read; recovers dead temp folders as an import \
            or a mount does (committed files roll forward into the store, files whose close had \
            succeeded become the app's assets, incomplete ones are deleted, except that one holding \
            some asset's bytes is kept in lost+found/); restores a damaged or missing original from a \
            file with its exact bytes (an unaccounted store file, a file in lost+found/, or another \
            asset's original), moving the damaged copy to lost+found/; and moves unaccounted files to \
            <library>/lost+found/<time>/. It never deletes a file that holds an asset's bytes, and never \
            writes outside the library: a referenced original that changed or vanished is only reported \
            (import it again, or trash the asset).

            Examples:
              photogate verify
              photogate verify --json | jq '.problems[] | select(.kind == "damaged")'
              photogate verify --repair
            """)

    @Flag(help: "Fix what can be fixed (see above); without it nothing is changed.")
    var repair = false
    @Flag(help: "With --repair: move store files no asset names to lost+found/ even when they are most of the store.")
    var force = false
    @Flag(help: "Make every store file no asset names an asset again (after a lost catalog); grants, albums and history are not rebuilt.")
    var rebuild = false
    @Flag(help: "Go on with the catalog the database file holds when its write-ahead log was lost after a kill (the changes it held are lost; photos among them are listed as orphans: --rebuild makes them assets again).")
    var acceptLostLog = false

    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag
    @OptionGroup var columns: ColumnsOption

    func validate() throws {
        if force && !repair { throw ValidationError("--force goes with --repair") }
        if rebuild && repair { throw ValidationError("--rebuild and --repair are two runs: rebuild first, then verify") }
    }

    func execute() throws {
        if acceptLostLog { Library.acceptLostLog.store(true, ordering: .relaxed) }
        if rebuild { return try rebuildCatalog() }
        var failed = false
        do {
            let library = try lib.open()
            let tty = isatty(2) == 1
            var lastDraw = Date.distantPast
            let report = try Verifier(library: library, options: VerifyOptions(repair: repair, force: force)).run { p in
                guard tty else { return }
                let now = Date()
                guard now.timeIntervalSince(lastDraw) > 0.1 || p.filesDone == p.filesTotal else { return }
                lastDraw = now
                var line = "\r\u{1B}[Kverifying \(p.filesDone)/\(p.filesTotal) files"
                if p.bytesTotal > 0 { line += ", \(humanSize(p.bytesDone)) of \(humanSize(p.bytesTotal))" }
                FileHandle.standardError.write(Data(line.utf8))
                if p.filesDone == p.filesTotal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
            }
            failed = !report.ok
            if output.json {
                printJSON(Verify.json(report))
                if failed { throw ExitCode(Exit.verifyProblems.rawValue) }
                return
            }
            if outputIsPiped || columns.columns != nil {
                // For scripts (issue 16): a header and one tab-separated row per problem; the
                // summary stays the last line.
                try printTable(["KIND", "PATH", "ID", "NAME", "DETAIL", "ACTION", "REPAIRED"], report.problems.map { p in
                    [p.kind.rawValue, p.path.isEmpty ? "-" : p.path, p.asset ?? "-", p.name ?? "-", p.detail, p.action ?? "-",
                     p.repaired ? "yes" : "no"]
                }, columns: columns)
            } else {
                for p in report.problems {
                    var line = "\(p.kind.rawValue)  \(p.path.isEmpty ? "-" : p.path)"
                    if let id = p.asset { line += "  \(id)" }
                    if let n = p.name { line += "  \(n)" }
                    line += ": \(p.detail)"
                    if let a = p.action { line += (p.repaired ? "; repaired: " : "; ") + a }
                    say(line)
                }
            }
            let open = report.problems.filter { !$0.repaired }.count
            let repaired = report.problems.count - open
            var summary = "checked \(report.assets) asset\(report.assets == 1 ? "" : "s") (\(report.filesHashed) files, "
                + "\(humanSize(report.bytesHashed)) hashed) in \(String(format: "%.1f", report.seconds)) s: "
            if report.problems.isEmpty {
                summary += "no problems"
            } else {
                summary += "\(report.problems.count) problem\(report.problems.count == 1 ? "" : "s")"
                if report.repair { summary += ", \(repaired) repaired" }
                if open > 0 && !report.repair { summary += " (nothing was changed; --repair fixes what it can)" }
            }
            if report.lostAndFound > 0 { summary += "; \(report.lostAndFound) file\(report.lostAndFound == 1 ? "" : "s") in \(LostAndFound.folder)/" }
            say(summary)
        }
        if failed { throw ExitCode(Exit.verifyProblems.rawValue) }
    }

    /// `--rebuild`: the store's files no asset names become assets again (Library.rebuild).
    func rebuildCatalog() throws {
        let paths = lib.paths
        let running = MountRegistry.list(paths.runFolder)
        if !running.isEmpty {
            throw CommandFailure("the library has mounts running (\(running.map(\.mountpoint).joined(separator: ", "))): unmount them first (photogate unmount)", .conflict)
        }
        let r = try Library.rebuild(at: paths) { line in if !output.json { say(line) } }
        if output.json {
            printJSON([
                "damagedCatalog": r.damagedCatalog ?? NSNull(), "rebuilt": r.assets.map { ["id": $0.id, "path": "store/" + $0.path] },
                "alreadyNamed": r.alreadyNamed, "skipped": r.skipped.map { ["path": $0.path, "why": $0.why] },
            ] as [String: Any])
            return
        }
        for s in r.skipped { printWarning("\(s.path) not rebuilt: \(s.why)") }
        if let d = r.damagedCatalog { say("the damaged catalog is kept as \(d)") }
        say("rebuilt \(r.assets.count) asset\(r.assets.count == 1 ? "" : "s") from the store (\(r.alreadyNamed) store file\(r.alreadyNamed == 1 ? " was" : "s were") an asset's already). "
            + (r.damagedCatalog == nil
                ? "The rest of the catalog was kept. They are the person's, named after their store files; their own names, grants and albums were in the part of the catalog that was lost: grant again what apps should see"
                : "They are the person's, named after their store files; grants, albums, apps, names and history were in the catalog and are gone: grant again what apps should see"))
    }

    /// The stable JSON object (docs/guide.md, "JSON"; fields are only ever added).
    static func json(_ r: VerifyReport) -> [String: Any] {
        var counts: [String: Int] = [:]
        for k in VerifyProblem.Kind.allCases { counts[k.rawValue] = 0 }
        for p in r.problems { counts[p.kind.rawValue, default: 0] += 1 }
        return [
            "ok": r.ok,
            "repair": r.repair,
            "assets": r.assets,
            "filesHashed": r.filesHashed,
            "bytesHashed": r.bytesHashed,
            "seconds": (r.seconds * 1000).rounded() / 1000,
            "lostAndFound": r.lostAndFound,
            "counts": counts,
            "problems": r.problems.map { p -> [String: Any] in
                [
                    "kind": p.kind.rawValue, "path": p.path, "id": p.asset ?? NSNull(), "name": p.name ?? NSNull(),
                    "detail": p.detail, "repaired": p.repaired, "action": p.action ?? NSNull(),
                ]
            },
        ]
    }
}

