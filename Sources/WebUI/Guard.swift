import Foundation
import HTTPTypes
import Hummingbird
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Who may use the web app (issue 35), checked before any handler runs, on every request:
/// - the Host header must be this server's loopback address and port (a page on another site
///   whose name was rebound to 127.0.0.1 sends its own name: refused);
/// - the secret in the URL the CLI printed is exchanged, once, for a session cookie (HttpOnly,
///   SameSite=Strict); after that the secret opens nothing;
/// - every other request needs that cookie (another local user who finds the port has none);
/// - a request that changes anything also needs the page's CSRF token in a header and an Origin
///   of this server (a form or fetch from another origin has neither).
/// Every response carries a strict Content-Security-Policy (scripts, styles and images from this
/// server only, no inline script, no framing) and is never cached.
public final class WebGuard: Sendable {
    private struct State {
        var secret: String?
        var sessions: [String: String] = [:]   // session cookie -> its CSRF token
        var port: Int = 0
    }
    private let state: Mutex<State>
    public static let cookieName = "pg_session"
    public static let csrfHeader = "X-Photogate-CSRF"

    public init() {
        state = Mutex(State(secret: WebGuard.randomToken()))
    }

    /// The one-time secret for the URL (nil once exchanged).
    public var secret: String? { state.withLock { $0.secret } }
    public func setPort(_ p: Int) { state.withLock { $0.port = p } }
    public var port: Int { state.withLock { $0.port } }

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

    func hostAllowed(_ host: String?) -> Bool {
        guard let host else { return false }
        let p = port
        return host == "127.0.0.1:\(p)" || host == "localhost:\(p)"
    }

    func originAllowed(_ origin: String?) -> Bool {
        guard let origin else { return false }
        let p = port
        return origin == "http://127.0.0.1:\(p)" || origin == "http://localhost:\(p)"
    }

    /// Exchanges the URL's secret for a new session; nil when it is wrong or was used.
    func exchange(_ offered: String) -> String? {
        state.withLock { s in
            guard let secret = s.secret, WebGuard.same(secret, offered) else { return nil }
            s.secret = nil
            let session = WebGuard.randomToken()
            s.sessions[session] = WebGuard.randomToken()
            return session
        }
    }

    /// The CSRF token of a session cookie; nil when the cookie opens no session.
    func csrf(forSession cookie: String?) -> String? {
        guard let cookie else { return nil }
        return state.withLock { s in
            s.sessions.first { WebGuard.same($0.key, cookie) }?.value
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

/// The guard as Hummingbird middleware, in front of every route.
/// The request context of the web app: Hummingbird's, and the session's CSRF token (for the page).
struct WebContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    var csrfToken = ""
    init(source: Source) { coreContext = .init(source: source) }
    var maxUploadSize: Int { 1 << 20 }
}

struct GuardMiddleware: RouterMiddleware {
    typealias Context = WebContext
    let guardian: WebGuard

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard guardian.hostAllowed(request.head.authority) else {
            return WebGuard.refusal(.misdirectedRequest, "wrong Host: this server answers only to its loopback address")
        }
        // The secret from the printed URL: exchanged once for the session cookie, then the same
        // page without it in the address.
        if request.method == .get, let offered = request.uri.queryParameters.get("k") {
            guard let session = guardian.exchange(offered) else {
                return WebGuard.refusal(.forbidden, "this link was used already or is wrong: run `photogate ui` again for a new one")
            }
            var r = Response(status: .seeOther, headers: [.location: request.uri.path.isEmpty ? "/" : request.uri.path])
            r.setCookie(Cookie(name: WebGuard.cookieName, value: session, path: "/", httpOnly: true, sameSite: .strict))
            WebGuard.secure(&r)
            return r
        }
        guard let csrf = guardian.csrf(forSession: request.cookies[WebGuard.cookieName]?.value) else {
            return WebGuard.refusal(.forbidden, "not signed in: open the address `photogate ui` printed")
        }
        if request.method != .get && request.method != .head {
            guard guardian.originAllowed(request.headers[.origin]) else {
                return WebGuard.refusal(.forbidden, "cross-origin request refused")
            }
            guard let token = request.headers[HTTPField.Name(WebGuard.csrfHeader)!], WebGuard.same(token, csrf) else {
                return WebGuard.refusal(.forbidden, "missing or wrong CSRF token")
            }
        }
        var context = context
        context.csrfToken = csrf
        var response = try await next(request, context)
        WebGuard.secure(&response)
        return response
    }
}
