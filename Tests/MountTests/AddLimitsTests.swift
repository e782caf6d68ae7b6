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

    /// Each file written (`cpWrite`) to its path, all at once: their close's errnos, in order.
    func writeAtOnce(_ files: [[UInt8]], to paths: [String]) -> [Int32] {
        let results = Mutex<[Int32]>(Array(repeating: 0, count: files.count))
        DispatchQueue.concurrentPerform(iterations: files.count) { i in
            let e = cpWrite(files[i], to: paths[i])
            results.withLock { $0[i] = e }
        }
        return results.withLock { $0 }
    }

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
        let all = writeAtOnce(files, to: files.indices.map { mp + "/racer\($0).jpg" })
        let taken = all.filter { $0 == 0 }.count
        #expect(all.allSatisfy { $0 == 0 || $0 == EDQUOT }, "\(all)")
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

    /// An editor (limited, read-write, with consent to edit) of `count` photos the person
    /// imported (which it did not add: they do not count), its mount with a daily limit of 1 MiB.
    func editorMount(photos count: Int) throws -> (MountFixture, String, [String]) {
        let f = try MountFixture()
        f.extraEnvironment["PHOTOGATE_DAILY_LIMIT_MB"] = "1"
        let names = (0..<count).map { "p\($0).jpg" }
        _ = try f.importPhotos(names)
        try f.pg("authorize", app, "--status", "limited")
        try f.pg(["grant", app] + names)
        try f.pg(["grant", app, "--edit"] + names)
        return (f, try f.mount(app), names)
    }

    /// Saves over photos ask the daily limit in the transaction that commits the version, as new
    /// files do: eight editors saving 300 KiB at once under a 1 MiB limit get 3 versions (asked
    /// in a transaction of their own before it, each could find room the others took).
    @Test func savesRacingToTheDailyLimitNeverTakeTheAppPastIt() throws {
        let (f, mp, names) = try editorMount(photos: 8)
        defer { try? f.unmount(mp) }
        let edits = try names.indices.map { i in try TestMedia.jpeg(tag: "edit \(i)") + [UInt8](repeating: UInt8(i), count: 300 << 10) }
        let all = writeAtOnce(edits, to: names.map { mp + "/" + $0 })
        #expect(all.allSatisfy { $0 == 0 || $0 == EDQUOT }, "\(all)")
        let taken = all.filter { $0 == 0 }.count
        let saved = names.indices.filter { readAll(mp + "/" + names[$0]) == edits[$0] }.count
        #expect(saved == taken, "\(saved) photos show an edit, \(taken) saves said saved")
        #expect(taken == (1 << 20) / edits[0].count, "\(taken) saves of \(edits[0].count) bytes were taken under a limit of 1 MiB")
        #expect(refused(mp).contains("a day"), "\(refused(mp))")
    }

    /// A save of the bytes a photo already has adds nothing: not refused past the limit (a tool
    /// that writes a file back unchanged must not fail), while a save that adds is.
    @Test func aSaveThatAddsNothingIsNotRefusedAtTheDailyLimit() throws {
        let (f, mp, names) = try editorMount(photos: 2)
        defer { try? f.unmount(mp) }
        let big = try TestMedia.jpeg(tag: "big edit") + [UInt8](repeating: 0x5a, count: 700 << 10)
        #expect(cpWrite(big, to: mp + "/p0.jpg") == 0)
        #expect(cpWrite(big, to: mp + "/p0.jpg") == 0, "writing back the current bytes was refused")
        let current = try #require(readAll(mp + "/p1.jpg"))
        #expect(cpWrite(current, to: mp + "/p1.jpg") == 0, "writing back the current bytes was refused")
        #expect(cpWrite(try TestMedia.jpeg(tag: "another") + [UInt8](repeating: 0x5a, count: 700 << 10), to: mp + "/" + names[1]) == EDQUOT)
        #expect(readAll(mp + "/p1.jpg") == current ? true : false, "a refused save changed the photo")
    }

    /// Sidecars written at once are bounded the same way (their versions count as the app's).
    @Test func sidecarsRacingToTheDailyLimitNeverTakeTheAppPastIt() throws {
        let (f, mp, names) = try editorMount(photos: 8)
        defer { try? f.unmount(mp) }
        let profiles = names.indices.map { i in
            Array("[Version]\nAppVersion=5.9\n# profile \(i)\n".utf8) + [UInt8](repeating: UInt8(ascii: "a") + UInt8(i), count: 300 << 10)
        }
        let all = writeAtOnce(profiles, to: names.map { mp + "/" + $0 + ".pp3" })
        #expect(all.allSatisfy { $0 == 0 || $0 == EDQUOT }, "\(all)")
        let taken = all.filter { $0 == 0 }.count
        let kept = names.indices.filter { readAll(mp + "/" + names[$0] + ".pp3") == profiles[$0] }.count
        #expect(kept == taken, "\(kept) sidecars are shown, \(taken) saves said saved")
        #expect(taken == (1 << 20) / profiles[0].count, "\(taken) sidecars of \(profiles[0].count) bytes were taken under a limit of 1 MiB")
    }
}
