import ArgumentParser
import Foundation
import GrantStore
import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

/// Shell completion of what the library holds (issue 38): app ids, asset names and ids, album
/// names. The scripts argument-parser generates (`photogate --generate-completion-script bash`,
/// installed by scripts/install) run `photogate ---completion <command> -- <argument> ...` with
/// the words typed so far; the library is the one those words name (`--library DIR`, or mount's
/// `-o library=DIR`), else $PHOTOGATE_LIBRARY and the default, as for the command itself. The
/// library is only read, by one query (`Library.completions`): never opened for writing, never
/// purged, and nothing is printed but the candidates.
enum Complete {
    static let apps = kind(.apps)
    static let assets = kind(.assets)
    static let trashedAssets = kind(.trashedAssets)
    static let albums = kind(.albums)
    static let userAlbums = kind(.userAlbums)
    static let sharedAlbums = kind(.sharedAlbums)

    static func kind(_ source: CompletionSource) -> CompletionKind {
        .custom { words, index, prefix in
            let shell = CompletionShell.requesting
            var out: [String] = []
            var seen = Set<String>()
            for c in Library.completions(source, prefix: shellWord(prefix), at: LibraryPaths.resolve(library(in: words, completing: index))) {
                guard let word = offered(c, shell: shell), seen.insert(word).inserted else { continue }
                out.append(quoted(word, for: shell))
            }
            return out
        }
    }

    /// What is offered for a candidate: its name, or, when the name cannot be offered safely,
    /// the asset's id (nothing for an app or album). A name is printed to the terminal as it
    /// is, and goes into the command line as the shell escapes it; an app names its files as it
    /// likes, and must not steer the person's terminal or command line by it:
    /// - characters a terminal obeys or shows out of order (`DisplayName.isUnsafe`);
    /// - a leading `-`, which the command would read as an option;
    /// - for bash, `$`, a backquote and a leading `~`: readline inserts them unescaped (with
    ///   `complete -o filenames`, for a name that is not a file here), so that pressing Enter
    ///   would expand them: `` `id`.jpg `` would run `id`.
    static func offered(_ c: CompletionCandidate, shell: CompletionShell?) -> String? {
        var safe = !DisplayName.containsUnsafe(c.name) && !c.name.hasPrefix("-")
        if shell == .bash && (c.name.contains("$") || c.name.contains("`") || c.name.hasPrefix("~")) { safe = false }
        return safe ? c.name : c.id
    }

    /// A name as the requesting shell's completion script must receive it to insert it as one
    /// literal word. Names come from apps (the files they make) as much as from the person, and
    /// may hold spaces, quotes, `$(...)` or backquotes:
    /// - bash: the generated script filters candidates through `compgen -W`, which expands each
    ///   one (command substitution included: an asset named `$(rm -rf ~).jpg` would run): the
    ///   name is single-quoted, so that the expansion gives it back as it is; readline then
    ///   escapes it as it inserts it (the script's `complete -o filenames`; see `offered`);
    /// - zsh: `_describe` reads `name:description`: a colon and a backslash are escaped;
    /// - fish: candidates are taken as they are, one per line, and escaped by fish.
    static func quoted(_ name: String, for shell: CompletionShell?) -> String {
        switch shell {
        case .bash?:
            return "'" + name.replacingOccurrences(of: "'", with: "'\\''") + "'"
        case .zsh?:
            return name.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: ":", with: "\\:")
        default:
            return name
        }
    }

    /// The library the command line names so far, if it names one.
    static func library(in words: [String], completing index: Int) -> String? {
        var found: String?
        var i = 0
        while i < words.count {
            let w = words[i]
            if w == "--" { break }   // run's command follows
            let value = i + 1 < words.count && i + 1 != index ? shellWord(words[i + 1]) : nil
            if w == "--library", let value {
                found = value
                i += 1
            } else if w.hasPrefix("--library=") {
                found = shellWord(String(w.dropFirst("--library=".count)))
            } else if w == "-o" || w.hasPrefix("-o") && w.count > 2 {
                let options = w == "-o" ? value : shellWord(String(w.dropFirst(2)))
                for o in (options ?? "").split(separator: ",") where o.hasPrefix("library=") {
                    found = String(o.dropFirst("library=".count))
                }
                if w == "-o" { i += 1 }
            }
            i += 1
        }
        return found.map(expandTilde)
    }

    /// A word as the shell would pass it on: its quotes and backslashes removed (the completion
    /// scripts pass words as typed). Variables and `~` are left as they are.
    static func shellWord(_ raw: String) -> String {
        var out = ""
        var quote: Character?
        var escape = false
        for c in raw {
            if escape {
                out.append(c)
                escape = false
            } else if let q = quote {
                if c == q { quote = nil } else if c == "\\" && q == "\"" { escape = true } else { out.append(c) }
            } else if c == "'" || c == "\"" {
                quote = c
            } else if c == "\\" {
                escape = true
            } else {
                out.append(c)
            }
        }
        return out
    }

    /// `~` and `~/x` as the home folder, `~user/x` as that user's (for a library's path: a name
    /// being completed may start with `~`).
    static func expandTilde(_ path: String) -> String {
        guard path.hasPrefix("~") else { return path }
        let rest = path.dropFirst()
        let user = rest.prefix { $0 != "/" }
        let home: String?
        if user.isEmpty {
            home = ProcessInfo.processInfo.environment["HOME"]
        } else if let pw = getpwnam(String(user)), let dir = pw.pointee.pw_dir {
            home = String(cString: dir)
        } else {
            home = nil
        }
        guard let home else { return path }
        return home + rest.dropFirst(user.count)
    }
}
