"""scripts/bench's web app rows (issue 35): with a 100,000-photo library, the time from opening the
picker to its first screen of thumbnails (cold thumbnail cache and warm), the elements in the
page while scrolling to the end, thumbnails made per second against `vipsthumbnail` run by hand
on the same files, and the server's memory. Driven in Debian's chromium (headless) through
selenium, as the tests drive it."""
import os
import shutil
import signal
import subprocess
import time

from benchlib import QUICK, Failed, log, pg, record, row, w

UI_PHOTOS = int(os.environ.get("BENCH_UI_PHOTOS", 10_000 if QUICK else 100_000))
UI_REAL = int(os.environ.get("BENCH_UI_REAL", 60 if QUICK else 200))
PY = "/usr/bin/python3"


def ui_library():
    """UI_REAL distinct 12-megapixel JPEGs (ffmpeg's test pattern, a frame each: real decoding
    work), imported, so they are the newest; the rest of UI_PHOTOS indexed by debug-fill-catalog
    (older, one picture)."""
    lib, src = w("library-ui"), w("ui-src")
    if os.path.isdir(lib):
        return lib, src
    os.makedirs(src, exist_ok=True)
    subprocess.run(["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc2=size=4032x3024:rate=1",
                    "-frames:v", str(UI_REAL), "-q:v", "3", os.path.join(src, "P%05d.jpg")], check=True)
    pg("init", "--library", lib)
    filler = w("ui-filler")
    os.makedirs(filler, exist_ok=True)
    shutil.copy(os.path.join(src, "P00001.jpg"), os.path.join(filler, "F.jpg"))
    pg("debug-fill-catalog", "--library", lib, "--count", UI_PHOTOS - UI_REAL, "--name-prefix", "F_", os.path.join(filler, "F.jpg"))
    pg("import", "--library", lib, src)
    pg("authorize", "--library", lib, "org.bench.Picker", "--access", "read-write", "--status", "limited")
    return lib, src


