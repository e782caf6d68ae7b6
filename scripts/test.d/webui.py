#!/usr/bin/python3
"""The web app (issue 35) in a real browser (Debian's chromium, headless, through chromedriver and
selenium), and its security rules from the outside. Run by webui.sh, which makes the temp folder,
the second local user and the cleanups: argv = TMP PHOTOGATE_BIN OTHER_USER SCREENSHOT_OUT.

Every wait is on a condition (WebDriverWait, or polling a command's output), never a bare sleep."""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

TMP, PG, OTHER, SHOT = sys.argv[1:5]
LIB = os.path.join(TMP, "library")
ENV = dict(os.environ, PHOTOGATE_LIBRARY=LIB, PHOTOGATE_REPORT_FLUSH_MS="100")
mounts = []
failures = []


def pg(*args, check=True, input=None):
    p = subprocess.run([PG, *args], env=ENV, capture_output=True, text=True, input=input)
    if check and p.returncode != 0:
        raise AssertionError(f"photogate {' '.join(args)} -> {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def expect(cond, what):
    if not cond:
        failures.append(what)
        print(f"webui: FAILED: {what}", file=sys.stderr)
    else:
        print(f"webui: ok: {what}", file=sys.stderr)


def until(cond, seconds=30, what="condition"):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def convert(*args):
    subprocess.run(["convert", *args], check=True)


def mount(app, *extra):
    mp = os.path.join(TMP, f"mnt-{app}")
    os.makedirs(mp, exist_ok=True)
    pg("mount", app, mp, *extra)
    mounts.append(mp)
    return mp


def unmount_all():
    for mp in mounts:
        subprocess.run([PG, "unmount", mp], env=ENV, capture_output=True)
        subprocess.run(["fusermount3", "-u", "-z", mp], capture_output=True)


def assets():
    return {a["name"]: a for a in json.loads(pg("assets", "--json"))}


def request(url, method="GET", headers=None, data=None):
    """(status, headers, body) of a request made with urllib (not the browser). The server's name
    is a random one under .localhost, which browsers send to the loopback address and this
    machine's resolver does not know: connect to 127.0.0.1 and send the name as Host."""
    headers = dict(headers or {})
    parts = urllib.parse.urlsplit(url)
    if parts.hostname and parts.hostname.endswith(".localhost"):
        headers.setdefault("Host", parts.netloc)
        url = urllib.parse.urlunsplit((parts.scheme, f"127.0.0.1:{parts.port}", parts.path, parts.query, parts.fragment))
    req = urllib.request.Request(url, method=method, headers=headers, data=data)
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **k):
        return None


# --- the library ----------------------------------------------------------------------------------

pg("init")
src = os.path.join(TMP, "src")
os.makedirs(src)
colors = ["red", "green", "blue", "orange", "purple", "teal", "gold", "gray"]
for i, c in enumerate(colors):
    convert("-size", "400x300", f"xc:{c}", "-fill", "white", "-draw", f"circle 200,150 200,{60 + i * 5}",
            os.path.join(src, f"{c}.jpg"))
# A photo stored sideways (red left half, blue right half, 400x200) whose EXIF orientation (6)
# says to turn it 90 degrees clockwise: shown right, it is 200 wide and 400 tall, red on top.
convert("-size", "200x200", "xc:red", "-size", "200x200", "xc:blue", "+append", os.path.join(src, "sideways.jpg"))
subprocess.run(["exiftool", "-q", "-overwrite_original", "-Orientation#=6", os.path.join(src, "sideways.jpg")], check=True)
# One with GPS: its thumbnail must carry none.
subprocess.run(["exiftool", "-q", "-overwrite_original", "-GPSLatitude=48.8584", "-GPSLatitudeRef=N",
                "-GPSLongitude=2.2945", "-GPSLongitudeRef=E", os.path.join(src, "red.jpg")], check=True)
