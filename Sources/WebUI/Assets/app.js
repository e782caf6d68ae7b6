// photogate's web app (issue 35). Plain JavaScript, no build step, no resource from anywhere but
// this server. Every name and reason comes from apps or files: it goes into the page as text
// (textContent, attributes set one by one), never as HTML.
"use strict";

// The session: a token this origin's script keeps (another port's page cannot read it) and sends
// in a header, beside the HttpOnly cookie; and a key that opens thumbnails only.
let token = localStorage.getItem("pg_token");
let thumbKey = localStorage.getItem("pg_thumb");
const main = document.getElementById("main");
let state = { apps: [], requests: [], change: -1 };
let view = null;          // the current view's object: { render(), refresh(), key(e), leave() }

// --- small helpers ---------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v === true) e.setAttribute(k, "");
    else if (v !== false && v != null) e.setAttribute(k, String(v));
  }
  for (const c of children.flat()) if (c != null) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

async function api(path, body) {
  const headers = { "X-Photogate-Token": token || "" };
  const init = body === undefined ? { headers } : {
    method: "POST", body: JSON.stringify(body), headers: Object.assign({ "Content-Type": "application/json" }, headers),
  };
  const r = await fetch(path, Object.assign({ credentials: "same-origin" }, init));
  if (r.status === 403 && path !== "/api/session") signedOut();
  if (!r.ok) {
    let msg = await r.text();
    try { msg = JSON.parse(msg).error.message || msg; } catch (_) { /* plain text */ }
    throw new Error(msg);
  }
  return r.json();
}

function toast(text) {
  const t = document.getElementById("toast");
  t.textContent = text;
  t.classList.add("show");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => t.classList.remove("show"), 2500);
}

const fmtDate = (s) => new Date(s * 1000).toISOString().slice(0, 16).replace("T", " ");
const fmtDay = (s) => new Date(s * 1000).toISOString().slice(0, 10);
const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
const monthKey = (s) => { const d = new Date(s * 1000); return d.getUTCFullYear() * 12 + d.getUTCMonth(); };
const monthLabel = (s) => { const d = new Date(s * 1000); return `${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()}`; };
const fmtSize = (n) => n < 1e3 ? `${n} B` : n < 1e6 ? `${(n / 1e3).toFixed(1)} kB` : n < 1e9 ? `${(n / 1e6).toFixed(1)} MB` : `${(n / 1e9).toFixed(1)} GB`;
const statuses = ["not-determined", "limited", "authorized", "denied", "restricted"];

function thumbURL(id, v, size) {
  return `/thumb/${encodeURIComponent(id)}?v=${encodeURIComponent(v || "")}${size ? "&size=" + size : ""}&t=${encodeURIComponent(thumbKey || "")}`;
}

function signedOut() {
  main.replaceChildren(el("h2", {}, "Not signed in"),
    el("p", {}, "Open the address `photogate ui` printed (it works once), or run photogate ui again for a new one."));
}

// The printed address carries a one-time secret in its fragment (#k=...&go=/route): exchanged
// here for the session, then gone from the address bar and the history.
async function signIn() {
  if (!location.hash.startsWith("#k=")) return;
  const params = new URLSearchParams(location.hash.slice(1));
  const go = params.get("go") || "/apps";
  history.replaceState(null, "", "/#" + (go.startsWith("/") ? go : "/apps"));
  const s = await api("/api/session", { secret: params.get("k") || "" });
  token = s.token; thumbKey = s.thumbKey;
  localStorage.setItem("pg_token", token);
  localStorage.setItem("pg_thumb", thumbKey);
}

// --- state, routing and live updates -----------------------------------------------------------

async function loadState() {
  state = await api("/api/state");
  const n = state.requests.length;
  const badge = document.getElementById("request-count");
  badge.hidden = n === 0;
  badge.textContent = String(n);
}

function route() {
  if (view && view.leave) view.leave();
  const hash = location.hash || "#/apps";
  const [path, query] = hash.slice(1).split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const params = new URLSearchParams(query || "");
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", hash.startsWith(a.getAttribute("href")));
  main.replaceChildren();
  if (parts[0] === "pick" && parts[1]) view = new PickerView(parts[1], params);
  else if (parts[0] === "app" && parts[1]) view = new AppView(parts[1]);
  else if (parts[0] === "requests") view = new RequestsView();
  else if (parts[0] === "deleted") view = new DeletedView();
  else view = new AppsView();
  view.render();
}

