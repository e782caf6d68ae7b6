import ArgumentParser
import GrantStore

struct Status: PhotogateCommand {
    static let configuration = CommandConfiguration(commandName: "status",
                                                    abstract: "Show an app's status for both access levels and its options.",
                                                    discussion: "Example: photogate status org.example.Editor --json")
    @Argument(help: "The app id.", completion: Complete.apps) var app: String
    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag
    @OptionGroup var columns: ColumnsOption

    func execute() throws {
        do {
            let a = try lib.open().requireApp(parseApp(app))
            if output.json {
                printJSON(statusJSON(a))
            } else if outputIsPiped || columns.columns != nil {
                // For scripts (issue 16): one row, a column per field.
                try printTable(["APP", "READ-WRITE", "ADD-ONLY", "STRIP-LOCATION", "PREVENT-PROMPT", "EDIT-ANY", "COMPATIBLE"],
                               [[a.id.rawValue, a.readWrite.rawValue, a.addOnly.rawValue, a.options.stripLocation ? "on" : "off",
                                 a.options.preventPrompt ? "on" : "off", a.options.editAny ? "on" : "off",
                                 a.options.compatible ? "on" : "off"]], columns: columns)
            } else {
                say("app:             \(a.id)")
                say("read-write:      \(a.readWrite.rawValue)")
                say("add-only:        \(a.addOnly.rawValue)")
                say("strip-location:  \(a.options.stripLocation ? "on" : "off")")
                say("prevent-prompt:  \(a.options.preventPrompt ? "on" : "off")")
                say("edit-any:        \(a.options.editAny ? "on" : "off")")
                say("compatible:      \(a.options.compatible ? "on" : "off")")
            }
        }
    }
}
