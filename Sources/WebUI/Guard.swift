import Foundation
import HTTPTypes
import Hummingbird
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Who may use the web app (issue 35), checked before any handler runs, on every request:
/// - the Host header must be this server's loopback address and port, once (a page on another
///   site whose name was rebound to 127.0.0.1 sends its own name: refused);
/// - the secret the CLI printed travels in the address's fragment (never sent to a server, never
///   in a Referer); the page's script exchanges it, once, for a session: an HttpOnly,
///   SameSite=Strict cookie named for this port, and a token the script keeps in this origin's
///   storage and sends in a header. After that the secret opens nothing;
/// - every request but the page's own files needs both. Browsers send cookies to every port of
///   127.0.0.1 (another local user's server there gets ours), so the cookie alone opens nothing:
///   the token is what another origin cannot read. Thumbnails, which an <img> loads, carry a
///   separate key that opens only thumbnails;
/// - a request that changes anything also needs an Origin of this server;
/// - a session unused for `idleLimit` ends.
/// Every response, errors included, carries a strict Content-Security-Policy and is never cached.
public final class WebGuard: Sendable {
    struct Session {
        var token: String
        var thumbKey: String
        var lastUsed: Double
    }
    private struct State {
        var secret: String?
        var sessions: [String: Session] = [:]   // by cookie value
        var port: Int = 0
    }
    private let state: Mutex<State>
    public static let tokenHeader = "X-Photogate-Token"
    /// The server's own host name: a random one under `.localhost` (browsers send every
    /// `*.localhost` name to the loopback address). `http://127.0.0.1:PORT` is an origin any local
    /// user can hold while the port is free, and a browser keeps what was served there: a
    /// cached script, a service worker, cookies. They poisoned thousands of ports ahead of a
    /// later ui in a minute. No one can prepare an origin whose name they cannot guess.
    public let hostName = "pg-" + String(WebGuard.randomToken().prefix(32)) + ".localhost"
    static let idleLimit: Double = 12 * 3600

    public init() {
        state = Mutex(State(secret: WebGuard.randomToken()))
    }

    /// The one-time secret for the address (nil once exchanged).
    public var secret: String? { state.withLock { $0.secret } }
    public func setPort(_ p: Int) { state.withLock { $0.port = p } }
    public var port: Int { state.withLock { $0.port } }
    /// The session cookie's name: one per server (two servers in one browser keep their own).
    var cookieName: String { "pg_session_\(port)" }

    static func randomToken() -> String {
        var g = SystemRandomNumberGenerator()   // getrandom(2)
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &g) }
        return bytes.map { String(format: "%02x", $0) }.joined()
    }

    /// Constant-time comparison of two tokens.
    static func same(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var d: UInt8 = 0
        for i in x.indices { d |= x[i] ^ y[i] }
        return d == 0
    }

    func hostAllowed(_ request: Request) -> Bool {
        // Ours (HTTP/1.1's Host is the request's authority), and only ours: not 127.0.0.1.
        guard let host = request.head.authority else { return false }
        return host == "\(hostName):\(port)"
    }

    func originAllowed(_ origin: String?) -> Bool {
        guard let origin else { return false }
        return origin == "http://\(hostName):\(port)"
    }

    /// Exchanges the address's secret for a new session: (cookie, token, thumbnail key), or nil
    /// when the secret is wrong or was used.
    func exchange(_ offered: String) -> (cookie: String, token: String, thumbKey: String)? {
        state.withLock { s in
            guard let secret = s.secret, WebGuard.same(secret, offered) else { return nil }
            s.secret = nil
            let cookie = WebGuard.randomToken(), token = WebGuard.randomToken(), key = WebGuard.randomToken()
            s.sessions[cookie] = Session(token: token, thumbKey: key, lastUsed: Date().timeIntervalSince1970)
            return (cookie, token, key)
        }
    }

    /// Whether this cookie opens a session with this token (or, for a thumbnail, this key).
    func admits(cookie: String?, token: String?, thumbKey: String?) -> Bool {
        guard let cookie else { return false }
        let now = Date().timeIntervalSince1970
        return state.withLock { s in
            s.sessions = s.sessions.filter { now - $0.value.lastUsed < WebGuard.idleLimit }
            guard let (key, session) = s.sessions.first(where: { WebGuard.same($0.key, cookie) }) else { return false }
            let ok = token.map { WebGuard.same($0, session.token) } ?? thumbKey.map { WebGuard.same($0, session.thumbKey) } ?? false
            if ok { s.sessions[key]?.lastUsed = now }
            return ok
        }
    }

    static let contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    static func secure(_ response: inout Response) {
        response.headers[.contentSecurityPolicy] = contentSecurityPolicy
        response.headers[.xContentTypeOptions] = "nosniff"
        response.headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        response.headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        response.headers[HTTPField.Name("Cross-Origin-Resource-Policy")!] = "same-origin"
        response.headers[HTTPField.Name("Cross-Origin-Opener-Policy")!] = "same-origin"
        if response.headers[.cacheControl] == nil { response.headers[.cacheControl] = "no-store" }
    }

    static func refusal(_ status: HTTPResponse.Status, _ text: String) -> Response {
        var r = Response(status: status, headers: [.contentType: "text/plain; charset=utf-8"],
                         body: ResponseBody(byteBuffer: ByteBuffer(string: text + "\n")))
        secure(&r)
        return r
    }
}