// A burst of changes (an app writing many files) redraws once a second at most: the picker
// fetches the whole catalog to follow one.
let pending = null, lastRefresh = 0;
function changed() {
  if (pending) return;
  const wait = Math.max(0, 1000 - (Date.now() - lastRefresh));
  pending = setTimeout(async () => {
    pending = null;
    lastRefresh = Date.now();
    await loadState().catch(() => {});
    if (view && view.refresh) view.refresh();
  }, wait);
}

// The change feed (server-sent events, read with fetch: an EventSource cannot send the token).
async function listen() {
  for (;;) {
    try {
      const r = await fetch("/events", { headers: { "X-Photogate-Token": token || "" }, credentials: "same-origin" });
      if (!r.ok) return;
      const reader = r.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const message = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (message.startsWith("event: change")) changed();
        }
      }
    } catch (_) { /* the server went away: try again */ }
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
}

async function progress() {
  try {
    const p = await api("/api/progress");
    const e = document.getElementById("progress");
    e.textContent = p.total && p.done < p.total ? `thumbnails ${p.done} / ${p.total}` : "";
    if (p.done < p.total) setTimeout(progress, 1000);
  } catch (_) { /* the server went away */ }
}

// --- Apps --------------------------------------------------------------------------------------

class AppsView {
  render() { this.draw(); }
  refresh() { this.draw(); }
  draw() {
    const cards = state.apps.map((a) => {
      const rwSelect = el("select", { "aria-label": `read-write access of ${a.id}`, "data-app": a.id, "data-access": "read-write",
        onchange: (e) => setAccess(a.id, "read-write", e.target.value) },
        statuses.map((s) => el("option", { value: s, selected: s === a.readWrite }, s)));
      const aoSelect = el("select", { "aria-label": `add-only access of ${a.id}`, "data-app": a.id, "data-access": "add-only",
        onchange: (e) => setAccess(a.id, "add-only", e.target.value) },
        statuses.filter((s) => s !== "limited").map((s) => el("option", { value: s, selected: s === a.addOnly }, s)));
      const what = a.readWrite === "limited" ? `limited (${a.selected} photo${a.selected === 1 ? "" : "s"})` : a.readWrite;
      return el("section", { class: "card", "data-app": a.id },
        el("h2", {}, a.id),
        el("div", { class: "row" }, el("label", {}, "Photos"), rwSelect, el("span", { class: "muted" }, what)),
        el("div", { class: "row" }, el("label", {}, "Add only"), aoSelect),
        el("div", { class: "row" }, el("label", {}, "Options"),
          el("label", {}, el("input", { type: "checkbox", checked: a.stripLocation, "data-option": "stripLocation",
            onchange: (e) => setOption(a.id, { stripLocation: e.target.checked }) }), " strip location"),
          el("label", {}, el("input", { type: "checkbox", checked: a.editAny, "data-option": "editAny",
            onchange: (e) => setOption(a.id, { editAny: e.target.checked }) }), " may edit any")),
        el("div", { class: "row muted" }, `created ${a.created}, picked ${a.picked}`),
        el("div", { class: "row" },
          el("a", { href: `#/pick/${encodeURIComponent(a.id)}` }, el("button", { tabindex: -1 }, "Edit Selected Photos")),
          el("a", { href: `#/app/${encodeURIComponent(a.id)}` }, el("button", { tabindex: -1 }, "What it did"))));
    });
    main.replaceChildren(el("h2", {}, "Apps and their access"),
      cards.length ? el("div", { class: "cards" }, cards) : el("p", { class: "muted" }, "No app has asked for photos yet."));
  }
}

async function setAccess(app, access, status) {
  try { await api(`/api/apps/${encodeURIComponent(app)}/access`, { access, status }); toast(`${app}: ${access} ${status}`); }
  catch (e) { toast(e.message); }
  await loadState(); if (view.refresh) view.refresh();
}

async function setOption(app, options) {
  try { await api(`/api/apps/${encodeURIComponent(app)}/options`, options); toast(`${app}: options changed`); }
  catch (e) { toast(e.message); }
  await loadState(); if (view.refresh) view.refresh();
}

// --- One app: what it did ----------------------------------------------------------------------

