#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

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
