import CFuse3

/// A sleeping poll(2)/select(2)/epoll waiter on a file of this filesystem (`fuse_pollhandle`).
///
/// The filesystem receives one in `poll(_:handle:pollHandle:)` when the caller is about to sleep.
/// Keep the latest one per open file and call `notify()` when the file's readiness changes: the
/// kernel wakes the waiter, which polls again. `notify()` is cheap, safe from any thread
/// (including request handlers) and a no-op once the session has stopped. Dropping the last
/// reference destroys the libfuse handle (`fuse_pollhandle_destroy`).
public final class PollHandle: @unchecked Sendable {
    // Immutable after init; libfuse's handle is only read by fuse_lowlevel_notify_poll.
    private let raw: OpaquePointer
    private let core: SessionCore

    init(raw: OpaquePointer, core: SessionCore) {
        self.raw = raw
        self.core = core
    }

    /// Wake whoever polls through this handle (fuse_lowlevel_notify_poll).
    public func notify() {
        core.notifyPoll(raw)
    }

    deinit {
        fuse_pollhandle_destroy(raw)
    }
}
