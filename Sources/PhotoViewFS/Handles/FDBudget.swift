import FUSE
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What one app's opens may cost its mount daemon in file descriptors (issue 14).
///
/// Every open of an original holds one descriptor in the daemon until the app closes it (the
/// kernel reads through it with passthrough; the daemon reads through it otherwise). Without a
/// bound, an app opening one granted file 20,000 times runs the daemon out of descriptors, and
/// then the database, the logs, new files and every other open fail: the whole mount breaks.
/// With a budget, the excess open fails with EMFILE (the app's own "too many open files"), and
/// the descriptors the daemon needs for everything else stay free.
///
/// Files an app is writing count too: each holds the daemon's temp file and the descriptor its
/// running hash reads through (`PhotoFS.makeSessionTemp`), so an app holding thousands of new
/// files open gets EMFILE for the next create rather than taking the daemon's last descriptor.
///
/// One mount is one daemon process, so the process-wide `mount` budget is the mount's: its
/// limit is the descriptor hard limit minus `reserve` (database and WAL, logs, inotify, a
/// commit's short-lived opens). Creating it raises the soft limit to the hard limit (the daemon's share of
/// the machine is the hard limit; the soft default of 1024 is a select(2)-era guard).
public final class FDBudget: Sendable {
    /// Descriptors kept for the daemon itself, never handed to an app's opens.
    public static let reserve = 256

    /// The mount daemon's budget (raises RLIMIT_NOFILE's soft limit on first use).
    public static let mount: FDBudget = {
        let hard = raiseDescriptorLimit()
        return FDBudget(limit: max(16, hard - reserve))
    }()

    /// How many descriptors the budget's holders may hold at once.
    public let limit: Int
    private let held = Atomic<Int>(0)

    public init(limit: Int) {
        self.limit = limit
    }

    /// Descriptors held now.
    public var inUse: Int { held.load(ordering: .relaxed) }

    /// Users other than the mount's owner (a mount with allow_other) hold their opens' descriptors
    /// from shares of the budget too: all of them together at most half of it, each at most an
    /// eighth. So no other user can take the owner's descriptors, nor one of them all the others'.
    public var othersLimit: Int { max(16, limit / 2) }
    public var perUserLimit: Int { max(16, limit / 8) }
    private struct Shares { var total = 0; var byUser: [UInt32: Int] = [:] }
    private let shares = Mutex(Shares())

    /// Counts one descriptor against `user`'s share (EMFILE when that share or the others' is
    /// spent); `acquire` is still needed for the budget itself.
    public func charge(user: UInt32) throws(Errno) {
        let (perUser, others) = (perUserLimit, othersLimit)
        try shares.withLock { s throws(Errno) in
            let mine = s.byUser[user, default: 0]
            guard mine < perUser, s.total < others else { throw Errno(EMFILE) }
            s.byUser[user] = mine + 1
            s.total += 1
        }
    }

    /// Gives back a descriptor counted with `charge`.
    public func uncharge(user: UInt32) {
        shares.withLock { s in
            guard let mine = s.byUser[user], mine > 0 else { return }
            s.byUser[user] = mine == 1 ? nil : mine - 1
            s.total -= 1
        }
    }

    /// Descriptors held by users other than the owner, and by `user` among them.
    public func heldByOthers(user: UInt32? = nil) -> Int {
        shares.withLock { s in user.map { s.byUser[$0, default: 0] } ?? s.total }
    }

    /// Takes `count` descriptors from the budget, or fails with EMFILE when fewer are left.
    public func acquire(_ count: Int = 1) throws(Errno) {
        var current = held.load(ordering: .relaxed)
        while true {
            guard current + count <= limit else { throw Errno(EMFILE) }
            let (exchanged, original) = held.compareExchange(expected: current, desired: current + count, ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }

    /// Gives back `count` descriptors taken with `acquire`.
    public func release(_ count: Int = 1) {
        held.subtract(count, ordering: .relaxed)
    }

    /// Runs `open` (a call that returns a descriptor, or -1 with errno) inside the budget: EMFILE
    /// without calling it when the budget is spent; its result otherwise, giving the descriptor
    /// back to the budget when it failed (errno is kept for the caller).
    public func opening(_ open: () -> Int32) throws(Errno) -> Int32 {
        try acquire()
        let fd = open()
        if fd < 0 {
            let e = errno
            release()
            errno = e
        }
        return fd
    }

    /// Closes a descriptor obtained through `opening` and gives it back to the budget.
    public func close(_ fd: Int32) {
        _ = Glibc.close(fd)
        release()
    }

    /// Raises this process's RLIMIT_NOFILE soft limit to its hard limit; returns the soft limit
    /// now in effect (the old one if raising failed).
    @discardableResult
    public static func raiseDescriptorLimit() -> Int {
        var rl = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &rl) == 0 else { return 1024 }
        if rl.rlim_cur < rl.rlim_max {
            var raised = rl
            raised.rlim_cur = rl.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { rl = raised }
        }
        // RLIM_INFINITY cannot happen for RLIMIT_NOFILE on Linux (bounded by fs.nr_open), but
        // keep the arithmetic safe.
        return rl.rlim_cur > UInt(Int32.max) ? Int(Int32.max) : Int(rl.rlim_cur)
    }
}
