import FUSE
import Foundation
import LibraryRun
import PhotoLibrary
import Threads
#if canImport(Glibc)
import Glibc
#endif

extension PhotoFS {
    // MARK: requests on access

    /// A not-determined app touching its mount records a prompt, once, unless prevent-prompt.
    func noteAccess() {
        if requested.load(ordering: .relaxed) { return }
        let (records, prevent) = model.withLock { ($0.policy.recordsRequestOnAccess, $0.app.options.preventPrompt) }
        guard records, !prevent else { return }
        if requested.exchange(true, ordering: .relaxed) { return }
        let lib = library, app = appID, kind: RequestKind = access == .readWrite ? .readWrite : .addOnly
        let log = self.log
        NativeThread.detached(name: "photogate-prompt") {
            do { try lib.recordRequest(app, kind: kind, reason: "") } catch { log("could not record request: \(error)") }
        }
    }

    // MARK: .photogate

    func statusContent() -> [UInt8] {
        let (app, policy) = model.withLock { ($0.app, $0.policy) }
        var obj: [String: Any] = [
            "app": app.id.rawValue,
            "access": access.rawValue,
            "status": policy.status.rawValue,
            "readWrite": app.readWrite.rawValue,
            "addOnly": app.addOnly.rawValue,
            "options": ["stripLocation": app.options.stripLocation, "preventPrompt": app.options.preventPrompt,
                        "editAny": app.options.editAny, "compatible": app.options.compatible],
            "readPath": readPathBox.withLock { $0?() } ?? (passthrough ? "passthrough" : "daemon"),
            // Who opens files: the daemon, or the kernel alone (a no-open mount).
            "opens": (noOpen ? MountRecord.Opens.kernel : .daemon).rawValue,
            // Whether this mount asked the person on the app's behalf: a not-determined app's
            // first touch records a request, unless prevent-prompt (noteAccess).
            "askedOnAccess": requested.load(ordering: .relaxed),
        ]
        // How many OPEN requests reached the daemon: one in a no-open mount (answered ENOSYS).
        if noOpen { obj["opensAnswered"] = opensAnswered.load(ordering: .relaxed) }
        let data = (try? JSONSerialization.data(withJSONObject: obj, options: [.sortedKeys, .prettyPrinted])) ?? Data()
        return [UInt8](data) + [0x0a]
    }

    /// `.photogate/refused`: the app's files refused at their close, oldest first, one a line:
    /// date (ISO 8601 UTC), tab, the name it wrote, tab, why.
    func refusedContent() -> [UInt8] {
        guard let list = try? library.refusals(appID) else { return [] }
        let f = ISO8601DateFormatter()
        return Array(list.map { "\(f.string(from: $0.date))\t\($0.name)\t\($0.reason)\n" }.joined().utf8)
    }

    /// Records a refused file where the app and the person can read why.
    func noteRefusal(_ name: String, _ why: String) {
        do { try library.recordRefusal(appID, name: name, reason: why) } catch { log("could not record the refusal of \(name): \(error)") }
    }

    /// `.photogate/request`: "read-write", "add-only" or "picker", then an optional reason line.
    func submitRequest(_ bytes: [UInt8]) throws(Errno) {
        guard let text = String(validating: bytes, as: UTF8.self) else { throw .invalid }
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        while lines.last == "" { lines.removeLast() }
        // An edit request names an asset: the mount records one when the app opens it for writing.
        guard let first = lines.first, let kind = RequestKind(rawValue: first), kind != .edit, lines.count <= 2 else { throw .invalid }
        let reason = lines.count == 2 ? lines[1] : ""
        if DisplayName.containsUnsafe(reason) { throw .invalid }
        do { try library.recordRequest(appID, kind: kind, reason: reason) } catch {
            log("could not record request: \(error)")
            throw mountErrno(for: error)
        }
    }
}
