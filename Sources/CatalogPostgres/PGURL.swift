#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Where a PostgreSQL catalog is and who connects: a libpq-style connection URL.
///
///     postgresql://user[:password]@host[:port]/db               TCP (no TLS: see below)
///     postgresql:///db?host=/path/to/socketdir&user=u            a Unix socket in that folder
///     postgresql://user@%2Fpath%2Fto%2Fsocketdir/db              the same, the folder percent-encoded
///
/// Parameters after `?`: host, port, user, password, dbname, application_name, sslmode
/// (disable, allow or prefer: connections are never encrypted; require and verify-* are refused,
/// since this client does not do TLS yet). Any other parameter is an error, as in libpq. Parts
/// with `/ ? # @ :` or `%` in them are percent-encoded. Defaults as libpq's: port 5432, user the
/// process's user, database the user's name, host the socket folder /var/run/postgresql.
///
/// The password never appears in `description`, `debugDescription`, a mirror (dump), or an
/// error of the parser (which names the faulty part without quoting the string).
public struct PGURL: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var user: String
    public var password: String?
    /// The TCP host; nil for a Unix socket.
    public var host: String?
    public var port: Int
    /// The folder holding the server's socket (`.s.PGSQL.<port>`); nil for TCP.
    public var socketDirectory: String?
    public var database: String
    /// Sent as the connection's application_name (pg_stat_activity shows it).
    public var applicationName: String?

    public static let defaultSocketDirectory = "/var/run/postgresql"

    /// The socket's path, for a Unix socket URL.
    public var socketPath: String? { socketDirectory.map { "\($0)/.s.PGSQL.\(port)" } }

    public struct ParseError: Error, CustomStringConvertible, Sendable {
        public var reason: String
        public var description: String {
            "invalid PostgreSQL URL: \(reason) (expected postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE or postgresql:///DATABASE?host=/SOCKET/FOLDER&user=USER)"
        }
    }

    public init(_ string: String) throws {
        func fail(_ reason: String) -> ParseError { ParseError(reason: reason) }
        var rest = Substring(string)
        var matched = false
        for scheme in ["postgresql://", "postgres://"] where rest.lowercased().hasPrefix(scheme) {
            rest = rest.dropFirst(scheme.count)
            matched = true
            break
        }
        guard matched else { throw fail("it does not start with postgresql://") }
        if rest.contains("#") { throw fail("it has a '#' (percent-encode it as %23)") }

        // authority [/path] [?query]
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        rest = rest[authorityEnd...]
        var pathPart = Substring(""), queryPart = Substring("")
        if let q = rest.firstIndex(of: "?") {
            pathPart = rest[..<q]
            queryPart = rest[rest.index(after: q)...]
        } else {
            pathPart = rest
        }

        var user: String?, password: String?, host: String?, port: Int?, database: String?
        var applicationName: String?

        var hostPort = authority
        if let at = authority.lastIndex(of: "@") {
            let userInfo = authority[..<at]
            hostPort = authority[authority.index(after: at)...]
            if let colon = userInfo.firstIndex(of: ":") {
                user = try Self.decode(userInfo[..<colon], part: "the user name")
                password = try Self.decode(userInfo[userInfo.index(after: colon)...], part: "the password")
            } else {
                user = try Self.decode(userInfo, part: "the user name")
            }
            if user == "" { user = nil }
        }
        if hostPort.contains(",") { throw fail("it names several hosts, which this client does not support") }
        if hostPort.hasPrefix("[") {
            guard let close = hostPort.firstIndex(of: "]") else { throw fail("an IPv6 host has no closing ']'") }
            host = String(hostPort[hostPort.index(after: hostPort.startIndex)..<close])
            let after = hostPort[hostPort.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw fail("something follows the IPv6 host other than :PORT") }
                port = try Self.port(after.dropFirst())
            }
        } else if let colon = hostPort.lastIndex(of: ":") {
            host = try Self.decode(hostPort[..<colon], part: "the host")
            port = try Self.port(hostPort[hostPort.index(after: colon)...])
        } else if !hostPort.isEmpty {
            host = try Self.decode(hostPort, part: "the host")
        }
        if host == "" { host = nil }

        if !pathPart.isEmpty {
            let db = try Self.decode(pathPart.dropFirst(), part: "the database name")
            if db.contains("/") { throw fail("the database name has a '/' (percent-encode it as %2F)") }
            if !db.isEmpty { database = db }
        }

        if !queryPart.isEmpty {
            for pair in queryPart.split(separator: "&", omittingEmptySubsequences: true) {
                guard let eq = pair.firstIndex(of: "=") else {
                    throw fail("the parameter '\(pair.prefix(40))' has no '=VALUE'")
                }
                let key = try Self.decode(pair[..<eq], part: "a parameter's name")
                let value = try Self.decode(pair[pair.index(after: eq)...], part: "the value of \(key)")
                switch key {
                case "host": host = value.isEmpty ? nil : value
                case "port": port = try Self.port(Substring(value))
                case "user": user = value.isEmpty ? nil : value
                case "password": password = value
                case "dbname": database = value.isEmpty ? nil : value
                case "application_name": applicationName = value
                case "sslmode":
                    switch value {
                    case "disable", "allow", "prefer": break
                    case "require", "verify-ca", "verify-full":
                        throw fail("sslmode=\(value) asks for TLS, which this client does not do yet (use a Unix socket, or a network you trust, with sslmode=disable)")
                    default: throw fail("sslmode must be disable, allow, prefer, require, verify-ca or verify-full")
                    }
                case "connect_timeout": break   // the caller's `timeout` governs
                default:
                    throw fail("unknown parameter '\(key.prefix(40))'")
                }
            }
        }

        let resolvedUser = user ?? Self.processUserName()
        self.user = resolvedUser
        self.password = password
        self.port = port ?? 5432
        self.database = database ?? resolvedUser
        self.applicationName = applicationName
        let h = host ?? Self.defaultSocketDirectory
        if h.hasPrefix("/") {
            self.host = nil
            self.socketDirectory = h
            if (socketPath?.utf8.count ?? 0) >= 108 {
                throw fail("the socket's path is longer than a Unix socket address can hold (107 bytes)")
            }
        } else {
            self.host = h
            self.socketDirectory = nil
        }
    }

    public init(user: String, password: String? = nil, host: String? = nil, port: Int = 5432,
                socketDirectory: String? = nil, database: String, applicationName: String? = nil) {
        self.user = user
        self.password = password
        self.host = socketDirectory == nil ? (host ?? "localhost") : nil
        self.port = port
        self.socketDirectory = socketDirectory
        self.database = database
        self.applicationName = applicationName
    }

    /// The same place and user, another application_name.
    public func with(applicationName: String?) -> PGURL {
        var u = self
        u.applicationName = applicationName
        return u
    }

    /// The URL in the form `init` reads, the password replaced by `***`.
    public var description: String {
        var s = "postgresql://"
        var params: [String] = []
        if let host {
            s += Self.encode(user)
            if password != nil { s += ":***" }
            s += "@" + (host.contains(":") ? "[\(host)]" : Self.encode(host))
            if port != 5432 { s += ":\(port)" }
        } else {
            params.append("host=" + Self.encode(socketDirectory ?? Self.defaultSocketDirectory, keepSlash: true))
            if port != 5432 { params.append("port=\(port)") }
            params.append("user=" + Self.encode(user))
            if password != nil { params.append("password=***") }
        }
        s += "/" + Self.encode(database)
        if let applicationName { params.append("application_name=" + Self.encode(applicationName)) }
        if !params.isEmpty { s += "?" + params.joined(separator: "&") }
        return s
    }

    public var debugDescription: String { "PGURL(\(description))" }

    public var customMirror: Mirror {
        Mirror(self, children: ["url": description], displayStyle: .struct)
    }

    // MARK: parsing helpers

    private static func port(_ s: Substring) throws -> Int {
        guard !s.isEmpty, s.count <= 5, s.allSatisfy({ $0.isASCII && $0.isNumber }), let p = Int(s), (1...65535).contains(p) else {
            throw ParseError(reason: "the port is not a number from 1 to 65535")
        }
        return p
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// Percent-decoding; the error names the part, never its text (it may be a password).
    private static func decode(_ s: Substring, part: String) throws -> String {
        let bytes = Array(s.utf8)
        guard bytes.contains(UInt8(ascii: "%")) else { return String(s) }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%") {
                guard i + 2 < bytes.count, let hi = hexValue(bytes[i + 1]), let lo = hexValue(bytes[i + 2]) else {
                    throw ParseError(reason: "\(part) has a '%' not followed by two hexadecimal digits")
                }
                out.append(hi << 4 | lo)
                i += 3
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        guard let decoded = String(validating: out, as: UTF8.self) else {
            throw ParseError(reason: "\(part) is not UTF-8 once percent-decoded")
        }
        return decoded
    }

    private static func encode(_ s: String, keepSlash: Bool = false) -> String {
        var out = ""
        for b in s.utf8 {
            let c = Character(Unicode.Scalar(b))
            if (b < 0x80 && (c.isLetter || c.isNumber)) || "-._~".contains(c) || (keepSlash && c == "/") {
                out.append(c)
            } else {
                out += "%" + String(b, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }

    private static func processUserName() -> String {
        if let pw = getpwuid(geteuid()), let name = pw.pointee.pw_name {
            return String(cString: name)
        }
        return "postgres"
    }
}

extension String {
    fileprivate func leftPadded(to n: Int) -> String {
        count >= n ? self : String(repeating: "0", count: n - count) + self
    }
}
