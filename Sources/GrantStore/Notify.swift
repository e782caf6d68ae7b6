import Foundation
import LibraryRun
import PhotoLibrary
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A desktop notification when an app files a request (issue 35): the freedesktop Notifications
/// service on the session bus, through `gdbus` (GLib's, on every desktop), sent in the background
/// so the mount never waits for it. No session bus, no gdbus: nothing happens, and nothing fails.
/// When `photogate ui` runs, the notification links to its Requests page (a browser that signed
/// in opens it at once); else it names the commands.
public enum RequestNotifier {
    /// At most one notification per app and kind in this long (an app asking again and again
    /// does not flood the desktop; every request is still listed).
    static let quiet: Double = 30
    private static let last = Mutex<[String: Double]>([:])

    /// The session bus's address, or nil: DBUS_SESSION_BUS_ADDRESS, else the user's bus socket.
    static func busAddress(_ env: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        if let a = env["DBUS_SESSION_BUS_ADDRESS"], !a.isEmpty { return a }
        if let dir = env["XDG_RUNTIME_DIR"], !dir.isEmpty {
            var st = stat()
            if lstat(dir + "/bus", &st) == 0, st.st_mode & S_IFMT == S_IFSOCK, st.st_uid == getuid() { return "unix:path=\(dir)/bus" }
        }
        return nil
    }

    /// Notification markup (a subset of HTML): the app's words as text.
    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    /// The address of a running `photogate ui` of this library (run/ui-port: "PORT PID HOST"), if any:
    /// only while that process lives and is this program run by this user (a ui killed with
    /// SIGKILL leaves the file, and its port could be anyone's by now).
    static func uiAddress(runDir: String) -> String? {
        guard let text = try? String(contentsOfFile: runDir + "/" + RunFolder.uiPort, encoding: .utf8) else { return nil }
        let parts = text.split(whereSeparator: \.isWhitespace)
        guard parts.count == 3, let port = Int(parts[0]), (1...65535).contains(port), let pid = Int32(parts[1]), pid > 0,
              parts[2].hasSuffix(".localhost"), parts[2].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") }) else { return nil }
        var a = stat(), b = stat()
        guard stat("/proc/\(pid)/exe", &a) == 0, stat("/proc/self/exe", &b) == 0, a.st_dev == b.st_dev, a.st_ino == b.st_ino,
              stat("/proc/\(pid)", &a) == 0, a.st_uid == getuid() else { return nil }
        return "http://\(parts[2]):\(port)"
    }

    public static func announce(app: AppID, kind: RequestKind, reason: String, runDir: String) {
        guard let bus = busAddress() else { return }
        let gdbus = "/usr/bin/gdbus"
        guard access(gdbus, X_OK) == 0 else { return }
        let key = "\(app.rawValue)\u{0}\(kind.rawValue)"
        let now = Date().timeIntervalSince1970
        let due = last.withLock { l -> Bool in
            if let t = l[key], now - t < quiet { return false }
            l[key] = now
            return true
        }
        guard due else { return }
        let title = switch kind {
        case .readWrite: "\(app) would like to access your photos"
        case .addOnly: "\(app) would like to add to your photos"
        case .picker: "\(app) asks you to choose photos"
        case .edit: "\(app) would like to edit a photo"
        }
        var body = reason.isEmpty ? "" : "“\(escape(String(reason.prefix(200))))”\n"
        if let address = uiAddress(runDir: runDir) {
            body += "<a href=\"\(address)/#/requests\">Answer in photogate</a>"
        } else {
            body += "Answer with photogate ui, or photogate requests and photogate authorize."
        }
        // gdbus's GVariant text: strings quoted, their quotes and backslashes escaped.
        func variant(_ s: String) -> String {
            "'" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
        }
        let args = [gdbus, "call", "--session", "--timeout", "5", "--dest", "org.freedesktop.Notifications",
                    "--object-path", "/org/freedesktop/Notifications", "--method", "org.freedesktop.Notifications.Notify",
                    variant("photogate"), "0", variant("dialog-question"), variant(title), variant(body),
                    "['default', 'Answer']", "{'category': <'presence'>, 'desktop-entry': <'photogate'>}", "15000"]
        // Backgrounded by a shell that exits at once (waited for here): no zombie, no wait.
        let script = ["/bin/sh", "-c", "\"$@\" </dev/null >/dev/null 2>&1 &", "sh"] + args
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        posix_spawnattr_setflags(&attr, Int16(0x80))   // POSIX_SPAWN_SETSID
        let cargs = script.map { strdup($0) } + [nil]
        defer { cargs.forEach { free($0) } }
        let envStrings: [String] = ["DBUS_SESSION_BUS_ADDRESS=\(bus)", "PATH=/usr/bin:/bin"]
        var env: [UnsafeMutablePointer<CChar>?] = envStrings.map { strdup($0) } + [nil]
        defer { env.forEach { free($0) } }
        var pid = pid_t()
        guard posix_spawn(&pid, "/bin/sh", nil, &attr, cargs, &env) == 0 else { return }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    }
}
