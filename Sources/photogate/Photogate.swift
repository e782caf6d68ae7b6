import ArgumentParser
import Foundation
import GrantStore
#if canImport(Glibc)
import Glibc
#endif

/// The release this binary was built from (`photogate --version`). scripts/install checks it.
let photogateVersion = "0.16.0"

@main
struct Photogate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "photogate",
        abstract: "Give every app its own limited view of a photo library (FUSE).",
        discussion: """
            A library is a folder with the original files (the store) and a database of assets, albums, \
            apps and their grants. Each app mounts its own view: only what the person granted it, \
            plus what it created. Grants change live from this command line.

            mount(8) and /etc/fstab work too (`mount -t fuse.photogate`): see `photogate help mount`.

            Exit codes are stable: see `photogate help exit-codes`.
            """,
        version: photogateVersion,
        subcommands: [
            Init.self, Import.self, Assets.self, AlbumCommand.self, Albums.self,
            Apps.self, Authorize.self, Status.self, Grant.self, Revoke.self, Grants.self, Options.self, Pick.self,
            Requests.self, Delete.self, Trash.self, Restore.self, Mount.self, Unmount.self, Mounts.self, Run.self, Changes.self, Explain.self,
            Versions.self, Revert.self, Verify.self, Backup.self, Migrate.self, Refused.self, Report.self, UI.self, ExitCodes.self,
            DebugFillCatalog.self,
        ]
    )

    /// mount.fuse3 runs `photogate SOURCE MOUNTPOINT -o OPTIONS` (no subcommand): read that as
    /// `photogate mount SOURCE MOUNTPOINT -o OPTIONS`. Everything else parses as usual.
    static func main() {
        // Everything photogate creates (library files, logs, what its daemons make) is owner-only.
        LibraryPrivacy.restrictUmask()
        let args = Array(CommandLine.arguments.dropFirst())
        // A completion script asking for candidates (`Complete`): whatever goes wrong (a script
        // of an older photogate naming an argument this one does not have, say), nothing may
        // land in the middle of the person's command line: only the candidates, on stdout.
        if args.first == "---completion" {
            let null = open("/dev/null", O_WRONLY | O_CLOEXEC)
            if null >= 0 { dup2(null, 2); close(null) }
        }
        // Only a line that can be mount.fuse3's needs the subcommands' names (cheap now: every
        // command names itself, so none is derived from its type's name).
        let names = configuration.subcommands.map { $0._commandName }
        let helper = args.count >= 2 && args[1].hasPrefix("/")
            ? MountHelperArguments.rewrite(args, subcommands: names) : nil
        if helper == nil, let unknown = UnknownCommand.find(args, subcommands: names) {
            // argument-parser says "2 unexpected arguments" for `photogate delet a b` (it reads
            // the words as arguments of the root command, which takes none).
            printError("no such command: \(unknown)" + (UnknownCommand.nearest(unknown, in: names).map { " (did you mean '\($0)'?)" } ?? ""))
            FileHandle.standardError.write(Data("Usage: photogate <subcommand>\n  See 'photogate --help' for the commands.\n".utf8))
            Glibc.exit(Exit.usage.rawValue)
        }
        main(helper ?? args)
    }
}

/// A first word that names no subcommand (`photogate delet`, `photogate help delet`).
enum UnknownCommand {
    /// The unknown command word, or nil when the line starts with a subcommand, a flag, or nothing.
    static func find(_ args: [String], subcommands: [String]) -> String? {
        guard var word = args.first, !word.hasPrefix("-") else { return nil }
        if word == "help" {
            guard args.count >= 2, !args[1].hasPrefix("-") else { return nil }
            word = args[1]
        }
        return subcommands.contains(word) || word == "help" ? nil : word
    }

    /// The subcommand a typo most likely meant: at most 2 edits away, or one it starts.
    static func nearest(_ word: String, in names: [String]) -> String? {
        let w = Array(word.lowercased())
        func distance(_ b: [Character]) -> Int {
            var row = Array(0...b.count)
            for (i, x) in w.enumerated() {
                var prev = row[0]
                row[0] = i + 1
                for (j, y) in b.enumerated() {
                    let cur = row[j + 1]
                    row[j + 1] = min(row[j + 1] + 1, row[j] + 1, prev + (x == y ? 0 : 1))
                    prev = cur
                }
            }
            return row[b.count]
        }
        let visible = names.filter { !$0.hasPrefix("debug-") }
        let scored = visible.map { ($0, distance(Array($0))) }.filter { $0.1 <= 2 }.sorted { ($0.1, $0.0) < ($1.1, $1.0) }
        if let best = scored.first { return best.0 }
        return w.count >= 3 ? visible.first { $0.hasPrefix(word.lowercased()) } : nil
    }
}

/// The mount helper convention (mount.fuse3, from fstab or `mount -t fuse.photogate`).
enum MountHelperArguments {
    /// `SOURCE MOUNTPOINT [-o OPTS]...` → `mount SOURCE MOUNTPOINT [-o OPTS]...`; nil if `args`
    /// starts with a subcommand or a flag (then it is an ordinary command line).
    static func rewrite(_ args: [String], subcommands: [String]) -> [String]? {
        guard args.count >= 2, let first = args.first, !first.hasPrefix("-"),
              !subcommands.contains(first), first != "help" else { return nil }
        // The mount point mount.fuse3 passes is absolute; a source has the app id (after '#').
        guard args[1].hasPrefix("/") else { return nil }
        var rest = Array(args.dropFirst(2))
        var out = ["mount", first, args[1]]
        while !rest.isEmpty {
            let a = rest.removeFirst()
            if a == "-o", !rest.isEmpty { out += ["-o", rest.removeFirst()] }
            else if a.hasPrefix("-o") && a.count > 2 { out += ["-o", String(a.dropFirst(2))] }
            else { out.append(a) }
        }
        return out
    }
}