class AppView {
  constructor(app) { this.app = app; }
  render() { this.draw(); }
  refresh() { this.draw(); }
  async draw() {
    let entries = [];
    try { entries = await api(`/api/apps/${encodeURIComponent(this.app)}/report`); } catch (e) { toast(e.message); }
    const rows = entries.map((e) => el("tr", {},
      el("td", {}, fmtDate(e.last)), el("td", {}, e.kind), el("td", {}, e.name == null ? "(deleted for good)" : e.name),
      el("td", {}, String(e.count)), el("td", {}, fmtDate(e.first))));
    main.replaceChildren(el("h2", {}, `What ${this.app} did`),
      el("p", { class: "muted" }, "Newest first: the photos it read, created, edited, deleted or was refused (photogate report)."),
      rows.length ? el("table", { id: "report" }, el("tr", {}, ["Last", "Kind", "Photo", "Times", "First"].map((h) => el("th", {}, h))), rows)
        : el("p", {}, "Nothing recorded."));
  }
}

// --- Requests ----------------------------------------------------------------------------------

class RequestsView {
  render() { this.draw(); }
  refresh() { this.draw(); }
  draw() {
    const items = state.requests.map((r) => {
      const title = {
        "read-write": `“${r.app}” would like to access your photos`,
        "add-only": `“${r.app}” would like to add to your photos`,
        "picker": `“${r.app}” asks you to choose photos`,
        "edit": `“${r.app}” would like to edit a photo`,
      }[r.kind] || `${r.app}: ${r.kind}`;
      const buttons = [];
      const answer = (a) => answerRequest(r.id, a);
      const pick = () => { location.hash = `#/pick/${encodeURIComponent(r.app)}?request=${r.id}&kind=${r.kind}`; };
      if (r.kind === "read-write") buttons.push(el("button", { onclick: pick, "data-answer": "select" }, "Select Photos…"),
        el("button", { onclick: () => answer("allow"), "data-answer": "allow" }, "Allow Full Access"));
      if (r.kind === "picker") buttons.push(el("button", { class: "primary", onclick: pick, "data-answer": "select" }, "Select Photos…"));
      if (r.kind === "add-only") buttons.push(el("button", { onclick: () => answer("allow"), "data-answer": "allow" }, "Allow"));
      if (r.kind === "edit") buttons.push(el("button", { onclick: () => answer("allow"), "data-answer": "allow" }, "Allow Editing"));
      buttons.push(el("button", { class: "danger", onclick: () => answer("deny"), "data-answer": "deny" }, "Don’t Allow"));
      return el("section", { class: "request", "data-request": r.id },
        el("strong", {}, title),
        r.asset ? el("div", {}, "Photo: ", r.asset.name) : null,
        el("div", { class: "reason" }, r.reason ? r.reason : ""),
        el("div", { class: "muted" }, fmtDate(r.date)),
        el("div", { class: "row" }, buttons));
    });
    main.replaceChildren(el("h2", {}, "Requests"),
      ...(items.length ? items : [el("p", { class: "muted", id: "no-requests" }, "No app is waiting for an answer.")]));
  }
}

async function answerRequest(id, answer) {
  try { await api(`/api/requests/${id}/answer`, { answer }); toast("answered"); }
  catch (e) { toast(e.message); }
  await loadState(); if (view.refresh) view.refresh();
}

// --- Recently Deleted --------------------------------------------------------------------------

class DeletedView {
  render() { this.draw(); }
  refresh() { this.draw(); }
  async draw() {
    let list = [];
    try { list = await api("/api/trash"); } catch (e) { toast(e.message); }
    const tiles = list.map((a) => el("div", { class: "tile", "data-id": a.id },
      el("img", { src: thumbURL(a.id, a.v), alt: a.name, loading: "lazy" }),
      el("div", { class: "name" }, a.name),
      el("div", { class: "muted" }, `deleted ${fmtDay(a.trashed)}${a.owner ? " by " + a.owner : ""}`),
      el("div", { class: "row" },
        el("button", { onclick: () => this.restore(a), "data-restore": a.id }, "Restore"),
        el("button", { class: "danger", "data-delete": a.id, onclick: (e) => this.remove(a, e.target) }, "Delete"))));
    main.replaceChildren(el("h2", {}, "Recently Deleted"),
      tiles.length ? el("div", { class: "grid-static" }, tiles) : el("p", { class: "muted" }, "Nothing was deleted."));
  }
  // Deleting for good asks twice: the first click arms the button.
  async remove(a, button) {
    if (button.dataset.armed !== "1") { button.dataset.armed = "1"; button.textContent = "Delete for good?"; return; }
    try { await api("/api/trash/delete", { ids: [a.id] }); toast(`deleted ${a.name} for good`); } catch (e) { toast(e.message); }
    this.draw();
  }
  async restore(a) {
    try { await api("/api/trash/restore", { ids: [a.id] }); toast(`restored ${a.name}`); } catch (e) { toast(e.message); }
    this.draw();
  }
}

