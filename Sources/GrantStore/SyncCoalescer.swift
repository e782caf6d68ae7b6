import Foundation

/// Shares one sync among the callers that need it at once (a log's `fdatasync`, say): each caller
/// has made its change first, then calls `run`, which returns once a sync that *began after the
/// call* has succeeded, whether this caller ran it or another did. A sync covers every caller that
/// had asked when it began; callers that ask while it runs wait for the next one, which one of
/// them runs. A sync that fails is thrown to the caller that ran it; the others it would have
/// covered run another themselves (and so fail only if theirs fails too). No caller is told done
/// by a sync that began before its change, nor by one that failed.
public final class SyncCoalescer: @unchecked Sendable {
    private let condition = NSCondition()
    /// Callers so far (each takes the next number).
    private var asked: UInt64 = 0
    /// Callers 1...covered are covered by a sync that succeeded.
    private var covered: UInt64 = 0
    private var running = false
    /// Syncs run so far, and callers asked that no sync has covered yet (for tests).
    public var syncs: UInt64 { condition.lock(); defer { condition.unlock() }; return started }
    public var pending: UInt64 { condition.lock(); defer { condition.unlock() }; return asked - covered }
    private var started: UInt64 = 0

    public init() {}

    public func run(_ sync: () throws -> Void) throws {
        condition.lock()
        defer { condition.unlock() }
        asked += 1
        let mine = asked
        while covered < mine {
            if running {
                condition.wait()
                continue
            }
            running = true
            started += 1
            let covers = asked   // everyone who has asked so far made their change before this sync
            condition.unlock()
            var failure: Error?
            do { try sync() } catch { failure = error }
            condition.lock()
            running = false
            if failure == nil { covered = max(covered, covers) }
            condition.broadcast()
            if let failure { throw failure }
        }
    }
}
