#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import PostgresNIO
import Threads

/// A doorbell from PostgreSQL: one dedicated connection that LISTENs on a channel, kept alive.
///
/// On its own thread (named photogate-pglisten), it connects, runs LISTEN, then calls
/// `onConnected()` — the moment to catch up from the history token, since every NOTIFY from now
/// on will be delivered — then `onNotify(payload)` for each notification, in order. Every
/// `heartbeat` without a notification it runs `SELECT 1`, which must answer within
/// `heartbeatTimeout` (postgres-nio has no keepalive: without this a dead server or network
/// would go unnoticed until the kernel gives up, minutes later). On any failure — the server
/// closed the connection (pg_terminate_backend, a restart), the heartbeat failed or timed out —
/// it closes the connection, calls `onDisconnected(error)`, waits a backoff (doubling from
/// `minBackoff` to `maxBackoff`, reset by a successful connect) and connects again, and calls
/// `onConnected()` again: notifications sent while it was away are lost, as PostgreSQL does not
/// queue them for a listener that is gone, so the caller catches up there.
///
/// All three callbacks run on the listener's thread, one at a time, never after `stop()`
/// returns. A notification that arrives while a callback runs waits for it; so does the
/// heartbeat. `lastConfirmed` is the monotonic time of the last sign of life: the LISTEN, a
/// successful heartbeat or a notification; fail-closed logic compares it with now.
///
/// The channel is used as a quoted identifier (case-sensitive; notify with
/// `SELECT pg_notify('channel', payload)`), and is limited to letters, digits, `_ . -` since
/// postgres-nio puts it into its LISTEN without escaping.
public final class PGListener: @unchecked Sendable {
    public struct Options: Sendable {
        public var heartbeat: Duration = .seconds(1)
        public var heartbeatTimeout: Duration = .seconds(2)
        public var connectTimeout: Duration = .seconds(5)
        public var minBackoff: Duration = .milliseconds(50)
        public var maxBackoff: Duration = .seconds(2)
        public init() {}
    }

    public let url: PGURL
    public let channel: String
    public let options: Options
    private let onConnected: @Sendable () -> Void
    private let onNotify: @Sendable (String) -> Void
    private let onDisconnected: @Sendable (PGError) -> Void

    private enum Event { case notify(Int, String), closed(Int), stop }
    private let inbox = Inbox<Event>()

    private struct State {
        var started = false
        var stopping = false
        var thread: NativeThread?
        var session: PGSession?
        var generation = 0
        var connected = false
        var backendPID: Int32?
        var lastConfirmed: ContinuousClock.Instant?
    }
    private let state = Locked(State())

    public init(url: PGURL, channel: String, options: Options = .init(),
                onConnected: @escaping @Sendable () -> Void,
                onNotify: @escaping @Sendable (String) -> Void,
                onDisconnected: @escaping @Sendable (PGError) -> Void) throws {
        guard !channel.isEmpty, channel.utf8.count <= 63,
              channel.unicodeScalars.allSatisfy({ $0.isASCII && (CharacterSetASCII.isAlnum($0) || "_.-".unicodeScalars.contains($0)) }) else {
            throw PGError(message: "a listening channel's name must be 1 to 63 letters, digits, '_', '.' or '-'")
        }
        self.url = url
        self.channel = channel
        self.options = options
        self.onConnected = onConnected
        self.onNotify = onNotify
        self.onDisconnected = onDisconnected
    }

    deinit { stop() }

    /// Starts the listener's thread (once; later calls do nothing).
    public func start() {
        state.withLockedValue { s in
            guard !s.started else { return }
            s.started = true
            s.thread = NativeThread.spawn(name: "photogate-pglisten") { [self] in self.run() }
        }
    }

    /// Ends the listener: closes its connection and waits for its thread, so that no callback
    /// runs after this returns (called from a callback, it returns at once and the thread ends
    /// after that callback). A connect attempt in progress is waited for (at most connectTimeout).
    public func stop() {
        let (thread, session) = state.withLockedValue { s -> (NativeThread?, PGSession?) in
            s.stopping = true
            let t = s.thread
            s.thread = nil
            return (t, s.session)
        }
        inbox.post(.stop)
        session?.close()
        if let thread, !thread.isCurrent { thread.join() }
    }

    /// The monotonic time of the last sign of life from the server (LISTEN, heartbeat, notification).
    public var lastConfirmed: ContinuousClock.Instant? { state.withLockedValue { $0.lastConfirmed } }
    /// Whether the connection is up and listening (as of the last event).
    public var isConnected: Bool { state.withLockedValue { $0.connected } }
    /// The server process of the listening connection, while connected.
    public var backendPID: Int32? { state.withLockedValue { $0.backendPID } }

    private var stopping: Bool { state.withLockedValue { $0.stopping } }

    private func confirm() {
        let now = ContinuousClock.now
        state.withLockedValue { $0.lastConfirmed = now }
    }