// --- The picker --------------------------------------------------------------------------------

const CELL = 128, GAP = 6, HEADER = 36;

class PickerView {
  constructor(app, params) {
    this.app = app;
    this.request = params.get("request") ? Number(params.get("request")) : null;
    this.requestKind = params.get("kind") || null;
    this.limit = params.get("limit") ? Number(params.get("limit")) : null;
    this.items = [];       // the catalog (arrays: id, name, date, kind, video, location, selectable, pickable, v, albums, size)
    this.shown = [];       // indexes into items, after filters
    this.selected = [];    // ids, in the order chosen
    this.initial = new Set();
    this.focus = 0;        // index into shown
    this.anchor = null;    // for shift-click ranges
    this.continuous = false;
    this.strip = false;
    this.cells = new Map();
  }

  async render() {
    this.scroller = el("div", { class: "scroller", id: "grid", tabindex: 0, role: "grid", "aria-label": "photos" });
    this.spacer = el("div", { class: "spacer" });
    this.scroller.append(this.spacer);
    this.scroller.addEventListener("scroll", () => this.paint());
    this.details = el("aside", { class: "details", id: "details" }, el("p", { class: "muted" }, "Select a photo to see its details."));
    this.search = el("input", { type: "search", placeholder: "Search name, album, date (/)", id: "search", oninput: () => this.filter() });
    this.albumSel = el("select", { id: "album", onchange: () => this.filter(), "aria-label": "album" });
    this.kindSel = el("select", { id: "kind", onchange: () => this.filter(), "aria-label": "type" },
      el("option", { value: "" }, "All types"), el("option", { value: "photo" }, "Photos"), el("option", { value: "video" }, "Videos"));
    this.count = el("span", { id: "count" });
    this.stripBox = el("input", { type: "checkbox", id: "strip", onchange: (e) => { this.strip = e.target.checked; } });
    this.contBox = el("input", { type: "checkbox", id: "continuous", onchange: (e) => this.setContinuous(e.target.checked) });
    this.title = el("h2", {}, `Choose photos for ${this.app}`);
    main.replaceChildren(this.title,
      el("div", { class: "toolbar" }, this.search, this.albumSel, this.kindSel,
        el("label", {}, this.stripBox, " strip location"), el("label", {}, this.contBox, " continuous"),
        el("span", { class: "muted" }, "? for keys")),
      this.help = el("div", { class: "help", id: "help", hidden: true },
        el("strong", {}, "Keys"),
        el("dl", {}, [["arrows, PgUp/PgDn, Home/End, g/G", "move"], ["space, click", "select or deselect"],
          ["shift+arrows, shift+click", "select a range"], ["a / A", "select / deselect everything shown"],
          ["/", "search (name, album, date)"], ["Tab", "albums"], ["i", "details and preview"], ["s", "strip location"],
          ["Enter", "done"], ["Escape", "cancel"], ["?", "this help"]].map(([k, v]) => [el("dt", {}, el("kbd", {}, k)), el("dd", {}, v)]))),
      el("div", { class: "picker" }, this.scroller, this.details),
      el("div", { class: "footer" }, this.count,
        el("button", { id: "cancel", onclick: () => this.cancel() }, "Cancel"),
        el("button", { id: "confirm", class: "primary", onclick: () => this.confirm() }, "Done")));
    this.resize = () => { this.layout(); this.paint(); };
    window.addEventListener("resize", this.resize);
    this.keys = (e) => this.key(e);
    document.addEventListener("keydown", this.keys);
    await this.load();
    this.scroller.focus();
  }

  leave() {
    window.removeEventListener("resize", this.resize);
    document.removeEventListener("keydown", this.keys);
  }

