// libFuzzer entry for the Redaction scanners; built by scripts/fuzz together with
// Sources/Redaction/*.swift (one module), with `swiftc -sanitize=fuzzer,address -parse-as-library`.
//
// REDACTION_FUZZ_KIND picks the target:
//   unset or "any"                      MediaScanner.scan(bytes:) (sniff, then the matching scanner)
//   jpeg png gif webp tiff heif mp4 mov that kind's scanner, whatever the magic bytes say
//   plan                                RedactionPlan(serialized:) and the plan operations
// Beyond "does not crash", each input checks the invariants the read path relies on.

#if canImport(Glibc)
import Glibc
#endif

private enum Target { case any, kind(MediaKind), plan }

private let target: Target = {
    guard let raw = getenv("REDACTION_FUZZ_KIND").map({ String(cString: $0) }), raw != "any", !raw.isEmpty else { return .any }
    if raw == "plan" { return .plan }
    guard let kind = MediaKind(rawValue: raw) else { fatalError("REDACTION_FUZZ_KIND=\(raw): not a MediaKind, 'any' or 'plan'") }
    return .kind(kind)
}()

private func check(_ plan: RedactionPlan, size: Int) {
    var previousEnd: UInt64 = 0
    for p in plan.patches {
        precondition(p.length > 0 && p.offset >= previousEnd, "patches must be sorted, non-overlapping, non-empty")
        precondition(p.replacement == nil || p.replacement!.count == Int(p.length), "replacement length")
        previousEnd = p.end
    }
    guard let decoded = try? RedactionPlan(serialized: plan.serialized()), decoded == plan else {
        preconditionFailure("serialization round trip")
    }
    if size >= 0 {
        precondition(previousEnd <= UInt64(size), "patch past the end of the input")
    }
}

private func exercise(_ plan: RedactionPlan, on bytes: [UInt8]) {
    var copy = bytes
    copy.withUnsafeMutableBytes { plan.apply(to: $0, fileOffset: 0) }
    // Reads at odd offsets give the same bytes as the whole-file apply.
    var offset = 0
    let step = max(1, bytes.count / 7)
    while offset < bytes.count {
        let n = min(step, bytes.count - offset)
        var chunk = Array(bytes[offset..<(offset + n)])
        chunk.withUnsafeMutableBytes { plan.apply(to: $0, fileOffset: UInt64(offset)) }
        precondition(chunk[...] == copy[offset..<(offset + n)], "chunked apply differs")
        precondition(plan.intersects(offset: UInt64(offset), length: n) || chunk[...] == bytes[offset..<(offset + n)],
                     "bytes changed where intersects() says no patch")
        offset += n
    }
}

/// With REDACTION_FUZZ_WRITE_PLANS=<dir>, each input's serialized plan is written there (seeds for "plan").
private let planDirectory: String? = getenv("REDACTION_FUZZ_WRITE_PLANS").map { String(cString: $0) }

private func writePlan(_ plan: RedactionPlan) {
    guard let planDirectory, !plan.isEmpty else { return }
    let bytes = plan.serialized()
    let name = "\(planDirectory)/plan-\(bytes.count)-\(String(CRC32.checksum(bytes.dropLast(4)), radix: 16))"
    guard let file = fopen(name, "wb") else { return }
    _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
    fclose(file)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func redactionFuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes: [UInt8] = (size > 0 && data != nil) ? Array(UnsafeBufferPointer(start: data, count: size)) : []
    switch target {
    case .plan:
        if let plan = try? RedactionPlan(serialized: bytes) {
            check(plan, size: -1)
            let window = [UInt8](repeating: 0xAB, count: 4096)
            exercise(RedactionPlan(patches: plan.patches.filter { $0.end <= 4096 }), on: window)
            var far = window
            far.withUnsafeMutableBytes { plan.apply(to: $0, fileOffset: plan.patches.first?.offset ?? 0) }
        }
    case .any, .kind:
        let forcing: MediaKind? = { if case .kind(let k) = target { return k } else { return nil } }()
        if let scan = try? MediaScanner.scan(ByteSource(bytes: bytes), forcing: forcing),
           case .plan(let plan) = scan.redaction {
            check(plan, size: bytes.count)
            exercise(plan, on: bytes)
            writePlan(plan)
        }
    }
    return 0
}
