import Foundation
import GRDB
import Testing
import TestSupport
@testable import GrantStore
@testable import PhotoLibrary
#if canImport(Glibc)
import Glibc
#endif

/// Issue 14: 3,000 distinct requests made 3,000 pending requests, and each rang the change bell
/// and appended to the change log, waking every mount of the library.
@Suite(.serialized) struct RequestFlood {
    /// The bell file's modification time in nanoseconds (nil: never rung).
    static func bellTime(_ lib: Library) -> Int? {
        var st = stat()
        guard stat(lib.paths.bell, &st) == 0 else { return nil }
        return st.st_mtim.tv_sec * 1_000_000_000 + st.st_mtim.tv_nsec
    }

    static func changeRows(_ lib: Library) throws -> Int {
        try lib.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM changes") ?? 0 }
    }

    @Test func pendingRequestsAreCappedPerAppAndKindAndWakeNoMount() throws {
        let t = try TempLibrary()
        let lib = t.library
        try lib.registerApp(editor)
        lib.ringBell()
        let bell = Self.bellTime(lib), rows = try Self.changeRows(lib), seq = try lib.lastChange()
        var refused = 0
        for i in 0..<3000 {
            do {
                try lib.recordRequest(editor, kind: .picker, reason: "reason \(i)")
            } catch let e as LibraryError {
                guard case .tooManyRequests(let app, let kind, let limit) = e else { throw e }
                #expect(app == editor.rawValue && kind == "picker" && limit == Library.maxPendingRequestsPerKind)
                refused += 1
            }
        }
        let pending = try lib.requests()
        #expect(pending.count == Library.maxPendingRequestsPerKind)
        #expect(refused == 3000 - Library.maxPendingRequestsPerKind)
        // The first ones stay, unchanged: the person sees what the app asked first.
        #expect(pending.map(\.reason) == (0..<Library.maxPendingRequestsPerKind).map { "reason \($0)" })
        // Nothing a mount follows moved: no bell, no change-log row, same sequence.
        #expect(Self.bellTime(lib) == bell, "recording a request rang the bell")
        #expect(try Self.changeRows(lib) == rows)
        #expect(try lib.lastChange() == seq)
        // An identical request is still the same one, even at the cap.
        let (same, isNew) = try lib.recordRequest(editor, kind: .picker, reason: "reason 3")
        #expect(!isNew && same.reason == "reason 3")
        // Another kind and another app have caps of their own.
        #expect(try lib.recordRequest(editor, kind: .readWrite).1)
        try lib.registerApp(camera)
        #expect(try lib.recordRequest(camera, kind: .picker, reason: "x").1)
        // Answering clears them; the app may ask again.
        try lib.authorize(editor, access: .readWrite, status: .limited)
        #expect(try lib.requests().filter { $0.app == editor }.isEmpty)
        #expect(try lib.recordRequest(editor, kind: .picker, reason: "reason 3000").1)
    }

    @Test func aRequestFromANewAppStillRings() throws {
        let t = try TempLibrary()
        let lib = t.library
        let seq = try lib.lastChange()
        // The app is new: that is a change (apps are listed, and mounts follow it).
        try lib.recordRequest(AppID("org.example.Newcomer")!, kind: .readWrite)
        #expect(try lib.lastChange() > seq)
        #expect(Self.bellTime(lib) != nil)
    }
}