  async load() {
    let c;
    try { c = await api(`/api/apps/${encodeURIComponent(this.app)}/catalog`); } catch (e) { toast(e.message); return; }
    this.items = c.items;
    this.byId = new Map(c.items.map((it, i) => [it[0], i]));
    // Selection mode for a limited app (or one about to be), else hand photos over as picked.
    this.mode = (c.readWrite === "limited" || this.requestKind === "read-write") ? "selection" : "deliver";
    const current = this.mode === "selection" ? c.selection : c.picks;
    this.selected = current.slice();
    this.initial = new Set(current);
    this.strip = c.stripLocation || c.selectionStrip.length > 0;
    this.stripBox.checked = this.strip;
    this.albumSel.replaceChildren(el("option", { value: "" }, "All photos"),
      c.albums.map((a) => el("option", { value: String(a.id) }, a.shared ? `${a.name} (shared)` : a.name)));
    this.albums = new Map(c.albums.map((a) => [a.id, a.name]));
    this.title.textContent = this.mode === "selection" ? `Photos ${this.app} may see` : `Choose photos to give ${this.app}`;
    this.filter();
  }

  offered(it) { return this.mode === "selection" ? it[6] : it[7]; }

  filter() {
    const q = this.search.value.trim().toLowerCase();
    const album = this.albumSel.value ? Number(this.albumSel.value) : null;
    const kind = this.kindSel.value;
    this.shown = [];
    for (let i = 0; i < this.items.length; i++) {
      const it = this.items[i];
      if (album != null && !it[9].includes(album)) continue;
      if (kind === "photo" && it[4]) continue;
      if (kind === "video" && !it[4]) continue;
      if (q) {
        if (!it.hay) it.hay = `${it[1]} ${fmtDay(it[2])} ${monthLabel(it[2])} ${it[9].map((a) => this.albums.get(a) || "").join(" ")}`.toLowerCase();
        if (!it.hay.includes(q)) continue;
      }
      this.shown.push(i);
    }
    this.focus = Math.min(this.focus, Math.max(0, this.shown.length - 1));
    this.layout();
    this.scroller.scrollTop = 0;
    this.paint();
    this.updateCount();
  }

  // Rows of month headers and of cells; positions are computed, only what is on screen is in the page.
  layout() {
    const width = this.scroller.clientWidth - 16;
    this.cols = Math.max(1, Math.floor((width + GAP) / (CELL + GAP)));
    this.rows = [];       // { y, header: label } or { y, start, end } (indexes into shown)
    this.rowOf = new Int32Array(this.shown.length);
    let y = 0, i = 0;
    while (i < this.shown.length) {
      const first = this.items[this.shown[i]][2], month = monthKey(first);
      this.rows.push({ y, header: monthLabel(first) });
      y += HEADER;
      let j = i;
      while (j < this.shown.length && monthKey(this.items[this.shown[j]][2]) === month) j++;
      for (let s = i; s < j; s += this.cols) {
        const e = Math.min(j, s + this.cols);
        for (let k = s; k < e; k++) this.rowOf[k] = this.rows.length;
        this.rows.push({ y, start: s, end: e });
        y += CELL + GAP;
      }
      i = j;
    }
    this.spacer.style.height = `${y + 8}px`;
  }