/// The request context of the web app: Hummingbird's.
struct WebContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    init(source: Source) { coreContext = .init(source: source) }
    var maxUploadSize: Int { 1 << 20 }
}

/// The guard as Hummingbird middleware, in front of every route.
struct GuardMiddleware: RouterMiddleware {
    typealias Context = WebContext
    let guardian: WebGuard
    /// Served to anyone who reaches the right Host: the page's own files hold no secret.
    static let open: Set<String> = ["/", "/app.js", "/app.css", "/favicon.ico"]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard guardian.hostAllowed(request) else {
            return WebGuard.refusal(.misdirectedRequest, "wrong Host: this server answers only to its loopback address")
        }
        let path = request.uri.path
        if request.method != .get && request.method != .head && !guardian.originAllowed(request.headers[.origin]) {
            return WebGuard.refusal(.forbidden, "cross-origin request refused")
        }
        if path == "/api/session" && request.method == .post {
            return try await exchange(request)
        }
        if !(request.method == .get && GuardMiddleware.open.contains(path)) {
            let cookies = GuardMiddleware.cookieValues(request, named: guardian.cookieName)
            let token = request.headers[HTTPField.Name(WebGuard.tokenHeader)!]
            let key = path.hasPrefix("/thumb/") && token == nil ? request.uri.queryParameters.get("t").map { String($0) } : nil
            guard cookies.contains(where: { guardian.admits(cookie: $0, token: token, thumbKey: key) }) else {
                return WebGuard.refusal(.forbidden, "not signed in: open the address `photogate ui` printed")
            }
        }
        var response: Response
        do {
            response = try await next(request, context)
        } catch let e as HTTPError {
            // Errors carry the same headers as every answer (a 404 without CORP told another
            // origin's no-cors fetch which apps and photos exist).
            response = WebGuard.refusal(e.status, e.body ?? e.status.reasonPhrase)
        } catch {
            response = WebGuard.refusal(.internalServerError, "\(error)")
        }
        WebGuard.secure(&response)
        return response
    }

    /// Every value of a cookie of this name (a page elsewhere may set one of the same name with a
    /// longer path, which the browser sends first: any of them may be the session).
    static func cookieValues(_ request: Request, named name: String) -> [String] {
        request.headers[values: .cookie].flatMap { $0.split(separator: ";") }.compactMap { part in
            let kv = part.trimmingCharacters(in: .whitespaces)
            guard kv.hasPrefix(name + "=") else { return nil }
            return String(kv.dropFirst(name.count + 1))
        }
    }

    /// POST /api/session {"secret": ...}: the one exchange of the printed secret.
    func exchange(_ request: Request) async throws -> Response {
        var request = request
        let buffer = try await request.collectBody(upTo: 4096)
        guard let body = try? JSONSerialization.jsonObject(with: Data(buffer: buffer)) as? [String: Any],
              let offered = body["secret"] as? String, let session = guardian.exchange(offered) else {
            return WebGuard.refusal(.forbidden, "this address was used already or is wrong: run `photogate ui` again for a new one")
        }
        let json = try JSONSerialization.data(withJSONObject: ["token": session.token, "thumbKey": session.thumbKey])
        var r = Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: json)))
        r.setCookie(Cookie(name: guardian.cookieName, value: session.cookie, path: "/", httpOnly: true, sameSite: .strict))
        WebGuard.secure(&r)
        return r
    }
}