# A camera raw (a NEF laid out by hand: Nikon's make, a CFA raw strip) whose embedded JPEG
# preview is magenta: its thumbnail is made from that preview.
def write_nef(path, jpeg):
    import struct
    make = b"NIKON CORPORATION\x00"
    data = jpeg + b"\x80" * 64 + make
    jpeg_at, strip_at, make_at = 8, 8 + len(jpeg), 8 + len(jpeg) + 64
    ifd_at = 8 + len(data) + (len(data) % 2)
    entries = [(0x0100, 3, 1, 8), (0x0101, 3, 1, 8), (0x0102, 3, 1, 8), (0x0103, 3, 1, 1), (0x0106, 3, 1, 32803),
               (0x010F, 2, len(make), make_at), (0x0111, 4, 1, strip_at), (0x0115, 3, 1, 1), (0x0116, 3, 1, 8),
               (0x0117, 4, 1, 64), (0x0201, 4, 1, jpeg_at), (0x0202, 4, 1, len(jpeg))]
    out = bytearray(b"II*\x00" + struct.pack("<I", ifd_at) + data)
    out += b"\x00" * (ifd_at - len(out))
    out += struct.pack("<H", len(entries))
    for tag, typ, count, value in entries:
        out += struct.pack("<HHI", tag, typ, count) + (struct.pack("<HH", value, 0) if typ == 3 else struct.pack("<I", value))
    out += struct.pack("<I", 0)
    with open(path, "wb") as f:
        f.write(out)


convert("-size", "320x240", "xc:magenta", os.path.join(TMP, "preview.jpg"))
with open(os.path.join(TMP, "preview.jpg"), "rb") as f:
    write_nef(os.path.join(src, "camera.nef"), f.read())
pg("import", src)
ids = {n: a["id"] for n, a in assets().items()}
pg("authorize", "org.example.Picker", "--access", "read-write", "--status", "limited")
pg("authorize", "org.example.Live", "--access", "read-write", "--status", "limited")
pg("authorize", "org.example.Deleter", "--access", "read-write", "--status", "authorized")
# An app that asks: a not-determined app touching its mount files a read-write request.
asker = mount("org.example.Asker")

