import ArgumentParser
import Foundation
import GrantStore
import LibraryRun
import Picker
import WebUI
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

struct UI: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "ui",
        abstract: "Serve the web app: apps' access, requests and a photo picker.",
        usage: "photogate ui [--port <port>] [--open] [<options>]",
        discussion: """
            Prints the address to open, with a one-time secret, as the first line of standard \
            output, then serves until interrupted (Ctrl-C). It listens on 127.0.0.1 only, and \
            answers only to a random name of its own under .localhost (the address shows it). The secret \
            is exchanged for a cookie on first use and opens nothing after: run `photogate ui` again \
            for another browser. --open opens it in the desktop's browser (through a private file, \
            so the secret never appears in a process list).

            The page does what the CLI does, with the same library calls: every app's access \
            (change it, strip location, edit consent), the picker (thumbnails, search, albums, \
            ranges, continuous mode), requests answered in one click, Recently Deleted, and what \
            each app did (photogate report). A change made in the CLI shows in an open page at once.

            Examples:
              photogate ui
              photogate ui --open --port 8765
              photogate pick org.example.Editor --web
            """)
    @Option(help: ArgumentHelp("The port on 127.0.0.1 (default: a free one).", valueName: "port")) var port: Int = 0
    @Flag(help: "Open the page in the desktop's browser (xdg-open).") var open = false
    @OptionGroup var lib: LibraryOption

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port is 0 to 65535") }
    }

    func execute() throws {
        try UI.serve(library: lib.open(), pickApp: nil, query: "", port: port, open: open)
    }

    static func serve(library: Library, pickApp: AppID?, query: String, port: Int, open: Bool) throws {
        // Held open for long, as a mount is: marked in use now, so that a catalog file replaced
        // under it is told to every command (CatalogFiles).
        try library.markInUse()
        let app = try WebApp(library: library, pickApp: pickApp, query: query)
        let run = library.paths.run
        let portFile = run + "/" + RunFolder.uiPort
        let openFile = run + "/ui-\(getpid()).html"
        let ourPort = Mutex<String>("")
        // At the end: the redirect file (it holds the secret) and the port file, if it is still
        // this server's (another ui of the library may have written it since).
        let cleanup: @Sendable () -> Void = {
            unlink(openFile)
            let mine = ourPort.withLock { $0 }
            if !mine.isEmpty, let text = try? String(contentsOfFile: portFile, encoding: .utf8), text == mine { unlink(portFile) }
        }
        defer { cleanup() }
        try app.run(port: port, atExit: cleanup) { url in
            // The first line of standard output, flushed: scripts read it.
            FileHandle.standardOutput.write(Data((url + "\n").utf8))
            // Where a request's desktop notification links (the address without its secret).
            if let p = url.split(separator: ":").dropFirst(2).first?.prefix(while: \.isNumber) {
                let fd = Glibc.open(portFile, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
                let host = url.dropFirst("http://".count).prefix(while: { $0 != ":" })
                let line = "\(p) \(getpid()) \(host)"
                if fd >= 0 { _ = line.withCString { write(fd, $0, strlen($0)) }; close(fd) }
                ourPort.withLock { $0 = line }
            }
            if open { UI.openInBrowser(url, file: openFile) }
            FileHandle.standardError.write(Data("photogate ui: serving on 127.0.0.1 until interrupted (Ctrl-C)\n".utf8))
        }
    }

    /// Opens the URL through a private HTML file that redirects to it: a browser's command line
    /// is readable by every local user, the file is not.
    static func openInBrowser(_ url: String, file: String) {
        guard let tool = ExternalViewer.available() else {
            FileHandle.standardError.write(Data("photogate ui: no desktop browser to open (no $DISPLAY or xdg-open): open the address above\n".utf8))
            return
        }
        let html = "<!doctype html><meta http-equiv=\"refresh\" content=\"0;url=\(url)\"><a href=\"\(url)\">photogate</a>\n"
        let fd = Glibc.open(file, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        _ = html.withCString { write(fd, $0, strlen($0)) }
        close(fd)
        _ = ExternalViewer.open(file, with: tool)
    }
}
