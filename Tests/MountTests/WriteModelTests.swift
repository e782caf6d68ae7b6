import Foundation
import GrantStore
import PhotoLibrary
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 13's model-based case for writes: random sequences of the writes apps make (create,
/// overwrite, rename to a free name and over an own file, unlink, writes into upload folders) in
/// a limited mount, against an independent model of what the app must then see. After every
/// step: the top listing is the model's, every name reads back the model's bytes, and every
/// stored file matches its hash. PHOTOGATE_WRITE_MODEL_SEED / _STEPS reproduce or lengthen a run.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct WriteModel {
    @Test func randomWritesKeepTheMountEqualToTheModel() throws {
        let env = ProcessInfo.processInfo.environment
        let seed = UInt64(env["PHOTOGATE_WRITE_MODEL_SEED"] ?? "") ?? 20_261_123
        let steps = Int(env["PHOTOGATE_WRITE_MODEL_STEPS"] ?? "") ?? 150
        print("write model: seed \(seed), \(steps) steps (PHOTOGATE_WRITE_MODEL_SEED / PHOTOGATE_WRITE_MODEL_STEPS)")
        var rng = SplitMix(seed: seed)
        let f = try MountFixture()
        let app = "org.model.Writer"
        try f.pg("authorize", app, "--status", "limited")
        let mp = try f.mount(app)
        // The model: name at the top -> bytes. Files written in a folder appear at the top under
        // their own name too (flattened), unless that name is taken (then the library renames).
        var model: [String: [UInt8]] = [:]
        let names = ["a.jpg", "b.jpg", "c.jpg", "d.jpg"]
        var made = 0
        func fresh() throws -> [UInt8] { made += 1; return try TestMedia.jpeg(tag: "m\(seed)-\(made)") }
        for step in 0..<steps {
            let name = names[Int(rng.next() % UInt64(names.count))]
            let op = rng.next() % 6
            var did = ""
            switch op {
            case 0, 1:
                // create or overwrite (an own file: a new version)
                let bytes = try fresh()
                let e = cpWrite(bytes, to: mp + "/" + name)
                #expect(e == 0, "step \(step): write \(name): errno \(e)")
                if e == 0 { model[name] = bytes }
                did = "write \(name)"
            case 2:
                // an editor's save: temp, then rename over (or onto a free name)
                let bytes = try fresh()
                let tmp = ".\(name).tmp\(step)"
                #expect(cpWrite(bytes, to: mp + "/" + tmp) == 0)
                let r = rename(mp + "/" + tmp, mp + "/" + name)
                #expect(r == 0, "step \(step): rename over \(name): errno \(errno)")
                if r == 0 { model[name] = bytes }
                did = "save-by-rename \(name)"
            case 3:
                // rename to another name (free or own)
                let to = names[Int(rng.next() % UInt64(names.count))]
                guard model[name] != nil, to != name else { continue }
                let r = rename(mp + "/" + name, mp + "/" + to)
                #expect(r == 0, "step \(step): rename \(name) -> \(to): errno \(errno)")
                if r == 0 {
                    // Over an own file: its bytes become the target's new version, the source goes.
                    model[to] = model[name]
                    model[name] = nil
                }
                did = "rename \(name) \(to)"
            case 4:
                let r = unlink(mp + "/" + name)
                if model[name] != nil {
                    #expect(r == 0, "step \(step): unlink \(name): errno \(errno)")
                    model[name] = nil
                } else {
                    #expect(r != 0 && errno == ENOENT)
                }
                did = "unlink \(name)"
            default:
                // a file into an upload folder, under a name not at the top (flattened as is)
                let folder = mp + "/dir\(step % 3)"
                if mkdir(folder, 0o755) != 0 { #expect(errno == EEXIST) }
                let leaf = "f\(step).jpg"
                let bytes = try fresh()
                #expect(cpWrite(bytes, to: folder + "/" + leaf) == 0, "step \(step): folder write")
                model[leaf] = bytes
                did = "folder write \(leaf)"
            }
            let listed = Set(listing(mp).filter { !$0.hasPrefix("dir") })
            #expect(listed == Set(model.keys), "step \(step) (\(did)): listed \(listed.sorted()), model \(model.keys.sorted())")
            for (n, bytes) in model {
                #expect(readAll(mp + "/" + n) == bytes ? true : false, "step \(step) (\(did)): \(n) does not read back the model's bytes")
            }
            if step % 10 == 9 || step == steps - 1 {
                #expect(try storeMismatches(f.library) == [], "step \(step)")
            }
            if listed != Set(model.keys) { break }   // one divergence is enough to read
        }
        let report = try Verifier(library: try Library.open(at: LibraryPaths(root: f.library))).run()
        #expect(report.ok, "\(report.problems.map { "\($0.kind) \($0.path)" })")
        try f.unmount(mp)
    }
}
