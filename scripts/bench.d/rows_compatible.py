"""scripts/bench's compatible-files rows (issue 37): a 12-megapixel HEIC read as a JPEG through a
mount of an app with `options APP --compatible on`, the first open (the JPEG made then, by libvips
in its sandbox) and a reopen served from the library's cache, each after a fresh mount (nothing
of the file in the kernel's FUSE caches; the cached JPEG's own pages stay warm). Native: the same
libvips command run by hand, unconfined, and a (warm) read of the cached JPEG from the disk."""
import os
import shutil

from benchlib import QUICK, log, measure, pg, pg_mount, pg_unmount, row, sh, w

COMPAT_RUNS = int(os.environ.get("BENCH_COMPAT_RUNS", 3 if QUICK else 5))
APP = "org.bench.OldViewer"


def heic_library():
    """One 12 MP HEIC (4032x3024, ffmpeg's test pattern with a little noise: real decoding work),
    with a capture date, in a library of its own; the app has the compatible option."""
    lib, src = w("library-compat"), w("compat-src")
    if os.path.isdir(lib):
        return lib, src
    os.makedirs(src, exist_ok=True)
    jpeg, heic = os.path.join(src, "source.jpg"), os.path.join(src, "IMG_0001.HEIC")
    sh("ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=4032x3024:rate=1", "-vf", "noise=alls=4:allf=t",
       "-frames:v", "1", "-q:v", "2", jpeg)
    log("compatible: encoding a 12 MP HEIC (x265, once; about half a minute)")
    sh("vips", "copy", jpeg, heic + "[Q=60]")
    os.unlink(jpeg)
    sh("exiftool", "-q", "-overwrite_original", "-DateTimeOriginal=2024:07:14 10:31:00", heic)
    pg("init", "--library", lib)
    pg("import", "--library", lib, src)
    pg("authorize", "--library", lib, APP, "--access", "read-write", "--status", "authorized")
    pg("options", "--library", lib, APP, "--compatible", "on")
    log(f"compatible: the HEIC is {os.path.getsize(heic) / 1e6:.1f} MB")
    return lib, src


@row("compatible", "metadata")
def compatible():
    lib, src = heic_library()
    cache = os.path.join(lib, "cache", "compatible")
    mp = w("mnt", "compat")
    pg_mount(lib, APP, mp)
    jpeg = os.path.join(mp, "IMG_0001.jpg")

    def remount(clear):
        def prepare():
            pg_unmount(lib, mp)
            if clear:
                shutil.rmtree(cache, ignore_errors=True)
            pg_mount(lib, APP, mp)
        return prepare

    label = "12 MP HEIC as JPEG: first open + read (made now)"
    measure("compat-first", label, "passthrough", ["cat", jpeg], prepare=remount(True), runs=COMPAT_RUNS)
    # The same conversion by hand (no sandbox, no limits, no mount): what the sandbox and the
    # mount add.
    out = w("compat-by-hand.jpg")
    measure("compat-first", label, "native",
            ["vips", "thumbnail", os.path.join(src, "IMG_0001.HEIC"), out + "[Q=90]", "100000", "--height", "100000",
             "--size", "down", "--export-profile", "srgb"], runs=COMPAT_RUNS)
    label = "12 MP HEIC as JPEG: reopen + read (cached)"
    measure("compat-cached", label, "passthrough", ["cat", jpeg], prepare=remount(False), runs=COMPAT_RUNS)
    made = [os.path.join(d, n) for d, _, ns in os.walk(cache) for n in ns if n.endswith(".jpg")]
    if made:
        measure("compat-cached", label, "native", ["cat", made[0]], runs=COMPAT_RUNS)
        log(f"compatible: the JPEG is {os.path.getsize(made[0]) / 1e6:.1f} MB")
    pg_unmount(lib, mp)
