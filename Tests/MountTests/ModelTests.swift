import Foundation
import GrantStore
import PhotoLibrary
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif


/// The test's own idea of the library: written independently of ViewPolicy, from the README's "What a mount shows" table.
struct Model {
    struct A { var name: String; var owner: String?; var shared: Bool; var trashed: Bool; var bytes: [UInt8] }
    var assets: [A] = []
    var rw: [String: String] = [:]        // app -> read-write status
    var ao: [String: String] = [:]        // app -> add-only status
    var selected: [String: Set<String>] = [:]
    var picked: [String: Set<String>] = [:]

    func visible(_ app: String) -> Set<String> {
        let status = rw[app] ?? "not-determined"
        var out = Set<String>()
        for a in assets where !a.trashed {
            let sel = selected[app]?.contains(a.name) ?? false, pick = picked[app]?.contains(a.name) ?? false
            let own = a.owner == app
            switch status {
            case "authorized": out.insert(a.name)
            case "limited": if !a.shared && (sel || own || pick) { out.insert(a.name) }
            default: if pick { out.insert(a.name) }
            }
        }
        return out
    }

    func canCreate(_ app: String) -> Bool { ["authorized", "limited"].contains(rw[app] ?? "") }

    func canDelete(_ app: String, _ a: A) -> Bool {
        guard visible(app).contains(a.name), !a.shared else { return false }
        switch rw[app] { case "authorized": return true; case "limited": return a.owner == app; default: return false }
    }
}

