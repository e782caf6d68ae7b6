import Foundation
import LibraryRun
import Synchronization
import Threads

/// Rings a library's bell (`RunFolder.ringBell`) from a thread of its own, for a mount's daemon:
/// every close that commits a photo rang it itself, and the ring (open, write, close in run/)
/// woke the daemon's own watcher, which took the close's core for the refresh the close then
/// made anyway: 0.54 ms of a 10 ms close, traced (issue 39). A close now only marks a ring owed
/// and wakes this thread; rings owed while one is under way become one. A ring is a hint, never
/// the only way a mount learns of a change (a daemon compares change numbers whenever 2 s pass
/// quietly); the daemon rings once more itself when it is done (Mount.swift).
final class BellRinger: @unchecked Sendable {
    private let folder: RunFolder
    private let condition = NSCondition()
    private var owed = false
    /// The thread could not be started: each ring is rung by its caller, as before.
    private var inline = false

    private init(_ folder: RunFolder) {
        self.folder = folder
        if let thread = NativeThread.spawn(name: "photogate-bell", { [self] in loop() }) {
            thread.detach()
        } else {
            inline = true
        }
    }

    private static let ringers = Mutex<[String: BellRinger]>([:])

    /// The one ringer of this run folder in this process (made, and its thread started, once).
    static func `for`(_ folder: RunFolder) -> BellRinger {
        ringers.withLock { r in
            if let ringer = r[folder.path] { return ringer }
            let ringer = BellRinger(folder)
            r[folder.path] = ringer
            return ringer
        }
    }

    /// A ring owed: the thread rings once it runs.
    func ring() {
        if inline { return folder.ringBell() }
        condition.lock()
        owed = true
        condition.signal()
        condition.unlock()
    }

    private func loop() {
        while true {
            condition.lock()
            while !owed { condition.wait() }
            owed = false
            condition.unlock()
            folder.ringBell()
        }
    }
}
