import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 14, resources: requests do not wake mounts and are capped; the daemon's descriptors.
@Suite(.serialized) struct DaemonResources {
    static func bellTime(_ library: String) -> Int? {
        var st = stat()
        guard stat(library + "/run/bell", &st) == 0 else { return nil }
        return st.st_mtim.tv_sec * 1_000_000_000 + st.st_mtim.tv_nsec
    }

    @Test func threeThousandRequestsAreCappedAndRingNoBell() throws {
        guard fuseAvailable else { return }
        let f = try MountFixture()
        try f.pg("authorize", "org.example.Asker", "--status", "limited")
        let m = try f.mount("org.example.Asker")
        try f.pg("authorize", "org.example.Other", "--status", "authorized")
        let watcher = try f.mount("org.example.Other")
        #expect(photos(watcher).isEmpty)
        let bell = Self.bellTime(f.library)
        var busy = 0, other: [Int32] = [], accepted: [Int] = []
        for i in 0..<3000 {
            // Close-on-exec: a child another suite spawns meanwhile must not keep a copy.
            let fd = Glibc.open(m + "/.photogate/request", O_WRONLY | O_CLOEXEC)
            guard fd >= 0 else { other.append(errno); continue }
            let text = "picker\nreason \(i)\n"
            let wrote = text.withCString { Glibc.write(fd, $0, strlen($0)) }
            if wrote != text.utf8.count { other.append(wrote < 0 ? errno : -1) }
            if Glibc.close(fd) != 0 { if errno == EBUSY { busy += 1 } else { other.append(errno) } } else { accepted.append(i) }
        }
        #expect(other.isEmpty, "unexpected errors: \(Set(other))")
        #expect(busy == 3000 - 16, "requests beyond the cap answer EBUSY (accepted: \(accepted))")
        let pending = try pendingRequests(f)
        #expect(pending.count == 16, "\(pending)")
        #expect(Self.bellTime(f.library) == bell, "requests rang the bell that wakes every mount")
        try f.unmount(m)
        try f.unmount(watcher)
    }

    /// A child that inherited a `.photogate/request` descriptor (a fork between open and close)
    /// and exits first sends a FLUSH too. It must not take the request: the opener's own close
    /// is the one that submits it and hears EBUSY past the cap.
    @Test func aChildClosingAnInheritedRequestDescriptorDoesNotTakeTheRequest() throws {
        guard fuseAvailable else { return }
        let f = try MountFixture()
        try f.pg("authorize", "org.example.Parent", "--status", "limited")
        let m = try f.mount("org.example.Parent")
        defer { try? f.unmount(m) }
        func ask(_ i: Int, forking: Bool) -> Int32 {
            let fd = Glibc.open(m + "/.photogate/request", O_WRONLY)   // no O_CLOEXEC: children inherit it
            guard fd >= 0 else { return errno }
            let text = "picker\nreason \(i)\n"
            _ = text.withCString { Glibc.write(fd, $0, strlen($0)) }
            if forking {
                var pid = pid_t()
                let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
                defer { argv.forEach { free($0) } }
                guard posix_spawn(&pid, "/bin/true", nil, nil, argv, environ) == 0 else { return -1 }
                var status: Int32 = 0
                _ = waitpid(pid, &status, 0)
            }
            return Glibc.close(fd) == 0 ? 0 : errno
        }
        // The first request, with a child closing its copy before the opener: still recorded.
        #expect(ask(0, forking: true) == 0)
        #expect(try pendingRequests(f).contains { ($0["reason"] as? String) == "reason 0" }, "the child's close swallowed the request")
        for i in 1..<16 { #expect(ask(i, forking: false) == 0) }
        // Past the cap the opener hears EBUSY even when a child closed its copy first.
        #expect(ask(16, forking: true) == EBUSY, "the child's close took the request and the opener's close succeeded")
        #expect(try pendingRequests(f).count == 16)
    }

    @Test func theDaemonRaisesItsDescriptorLimit() throws {
        guard fuseAvailable else { return }
        let f = try MountFixture()
        try f.pg("authorize", "org.example.Opener", "--status", "authorized")
        let m = try f.mount("org.example.Opener")
        defer { try? f.unmount(m) }
        let records = try FileManager.default.contentsOfDirectory(atPath: f.library + "/run/mounts").filter { $0.hasSuffix(".json") }
        let pid = try #require(records.compactMap { Int32($0.dropLast(5)) }.first)
        let limits = try String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)
        let line = try #require(limits.split(separator: "\n").first { $0.hasPrefix("Max open files") })
        let fields = line.split(separator: " ").suffix(3)
        #expect(fields.count == 3 && fields.first == fields.dropFirst().first, "soft limit raised to the hard limit: \(line)")
        let log = (try? String(contentsOfFile: f.library + "/run/logs/org.example.Opener.read-write.log", encoding: .utf8)) ?? ""
        #expect(log.contains("descriptors: "), "\(log)")
    }
}
