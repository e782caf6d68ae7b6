import PhotoLibrary

/// The `-o` options of `photogate mount`, as typed or as mount(8)/mount.fuse3 pass them from an
/// fstab line (`access=add-only,library=/srv/photos,rw,nosuid,nodev,...`).
struct MountOptionList: Equatable {
    /// `access=read-write|add-only` (overrides --access).
    var access: AccessLevel?
    /// `library=DIR` (overrides --library and $PHOTOGATE_LIBRARY).
    var library: String?
    /// `no_passthrough` / `passthrough=off`.
    var noPassthrough = false
    var allowOther = false
    /// `no_open`: a no-open mount (read-only; the kernel opens files without asking).
    var noOpen = false
    /// Options for libfuse and the kernel (mount flags, default_permissions, ...).
    var fuse: [String] = []

    /// What libfuse accepts as mount options (generic mount flags and FUSE's own).
    static let fuseFlags: Set<String> = [
        "rw", "ro", "suid", "nosuid", "dev", "nodev", "exec", "noexec", "async", "sync", "dirsync",
        "atime", "noatime", "diratime", "nodiratime", "relatime", "norelatime", "strictatime",
        "nostrictatime", "lazytime", "nolazytime", "default_permissions", "allow_root", "auto_unmount",
    ]
    static let fuseKeys: Set<String> = ["max_read", "blksize"]
    /// Options that would change what the mount table says the mount is (`fuse.NAME`, its
    /// source): views are told apart by them, so they are photogate's to set.
    static let namingKeys: Set<String> = ["fsname", "subtype"]
    /// Options for mount(8) itself, meaningless to a FUSE daemon: accepted and ignored, so an
    /// fstab line may carry them (mount.fuse3 drops most of them before calling us).
    static let ignoredFlags: Set<String> = ["defaults", "auto", "noauto", "user", "nouser", "users", "owner",
                                            "group", "nofail", "_netdev", "loud", "silent"]
    static let ignoredKeys: Set<String> = ["comment", "setuid", "drop_privileges"]

    /// Parses every `-o` value (each comma-separated; `\,` is a literal comma, and so is one inside
    /// double quotes, which libmount keeps from an fstab line: `library="/srv/a,b"`).
    init(_ values: [String]) throws {
        for value in values {
            for opt in Self.split(value) where !opt.isEmpty {
                let key = opt.split(separator: "=", maxSplits: 1).first.map(String.init) ?? opt
                let val = opt.contains("=") ? String(opt.drop(while: { $0 != "=" }).dropFirst()) : nil
                switch (key, val) {
                case ("access", let v?):
                    guard let a = AccessLevel(rawValue: v) else {
                        throw CommandFailure("invalid mount option \(opt): access is read-write or add-only", .usage)
                    }
                    access = a
                case ("library", let v?) where !v.isEmpty: library = v
                case ("no_passthrough", nil), ("passthrough", "off"), ("passthrough", "no"): noPassthrough = true
                case ("passthrough", nil), ("passthrough", "on"), ("passthrough", "auto"): noPassthrough = false
                case ("allow_other", nil): allowOther = true
                case ("no_open", nil): noOpen = true
                case (let k, nil) where Self.fuseFlags.contains(k): fuse.append(k)
                case (let k, _?) where Self.fuseKeys.contains(k): fuse.append(opt)
                case (let k, _) where Self.namingKeys.contains(k):
                    throw CommandFailure("mount option \(opt) is refused: a view's type (fuse.photogate) and source (photogate:APP) are how photogate and other tools tell views apart", .usage)
                case (let k, nil) where Self.ignoredFlags.contains(k): continue
                case (let k, _) where k.hasPrefix("x-") || Self.ignoredKeys.contains(k): continue
                default:
                    throw CommandFailure("unknown mount option \(opt) (photogate takes access=, library=, no_passthrough, no_open, allow_other and the usual mount flags)", .usage)
                }
            }
        }
    }

    static func split(_ s: String) -> [String] {
        var out: [String] = [], cur = "", escaped = false, quoted = false
        for ch in s {
            if escaped { cur.append(ch); escaped = false }
            else if ch == "\\" { escaped = true }
            else if ch == "\"" { quoted.toggle() }
            else if ch == "," && !quoted { out.append(cur); cur = "" }
            else { cur.append(ch) }
        }
        out.append(cur)
        return out
    }

    /// The options to hand the background daemon (library and access are passed as flags).
    var daemonArguments: [String] {
        var opts = fuse
        if allowOther { opts.append("allow_other") }
        return opts.isEmpty ? [] : ["-o", opts.map { $0.replacingOccurrences(of: ",", with: "\\,") }.joined(separator: ",")]
    }
}

/// An app id as typed, or as an fstab source: `photogate#APP` (the mount.fuse3 convention) or
/// `/path/to/photogate#APP` (fstab type `fuse`).
func appFromMountSource(_ source: String) -> String {
    guard let hash = source.lastIndex(of: "#") else { return source }
    return String(source[source.index(after: hash)...])
}