/// Issue 4's model-based property test: random sequences of grants, revokes, picks, status and
/// option changes, imports, app writes and deletes across several apps and both access levels.
/// After every step each running mount must list exactly what the model says, every hidden asset
/// must be ENOENT (never readable), and a visible one must read back its exact bytes.
/// PHOTOGATE_MODEL_SEED and PHOTOGATE_MODEL_STEPS reproduce or lengthen a run.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct ModelBased {
    @Test func randomOperationsKeepEveryMountEqualToTheModel() throws {
        let env = ProcessInfo.processInfo.environment
        let seed = UInt64(env["PHOTOGATE_MODEL_SEED"] ?? "") ?? 20_261_122
        let steps = Int(env["PHOTOGATE_MODEL_STEPS"] ?? "") ?? 2000
        print("model test: seed \(seed), \(steps) steps (PHOTOGATE_MODEL_SEED / PHOTOGATE_MODEL_STEPS)")
        var rng = SplitMix(seed: seed)
        let f = try MountFixture()
        let library = try Library.open(at: LibraryPaths(root: f.library))
        var model = Model()
        let apps = ["org.model.A", "org.model.B", "org.model.C"]
        let statuses = ["not-determined", "restricted", "denied", "authorized", "limited"]
        var counter = 0

        func importOne(shared: Bool) throws {
            counter += 1
            let name = (shared ? "s" : "p") + "\(counter).jpg"
            let bytes = try TestMedia.jpeg(tag: "model-\(seed)-\(counter)")
            let dir = f.dir + "/imp\(counter)"
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            try TestMedia.write(bytes, to: dir + "/" + name)
            let s = try Importer(library: library, options: ImportOptions(sharedAlbum: shared ? "Cloud" : nil)).run([dir])
            #expect(s.imported.count == 1)
            model.assets.append(.init(name: name, owner: nil, shared: shared, trashed: false, bytes: bytes))
        }
        for i in 0..<10 { try importOne(shared: i % 5 == 4) }
        for app in apps {
            let st = statuses[Int(rng.next() % 5)]
            try library.authorize(AppID(app)!, access: .readWrite, status: AuthorizationStatus(rawValue: st)!)
            model.rw[app] = st
        }
        try library.authorize(AppID(apps[2])!, access: .addOnly, status: .authorized)
        model.ao[apps[2]] = "authorized"
        var mounts: [String: String] = [:]
        for app in apps { mounts[app] = try f.mount(app) }
        let addOnly = try f.mount(apps[2], access: "add-only")

        var failed = false
        func check(_ step: Int, _ what: String) {
            for app in apps {
                let mp = mounts[app]!
                let want = model.visible(app)
                let ok = eventually { Set(listing(mp).filter { $0 != "Albums" && $0 != "Shared" }) == want }
                if !ok {
                    let have = Set(listing(mp))
                    let logs = ((try? FileManager.default.contentsOfDirectory(atPath: f.library + "/run/logs")) ?? []).compactMap {
                        try? String(contentsOfFile: f.library + "/run/logs/" + $0, encoding: .utf8)
                    }.joined().split(separator: "\n").suffix(15).joined(separator: "\n")
                    Issue.record("step \(step) (\(what)), seed \(seed): \(app) lists \(have.count) names; missing \(want.subtracting(have).sorted().prefix(10)), extra \(have.subtracting(want).sorted().prefix(10)); daemon logs:\n\(logs)")
                    failed = true
                    return
                }
                for a in model.assets where !want.contains(a.name) {
                    let e = openErrno(mp + "/" + a.name, O_RDONLY)
                    if e != ENOENT {
                        Issue.record("step \(step) (\(what)), seed \(seed): hidden \(a.name) in \(app) gives errno \(e), not ENOENT")
                        failed = true
                    }
                }
                if let a = model.assets.filter({ want.contains($0.name) }).randomElement(using: &rng) {
                    // An option change swaps inodes (redacted and plain views never share one);
                    // the kernel's old entry is dropped right after, so allow it to settle.
                    if !eventually(60, { readAll(mp + "/" + a.name) == a.bytes }) {
                        Issue.record("step \(step) (\(what)): \(a.name) in \(app) does not read back its bytes")
                    }
                }
            }
            if !listing(addOnly).isEmpty { Issue.record("step \(step): the add-only mount lists \(listing(addOnly))") }
            if let a = model.assets.randomElement(using: &rng), openErrno(addOnly + "/" + a.name, O_RDONLY) != ENOENT {
                Issue.record("step \(step): the add-only mount opens \(a.name)")
            }
        }

        check(0, "start")
        for step in 1...steps {
            let app = apps[Int(rng.next() % UInt64(apps.count))]
            let id = AppID(app)!
            let live = model.assets.filter { !$0.trashed }
            let pickAsset = { () -> Model.A? in live.isEmpty ? nil : live[Int(rng.next() % UInt64(live.count))] }
            var what = ""
            switch rng.next() % 12 {
            case 0, 1:
                guard let a = pickAsset() else { continue }
                what = "grant \(a.name) to \(app)"
                do {
                    try library.grant(id, [a.name])
                    #expect(!a.shared, "granting a shared asset must be refused")
                    model.selected[app, default: []].insert(a.name)
                } catch { #expect(a.shared, "\(what): \(error)") }
            case 2, 3:
                guard let a = pickAsset() else { continue }
                what = "revoke \(a.name) from \(app)"
                try library.revoke(id, [a.name])
                model.selected[app]?.remove(a.name)
            case 4:
                guard let a = pickAsset() else { continue }
                if rng.next() % 2 == 0 {
                    what = "pick \(a.name) for \(app)"
                    do {
                        try library.grant(id, [a.name], picked: true)
                        #expect(!(a.shared && model.rw[app] == "limited"), "picking a shared asset for a limited app must be refused")
                        model.picked[app, default: []].insert(a.name)
                    } catch { #expect(a.shared && model.rw[app] == "limited", "\(what): \(error)") }
                } else {
                    what = "unpick \(a.name) for \(app)"
                    try library.revoke(id, [a.name], picked: true)
                    model.picked[app]?.remove(a.name)
                }
            case 5:
                let st = statuses[Int(rng.next() % 5)]
                what = "authorize \(app) \(st)"
                try library.authorize(id, access: .readWrite, status: AuthorizationStatus(rawValue: st)!)
                model.rw[app] = st
            case 6:
                let strip = rng.next() % 2 == 0
                what = "strip-location \(strip) for \(app)"
                try library.setOptions(id, stripLocation: strip, preventPrompt: rng.next() % 2 == 0)
            case 7:
                what = "import"
                try importOne(shared: rng.next() % 4 == 0)
            case 8, 9:
                counter += 1
                let viaAddOnly = app == apps[2] && rng.next() % 2 == 0
                let name = "w\(counter).jpg"
                let bytes = try TestMedia.jpeg(tag: "write-\(seed)-\(counter)")
                let dir = viaAddOnly ? addOnly : mounts[app]!
                what = "\(app) writes \(name)\(viaAddOnly ? " (add-only)" : "")"
                let fd = open(dir + "/" + name, O_CREAT | O_EXCL | O_WRONLY, 0o644)
                let allowed = viaAddOnly ? model.ao[app] == "authorized" : model.canCreate(app)
                if fd < 0 {
                    #expect(!allowed && errno == EACCES, "\(what): errno \(errno)")
                } else {
                    #expect(allowed, "\(what) succeeded but should not")
                    let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                    #expect(n == bytes.count)
                    #expect(close(fd) == 0)
                    model.assets.append(.init(name: name, owner: app, shared: false, trashed: false, bytes: bytes))
                    // The asset exists once the release commits it.
                    #expect(eventually { (try? library.resolve([name]).count) == 1 }, "\(what) never committed")
                }
            case 10:
                guard let a = pickAsset() else { continue }
                what = "\(app) deletes \(a.name)"
                let visible = model.visible(app).contains(a.name)
                let r = errnoOf { unlink(mounts[app]! + "/" + a.name) }
                if !visible {
                    #expect(r == ENOENT, "\(what): hidden must be ENOENT, got \(r)")
                } else if model.canDelete(app, a) {
                    #expect(r == 0, "\(what): errno \(r)")
                    if r == 0, let i = model.assets.firstIndex(where: { $0.name == a.name }) { model.assets[i].trashed = true }
                } else {
                    #expect(r == EACCES, "\(what): must be EACCES, got \(r)")
                }
            default:
                guard let i = model.assets.indices.filter({ model.assets[$0].trashed }).randomElement(using: &rng) else { continue }
                what = "restore \(model.assets[i].name)"
                try library.restore([model.assets[i].name])
                model.assets[i].trashed = false
            }
            check(step, what)
            if failed { break }   // one divergence is enough: stop instead of timing out on every step
        }
        for app in apps { try f.unmount(mounts[app]!) }
        try f.unmount(addOnly)
    }
}
