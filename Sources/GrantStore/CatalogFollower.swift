import CatalogPostgres
import Foundation
import LibraryRun
import PGSystem
import Synchronization
import Threads
#if canImport(Glibc)
import Glibc
#endif

/// A running mount's hold on a catalog on a server (issue 41).
///
/// The doorbell: one listening connection per host, not per mount. Every mount daemon of a library
/// folder (one host's) asks for `run/doorbell.lock`; the one that has it LISTENs on the catalog's
/// channel and rings this host's bell (`RunFolder.ringBell`) at each notification, and once each
/// time its connection is made (again): the mounts then catch up from their change position, so
/// what was committed while the connection was away is not missed (PostgreSQL keeps no
/// notification for a listener that is gone). When that daemon ends, the lock passes to another.
/// The bell is a doorbell only: a mount reads what changed from the change log.
///
/// The heartbeat: every daemon confirms the catalog every second (`SELECT 1` on a connection of
/// its own pool); `unconfirmedFor` is how long it has not. A mount blanks its view past
/// `failClosedAfter` and rebuilds it when the catalog answers again.
public final class CatalogFollower: Sendable {
    let library: Library
    let server: ServerCatalog
    private let lastConfirmed: Mutex<ContinuousClock.Instant>
    private let stopping = Atomic<Bool>(false)
    private let listener = Mutex<PGListener?>(nil)

    /// `PHOTOGATE_FAIL_CLOSED_SECONDS`, else 10.
    public static var failClosedAfter: Duration {
        if let v = ProcessInfo.processInfo.environment["PHOTOGATE_FAIL_CLOSED_SECONDS"], let s = Double(v), s > 0 { return .milliseconds(Int(s * 1000)) }
        return .seconds(10)
    }

    init(library: Library, server: ServerCatalog) {
        self.library = library
        self.server = server
        lastConfirmed = Mutex(.now)
    }

    public var unconfirmedFor: Duration { lastConfirmed.withLock { $0.duration(to: .now) } }

    func start() {
        NativeThread.detached(name: "photogate-heartbeat") { [self] in
            while !stopping.load(ordering: .relaxed) {
                if server.ping() { lastConfirmed.withLock { $0 = .now } }
                var ts = timespec(tv_sec: 0, tv_nsec: 500_000_000)
                nanosleep(&ts, nil)
            }
        }
        NativeThread.detached(name: "photogate-doorbell") { [self] in holdDoorbell() }
    }

    func stop() {
        stopping.store(true, ordering: .relaxed)
        listener.withLock { $0?.stop(); $0 = nil }
    }

    /// Waits for this host's doorbell lock, then listens for as long as the daemon runs.
    private func holdDoorbell() {
        let path = library.paths.run + "/doorbell.lock"
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { return }
        // Held until the process ends (the kernel lets go of it then, a kill included).
        while flock(fd, LOCK_EX) != 0 {
            if errno != EINTR { Glibc.close(fd); return }
        }
        guard !stopping.load(ordering: .relaxed) else { Glibc.close(fd); return }
        let bell = library.paths.runFolder
        do {
            let url = try PostgresCatalog.url(server.link.catalog, application: "photogate-doorbell")
            let l = try PGListener(url: url, channel: ServerCatalog.channel,
                                   onConnected: { bell.ringBell() },
                                   onNotify: { _ in bell.ringBell() },
                                   onDisconnected: { _ in })
            listener.withLock { $0 = l }
            l.start()
        } catch {
            Glibc.close(fd)
        }
    }
}

extension Library {
    /// A running mount's follower of its catalog on a server (nil for a local catalog); started.
    public func followCatalog() -> CatalogFollower? {
        guard let server else { return nil }
        let f = CatalogFollower(library: self, server: server)
        f.start()
        return f
    }
}
