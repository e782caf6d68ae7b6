import Foundation
import GrantStore
import HTTPTypes
import Hummingbird
import Logging
import PhotoLibrary
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The person's local web app (issue 35): `photogate ui`. A Hummingbird server on 127.0.0.1 whose
/// every action is the library call the CLI makes (so it lands in history, reaches running mounts
/// at once, and a change made in the CLI shows in the page through /events). The page is plain
/// HTML, CSS and JavaScript kept in this module (Assets.swift), served from the binary.
public final class WebApp: Sendable {
    let library: Library
    let guardian = WebGuard()
    let thumbs: Thumbnailer
    /// Where the page opens first (`pick APP --web`: that app's picker).
    let start: String
    /// Set on SIGINT/SIGTERM: the event streams end.
    let stopping = Atomic<Bool>(false)

    public init(library: Library, pickApp: AppID? = nil, query: String = "") throws {
        self.library = library
        thumbs = try Thumbnailer(library: library)
        start = pickApp.map { "/pick/\($0.rawValue)\(query)" } ?? "/apps"
    }

    /// Serves until SIGINT or SIGTERM. `announce` gets the URL (with the one-time secret) once
    /// the server listens; `port` 0 takes a free one.
    public func run(port: Int, atExit: @escaping @Sendable () -> Void = {}, announce: @escaping @Sendable (String) -> Void) throws {
        // Descriptors: the soft limit up to the hard one (a flood of half-open connections from
        // another local user took all 1,024 of the default).
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        let router = Router(context: WebContext.self)
        router.add(middleware: GuardMiddleware(guardian: guardian))
        routes(router)
        let guardian = self.guardian
        let start = self.start
        let app = Application(
            router: router,
            // A connection that sends nothing for this long is closed (half-open connections
            // held descriptors for ever); an event stream writes every 5 s.
            server: .http1(configuration: .init(idleTimeout: .seconds(30))),
            configuration: .init(address: .hostname("127.0.0.1", port: port), serverName: nil),
            // (Listening on 127.0.0.1; answering only to its own name, `WebGuard.hostName`.)
            onServerRunning: { channel in
                let p = channel.localAddress?.port ?? port
                guardian.setPort(p)
                // The secret in the fragment: the page's script exchanges it; no server sees it.
                var allowed = CharacterSet.urlQueryAllowed
                allowed.remove(charactersIn: "&=+#")
                let go = start.addingPercentEncoding(withAllowedCharacters: allowed) ?? "/apps"
                announce("http://\(guardian.hostName):\(p)/#k=\(guardian.secret ?? "")&go=\(go)")
            },
            logger: .init(label: "photogate-ui", factory: { _ in SwiftLogNoOpLogHandler() }))
        // Ctrl-C or SIGTERM: the server shuts down gracefully (Hummingbird's own handlers), and
        // the event streams, which would otherwise hold it open, end at once.
        let sources = [SIGINT, SIGTERM].map { sig -> any DispatchSourceSignal in
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { [self] in
                stopping.store(true, ordering: .relaxed)
                // Graceful, but not for ever: a request that never sends its body held the
                // server open as long as its client wished.
                DispatchQueue.global().asyncAfter(deadline: .now() + 3) { atExit(); exit(0) }
            }
            source.resume()
            return source
        }
        defer { sources.forEach { $0.cancel() } }
        let failure = Mutex<(any Error)?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            do { try await app.runService() } catch { failure.withLock { $0 = error } }
            done.signal()
        }
        // Thumbnails of the whole library, newest first, while the person looks (on-screen ones
        // go first).
        if let all = try? library.assets() {
            thumbs.warmAll(all.filter { !$0.isTrashed }.sorted { $0.captureDate < $1.captureDate })
        }
        done.wait()
        thumbs.stop()
        if let e = failure.withLock({ $0 }) { throw e }
    }

    // MARK: routes

    func routes(_ router: Router<WebContext>) {
        router.get("/") { _, _ in WebApp.asset(WebAssets.page, "text/html; charset=utf-8") }
        router.get("/app.js") { _, _ in WebApp.asset(WebAssets.script, "text/javascript; charset=utf-8") }
        router.get("/favicon.ico") { _, _ in Response(status: .noContent) }
        router.get("/app.css") { _, _ in WebApp.asset(WebAssets.style, "text/css; charset=utf-8") }
        router.get("/api/state") { [self] _, _ in try json(state()) }
        router.get("/api/progress") { [self] _, _ in
            let p = thumbs.progress
            return try WebApp.json(["done": p.done, "total": p.total, "sandboxed": thumbs.sandboxed])
        }
        router.post("/api/apps/:app/access") { [self] request, context in
            let app = try appID(context)
            let body = try await WebApp.body(request)
            guard let level = (body["access"] as? String).flatMap(AccessLevel.init(rawValue:)),
                  let status = (body["status"] as? String).flatMap(AuthorizationStatus.init(rawValue:)) else {
                throw HTTPError(.badRequest, message: "access and status are required")
            }
            _ = try call { try library.authorize(app, access: level, status: status) }
            return try json(state())
        }
        router.post("/api/apps/:app/options") { [self] request, context in
            let app = try appID(context)
            let body = try await WebApp.body(request)
            for key in ["stripLocation", "editAny"] where body[key] != nil && !(body[key] is Bool) {
                throw HTTPError(.badRequest, message: "'\(key)' is true or false")
            }
            _ = try call {
                try library.setOptions(app, stripLocation: body["stripLocation"] as? Bool, editAny: body["editAny"] as? Bool)
            }
            return try json(state())
        }
        router.get("/api/apps/:app/report") { [self] _, context in
            let app = try appID(context)
            let entries = try call { try library.accessReport(app: app) }
            return try WebApp.json(entries.map { e -> [String: Any] in
                ["kind": e.kind.description, "id": e.assetID ?? NSNull(), "name": e.name ?? NSNull(),
                 "first": e.first.timeIntervalSince1970, "last": e.last.timeIntervalSince1970, "count": e.count, "days": e.days]
            })
        }
        router.get("/api/apps/:app/catalog") { [self] _, context in try catalog(appID(context)) }
        router.post("/api/apps/:app/selection") { [self] request, context in
            let app = try appID(context)
            let body = try await WebApp.body(request)
            // Fields of the wrong type are refused, not taken as absent.
            let given = body.filter { !($0.value is NSNull) }
            for (key, ok) in [("add", given["add"].map { $0 is [String] }), ("remove", given["remove"].map { $0 is [String] }),
                              ("picked", given["picked"].map { $0 is Bool }), ("stripLocation", given["stripLocation"].map { $0 is Bool }),
                              ("request", given["request"].map { $0 is NSNumber })] where ok == false {
                throw HTTPError(.badRequest, message: "'\(key)' has the wrong type")
            }
            let add = (body["add"] as? [String]) ?? [], remove = (body["remove"] as? [String]) ?? []
            let picked = body["picked"] as? Bool ?? false
            let strip = body["stripLocation"] as? Bool ?? false
            guard add.count + remove.count <= 100_000 else { throw HTTPError(.contentTooLarge) }
            try call {
                if !add.isEmpty { _ = try library.grant(app, add, picked: picked, stripLocation: strip) }
                if !remove.isEmpty { _ = try library.revoke(app, remove, picked: picked) }
                // The request this answers, if it is this app's.
                if let rid = (body["request"] as? NSNumber)?.int64Value, (try? library.request(id: rid))?.app == app {
                    do { try library.removeRequest(id: rid) } catch LibraryError.unknownRequest {}
                }
            }
            return try json(["ok": true])
        }
        router.post("/api/requests/:id/answer") { [self] request, context in
            guard let rid = context.parameters.get("id").flatMap(Int64.init) else { throw HTTPError(.badRequest) }
            let body = try await WebApp.body(request)
            try call { try answer(rid, body["answer"] as? String ?? "") }
            return try json(state())
        }
        router.get("/api/asset/:id") { [self] _, context in
            let asset = try findAsset(context)
            let seeing = try call { try library.appsSeeing(asset) }
            return try WebApp.json([
                "id": asset.id, "name": asset.displayName, "kind": asset.mediaKind, "class": asset.mediaClass.rawValue,
                "size": asset.byteSize, "captured": asset.captureDate.timeIntervalSince1970, "added": asset.addedDate.timeIntervalSince1970,
                "hasLocation": asset.hasLocation, "owner": asset.owner?.rawValue ?? NSNull(),
                "apps": seeing.map { ["app": $0.app.rawValue, "access": $0.access.rawValue] },
            ])
        }
        router.get("/thumb/:id") { [self] request, context in
            let asset = try findAsset(context)
            let size: Thumbnailer.Size = request.uri.queryParameters.get("size") == "large" ? .large : .small
            let bytes: [UInt8]
            do { bytes = try await thumbs.image(asset, size) } catch {
                return WebApp.asset(WebAssets.placeholder, "image/svg+xml")
            }
            var r = Response(status: .ok, headers: [.contentType: "image/jpeg"], body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
            // Keyed by the version (the page asks with ?v=hash): a new version is a new address.
            r.headers[.cacheControl] = "private, max-age=86400"
            return r
        }
        router.get("/api/trash") { [self] _, _ in
            let list = try call { try library.trash() }
            return try WebApp.json(list.reversed().map { a -> [String: Any] in
                ["id": a.id, "name": a.displayName, "v": String(a.contentHash.suffix(16)), "trashed": a.trashedDate?.timeIntervalSince1970 ?? 0,
                 "owner": a.owner?.rawValue ?? NSNull()]
            })
        }
        router.post("/api/trash/restore") { [self] request, _ in
            let body = try await WebApp.body(request)
            let ids = (body["ids"] as? [String]) ?? []
            guard !ids.isEmpty else { throw HTTPError(.badRequest, message: "no ids") }
            _ = try call { try library.restore(ids) }
            return try json(["ok": true])
        }
        router.post("/api/trash/delete") { [self] request, _ in
            let body = try await WebApp.body(request)
            let ids = (body["ids"] as? [String]) ?? []
            guard !ids.isEmpty else { throw HTTPError(.badRequest, message: "no ids") }
            _ = try call { try library.deleteForGood(ids) }
            return try json(["ok": true])
        }
        router.get("/events") { [self] _, _ in events() }
    }

    // MARK: what the page shows

    func state() throws -> [String: Any] {
        try call {
            let apps = try library.appSummaries()
            let requests = try library.requests()
            return [
                "change": try library.lastChange(),
                "apps": apps.map { s -> [String: Any] in
                    let a = s.record
                    return ["id": a.id.rawValue, "readWrite": a.readWrite.rawValue, "addOnly": a.addOnly.rawValue,
                            "stripLocation": a.options.stripLocation, "editAny": a.options.editAny,
                            "selected": s.selected, "picked": s.picked, "created": s.created]
                },
                "requests": requests.map { r -> [String: Any] in
                    ["id": r.id, "app": r.app.rawValue, "kind": r.kind.rawValue, "reason": r.reason,
                     "date": r.createdAt.timeIntervalSince1970,
                     "asset": r.asset.map { ["id": $0.id, "name": $0.displayName] as [String: Any] } ?? NSNull()]
                },
            ]
        }
    }

    /// The picker's catalog for an app, newest first: items as arrays [id, name, captured, kind,
    /// isVideo, hasLocation, selectable, pickable, version, albums, size], the albums, and the
    /// app's selection and picks. Written by hand: 100,000 items through JSONSerialization took
    /// seconds; this is one pass over the rows.
    func catalog(_ app: AppID) throws -> Response {
        let (c, record, hashes) = try call {
            (try library.pickerCatalog(for: app), try library.requireApp(app), try library.contentHashes())
        }
        let items = c.items.sorted { $0.captureDate > $1.captureDate || ($0.captureDate == $1.captureDate && $0.rowID > $1.rowID) }
        var out = JSONText()
        out.raw("{\"app\":"); out.string(app.rawValue)
        out.raw(",\"readWrite\":"); out.string(record.readWrite.rawValue)
        out.raw(",\"stripLocation\":\(record.options.stripLocation)")
        out.raw(",\"albums\":[")
        for (i, a) in c.albums.enumerated() {
            if i > 0 { out.raw(",") }
            out.raw("{\"id\":\(a.id),\"name\":"); out.string(a.name); out.raw(",\"shared\":\(a.isShared)}")
        }
        out.raw("],\"items\":[")
        for (n, i) in items.enumerated() {
            if n > 0 { out.raw(",") }
            out.raw("["); out.string(i.id); out.raw(","); out.string(i.displayName)
            out.raw(",\(Int64(i.captureDate)),"); out.string(i.mediaKind)
            out.raw(",\(i.mediaClass == .video),\(i.hasLocation),\(i.selectable),\(i.pickable),")
            out.string(String((hashes[i.rowID] ?? "").suffix(16)))
            out.raw(",[\((c.albumsOfAsset[i.rowID] ?? []).map(String.init).joined(separator: ","))],\(i.byteSize)]")
        }
        out.raw("],\"selection\":"); out.strings(c.selection.keys.compactMap { c.ids[$0] })
        out.raw(",\"selectionStrip\":"); out.strings(c.selection.filter { $0.value }.keys.compactMap { c.ids[$0] })
        out.raw(",\"picks\":"); out.strings(c.picks.keys.compactMap { c.ids[$0] })
        out.raw("}")
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: out.bytes)))
    }

    /// One click on a request: `allow` (full access), `deny`, or `limited` (after the picker).
    func answer(_ id: Int64, _ answer: String) throws {
        let r = try library.request(id: id)
        switch (r.kind, answer) {
        case (.readWrite, "allow"), (.picker, "allow"): _ = try library.authorize(r.app, access: .readWrite, status: .authorized)
        case (.readWrite, "limited"), (.picker, "limited"): _ = try library.authorize(r.app, access: .readWrite, status: .limited)
        case (.readWrite, "deny"): _ = try library.authorize(r.app, access: .readWrite, status: .denied)
        case (.addOnly, "allow"): _ = try library.authorize(r.app, access: .addOnly, status: .authorized)
        case (.addOnly, "deny"): _ = try library.authorize(r.app, access: .addOnly, status: .denied)
        case (.edit, "allow"):
            guard let a = r.asset else { throw LibraryError.invalid("the edit request names no photo") }
            _ = try library.grantEdit(r.app, [a.id])
        case (.picker, "deny"), (.edit, "deny"): break
        default: throw LibraryError.invalid("'\(answer)' does not answer a \(r.kind.rawValue) request")
        }
        // authorize clears the level's requests itself; the others go now.
        do { try library.removeRequest(id: id) } catch LibraryError.unknownRequest {}
    }

    /// Server-sent events: one `change` event whenever the library's change position or its
    /// requests move, so an open page follows the CLI (and mounts' requests) at once.
    func events() -> Response {
        let library = self.library
        let body = ResponseBody { [self] writer in
            var last: (Int64, Int) = (-1, -1)
            var quiet = 0
            while !Task.isCancelled && !stopping.load(ordering: .relaxed) {
                let now = ((try? library.lastChange()) ?? -1, (try? library.requests().count) ?? -1)
                if now != last {
                    last = now
                    quiet = 0
                    try await writer.write(ByteBuffer(string: "event: change\ndata: {\"change\":\(now.0),\"requests\":\(now.1)}\n\n"))
                } else if quiet >= 20 {
                    quiet = 0
                    try await writer.write(ByteBuffer(string: ": keep-alive\n\n"))
                }
                quiet += 1
                try await Task.sleep(for: .milliseconds(250))
            }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-store"], body: body)
    }

    // MARK: helpers

    static func asset(_ text: String, _ type: String) -> Response {
        Response(status: .ok, headers: [.contentType: type], body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    static func json(_ value: Any) throws -> Response {
        let data = try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys])
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
    func json(_ value: Any) throws -> Response { try WebApp.json(value) }

    static func body(_ request: Request) async throws -> [String: Any] {
        var request = request
        let buffer = try await request.collectBody(upTo: 4 << 20)
        guard request.headers[.contentType]?.hasPrefix("application/json") == true,
              let obj = try? JSONSerialization.jsonObject(with: Data(buffer: buffer)) as? [String: Any] else {
            throw HTTPError(.badRequest, message: "a JSON object is expected")
        }
        return obj
    }

    func appID(_ context: WebContext) throws -> AppID {
        guard let raw = context.parameters.get("app"), let id = AppID(raw) else { throw HTTPError(.badRequest, message: "invalid app id") }
        return id
    }

    func findAsset(_ context: WebContext) throws -> Asset {
        guard let ref = context.parameters.get("id"), ref.count == 16, ref.allSatisfy(\.isHexDigit) else {
            throw HTTPError(.badRequest, message: "an asset id is 16 hex digits")
        }
        return try call {
            guard let a = try library.resolve([ref]).first else { throw LibraryError.unknownAssets([ref]) }
            return a
        }
    }

    /// A library call, its errors as HTTP statuses with the CLI's message.
    func call<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let e as LibraryError {
            let status: HTTPResponse.Status = switch e {
            case .unknownApp, .unknownAssets, .unknownAlbum, .unknownRequest: .notFound
            case .invalid, .invalidAppID, .badInput: .badRequest
            case .conflict, .albumExists, .tooManyRequests: .conflict
            case .libraryBusy: .serviceUnavailable
            default: .internalServerError
            }
            throw HTTPError(status, message: "\(e)")
        }
    }
}

/// JSON written by hand, for the large answers: strings escaped as RFC 8259 asks (quote,
/// backslash, control characters), everything else passed as is.
struct JSONText {
    var bytes: [UInt8] = []

    init() { bytes.reserveCapacity(1 << 20) }

    mutating func raw(_ s: String) { bytes.append(contentsOf: s.utf8) }

    mutating func string(_ s: String) {
        bytes.append(0x22)
        for b in s.utf8 {
            switch b {
            case 0x22: bytes.append(contentsOf: [0x5C, 0x22])
            case 0x5C: bytes.append(contentsOf: [0x5C, 0x5C])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [0x5C, 0x75, 0x30, 0x30, hex[Int(b >> 4)], hex[Int(b & 15)]])
            default: bytes.append(b)
            }
        }
        bytes.append(0x22)
    }

    mutating func strings(_ list: [String]) {
        raw("[")
        for (i, s) in list.enumerated() {
            if i > 0 { raw(",") }
            string(s)
        }
        raw("]")
    }
}
