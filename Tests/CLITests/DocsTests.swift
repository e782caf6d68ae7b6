import Foundation
import Testing
import TestSupport

/// Issue 40: what the documents say must stay true of the code: the exit-code page is the code's
/// own output.
@Suite(.serialized) struct Docs {
    static let root = TestSupport.packageRoot

    @Test func theExitCodePageIsTheCodesOwnOutput() throws {
        let c = try CLI(initialize: false)
        let o = try c.run("exit-codes", "--markdown")
        #expect(o.status == 0, "\(o.stderr)")
        let page = try String(contentsOfFile: Self.root + "/docs/exit-codes.md", encoding: .utf8)
        #expect(o.stdout == page, "docs/exit-codes.md is not `photogate exit-codes --markdown`: run it again into the file")
        // One row per code the command lists, in its order.
        let codes = try c.run("exit-codes").stdout.split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) }
        let rows = page.split(separator: "\n").filter { $0.hasPrefix("| ") && !$0.hasPrefix("| code") }
            .compactMap { $0.dropFirst(2).split(separator: " ").first.map(String.init) }
        #expect(codes.count >= 15 && rows == codes, "\(rows) against \(codes)")
    }
}
