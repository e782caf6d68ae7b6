#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A plain pthread for the wrapper's own long-lived work (the notifier). Not a Swift concurrency
/// task: it blocks in the kernel, which a cooperative pool thread must never do.
struct NativeThread: @unchecked Sendable {
    private let id: pthread_t

    private final class Start {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    /// Starts `body` on a new joinable thread. (`name` documents it; pthread_setname_np is not
    /// visible from Swift's Glibc module.)
    static func spawn(name: String, _ body: @escaping @Sendable () -> Void) -> NativeThread? {
        let start = Unmanaged.passRetained(Start(body)).toOpaque()
        var tid = pthread_t()
        let rc = pthread_create(&tid, nil, { arg in
            let start = Unmanaged<Start>.fromOpaque(arg!).takeRetainedValue()
            start.body()
            return nil
        }, start)
        guard rc == 0 else {
            Unmanaged<Start>.fromOpaque(start).release()
            return nil
        }
        return NativeThread(id: tid)
    }

    func join() { pthread_join(id, nil) }

    func detach() { pthread_detach(id) }

    var isCurrent: Bool { pthread_equal(id, pthread_self()) != 0 }
}

/// Marks libfuse's worker threads: set on entry to every request callback (they run nothing
/// else), so `flushNotifications()` can tell it is being called from inside a handler.
enum HandlerThread {
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    @inline(__always) static func mark() {
        // Any non-nil value will do; it is never dereferenced.
        if pthread_getspecific(key) == nil { pthread_setspecific(key, UnsafeRawPointer(bitPattern: 0x1)) }
    }

    static var isCurrent: Bool { pthread_getspecific(key) != nil }
}