  paint() {
    const top = this.scroller.scrollTop, bottom = top + this.scroller.clientHeight;
    const keep = new Set();
    // Binary search for the first row on screen.
    let lo = 0, hi = this.rows.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (this.rows[mid].y + CELL + GAP < top - 200) lo = mid + 1; else hi = mid; }
    const order = new Map(this.selected.map((id, i) => [id, i + 1]));
    for (let r = lo; r < this.rows.length && this.rows[r].y < bottom + 200; r++) {
      const row = this.rows[r];
      if (row.header) {
        const key = `h${r}`;
        keep.add(key);
        if (!this.cells.has(key)) {
          const h = el("div", { class: "month" }, row.header);
          h.style.top = `${row.y}px`;
          this.spacer.append(h);
          this.cells.set(key, h);
        }
        continue;
      }
      for (let k = row.start; k < row.end; k++) {
        const it = this.items[this.shown[k]];
        const key = `c${k}`;
        keep.add(key);
        let c = this.cells.get(key);
        if (!c || c.dataset.id !== it[0]) {
          if (c) c.remove();
          c = el("div", { class: "cell", role: "gridcell", "data-id": it[0], "data-index": k, title: it[1] },
            el("img", { src: thumbURL(it[0], it[8]), alt: it[1], loading: "lazy", draggable: "false" }));
          if (it[4]) c.append(el("span", { class: "tag" }, "video"));
          else if (it[5]) c.append(el("span", { class: "tag" }, "location"));
          c.addEventListener("click", (e) => this.click(k, e));
          c.style.left = `${8 + (k - row.start) * (CELL + GAP)}px`;
          c.style.top = `${row.y}px`;
          this.spacer.append(c);
          this.cells.set(key, c);
        }
        const n = order.get(it[0]);
        c.classList.toggle("selected", n != null);
        c.classList.toggle("focused", k === this.focus);
        c.classList.toggle("unavailable", !this.offered(it));
        c.setAttribute("aria-selected", n != null ? "true" : "false");
        let badge = c.querySelector(".order");
        if (n != null) {
          if (!badge) { badge = el("span", { class: "order" }); c.append(badge); }
          badge.textContent = String(n);
        } else if (badge) badge.remove();
      }
    }
    for (const [key, c] of this.cells) if (!keep.has(key)) { c.remove(); this.cells.delete(key); }
  }

  updateCount() {
    const n = this.selected.length;
    this.count.textContent = `${n} selected${this.limit ? ` (at most ${this.limit})` : ""} · ${this.shown.length} shown · ${this.mode === "selection" ? "limited selection" : "handed over as picked"}`;
  }

  click(k, e) {
    this.focus = k;
    if (e.shiftKey && this.anchor != null) this.range(this.anchor, k);
    else { this.toggle(k); this.anchor = k; }
    this.showDetails();
  }

  range(a, b) {
    const [s, t] = a < b ? [a, b] : [b, a];
    const add = [];
    for (let k = s; k <= t; k++) {
      const it = this.items[this.shown[k]];
      if (this.offered(it) && !this.selected.includes(it[0])) add.push(it[0]);
    }
    this.change(add, []);
  }

  toggle(k) {
    const it = this.items[this.shown[k]];
    if (!it) return;
    if (!this.offered(it)) { toast(`${it[1]} cannot be given to this app (a shared album's photo, say)`); return; }
    if (this.selected.includes(it[0])) this.change([], [it[0]]);
    else this.change([it[0]], []);
  }

  change(add, remove) {
    if (this.limit && this.selected.length - remove.length + add.length > this.limit) {
      add = add.slice(0, Math.max(0, this.limit - this.selected.length + remove.length));
      toast(`at most ${this.limit}`);
    }
    this.selected = this.selected.filter((id) => !remove.includes(id)).concat(add);
    if (this.continuous && (add.length || remove.length)) this.send(add, remove);
    this.paint();
    this.updateCount();
  }

  async send(add, remove) {
    try {
      await api(`/api/apps/${encodeURIComponent(this.app)}/selection`,
        { add, remove, picked: this.mode === "deliver", stripLocation: this.strip });
    } catch (e) { toast(e.message); }
  }

  async setContinuous(on) {
    this.continuous = on;
    if (on) {   // what was chosen before goes now
      await this.prepareRequest();
      const diff = this.diff();
      await this.send(diff.add, diff.remove);
    }
  }

  diff() {
    const now = new Set(this.selected);
    return { add: this.selected.filter((id) => !this.initial.has(id)), remove: [...this.initial].filter((id) => !now.has(id)) };
  }

  // Answering an app's first read-write request by choosing photos makes it limited first.
  async prepareRequest() {
    if (this.request != null && this.requestKind === "read-write" && !this.prepared) {
      this.prepared = true;
      await api(`/api/requests/${this.request}/answer`, { answer: "limited" }).catch((e) => toast(e.message));
    }
  }

  async confirm() {
    try {
      await this.prepareRequest();
      const d = this.continuous ? { add: [], remove: [] } : this.diff();
      await api(`/api/apps/${encodeURIComponent(this.app)}/selection`,
        { add: d.add, remove: d.remove, picked: this.mode === "deliver", stripLocation: this.strip, request: this.request });
      toast(`${this.app}: ${this.selected.length} photo${this.selected.length === 1 ? "" : "s"}`);
      location.hash = "#/apps";
    } catch (e) { toast(e.message); }
  }

  async cancel() {
    if (this.continuous) {   // continuous changes are taken back
      const d = this.diff();
      await this.send(d.remove, d.add);
    }
    location.hash = "#/apps";
  }

  async showDetails() {
    const it = this.items[this.shown[this.focus]];
    if (!it) return;
    const img = el("img", { src: thumbURL(it[0], it[8], "large"), alt: it[1], id: "preview" });
    this.details.replaceChildren(img, el("p", {}, it[1]));
    let d;
    try { d = await api(`/api/asset/${encodeURIComponent(it[0])}`); } catch (e) { return; }
    if (this.items[this.shown[this.focus]] !== it) return;
    const row = (k, v) => [el("dt", {}, k), el("dd", {}, v)];
    this.details.append(el("dl", {},
      row("Date", fmtDate(d.captured)), row("Size", fmtSize(d.size)), row("Kind", `${d.kind} (${d.class})`),
      row("Location", d.hasLocation ? "yes" : "no"), row("Made by", d.owner || "—"),
      row("Seen by", d.apps.length ? d.apps.map((a) => `${a.app} (${a.access})`).join(", ") : "no app")));
  }

  move(delta, extend) {
    const n = this.shown.length;
    if (!n) return;
    const next = Math.max(0, Math.min(n - 1, this.focus + delta));
    if (extend) { if (this.anchor == null) this.anchor = this.focus; this.focus = next; this.range(this.anchor, next); }
    else this.focus = next;
    const row = this.rows[this.rowOf[this.focus]];
    if (row.y < this.scroller.scrollTop) this.scroller.scrollTop = row.y - HEADER;
    else if (row.y + CELL > this.scroller.scrollTop + this.scroller.clientHeight) this.scroller.scrollTop = row.y + CELL - this.scroller.clientHeight + GAP;
    this.paint();
  }

  key(e) {
    if (e.target === this.search) {
      if (e.key === "Escape" || e.key === "Enter") { e.preventDefault(); this.scroller.focus(); }
      return;
    }
    if (e.target.tagName === "SELECT" || e.target.tagName === "INPUT" && e.target.type !== "checkbox") return;
    const ext = e.shiftKey;
    switch (e.key) {
      case "ArrowRight": this.move(1, ext); break;
      case "ArrowLeft": this.move(-1, ext); break;
      case "ArrowDown": this.move(this.cols, ext); break;
      case "ArrowUp": this.move(-this.cols, ext); break;
      case "PageDown": this.move(this.cols * 4, ext); break;
      case "PageUp": this.move(-this.cols * 4, ext); break;
      case "Home": this.move(-this.focus, ext); break;
      case "End": this.move(this.shown.length, ext); break;
      case " ": this.toggle(this.focus); this.anchor = this.focus; break;
      case "Enter": this.confirm(); break;
      case "Escape": this.cancel(); break;
      case "i": this.showDetails(); break;
      case "s": this.stripBox.checked = this.strip = !this.strip; break;
      case "/": this.search.focus(); break;
      case "a": this.change(this.shown.map((i) => this.items[i]).filter((it) => this.offered(it) && !this.selected.includes(it[0])).map((it) => it[0]), []); break;
      case "A": { const inView = new Set(this.shown.map((i) => this.items[i][0])); this.change([], this.selected.filter((id) => inView.has(id))); break; }
      case "g": this.move(-this.focus, ext); break;
      case "G": this.move(this.shown.length, ext); break;
      case "Tab": if (e.shiftKey) return; this.albumSel.focus(); break;
      case "?": this.help.hidden = !this.help.hidden; break;
      default: return;
    }
    e.preventDefault();
  }

  async refresh() {
    // A change elsewhere (the CLI, another page): the selection follows unless this page has
    // changes of its own.
    const d = this.diff();
    if (!this.continuous && (d.add.length || d.remove.length)) return;
    const focus = this.focus, top = this.scroller.scrollTop;
    await this.load();
    this.focus = focus;
    this.scroller.scrollTop = top;
    this.paint();
  }
}

// --- start ---------------------------------------------------------------------------------------

window.addEventListener("hashchange", route);
signIn().then(loadState).then(() => { route(); listen(); progress(); }, () => signedOut());
