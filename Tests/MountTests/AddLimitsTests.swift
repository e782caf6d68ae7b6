import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// What one app may add (issue 34): a file that is mostly holes (a video followed by a hole made
/// with ftruncate: gigabytes of asset that take no disk, hashed at every close and verify and
/// copied whole by every backup) is refused; and the bytes an app adds in a day are bounded.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct AddLimits {
    let app = "org.example.Adder"

    func refused(_ mp: String) -> String { String(decoding: readAll(mp + "/.photogate/refused") ?? [], as: UTF8.self) }

    @Test func aFileThatIsMostlyHolesIsRefused() throws {
        let f = try MountFixture()
        try f.pg("authorize", app, "--access", "add-only", "--status", "authorized")
        let mp = try f.mount(app, access: "add-only")
        let photo = try TestMedia.jpeg(tag: "then a hole")
        let fd = open(mp + "/sparse.jpg", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        #expect(fd >= 0)
        #expect(photo.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == photo.count)
        #expect(ftruncate(fd, 64 << 20) == 0)
        #expect(errnoOf { close(fd) } == EINVAL, "a 64 MiB file of 2 KB was taken")
        #expect(refused(mp).contains("mostly holes"), "\(refused(mp))")
        #expect(try f.assetsJSON().isEmpty)
        // A file written whole is taken.
        #expect(cpWrite(try TestMedia.jpeg(tag: "whole") + [UInt8](repeating: 0x5a, count: 2 << 20), to: mp + "/whole.jpg") == 0)
        #expect(try f.assetsJSON().count == 1)
        try f.unmount(mp)
    }

    @Test func whatAnAppAddsInADayIsBounded() throws {
        let f = try MountFixture()
        f.extraEnvironment["PHOTOGATE_DAILY_LIMIT_MB"] = "1"
        try f.pg("authorize", app, "--access", "add-only", "--status", "authorized")
        let mp = try f.mount(app, access: "add-only")
        let padding = [UInt8](repeating: 0x5a, count: 600 << 10)
        #expect(cpWrite(try TestMedia.jpeg(tag: "first") + padding, to: mp + "/first.jpg") == 0)
        #expect(cpWrite(try TestMedia.jpeg(tag: "second") + padding, to: mp + "/second.jpg") == EDQUOT)
        #expect(refused(mp).contains("a day"), "\(refused(mp))")
        #expect(try f.assetsJSON().map { $0["name"] as? String } == ["first.jpg"])
        try f.unmount(mp)
    }
}
