import ArgumentParser
import Foundation
import GrantStore
import LibraryRun
#if canImport(Glibc)
import Glibc
#endif

/// A photogate subcommand: it writes `execute`, and errors become a message and an exit code in
/// one place (`photogate.run`), the same for every command.
protocol PhotogateCommand: ParsableCommand {
    func execute() throws

    /// Whether the command, having changed the library, returns only once every running mount
    /// shows the change (`awaitRunningMounts`), so that what it took away (a revoke, a denial,
    /// strip-location on, a photo trashed) is gone for the next open. Every command does, unless
    /// it says otherwise and why.
    var waitsForRunningMounts: Bool { get }

    /// Whether the command has --new-app, which registers an unknown app: the "unknown app"
    /// message then offers it.
    static var offersNewApp: Bool { get }
}

extension PhotogateCommand {
    var waitsForRunningMounts: Bool { true }
    static var offersNewApp: Bool { false }

    func run() throws {
        let waits = waitsForRunningMounts
        if waits { Library.notesCommits.store(true, ordering: .relaxed) }
        // Also when it fails after committing (pick interrupted by a signal reverts, then exits 130).
        defer { if waits { awaitRunningMounts() } }
        try photogate.run {
            do {
                try execute()
            } catch LibraryError.unknownApp(let id) {
                // What to do about it, which the library's own message cannot say (issue 38).
                throw CommandFailure(unknownAppMessage(id, offersNewApp: Self.offersNewApp), .notFound)
            }
        }
    }
}

/// "unknown app", and how an app becomes known: a typo is the usual cause, so nothing registers
/// one by accident; `authorize` (or, where the command has it, --new-app) does it on purpose.
func unknownAppMessage(_ id: String, offersNewApp: Bool) -> String {
    "unknown app '\(id)': no authorization, mount or grant has named it (a typo?); `photogate apps` lists the known apps. "
        + "Register it with `photogate authorize \(id) --status limited` (or another status)"
        + (offersNewApp ? ", or pass --new-app" : "")
}

/// Waits until every running mount of each library this command changed has applied the change
/// (at most 10 s; a mount whose daemon is stopped or stuck gets a warning, and the command still
/// succeeds: the change is committed, and that mount applies it when its daemon runs again).
func awaitRunningMounts() {
    for c in Library.takeCommitted() {
        for r in MountAcks.wait(for: c.seq, run: c.run, timeout: 10) {
            printWarning("the mount of \(r.app) at \(r.mountpoint) (pid \(r.pid)) has not applied this change after 10 s; it will once its daemon runs again")
        }
    }
}

/// The one CLI error handler: library errors and command failures become the message and exit
/// code of the table (`photogate help exit-codes`); argument-parser's own errors and exit codes
/// pass through to it; anything else (an error no layer typed) is reported, escaped, as a
/// failure rather than as argument-parser's raw "Error: ..." line.
func run(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch let e as LibraryError {
        printError(e.description)
        throw ExitCode(exitCode(for: e).rawValue)
    } catch let e as CommandFailure {
        printError(e.message)
        throw ExitCode(e.code.rawValue)
    } catch let e as ExitCode {
        throw e
    } catch let e as ValidationError {
        throw e
    } catch let e as CleanExit {
        throw e
    } catch {
        printError(String(describing: error))
        throw ExitCode(Exit.failure.rawValue)
    }
}

struct CommandFailure: Error {
    var message: String
    var code: Exit
    init(_ message: String, _ code: Exit) {
        self.message = message
        self.code = code
    }
}
