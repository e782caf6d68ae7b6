import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// /proc/self/mountinfo longer than a page: files under /proc report size 0 and Foundation's
/// `String(contentsOfFile:)` returns only the first ~4 KB, so on a machine with a few dozen mounts
/// photogate lost sight of its own later mounts (`unmount` said "nothing is mounted", `mounts`
/// dropped them, test fixtures leaked them). This test fills a private mount namespace with
/// 150 tmpfs mounts ahead of the view, so the view's line lies far past the first page.
@Suite(.serialized, .enabled(if: fuseAvailable, "needs /dev/fuse"))
struct MountTable {
    @Test func aMountPastTheFirstPageOfTheMountTableIsFoundAndUnmounted() throws {
        guard getuid() == 0, TestSupport.which("unshare") else {
            print("MountTable: SKIPPED: needs root and unshare(1) for a private mount namespace"); return
        }
        let f = try MountFixture()
        try f.importPhotos(["a.jpg"])
        try f.pg("authorize", "org.example.Crowd", "--status", "authorized")
        let mp = f.dir + "/crowded-view"
        let fill = f.dir + "/filler"
        // Everything happens in a private mount namespace: the tmpfs mounts and the view vanish
        // with it; the trap detaches the view should the unmount under test fail.
        let script = """
        set -u
        trap 'umount -l "$MP" 2>/dev/null; true' EXIT
        mkdir -p "$MP"
        for i in $(seq 150); do d="$FILL/a-rather-long-folder-name-to-fill-the-mount-table-$i"; mkdir -p "$d"; mount -t tmpfs -o size=4k none "$d" || exit 90; done
        [ "$(wc -c < /proc/self/mountinfo)" -gt 12000 ] || exit 91
        "$PG" mount org.example.Crowd "$MP" || exit 92
        "$PG" mounts --json > "$FILL.mounts" || exit 93
        "$PG" unmount "$MP" || exit 94
        grep -q " $MP " /proc/self/mounts && exit 95
        # A daemon ending (SIGTERM) finds its own mount in the table by its id, past the first page.
        trap 'umount -l "$MP" 2>/dev/null; umount -l "$MP2" 2>/dev/null; true' EXIT
        mkdir -p "$MP2"
        "$PG" mount org.example.Crowd "$MP2" || exit 96
        pid=$("$PG" mounts --json | awk -F'[:,]' '/"pid"/ {gsub(/ /, "", $2); print $2; exit}')
        kill -TERM "$pid" || exit 97
        # The daemon unmounts before it exits: wait for its exit (a pidfd; at most 30 s).
        python3 -c 'import os, select, sys; select.select([os.pidfd_open(int(sys.argv[1]))], [], [], 30)' "$pid" || exit 99
        grep -q " $MP2 " /proc/self/mounts && exit 98
        exit 0
        """
        let o = try TestSupport.run("unshare", ["-m", "--propagation", "private", "bash", "-c", script],
                                    environment: f.env.merging(["PG": TestSupport.photogateBinary, "MP": mp, "MP2": mp + "-2", "FILL": fill]) { a, _ in a })
        #expect(o.status == 0, "exit \(o.status): \(o.stderr)")
        let listed = TestSupport.readWhole(fill + ".mounts") ?? ""
        #expect(listed.contains("crowded-view"), "photogate mounts did not list the view: \(listed)")
    }
    /// Mount points are told apart by their bytes, as the kernel names them: `café` precomposed
    /// and `cafe` + U+0301 are two folders. With String's ==, a view mounted at one made
    /// `photogate mount` call the other busy (exit 72), and `mounts` could list either as the other.
    @Test func mountPointsAreToldApartByTheirBytes() throws {
        let f = try MountFixture()
        try f.importPhotos(["a.jpg"])
        try f.pg("authorize", "org.example.Accents", "--status", "authorized")
        let decomposed = f.dir + "/cafe\u{301}", precomposed = f.dir + "/caf\u{e9}"
        #expect(!decomposed.utf8.elementsEqual(precomposed.utf8) && decomposed == precomposed)
        func mountedByBytes(_ p: String) -> Bool {
            (TestSupport.readWhole("/proc/mounts") ?? "").split(separator: "\n").contains {
                $0.split(separator: " ").dropFirst().first.map { $0.utf8.elementsEqual(p.utf8) } ?? false
            }
        }
        defer { for p in [decomposed, precomposed] where mountedByBytes(p) { FUSECleanup.abortAndDetach(p) } }
        #expect(mkdir(decomposed, 0o755) == 0 && mkdir(precomposed, 0o755) == 0)
        let first = try f.pgStatus("mount", "org.example.Accents", decomposed)
        #expect(first.status == 0, "\(first.stderr)")
        let second = try f.pgStatus("mount", "org.example.Accents", precomposed)
        #expect(second.status == 0, "the other folder was called busy: \(second.stderr)")
        #expect(mountedByBytes(decomposed) && mountedByBytes(precomposed))
        let live = try f.pg("mounts", "--json").stdout
        #expect(live.components(separatedBy: "\"live\"").count - 1 == 2, "mounts --json: \(live)")
        try f.pg("unmount", precomposed)
        #expect(!mountedByBytes(precomposed) && mountedByBytes(decomposed), "unmount reached the wrong folder")
        try f.pg("unmount", decomposed)
        #expect(!mountedByBytes(decomposed))
    }
}