server = subprocess.Popen([PG, "ui"], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
driver = None
try:
    url = server.stdout.readline().strip()
    expect(url.startswith("http://pg-") and ".localhost:" in url and "/#k=" in url,
           f"the first line of stdout is the URL: a random name under .localhost, its secret in the fragment ({url!r})")
    base = url.split("/#")[0]
    port = int(base.rsplit(":", 1)[1])
    secret = url.split("#k=")[1].split("&")[0]
    origin = {"Origin": base, "Content-Type": "application/json"}

    # --- security from the outside, before the browser signs in ------------------------------------
    s, h, _ = request(base + "/api/state")
    expect(s == 403, f"no cookie: refused ({s})")
    s, _, _ = request(base + "/", headers={"Host": f"attacker.example:{port}"})
    expect(s == 421, f"DNS rebinding (a foreign Host): refused ({s})")
    # 127.0.0.1:PORT is an origin any local user could have held before (a cached script, a
    # service worker): the server answers only to its own random name.
    for other_host in [f"127.0.0.1:{port}", f"localhost:{port}"]:
        s, _, _ = request(base + "/app.js", headers={"Host": other_host})
        expect(s == 421, f"Host {other_host}: refused ({s})")
    s, _, _ = request(base + "/api/session", "POST", origin, json.dumps({"secret": "0" * 64}).encode())
    expect(s == 403, f"a wrong secret: refused ({s})")
    s, _, _ = request(base + "/api/session", "POST", dict(origin, Origin="http://attacker.example"), json.dumps({"secret": secret}).encode())
    expect(s == 403, f"the secret from another origin: refused ({s})")
    # Another local user who knows the port gets nothing (and has no secret).
    p = subprocess.run(["runuser", "-u", OTHER, "--", "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                        "-H", f"Host: {base.split('//')[1]}", f"http://127.0.0.1:{port}/api/state"], capture_output=True, text=True)
    expect(p.stdout == "403", f"another local user: refused ({p.stdout} {p.stderr.strip()})")
    s, _, _ = request(base + "/events")
    expect(s == 403, f"the event stream without a cookie: refused ({s})")

    # --- the browser -------------------------------------------------------------------------------
    o = Options()
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900", "--disable-dev-shm-usage",
              f"--user-data-dir={TMP}/chrome"]:
        o.add_argument(a)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)
    wait = WebDriverWait(driver, 30)

    def click(css):
        """Clicks an element, found again if the page redrew it meanwhile (every change does)."""
        def attempt(d):
            try:
                d.find_element(By.CSS_SELECTOR, css).click()
                return True
            except (StaleElementReferenceException, NoSuchElementException):
                return False
        wait.until(attempt)

    def text(css):
        """An element's text read in one step (the page redraws on every change)."""
        return driver.execute_script("const e = document.querySelector(arguments[0]); return e ? e.textContent : ''", css)
    driver.get(url)
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "section.card"))
    expect("k=" not in driver.current_url, f"the secret left the address bar ({driver.current_url})")
    cookie = driver.get_cookie(f"pg_session_{port}")
    expect(cookie and cookie["httpOnly"] and cookie.get("sameSite") == "Strict", f"session cookie HttpOnly, SameSite=Strict ({cookie})")
    expect(driver.execute_script("return document.cookie") == "", "the page's script cannot read the cookie")
    # The secret is useless now.
    s, _, _ = request(base + "/api/session", "POST", origin, json.dumps({"secret": secret}).encode())
    expect(s == 403, f"the printed secret a second time: refused ({s})")
    ck = {"Cookie": f"pg_session_{port}={cookie['value']}", "Content-Type": "application/json"}
    token = driver.execute_script("return localStorage.getItem('pg_token')")
    thumb_key = driver.execute_script("return localStorage.getItem('pg_thumb')")
    auth = dict(ck, **{"X-Photogate-Token": token})
    # The cookie alone opens nothing: browsers send it to every port of 127.0.0.1, so another
    # user's server there gets it; the page's files hold no token to read with it.
    s, _, page = request(base + "/api/state", headers=ck)
    expect(s == 403, f"the cookie without the token: refused ({s})")
    expect(token and token.encode() not in page and token.encode() not in request(base + "/", headers=ck)[2],
           "the token is in no page the cookie fetches")
    s, _, _ = request(base + f"/thumb/{ids['red.jpg']}", headers=ck)
    expect(s == 403, f"a thumbnail with the cookie alone: refused ({s})")
    s, _, _ = request(base + "/api/state", headers=auth)
    expect(s == 200, f"the cookie and the token: admitted ({s})")
    # A cookie of the same name planted first (a longer path from elsewhere) does not lock out.
    s, _, _ = request(base + "/api/state", headers=dict(auth, Cookie=f"pg_session_{port}=planted; " + ck["Cookie"]))
    expect(s == 200, f"a planted cookie of the same name first: still admitted ({s})")
    csp = request(base + "/", headers=ck)[1].get("Content-Security-Policy", "")
    expect("default-src 'none'" in csp and "script-src 'self'" in csp and "frame-ancestors 'none'" in csp, f"strict CSP ({csp})")
    s, h, _ = request(base + "/api/apps/org.example.Nobody/catalog", headers=auth)
    expect(s == 404 and "default-src 'none'" in h.get("Content-Security-Policy", "") and h.get("Cross-Origin-Resource-Policy") == "same-origin",
           f"an error carries the same headers ({s}, {h})")
    # State changes: only with the token, and from this origin.
    body = json.dumps({"access": "read-write", "status": "authorized"}).encode()
    s, _, _ = request(base + "/api/apps/org.example.Picker/access", "POST", dict(ck, Origin=base), body)
    expect(s == 403, f"POST without the token: refused ({s})")
    s, _, _ = request(base + "/api/apps/org.example.Picker/access", "POST", dict(auth, Origin="http://attacker.example"), body)
    expect(s == 403, f"cross-origin POST: refused ({s})")
    expect(json.loads(pg("status", "org.example.Picker", "--json"))["readWrite"] == "limited", "nothing changed by the refused POSTs")

    # --- a request answered in one click, shown without a reload ---------------------------------------
    driver.get(base + "/#/requests")
    os.listdir(asker)  # the app's first access files its request
    expect(until(lambda: "org.example.Asker" in pg("requests")), "the app's first access filed a request")
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "section.request"))
    reason_app = mount("org.example.Reasoner")
    hostile = '<img src=x onerror="document.title=\'pwned\'"> please'
    with open(os.path.join(reason_app, ".photogate", "request"), "w") as f:
        f.write("picker\n" + hostile + "\n")
    # The page shows it without a reload (the change feed).
    wait.until(lambda d: d.execute_script("return [...document.querySelectorAll('.request .reason')].some(e => e.textContent.includes(arguments[0]))", hostile))
    expect(driver.title == "photogate" and not driver.find_elements(By.CSS_SELECTOR, ".request img"),
           "an app's reason is shown as text, never as HTML")
    asked = [r["id"] for r in json.loads(pg("requests", "--json")) if r["app"] == "org.example.Asker" and r["kind"] == "read-write"][0]
    click(f"section.request[data-request='{asked}'] [data-answer=allow]")
    expect(until(lambda: json.loads(pg("status", "org.example.Asker", "--json"))["readWrite"] == "authorized"),
           "Allow Full Access authorized the app")
    expect(until(lambda: "org.example.Asker" not in pg("requests")), "the request is answered")

    # --- picking three photos by clicking their thumbnails --------------------------------------------
    driver.get(base + "/#/pick/org.example.Picker")
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".cell")) >= len(colors) + 2)
    chosen = ["blue.jpg", "gold.jpg", "teal.jpg"]
    for n in chosen:
        click(f".cell[data-id='{ids[n]}']")
    expect([e.text for e in driver.find_elements(By.CSS_SELECTOR, ".cell.selected .order")] != [], "selected cells show their order")
    # Thumbnails rendered (not the placeholder, not blank), and the sideways photo upright.
    wait.until(lambda d: d.execute_script(
        "return [...document.querySelectorAll('.cell img')].every(i => i.complete && i.naturalWidth > 0)"))
    dims = driver.execute_script(
        f"const i = document.querySelector(\".cell[data-id='{ids['sideways.jpg']}'] img\"); return [i.naturalWidth, i.naturalHeight]")
    expect(dims[1] > dims[0], f"the sideways photo's thumbnail is upright ({dims[0]}x{dims[1]})")
    wait.until(lambda d: d.execute_script("const i = document.getElementById('preview'); return !!i && i.complete && i.naturalWidth > 0"))
    driver.save_screenshot(SHOT)
    from PIL import Image
    shot = Image.open(SHOT).convert("RGB")
    cell = driver.find_element(By.CSS_SELECTOR, f".cell[data-id='{ids['blue.jpg']}']")
    r = cell.rect
    px = shot.getpixel((int(r["x"] + 12), int(r["y"] + 12)))
    expect(px[2] > 150 and px[0] < 100, f"blue.jpg's thumbnail is blue in the screenshot ({px})")
    side = driver.find_element(By.CSS_SELECTOR, f".cell[data-id='{ids['sideways.jpg']}']").rect
    top, bottom = shot.getpixel((int(side["x"] + side["width"] / 2), int(side["y"] + 10))), \
        shot.getpixel((int(side["x"] + side["width"] / 2), int(side["y"] + side["height"] - 10)))
    expect(top[0] > 150 and top[2] < 100 and bottom[2] > 150, f"sideways.jpg: red on top, blue below ({top}, {bottom})")
    click("#confirm")
    wait.until(lambda d: d.current_url.endswith("#/apps"))
    granted = sorted(g["name"] for g in json.loads(pg("grants", "org.example.Picker", "--json")))
    expect(granted == sorted(chosen), f"photogate grants lists the three picked ({granted})")
    # The thumbnail carries no location (exiftool on what the server sends).
    tpath = os.path.join(TMP, "thumb.jpg")
    with open(tpath, "wb") as f:
        f.write(request(base + f"/thumb/{ids['red.jpg']}?t={thumb_key}", headers=ck)[2])
    gps = subprocess.run(["exiftool", "-s", "-GPS:all", tpath], capture_output=True, text=True).stdout
    ident = subprocess.run(["identify", tpath], capture_output=True, text=True).stdout
    expect("JPEG" in ident and gps.strip() == "", f"red.jpg's thumbnail is a JPEG without GPS ({ident.strip()} / {gps.strip()!r})")
    # The raw's thumbnail is its embedded preview (magenta), not the placeholder.
    raw_thumb = request(base + f"/thumb/{ids['camera.nef']}?t={thumb_key}", headers=ck)
    rpath = os.path.join(TMP, "raw-thumb.jpg")
    with open(rpath, "wb") as f:
        f.write(raw_thumb[2])
    rpx = Image.open(rpath).convert("RGB").getpixel((10, 10)) if raw_thumb[1].get("Content-Type") == "image/jpeg" else None
    expect(rpx is not None and rpx[0] > 200 and rpx[2] > 200 and rpx[1] < 60, f"the NEF's thumbnail is its magenta preview ({raw_thumb[1].get('Content-Type')}, {rpx})")
    cached = subprocess.run(["find", os.path.join(LIB, "thumbs"), "-type", "f", "-perm", "/077"], capture_output=True, text=True).stdout
    expect(oct(os.stat(os.path.join(LIB, "thumbs")).st_mode & 0o777) == "0o700" and cached == "",
           "the thumbnail cache is private (0700, files 0600)")

    # --- keyboard: focus, move, space, enter ------------------------------------------------------------
    driver.get(base + "/#/pick/org.example.Picker")
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".cell.selected")) == 3)
    grid = driver.find_element(By.ID, "grid")
    grid.send_keys(Keys.HOME, " ")   # the newest photo joins the selection
    first = driver.find_element(By.CSS_SELECTOR, ".cell.focused").get_attribute("data-id")
    grid.send_keys(Keys.ENTER)
    wait.until(lambda d: d.current_url.endswith("#/apps"))
    expect(until(lambda: len(json.loads(pg("grants", "org.example.Picker", "--json"))) == 4 and first in pg("grants", "org.example.Picker")),
           "space selected the focused photo and Enter confirmed")

    # ? shows the keys; A deselects everything shown, Enter confirms: the selection is empty.
    driver.get(base + "/#/pick/org.example.Picker")
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".cell.selected")) == 4)
    grid = driver.find_element(By.ID, "grid")
    grid.send_keys("?")
    wait.until(lambda d: d.find_element(By.ID, "help").is_displayed())
    grid.send_keys("A")
    wait.until(lambda d: not d.find_elements(By.CSS_SELECTOR, ".cell.selected"))
    grid.send_keys(Keys.ENTER)
    expect(until(lambda: json.loads(pg("grants", "org.example.Picker", "--json")) == []), "A then Enter took the whole selection back")

    # --- continuous mode reaches a running mount at once -------------------------------------------------
    live = mount("org.example.Live")
    driver.get(base + "/#/pick/org.example.Live")
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".cell"))
    click("#continuous")
    click(f".cell[data-id='{ids['green.jpg']}']")
    expect(until(lambda: "green.jpg" in os.listdir(live)), "continuous: a click shows in the running mount")
    click(f".cell[data-id='{ids['green.jpg']}']")
    expect(until(lambda: "green.jpg" not in os.listdir(live)), "continuous: a second click takes it away")

    # --- a grant made in the CLI shows in an open page at once --------------------------------------------
    driver.get(base + "/#/apps")
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "section.card[data-app='org.example.Live']"))
    pg("grant", "org.example.Live", "purple.jpg", "orange.jpg")
    expect(until(lambda: "limited (2 photos)" in text("section.card[data-app='org.example.Live']")),
           "a CLI grant shows in the open page without a reload")

    # --- Recently Deleted: restore -------------------------------------------------------------------------
    deleter = mount("org.example.Deleter")
    os.unlink(os.path.join(deleter, "gray.jpg"))
    driver.get(base + "/#/deleted")
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, f".tile[data-id='{ids['gray.jpg']}']"))
    click(f"[data-restore='{ids['gray.jpg']}']")
    expect(until(lambda: ids["gray.jpg"] not in pg("trash")), "Restore brought gray.jpg back")
    expect(until(lambda: "gray.jpg" in os.listdir(deleter)), "the restored photo is back in the app's mount")
    # Delete for good: asked twice; the row and the stored file go, verify finds nothing wrong.
    os.unlink(os.path.join(deleter, "orange.jpg"))
    store_file = [os.path.join(dp, f) for dp, _, fs in os.walk(os.path.join(LIB, "store")) for f in fs if f.startswith(ids["orange.jpg"])]
    expect(len(store_file) == 1, f"orange.jpg's stored file ({store_file})")
    driver.get(base + "/#/deleted")
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, f".tile[data-id='{ids['orange.jpg']}']"))
    click(f"[data-delete='{ids['orange.jpg']}']")
    wait.until(lambda d: "for good" in text(f"[data-delete='{ids['orange.jpg']}']"))
    expect(ids["orange.jpg"] in pg("trash"), "one click does not delete")
    click(f"[data-delete='{ids['orange.jpg']}']")
    expect(until(lambda: ids["orange.jpg"] not in pg("trash") and "orange.jpg" not in assets()), "Delete for good deleted orange.jpg")
    expect(not any(os.path.exists(p) for p in store_file), "its stored file is gone")
    expect(subprocess.run([PG, "verify"], env=ENV, capture_output=True).returncode == 0, "verify finds nothing wrong after")

    # --- what an app did ----------------------------------------------------------------------------------
    with open(os.path.join(live, "purple.jpg"), "rb") as f:
        f.read()
    expect(until(lambda: "purple.jpg" in pg("report", "org.example.Live")), "the mount recorded the read")
    driver.get(base + "/#/app/org.example.Live")
    # Read in one step and waited for: the page redraws the report as the mount's batch arrives
    # (reading a found element's text raced that redraw: a stale element, once in a full run).
    expect(until(lambda: "purple.jpg" in text("#report")), "the app page shows what the app read")
    # A second server in the same browser, opened as --open opens it (a private file:// page that
    # redirects): it signs in, and the first server's session stays.
    second = subprocess.Popen([PG, "ui"], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        url2 = second.stdout.readline().strip()
        page = os.path.join(TMP, "open.html")
        with open(page, "w") as f:
            f.write(f'<!doctype html><meta http-equiv="refresh" content="0;url={url2}">')
        driver.get("file://" + page)
        wait.until(lambda d: d.current_url.startswith(url2.split("#")[0]) and d.find_elements(By.CSS_SELECTOR, "section.card"))
        expect(True, "a file:// page redirecting to the address signs in (--open)")
        driver.get(base + "/#/apps")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "section.card") or "Not signed in" in text("main"))
        expect(bool(driver.find_elements(By.CSS_SELECTOR, "section.card")), "the first server's session survives the second's")
    finally:
        second.send_signal(signal.SIGINT)
        second.wait(timeout=20)

    logs = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    expect(not logs, f"no errors in the browser's console ({logs})")