def start_ui(lib):
    p = subprocess.Popen([os.environ["PG"], "ui", "--library", lib], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    url = p.stdout.readline().strip()
    if not url.startswith("http://pg-"):
        p.kill()
        raise Failed(f"photogate ui printed {url!r}")
    return p, url


def stop_ui(p):
    p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return None


BROWSER = r'''
import json, sys, time
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
url, app, work = sys.argv[1:4]
o = Options()
for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900", "--disable-dev-shm-usage",
          "--user-data-dir=" + work]:
    o.add_argument(a)
d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)
out = {}
try:
    d.get(url)   # signs in (the secret), lands on the apps page
    base = url.split("/#")[0]
    ready = ("const cells = [...document.querySelectorAll('.cell img')];"
             "return cells.length > 0 && cells.every(i => i.complete && i.naturalWidth > 0)")
    for label in ["cold", "warm"]:
        d.get("about:blank")
        t0 = time.perf_counter()
        d.get(base + "/#/pick/" + app)
        while not d.execute_script(ready):
            if time.perf_counter() - t0 > 300:
                raise SystemExit("the first screen never finished")
            time.sleep(0.01)
        out[label] = time.perf_counter() - t0
        out[label + "_cells"] = d.execute_script("return document.querySelectorAll('.cell').length")
    # Scroll to the end a screen at a time, counting the page's elements.
    most, steps = 0, 0
    total = d.execute_script("return document.getElementById('grid').scrollHeight")
    while True:
        n = d.execute_script("const g = document.getElementById('grid'); g.scrollTop += g.clientHeight;"
                             " g.dispatchEvent(new Event('scroll')); return [g.scrollTop + g.clientHeight, document.getElementsByTagName('*').length]")
        most = max(most, n[1])
        steps += 1
        if n[0] >= total - 2 or steps > 100000:
            break
    out["elements"] = most
    out["screens"] = steps
finally:
    d.quit()
print(json.dumps(out))
'''


@row("ui-picker", "ui")
def ui_picker():
    lib, _ = ui_library()
    shutil.rmtree(os.path.join(lib, "thumbs"), ignore_errors=True)
    p, url = start_ui(lib)
    try:
        script = w("ui-browser.py")
        with open(script, "w") as f:
            f.write(BROWSER)
        r = subprocess.run([PY, script, url, "org.bench.Picker", w("ui-chrome")], capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            raise Failed((r.stderr.strip().splitlines() or ["browser failed"])[-1])
        import json
        m = json.loads(r.stdout)
        mem = rss_mb(p.pid)
    finally:
        stop_ui(p)
    label = f"picker of {UI_PHOTOS:,} photos"
    record("ui-first-cold", f"{label}: open to first screen of thumbnails, cold cache", "photogate", "s", "lower", m["cold"], [m["cold"]],
           note=f"{m['cold_cells']} thumbnails on the screen")
    record("ui-first-warm", f"{label}: open to first screen of thumbnails, warm cache", "photogate", "s", "lower", m["warm"], [m["warm"]])
    record("ui-elements", f"{label}: most elements in the page while scrolling to the end", "photogate", "elements", "lower",
           m["elements"], [m["elements"]], note=f"{m['screens']} screens scrolled")
    record("ui-memory", f"{label}: the server's memory (RSS) after", "photogate", "MB", "lower", mem, [mem] if mem else [])


@row("ui-thumbs", "ui")
def ui_thumbs():
    """Thumbnails per second: the server making UI_REAL thumbnails (its workers, one per core, each
    decoder in bubblewrap) against `vipsthumbnail` run by hand on the same files, one process per
    core, in the same round."""
    lib, src = ui_library()
    files = sorted(os.path.join(src, n) for n in os.listdir(src))
    ids = [a["id"] for a in __import__("json").loads(pg("assets", "--library", lib, "--json")) if a["name"].startswith("P")]
    cores = os.cpu_count() or 2
    by_hand, served = [], []
    for _ in range(3):
        out = w("ui-by-hand")
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        t0 = time.perf_counter()
        chunks = [files[i::cores] for i in range(cores)]
        procs = [subprocess.Popen(["vipsthumbnail", *c, "--size", "320x320", "-o", os.path.join(out, "%s.jpg[Q=82,strip]")])
                 for c in chunks if c]
        for q in procs:
            q.wait()
        by_hand.append(len(files) / (time.perf_counter() - t0))
        shutil.rmtree(os.path.join(lib, "thumbs"), ignore_errors=True)
        p, url = start_ui(lib)
        try:
            import json as _json
            import urllib.request
            host = url.split("//")[1].split("/")[0]
            port = host.rsplit(":", 1)[1]
            secret = url.split("#k=")[1].split("&")[0]
            req = urllib.request.Request(f"http://127.0.0.1:{port}/api/session", method="POST",
                                         data=_json.dumps({"secret": secret}).encode(),
                                         headers={"Host": host, "Origin": f"http://{host}", "Content-Type": "application/json"})
            with urllib.request.urlopen(req) as r:
                session = _json.loads(r.read())
                cookie = r.headers["Set-Cookie"].split(";")[0]
            base = f"http://127.0.0.1:{port}"

            class Opener:
                def open(self, u):
                    return urllib.request.urlopen(urllib.request.Request(u + f"?t={session['thumbKey']}",
                                                                         headers={"Host": host, "Cookie": cookie}))
            opener = Opener()
            from concurrent.futures import ThreadPoolExecutor
            t0 = time.perf_counter()
            with ThreadPoolExecutor(max_workers=8) as ex:
                sizes = list(ex.map(lambda i: len(opener.open(f"{base}/thumb/{i}").read()), ids))
            served.append(len(ids) / (time.perf_counter() - t0))
            if min(sizes) < 1000:
                raise Failed("a thumbnail came back as the placeholder")
        finally:
            stop_ui(p)
    label = f"thumbnails of {len(files)} 12-megapixel JPEGs made per second"
    record("ui-thumbs", label, "vipsthumbnail", "/s", "higher", sorted(by_hand)[1], by_hand, note=f"{cores} processes by hand")
    record("ui-thumbs", label, "photogate", "/s", "higher", sorted(served)[1], served,
           note=f"photogate ui, {cores} workers, each decoder in bubblewrap; {sorted(served)[1] / sorted(by_hand)[1]:.2f} of vipsthumbnail's rate")
