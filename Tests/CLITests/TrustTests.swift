import Foundation
import GRDB
import Testing
import TestSupport
@testable import GrantStore
import PhotoLibrary

/// Issue 14: a hostile app must not steer the person's CLI (names it gives its files, names that
/// hold terminal controls, typos, shared assets).
extension CLI {
    /// An app creates a file as its mount would (the same commit path), without a mount.
    @discardableResult
    func appFile(_ app: String, _ name: String) throws -> Asset {
        let lib = try Library.open(at: LibraryPaths(root: library))
        let writer = try StoreWriter(library: lib, purpose: "test")
        let (id, temp, fd) = try writer.makeTemp(extension: "jpg")
        defer { close(fd) }
        let bytes = try TestMedia.jpeg(tag: "\(app)-\(name)-\(UUID())")
        _ = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        return try writer.commitAppFile(tempPath: temp, fd: fd, id: id, app: AppID(app)!, name: name).asset
    }

    func list(_ args: [String]) throws -> [[String: Any]] {
        let o = try run(args + ["--json"])
        #expect(o.status == 0, "\(args): \(o.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(o.stdout.utf8)) as? [[String: Any]])
    }

    func ids(_ args: String...) throws -> [String] { try list(args).compactMap { $0["id"] as? String } }
    func names(_ args: String...) throws -> [String] { try list(args).compactMap { $0["name"] as? String } }

    /// The id of the library asset whose display name is `name`.
    func id(of name: String) throws -> String {
        try #require(try list(["assets"]).first { $0["displayName"] as? String == name }?["id"] as? String)
    }

    func sql(_ statement: String, _ arguments: StatementArguments = []) throws {
        let lib = try Library.open(at: LibraryPaths(root: library))
        try lib.write { db in try db.execute(sql: statement, arguments: arguments) }
    }
}

let appA = "org.example.Limited"
let appB = "org.example.Other"

@Suite(.serialized) struct CLIUnknownApps {
    /// Item 4: a typo in an app id grants nothing, creates nothing, and says so.
    @Test func aTypoGrantsNothing() throws {
        let c = try CLI()
        try c.ok("import", try c.photos(["a.jpg"]))
        for args in [["grant", "no.such.app", "a.jpg"], ["grant", "no.such.app", "--picked", "a.jpg"],
                     ["options", "no.such.app", "--strip-location", "on"], ["revoke", "no.such.app", "a.jpg"],
                     ["pick", "no.such.app"]] {
            let o = try c.run(args)
            #expect(o.status == Code.notFound, "\(args): \(o.status) \(o.stderr)")
            #expect(o.stderr.contains("unknown app"), "\(args): \(o.stderr)")
        }
        #expect(try c.list(["apps"]).isEmpty)
        // An explicit flag registers it; authorize registers as before.
        try c.ok("grant", "no.such.app", "--new-app", "a.jpg")
        try c.ok("options", "org.example.Fresh", "--new-app", "--strip-location", "on")
        try c.ok("authorize", "org.example.Third", "--status", "limited")
        #expect(try c.list(["apps"]).compactMap { $0["app"] as? String } == ["no.such.app", "org.example.Fresh", "org.example.Third"])
        #expect(try c.ids("grants", "no.such.app").count == 1)
    }
}

