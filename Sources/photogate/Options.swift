import ArgumentParser
import GrantStore

enum Toggle: String, ExpressibleByArgument, CaseIterable {
    case on, off
    var bool: Bool { self == .on }
}

struct Options: PhotogateCommand {
    static let offersNewApp = true
    static let configuration = CommandConfiguration(
        commandName: "options",
        abstract: "Show or set an app's options: location, prompts, edits, HEIC as JPEG.",
        // A short synopsis: argument-parser does not wrap the generated one at 80 columns (issue 16).
        usage: "photogate options <app> [<options>]",
        discussion: """
            strip-location: every file the app reads carries no location (the picker's Options menu).
            prevent-prompt: touching the mount while not-determined records no request (nor an edit request).
            edit-any: the app may edit every asset it can see without asking (a trusted editor); turning \
            it on answers the app's pending edit requests.
            compatible: the app sees HEIC/HEIF photos as JPEG (IMG_0001.HEIC as IMG_0001.jpg), made on \
            first use and cached in the library, for apps that cannot read HEIC; it cannot save them.

            Setting options of an app that is not known yet is refused (exit 66) unless --new-app \
            registers it (e.g. to set strip-location before its first mount).

            Example: photogate options org.example.Editor --strip-location on
            """)

    @Argument(help: "The app id.", completion: Complete.apps) var app: String
    @Option(help: "on or off.") var stripLocation: Toggle?
    @Option(help: "on or off.") var preventPrompt: Toggle?
    @Option(help: "on or off.") var editAny: Toggle?
    @Option(help: "on or off.") var compatible: Toggle?
    @Flag(help: "Register the app if it is not known yet (otherwise an unknown app is refused, exit 66).") var newApp = false
    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag

    func execute() throws {
        do {
            let id = try parseApp(app)
            let library = try lib.open()
            let record: AppRecord
            if stripLocation == nil && preventPrompt == nil && editAny == nil && compatible == nil {
                record = try library.requireApp(id)
            } else {
                record = try library.setOptions(id, stripLocation: stripLocation?.bool, preventPrompt: preventPrompt?.bool,
                                                editAny: editAny?.bool, compatible: compatible?.bool, registering: newApp)
            }
            if output.json {
                printJSON(["app": id.rawValue, "stripLocation": record.options.stripLocation, "preventPrompt": record.options.preventPrompt,
                           "editAny": record.options.editAny, "compatible": record.options.compatible] as [String: Any])
            } else {
                say("strip-location: \(record.options.stripLocation ? "on" : "off")")
                say("prevent-prompt: \(record.options.preventPrompt ? "on" : "off")")
                say("edit-any: \(record.options.editAny ? "on" : "off")")
                say("compatible: \(record.options.compatible ? "on" : "off")")
            }
        }
    }
}
