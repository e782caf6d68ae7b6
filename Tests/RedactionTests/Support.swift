import Foundation
import Testing
import TestSupport
@testable import Redaction

/// External tools the tests drive: found through PATH; a missing tool fails the test (scripts/test installs them).
enum Tools {
    static func path(_ name: String) -> String? {
        let dirs = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":")
        for dir in dirs {
            let candidate = "\(dir)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    struct Output {
        var status: Int32
        var stdout: Data
        var stderr: String
        var text: String { String(decoding: stdout, as: UTF8.self) }
    }

    struct Missing: Error, CustomStringConvertible {
        var tool: String
        var description: String { "\(tool) not found in PATH (scripts/test installs exiftool, imagemagick and ffmpeg)" }
    }

    /// Runs `tool` with `arguments`; stdout and stderr go through files (no pipe deadlock).
    @discardableResult
    static func run(_ tool: String, _ arguments: [String], in dir: URL? = nil) throws -> Output {
        guard let executable = path(tool) else { throw Missing(tool: tool) }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("redaction-run-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let out = scratch.appendingPathComponent("out"), err = scratch.appendingPathComponent("err")
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        _ = FileManager.default.createFile(atPath: err.path, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let dir { process.currentDirectoryURL = dir }
        let outHandle = try FileHandle(forWritingTo: out), errHandle = try FileHandle(forWritingTo: err)
        process.standardOutput = outHandle
        process.standardError = errHandle
        process.standardInput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        try outHandle.close()
        try errHandle.close()
        return Output(status: process.terminationStatus, stdout: try Data(contentsOf: out),
                      stderr: String(decoding: try Data(contentsOf: err), as: UTF8.self))
    }

    /// Runs and requires exit status 0.
    @discardableResult
    static func must(_ tool: String, _ arguments: [String]) throws -> Output {
        let o = try run(tool, arguments)
        guard o.status == 0 else {
            throw Failure("\(tool) \(arguments.joined(separator: " ")) exited \(o.status): \(o.stderr)")
        }
        return o
    }
}

struct Failure: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// A temporary directory removed at the end of a test.
final class Scratch {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("redaction-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(at: url) }
    func path(_ name: String) -> String { url.appendingPathComponent(name).path }
}

func readBytes(_ path: String) throws -> [UInt8] { [UInt8](try Data(contentsOf: URL(fileURLWithPath: path))) }
func writeBytes(_ bytes: [UInt8], _ path: String) throws { try Data(bytes).write(to: URL(fileURLWithPath: path)) }

/// Scans by fd (the production path).
func scanFile(_ path: String) throws -> MediaScan {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { throw Failure("open \(path) failed") }
    defer { close(fd) }
    var st = stat()
    guard fstat(fd, &st) == 0 else { throw Failure("fstat failed") }
    return try MediaScanner.scan(fd: fd, size: UInt64(st.st_size))
}

extension RedactionPlan {
    /// The served bytes of a whole file.
    func applied(to bytes: [UInt8]) -> [UInt8] {
        var out = bytes
        out.withUnsafeMutableBytes { apply(to: $0, fileOffset: 0) }
        return out
    }

    /// Served bytes built from reads of random sizes at random offsets (as FUSE reads do).
    func appliedInChunks(to bytes: [UInt8], seed: UInt64) -> [UInt8] {
        var rng = SplitMix(seed: seed)
        var out = bytes
        var offset = 0
        while offset < bytes.count {
            let n = min(bytes.count - offset, 1 + Int(rng.next() % 5000))
            var chunk = Array(bytes[offset..<(offset + n)])
            chunk.withUnsafeMutableBytes { apply(to: $0, fileOffset: UInt64(offset)) }
            out.replaceSubrange(offset..<(offset + n), with: chunk)
            offset += n
        }
        return out
    }
}


/// exiftool's view of a file: `exiftool -a -G1 -n -j`, one flat dictionary.
func exiftoolTags(_ path: String) throws -> [String: Any] {
    let o = try Tools.run("exiftool", ["-a", "-G1", "-n", "-j", path])
    guard let list = try JSONSerialization.jsonObject(with: o.stdout) as? [[String: Any]], let first = list.first else {
        throw Failure("exiftool printed no JSON for \(path): \(o.stderr)")
    }
    return first
}

/// Tags whose name says location (GPS*, *Location*, *Coordinates*, latitude/longitude/altitude).
func locationTags(_ tags: [String: Any]) -> [String: Any] {
    tags.filter { key, _ in
        let name = (key.split(separator: ":").last.map(String.init) ?? key).lowercased()
        return name.hasPrefix("gps") || name.contains("location") || name.contains("coordinates")
            || name.contains("latitude") || name.contains("longitude") || name.contains("altitude")
            || name.contains("iso6709")
    }
}

/// A value that says something: a nonzero number, or text with a nonzero digit.
func isNonzero(_ value: Any) -> Bool {
    if let n = value as? NSNumber { return n.doubleValue != 0 }
    if let s = value as? String { return s.contains { "123456789".contains($0) } }
    if let a = value as? [Any] { return a.contains(where: isNonzero) }
    if let d = value as? [String: Any] { return d.values.contains(where: isNonzero) }
    return false
}

/// Text values of these tags (e.g. "IPTC:City") that must be gone or blank.
func nonBlank(_ tags: [String: Any], names: [String]) -> [String: Any] {
    tags.filter { key, value in
        let name = key.split(separator: ":").last.map(String.init) ?? key
        guard names.contains(name) else { return false }
        let text = "\(value)".trimmingCharacters(in: .whitespacesAndNewlines.union(.init(charactersIn: "\0")))
        return !text.isEmpty
    }
}

enum Decode { case image, video }

/// The decoded pixels (images) or per-frame hashes (movies): must be the same before and after redaction.
func decoded(_ path: String, _ how: Decode) throws -> Data {
    switch how {
    case .image:
        let o = try Tools.must("convert", [path + "[0]", "-depth", "8", "rgba:-"])
        return o.stdout
    case .video:
        let o = try Tools.must("ffmpeg", ["-v", "error", "-i", path, "-map", "0:v", "-f", "framemd5", "-"])
        guard o.stderr.isEmpty else { throw Failure("ffmpeg reported errors for \(path): \(o.stderr)") }
        let probe = try Tools.run("ffprobe", ["-v", "error", path])
        guard probe.status == 0, probe.stderr.isEmpty else { throw Failure("ffprobe reported errors for \(path): \(probe.stderr)") }
        return o.stdout
    }
}

struct Expectation {
    var kind: MediaKind
    var hasLocation = true
    var date: Date?
    var width: Int?
    var height: Int?
    /// Text tags that must be blank after redaction (IPTC/XMP city...).
    var blankTags: [String] = []
    /// Location tags that must be there before redaction (proves the fixture carries them).
    var mustHaveBefore: [String] = []
    /// The original must decode (false for third-party stubs without image data: then only an
    /// original that decodes is compared).
    var mustDecode = true
}

/// The whole check for one file: scan (bytes and fd agree), apply the plan, then exiftool sees no
/// location, the changed bytes all lie inside patches, and the file decodes to the same pixels/frames.
@discardableResult
func verifyRedaction(_ path: String, _ expect: Expectation, decode how: Decode,
                     sourceLocation: SourceLocation = #_sourceLocation) throws -> (MediaScan, [String: Any]) {
    let original = try readBytes(path)
    let scan = try MediaScanner.scan(bytes: original)
    let byFD = try scanFile(path)
    #expect(scan == byFD, "scan(bytes:) and scan(fd:) disagree", sourceLocation: sourceLocation)
    #expect(scan.kind == expect.kind, sourceLocation: sourceLocation)
    #expect(scan.hasLocation == expect.hasLocation, "hasLocation", sourceLocation: sourceLocation)
    if let date = expect.date {
        #expect(scan.captureDate == date, "capture date \(String(describing: scan.captureDate)) != \(date)", sourceLocation: sourceLocation)
    }
    if let w = expect.width { #expect(scan.pixelWidth == w, sourceLocation: sourceLocation) }
    if let h = expect.height { #expect(scan.pixelHeight == h, sourceLocation: sourceLocation) }

    let before = try exiftoolTags(path)
    for name in expect.mustHaveBefore {
        #expect(before.keys.contains { $0.hasSuffix(":" + name) || $0 == name }, "fixture lacks \(name)", sourceLocation: sourceLocation)
    }
    guard case .plan(let plan) = scan.redaction else {
        Issue.record("refused: \(scan.redaction)", sourceLocation: sourceLocation)
        return (scan, [:])
    }
    if expect.hasLocation { #expect(!plan.isEmpty, sourceLocation: sourceLocation) }
    for p in plan.patches {
        #expect(p.end <= UInt64(original.count), "patch past the end", sourceLocation: sourceLocation)
    }
    let served = plan.applied(to: original)
    #expect(plan.appliedInChunks(to: original, seed: UInt64(original.count)) == served, sourceLocation: sourceLocation)
    #expect(served.count == original.count, sourceLocation: sourceLocation)
    for i in 0..<original.count where original[i] != served[i] {
        #expect(plan.intersects(offset: UInt64(i), length: 1), "byte \(i) changed outside the plan", sourceLocation: sourceLocation)
        break
    }
    // The plan survives serialization.
    #expect(try RedactionPlan(serialized: plan.serialized()) == plan, sourceLocation: sourceLocation)

    let ext = (path as NSString).pathExtension
    let redactedPath = (path as NSString).deletingPathExtension + "-redacted." + ext
    try writeBytes(served, redactedPath)
    let after = try exiftoolTags(redactedPath)
    let leaks = locationTags(after).filter { isNonzero($0.value) }
    #expect(leaks.isEmpty, "exiftool still shows location: \(leaks)", sourceLocation: sourceLocation)
    let texts = nonBlank(after, names: expect.blankTags)
    #expect(texts.isEmpty, "exiftool still shows: \(texts)", sourceLocation: sourceLocation)
    #expect(after["ExifTool:Error"] == nil, "exiftool error: \(after["ExifTool:Error"] ?? "")", sourceLocation: sourceLocation)

    if expect.mustDecode {
        #expect(try decoded(redactedPath, how) == decoded(path, how), "decoded content changed", sourceLocation: sourceLocation)
    } else if let original = try? decoded(path, how) {
        #expect(try decoded(redactedPath, how) == original, "decoded content changed", sourceLocation: sourceLocation)
    }
    // Redacting the redacted file finds nothing more to hide.
    let again = try MediaScanner.scan(bytes: served)
    #expect(again.hasLocation == false, "location still found after redaction", sourceLocation: sourceLocation)
    return (scan, after)
}

/// A UTC date from components.
func utc(_ y: Int, _ mo: Int, _ d: Int, _ h: Int, _ mi: Int, _ s: Int, offsetHours: Int = 0) -> Date {
    var c = DateComponents()
    (c.year, c.month, c.day, c.hour, c.minute, c.second) = (y, mo, d, h, mi, s)
    c.timeZone = TimeZone(secondsFromGMT: offsetHours * 3600)
    return Calendar(identifier: .gregorian).date(from: c)!
}
