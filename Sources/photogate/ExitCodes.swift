import ArgumentParser

struct ExitCodes: PhotogateCommand {
    static let configuration = CommandConfiguration(
        commandName: "exit-codes",
        abstract: "The exit codes of every photogate command (stable: scripts may branch on them).",
        discussion: Exit.allCases.map { "  \(String($0.rawValue).padding(toLength: 4, withPad: " ", startingAt: 0)) \($0.meaning)" }
            .joined(separator: "\n"))

    func execute() throws {
        for e in Exit.allCases {
            say("\(String(e.rawValue).padding(toLength: 4, withPad: " ", startingAt: 0)) \(e.meaning)")
        }
    }
}
