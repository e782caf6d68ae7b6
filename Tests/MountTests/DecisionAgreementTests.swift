import Foundation
import GrantStore
import PhotoLibrary
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 17's property: for random libraries, `explain` (its JSON), `assets --app` (its JSON) and
/// a real mount agree asset by asset: which assets the app sees, under which name, and whether it
/// reads them with their location stripped (the mount's bytes against the original's, and
/// exiftool for one stripped file per library). Random assets (with and without GPS, some
/// cloud-shared), app-created files whose names clash with photos and with each other, random
/// selections and picks (with and without strip-location), edit consents, Recently Deleted,
/// statuses for both access levels and options; a seeded generator, several seeds.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct DecisionAgreement {
    /// SplitMix64: the same library for the same seed, on every machine.
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &self) < p }
    }

    static let apps = ["org.prop.Alpha", "org.prop.Beta", "org.prop.Gamma"]

    @Test(arguments: [1, 2, 3] as [UInt64])
    func explainAssetsAndTheMountAgree(seed: UInt64) throws {
        var rng = Generator(state: seed)
        let f = try MountFixture()
        // Photos: names from a small pool, so that app files clash with them.
        let pool = (0..<8).map { "IMG_\(String(format: "%04d", $0)).jpg" }
        let batches: [(gps: Bool, extra: [String])] = [(false, []), (true, []), (rng.chance(0.5), ["--shared", "Cloud"])]
        var used = Set<String>()
        for b in batches {
            let names = pool.filter { !used.contains($0) && rng.chance(0.4) }
            guard !names.isEmpty else { continue }
            used.formUnion(names)
            try f.importPhotos(names, gps: b.gps, extra: b.extra)
        }
        let lib = try Library.open(at: LibraryPaths(root: f.library))
        for a in Self.apps { _ = try lib.registerApp(AppID(a)!) }
        // App-created files, named like photos or like each other's files.
        let writer = try StoreWriter(library: lib, purpose: "test")
        for a in Self.apps {
            for k in 0..<Int.random(in: 0...3, using: &rng) {
                let name = rng.chance(0.7) ? pool.randomElement(using: &rng)! : "own-\(k % 2).jpg"
                let gps = rng.chance(0.5)
                let (id, temp, fd) = try writer.makeTemp(extension: "jpg")
                defer { close(fd) }
                let bytes = try TestMedia.jpeg(tag: "\(a)-\(name)-\(seed)-\(k)", gps: gps)
                _ = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
                _ = try writer.commitAppFile(tempPath: temp, fd: fd, id: id, app: AppID(a)!, name: name)
            }
        }
        // Grants, picks, edit consents: the library refuses what could never show (shared
        // assets in a selection, or picked for a limited app); that is the decision's as well.
        let everything = try lib.assets()
        for a in Self.apps {
            let app = AppID(a)!
            if rng.chance(0.5) { _ = try lib.authorize(app, access: .readWrite, status: .limited) }
            for asset in everything {
                if rng.chance(0.35) { _ = try? lib.grant(app, [asset.id], stripLocation: rng.chance(0.4)) }
                if rng.chance(0.25) { _ = try? lib.grant(app, [asset.id], picked: true, stripLocation: rng.chance(0.4)) }
                if rng.chance(0.15) { _ = try? lib.grantEdit(app, [asset.id]) }
            }
        }
        let trashed = everything.filter { _ in rng.chance(0.15) }.map(\.rowID)
        if !trashed.isEmpty { try lib.moveToTrash(rowIDs: trashed) }
        // Statuses and options last: a grant made under one status is judged under another.
        for a in Self.apps {
            let app = AppID(a)!
            _ = try lib.authorize(app, access: .readWrite, status: AuthorizationStatus.allCases.randomElement(using: &rng)!)
            _ = try lib.authorize(app, access: .addOnly,
                                  status: AuthorizationStatus.allCases.filter { $0.isValid(for: .addOnly) }.randomElement(using: &rng)!)
            _ = try lib.setOptions(app, stripLocation: rng.chance(0.3), editAny: rng.chance(0.3))
        }

        let all = try lib.assets() + lib.trash()
        var checkedStripped = false
        var seenSomething = false
        var stats: [String: Int] = [:]
        for a in Self.apps {
            // An add-only view shows nothing whatever its status: one app's is enough to check.
            for access in a == Self.apps[Int(seed) % Self.apps.count] ? ["read-write", "add-only"] : ["read-write"] {
                let context = "seed \(seed), \(a), \(access)"
                // assets --app
                let listed = try f.assetsJSON("--app", a, "--access", access)
                var listedNames: [String: String] = [:]
                for e in listed { listedNames[e["id"] as! String] = e["name"] as? String }
                #expect(listedNames.count == listed.count, "\(context): an id listed twice")
                // explain, asset by asset (every asset of the library, Recently Deleted included)
                var explained: [String: (name: String, strip: Bool, edit: Bool)] = [:]
                for asset in all {
                    let o = try f.pg("explain", a, asset.id, "--access", access, "--json")
                    let e = try #require(try JSONSerialization.jsonObject(with: Data(o.stdout.utf8)) as? [String: Any])
                    #expect((e["asset"] as? [String: Any])?["id"] as? String == asset.id)
                    if e["visible"] as? Bool == true {
                        let edit = try #require((e["edit"] as? [String: Any])?["decision"] as? String)
                        explained[asset.id] = (try #require(e["name"] as? String), try #require(e["stripLocation"] as? Bool), edit == "allowed")
                    }
                }
                #expect(Set(explained.keys) == Set(listedNames.keys), "\(context): explain and assets --app see different assets")
                for (id, e) in explained { #expect(listedNames[id] == e.name, "\(context): \(id) is '\(e.name)' to explain, '\(listedNames[id] ?? "-")' to assets --app") }
                // The mount.
                let mp = try f.mount(a, access: access)
                let files = listing(mp).filter { !DisplayName.reserved.contains($0) }
                #expect(Set(files) == Set(explained.values.map(\.name)), "\(context): the mount shows \(files), explain \(explained.values.map(\.name).sorted())")
                #expect(files.count == explained.count, "\(context): names are not unique")
                for asset in all {
                    guard let e = explained[asset.id] else { continue }
                    seenSomething = true
                    stats["visible", default: 0] += 1
                    if e.name != asset.displayName { stats["renamed", default: 0] += 1 }
                    if e.name != (asset.ownerName ?? asset.displayName) { stats["clash", default: 0] += 1 }
                    if e.strip && asset.hasLocation { stats["stripped", default: 0] += 1 }
                    if asset.isShared { stats["shared", default: 0] += 1 }
                    let original = try #require(readAll(try lib.originalPath(asset)), "\(context): original of \(asset.id)")
                    let path = mp + "/" + e.name
                    // Writable exactly where explain's edit decision allows (issue 37).
                    var st = stat()
                    #expect(stat(path, &st) == 0 && st.st_mode & 0o777 == (e.edit ? 0o644 : 0o444),
                            "\(context): \(e.name) is \(String(st.st_mode & 0o777, radix: 8)), explain says edit \(e.edit ? "allowed" : "not allowed")")
                    if e.edit { stats["editable", default: 0] += 1 }
                    let read = try #require(readAll(path), "\(context): the mount cannot read \(e.name)")
                    #expect(read.count == original.count, "\(context): \(e.name) has another size through the mount")
                    if e.strip && asset.hasLocation {
                        #expect(read != original, "\(context): \(e.name) should read with its location stripped")
                        if !checkedStripped {
                            checkedStripped = true
                            #expect(try StripLocation.locationLeft(in: path).isEmpty, "\(context): exiftool still finds a location in \(e.name)")
                        }
                    } else {
                        #expect(read == original, "\(context): \(e.name) should read as the original (strip \(e.strip), gps \(asset.hasLocation))")
                    }
                }
                try f.unmount(mp)
            }
        }
        print("DecisionAgreement seed \(seed): stats \(stats)")
        #expect(seenSomething, "seed \(seed): no app saw anything; the property checked nothing")
    }
}