finally:
    if driver:
        driver.quit()
    server.send_signal(signal.SIGINT)
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
    unmount_all()

# A decoder is limited: with 256 MB of address space, an interlaced 10000x10000 PNG (300 MB
# decoded; an app can write one in 300 KB) is refused, remembered as failed, and shows the placeholder, while a
# photo next to it gets its thumbnail.
lim = os.path.join(TMP, "limited")
os.makedirs(os.path.join(lim, "src"))
def adam7_png(path, w, h, rgb):
    """An interlaced PNG (a decoder must hold all of it) of one colour: a few hundred KB on disk."""
    import struct
    import zlib

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    comp, data = zlib.compressobj(9), []
    for x0, y0, dx, dy in [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]:
        pw, ph = (w - x0 + dx - 1) // dx, (h - y0 + dy - 1) // dy
        row = b"\x00" + bytes(rgb) * pw
        data += [comp.compress(row) for _ in range(ph)]
    data.append(comp.flush())
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 1))
                + chunk(b"IDAT", b"".join(data)) + chunk(b"IEND", b""))


adam7_png(os.path.join(lim, "src", "huge.png"), 10000, 10000, (255, 165, 0))
convert("-size", "640x480", "xc:teal", os.path.join(lim, "src", "fine.jpg"))
LENV = dict(ENV, PHOTOGATE_LIBRARY=os.path.join(lim, "library"), PHOTOGATE_THUMB_MEMORY_MB="256")
subprocess.run([PG, "init"], env=LENV, check=True, capture_output=True)
subprocess.run([PG, "import", os.path.join(lim, "src")], env=LENV, check=True, capture_output=True)
lids = {a["name"]: a["id"] for a in json.loads(subprocess.run([PG, "assets", "--json"], env=LENV, capture_output=True, text=True).stdout)}
third = subprocess.Popen([PG, "ui"], env=LENV, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
try:
    url3 = third.stdout.readline().strip()
    base3, secret3 = url3.split("/#")[0], url3.split("#k=")[1].split("&")[0]
    s, h, body = request(base3 + "/api/session", "POST", {"Origin": base3, "Content-Type": "application/json"},
                         json.dumps({"secret": secret3}).encode())
    sess = json.loads(body)
    ck3 = {"Cookie": h.get("Set-Cookie", "").split(";")[0], "X-Photogate-Token": sess["token"]}
    s, h, _ = request(base3 + f"/thumb/{lids['huge.png']}?t={sess['thumbKey']}", headers=ck3)
    expect(s == 200 and h.get("Content-Type") == "image/svg+xml", f"a decode past the memory limit shows the placeholder ({s}, {h.get('Content-Type')})")
    failed = [f for dp, _, fs in os.walk(os.path.join(lim, "library", "thumbs")) for f in fs if f.endswith(".failed")]
    expect(len(failed) == 1, f"the failure is remembered ({failed})")
    s, h, _ = request(base3 + f"/thumb/{lids['fine.jpg']}?t={sess['thumbKey']}", headers=ck3)
    expect(s == 200 and h.get("Content-Type") == "image/jpeg", f"the photo beside it has its thumbnail ({s}, {h.get('Content-Type')})")
finally:
    third.send_signal(signal.SIGINT)
    third.wait(timeout=20)

expect(server.returncode == 0, f"photogate ui ends with 0 on Ctrl-C ({server.returncode}: {server.stderr.read().strip()[-300:]})")
if failures:
    print(f"webui: {len(failures)} failed: {failures}", file=sys.stderr)
    sys.exit(1)
