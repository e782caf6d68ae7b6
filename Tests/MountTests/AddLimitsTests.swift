import Foundation
import Synchronization
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

    /// A new library, the app authorized to add, its add-only mount with a daily limit of
    /// `dailyLimitMB`.
    func addOnlyMount(dailyLimitMB: Int) throws -> (MountFixture, String) {
        let f = try MountFixture()
        f.extraEnvironment["PHOTOGATE_DAILY_LIMIT_MB"] = String(dailyLimitMB)
        try f.pg("authorize", app, "--access", "add-only", "--status", "authorized")
        return (f, try f.mount(app, access: "add-only"))
    }

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
        let (f, mp) = try addOnlyMount(dailyLimitMB: 1)
        let padding = [UInt8](repeating: 0x5a, count: 600 << 10)
        #expect(cpWrite(try TestMedia.jpeg(tag: "first") + padding, to: mp + "/first.jpg") == 0)
        #expect(cpWrite(try TestMedia.jpeg(tag: "second") + padding, to: mp + "/second.jpg") == EDQUOT)
        #expect(refused(mp).contains("a day"), "\(refused(mp))")
        #expect(try f.assetsJSON().map { $0["name"] as? String } == ["first.jpg"])
        try f.unmount(mp)
    }

    /// The limit is asked in the transaction that adds the file: closes at once cannot each find
    /// room the others are about to take (asked before it, in a transaction of its own, eight
    /// writers of 300 KiB each passed a 1 MiB limit together).
    @Test func writersRacingToTheDailyLimitNeverTakeTheAppPastIt() throws {
        let (f, mp) = try addOnlyMount(dailyLimitMB: 1)
        defer { try? f.unmount(mp) }
        let files = try (0..<8).map { i in try TestMedia.jpeg(tag: "racer \(i)") + [UInt8](repeating: UInt8(i), count: 300 << 10) }
        let results = Mutex<[Int32]>([])
        DispatchQueue.concurrentPerform(iterations: files.count) { i in
            let e = cpWrite(files[i], to: mp + "/racer\(i).jpg")
            results.withLock { $0.append(e) }
        }
        let taken = results.withLock { $0 }.filter { $0 == 0 }.count
        #expect(results.withLock { $0 }.allSatisfy { $0 == 0 || $0 == EDQUOT }, "\(results.withLock { $0 })")
        let assets = try f.assetsJSON()
        #expect(assets.count == taken)
        #expect(taken == (1 << 20) / files[0].count, "\(taken) files of \(files[0].count) bytes were taken under a limit of 1 MiB")
    }

    /// A copy of a photo the app added already adds nothing (it is that asset): not refused past
    /// the limit, as `cp` of a folder again must not fail on what it copied before.
    @Test func aCopyOfWhatTheAppAddedIsNotRefusedAtTheDailyLimit() throws {
        let (f, mp) = try addOnlyMount(dailyLimitMB: 1)
        defer { try? f.unmount(mp) }
        let photo = try TestMedia.jpeg(tag: "once") + [UInt8](repeating: 0x5a, count: 700 << 10)
        #expect(cpWrite(photo, to: mp + "/once.jpg") == 0)
        #expect(cpWrite(photo, to: mp + "/again.jpg") == 0, "a copy of an asset the app has was refused")
        #expect(cpWrite(try TestMedia.jpeg(tag: "new") + [UInt8](repeating: 0x5a, count: 700 << 10), to: mp + "/new.jpg") == EDQUOT)
        #expect(try f.assetsJSON().count == 1)
    }
}
