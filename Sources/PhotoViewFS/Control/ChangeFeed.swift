import FUSE
#if canImport(Glibc)
import Glibc
#endif

/// The live feed behind `.photogate/changes`: recent history lines plus the poll handles of
/// sleeping readers, at most one per open file (issue 14: one app polling and closing 5,000
/// times kept 5,000 libfuse handles until the next change).
struct ChangeFeed: @unchecked Sendable {
    var latest: Int64
    var lines: [(token: Int64, text: String)] = []
    /// The newest poll handle of each open file, by file handle. The kernel hands one per poll
    /// that will sleep; all of one file's wake the same waiters, so the newest is enough.
    var pollers: [UInt64: PollHandle] = [:]
    static let keep = 4096

    init(latest: Int64) { self.latest = latest }

    mutating func append(_ new: [(Int64, String)], latest l: Int64) {
        lines.append(contentsOf: new.map { (token: $0.0, text: $0.1) })
        if lines.count > ChangeFeed.keep { lines.removeFirst(lines.count - ChangeFeed.keep) }
        latest = max(latest, l)
    }

    /// Keeps `p` as the file's waiter; the handle it replaces is dropped (and so destroyed).
    mutating func addPoller(_ p: PollHandle, for handle: UInt64) { pollers[handle] = p }

    /// Drops the file's waiter (at release).
    mutating func removePoller(for handle: UInt64) -> PollHandle? { pollers.removeValue(forKey: handle) }

    mutating func takePollers() -> [PollHandle] {
        let p = Array(pollers.values)
        pollers = [:]
        return p
    }

    func hasEntries(after position: Int64) -> Bool { (lines.last?.token ?? 0) > position }

    /// Whole lines after `position`, at most `max` bytes (at least one line if any).
    func read(after position: Int64, max: Int) -> ([UInt8], Int64) {
        var out: [UInt8] = []
        var next = position
        for l in lines where l.token > position {
            let b = Array(l.text.utf8)
            if !out.isEmpty && out.count + b.count > max { break }
            out += b.prefix(max)
            next = l.token
        }
        return (out, next)
    }
}
