import ArgumentParser
import GrantStore

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show an app's status for both access levels and its options.",
                                                    discussion: "Example: photogate status org.example.Editor --json")
    @Argument(help: "The app id.") var app: String
    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag

    func run() throws {
        try photogate.run {
            let a = try lib.open().requireApp(parseApp(app))
            if output.json {
                printJSON(statusJSON(a))
            } else {
                say("app:             \(a.id)")
                say("read-write:      \(a.readWrite.rawValue)")
                say("add-only:        \(a.addOnly.rawValue)")
                say("strip-location:  \(a.options.stripLocation ? "on" : "off")")
                say("prevent-prompt:  \(a.options.preventPrompt ? "on" : "off")")
                say("edit-any:        \(a.options.editAny ? "on" : "off")")
            }
        }
    }
}