    /// Waits until `deadline`, dropping stale events; true when stop() came meanwhile.
    private func sleepUnlessStopped(until deadline: ContinuousClock.Instant) -> Bool {
        while let event = inbox.next(until: deadline) {
            if case .stop = event { return true }
        }
        return stopping
    }

    private func run() {
        var backoff = options.minBackoff
        while !stopping {
            let generation = state.withLockedValue { s -> Int in s.generation += 1; return s.generation }
            var session: PGSession?
            do {
                let s = try PGSession.connect(url, timeout: options.connectTimeout)
                session = s
                s.queryTimeout = options.heartbeatTimeout
                let abandoned = state.withLockedValue { st -> Bool in
                    st.session = s
                    return st.stopping
                }
                if abandoned { s.close(); return }
                let inbox = self.inbox, channel = self.channel, connection = s.connection
                connection.closeFuture.whenComplete { _ in inbox.post(.closed(generation)) }
                // On the event loop, and only while the channel is open: addListener writes its
                // listener to the channel without a promise, and one dropped by a closed channel
                // traps (NotificationListener's deinit: "Notification closure had not been used").
                let registered = try connection.eventLoop.submit { () -> Bool in
                    guard !connection.isClosed else { return false }
                    connection.addListener(channel: channel) { _, note in inbox.post(.notify(generation, note.payload)) }
                    return true
                }.wait()
                guard registered else { throw PGError(message: "the connection closed before LISTEN", isConnectionLost: true) }
                // postgres-nio sends its own LISTEN for the listener above, without telling when it is
                // done; this one is queued after it on the connection, so its answer means listening.
                try s.query("LISTEN \"\(channel)\"")
                let pid = try s.backendPID()
                let now = ContinuousClock.now
                state.withLockedValue { st in
                    st.connected = true
                    st.backendPID = pid
                    st.lastConfirmed = now
                }
                onConnected()
                backoff = options.minBackoff
                var nextBeat = ContinuousClock.now + options.heartbeat
                events: while true {
                    switch inbox.next(until: nextBeat) {
                    case .stop?:
                        s.close()
                        state.withLockedValue { $0.session = nil; $0.connected = false }
                        return
                    case .notify(let g, let payload)?:
                        guard g == generation else { continue events }
                        confirm()
                        onNotify(payload)
                    case .closed(let g)?:
                        guard g == generation else { continue events }
                        throw PGError(message: "the listening connection was closed (by the server, or the network)", isConnectionLost: true)
                    case nil:   // heartbeat due
                        try s.query("SELECT 1")
                        confirm()
                        nextBeat = ContinuousClock.now + options.heartbeat
                    }
                }
            } catch {
                session?.close()
                state.withLockedValue { $0.session = nil; $0.connected = false; $0.backendPID = nil }
                if stopping { return }
                onDisconnected(PGSession.convert(error))
                if sleepUnlessStopped(until: ContinuousClock.now + backoff) { return }
                backoff = min(backoff * 2, options.maxBackoff)
            }
        }
    }
}

private enum CharacterSetASCII {
    static func isAlnum(_ s: Unicode.Scalar) -> Bool {
        (s >= "a" && s <= "z") || (s >= "A" && s <= "Z") || (s >= "0" && s <= "9")
    }
}

/// A queue one thread waits on with a deadline (pthread mutex and condition on CLOCK_MONOTONIC).
final class Inbox<T>: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var items: [T] = []
    private var head = 0

    init() {
        pthread_mutex_init(mutex, nil)
        var attr = pthread_condattr_t()
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        pthread_cond_init(cond, &attr)
        pthread_condattr_destroy(&attr)
    }

    deinit {
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(mutex)
        cond.deallocate()
        mutex.deallocate()
    }

    func post(_ item: T) {
        pthread_mutex_lock(mutex)
        items.append(item)
        pthread_cond_signal(cond)
        pthread_mutex_unlock(mutex)
    }

    /// The next item, or nil once `deadline` has passed with none.
    func next(until deadline: ContinuousClock.Instant) -> T? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        var ts = Self.monotonic(deadline)
        while head == items.count {
            if pthread_cond_timedwait(cond, mutex, &ts) == ETIMEDOUT && head == items.count { return nil }
        }
        let item = items[head]
        head += 1
        if head == items.count { items.removeAll(keepingCapacity: true); head = 0 }
        return item
    }

    private static func monotonic(_ deadline: ContinuousClock.Instant) -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let remaining = max(.zero, deadline - ContinuousClock.now)
        let (secs, attos) = remaining.components
        var ts = timespec(tv_sec: now.tv_sec + Int(secs), tv_nsec: now.tv_nsec + Int(attos / 1_000_000_000))
        if ts.tv_nsec >= 1_000_000_000 { ts.tv_sec += 1; ts.tv_nsec -= 1_000_000_000 }
        return ts
    }
}
