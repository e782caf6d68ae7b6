import ArgumentParser
import GrantStore

func statusJSON(_ a: AppRecord) -> [String: Any] {
    [
        "app": a.id.rawValue,
        "readWrite": a.readWrite.rawValue,
        "addOnly": a.addOnly.rawValue,
        "options": ["stripLocation": a.options.stripLocation, "preventPrompt": a.options.preventPrompt, "editAny": a.options.editAny,
                    "compatible": a.options.compatible],
    ]
}

struct Apps: PhotogateCommand {
    static let configuration = CommandConfiguration(commandName: "apps",
                                                    abstract: "List known apps and their authorization statuses.",
                                                    discussion: "Example: photogate apps --json")
    @OptionGroup var lib: LibraryOption
    @OptionGroup var output: JSONFlag
    @OptionGroup var columns: ColumnsOption

    func execute() throws {
        do {
            let apps = try lib.open().apps()
            if output.json {
                printJSON(apps.map(statusJSON))
            } else {
                try printTable(["APP", "READ-WRITE", "ADD-ONLY", "OPTIONS"], apps.map {
                    [$0.id.rawValue, $0.readWrite.rawValue, $0.addOnly.rawValue, optionsText($0)]
                }, columns: columns)
            }
        }
    }
}

func optionsText(_ a: AppRecord) -> String {
    var o: [String] = []
    if a.options.stripLocation { o.append("strip-location") }
    if a.options.preventPrompt { o.append("prevent-prompt") }
    if a.options.editAny { o.append("edit-any") }
    if a.options.compatible { o.append("compatible") }
    return o.isEmpty ? "-" : o.joined(separator: ",")
}
