import PGSystem
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A plain pthread: photogate's one thread primitive (the FUSE notifier and session loop, the
/// change watcher, the parallel build of a mount's view, the import and verify workers). Not a
/// Swift concurrency task: these block in the kernel, which a cooperative pool thread must never
/// do; and neither GCD nor Foundation's Thread, so that one mechanism is to be reasoned about.
public struct NativeThread: @unchecked Sendable {
    private let id: pthread_t

    private final class Start {
        let name: String
        let body: @Sendable () -> Void
        init(_ name: String, _ body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }

    /// Starts `body` on a new joinable thread named `name` (its first 15 bytes, as
    /// /proc/PID/task/TID/comm and top -H show it).
    public static func spawn(name: String, _ body: @escaping @Sendable () -> Void) -> NativeThread? {
        let start = Unmanaged.passRetained(Start(name, body)).toOpaque()
        var tid = pthread_t()
        let rc = pthread_create(&tid, nil, { arg in
            let start = Unmanaged<Start>.fromOpaque(arg!).takeRetainedValue()
            pg_set_thread_name(start.name)
            start.body()
            return nil
        }, start)
        guard rc == 0 else {
            Unmanaged<Start>.fromOpaque(start).release()
            return nil
        }
        return NativeThread(id: tid)
    }

    public func join() { pthread_join(id, nil) }

    public func detach() { pthread_detach(id) }

    public var isCurrent: Bool { pthread_equal(id, pthread_self()) != 0 }

    /// Runs `body` in the background on a thread of its own, not waited for.
    public static func detached(name: String, _ body: @escaping @Sendable () -> Void) {
        if let t = spawn(name: name, body) { t.detach() } else { body() }
    }

    /// Runs `body(0..<iterations)` concurrently, one thread per iteration (the caller's thread
    /// takes the first), and returns when all are done. For a few large independent tasks.
    public static func concurrentPerform(iterations: Int, _ body: @escaping @Sendable (Int) -> Void) {
        guard iterations > 0 else { return }
        let others = (1..<iterations).map { i in (i, spawn(name: "photogate-worker") { body(i) }) }
        body(0)
        for (i, t) in others {
            if let t { t.join() } else { body(i) }
        }
    }
}
