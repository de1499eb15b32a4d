// lockyard web: the timeline, drawn on a canvas (only the rows in view are drawn, so a
// journal of many files stays smooth). Rows are files or agents; bars are holds, hatched
// bars waits, diamonds deadlocks, triangles denied writes. Closed spans come from the
// journal (/api/timeline, then pushed records); open ones from the live board.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const ROW = 20, AXIS = 22, LABEL = 190;
  const COLORS = { hold: "#3b82c4", wait: "#e59a1c", cycle: "#d62f2f", denied: "#c2410c", grid: "#eef0f3", ink: "#1d2430", dim: "#6b7482" };
  const state = {
    by: "file", seconds: 3600, custom: null,   // custom: [from, to] in seconds since the epoch
    since: null, asked: null, latest: 0, busy: false,  // since: a run's start (`#from=`): to its latest event
    items: [], keys: new Set(), board: null, note: "",
    rows: [], layoutDirty: true, skew: 0, loading: 0,
  };
  const canvas = $("timeline"), scroll = $("timeline-scroll"), spacer = $("timeline-spacer"), tip = $("tooltip");
  const ctx = canvas.getContext("2d");
  let hatch = null;
  // The box's size and scroll, kept by an observer and the scroll event: read while painting,
  // they would make the browser lay out the whole page then (the table beside it included).
  const view = { width: scroll.clientWidth, height: scroll.clientHeight, top: 0 };

  function now() { return Date.now() / 1000 + state.skew; }
  function windowRange() {
    if (state.custom) return state.custom;
    const t = now();
    if (state.since !== null) {
      // A run's window: from its start to its latest event (to now while anything is held
      // or waited for), so a run of seconds fills the width, and stays so after it ended.
      const end = Math.min(state.busy ? t : Math.max(state.latest, state.since), t);
      const span = Math.max(end - state.since, 10);
      return [state.since, state.since + span * 1.03];
    }
    return [t - state.seconds, t];
  }

  // ---- data ----------------------------------------------------------------------------
  function itemKey(it) { return it.k + "|" + it.s + "|" + it.a + "|" + it.f; }
  function addItems(items) {
    for (const it of items) {
      if (!it || typeof it.k !== "string" || typeof it.s !== "number") continue;
      const key = itemKey(it);
      if (state.keys.has(key)) continue;
      state.keys.add(key);
      state.items.push(it);
      const end = typeof it.e === "number" ? it.e : it.s;
      if (end > state.latest) state.latest = end;
    }
    state.layoutDirty = true;
    draw();
  }

  function openItems() {
    // Holds and waits going on now, from the live board.
    const board = state.board, out = [];
    if (!board) return out;
    const t = now();
    for (const lock of board.locks) {
      const readers = lock.readers || [];
      if (lock.holder !== null && lock.held_since !== null) out.push({ k: readers.length ? "wait" : "hold", a: lock.holder, f: lock.name, s: lock.held_since, e: t, open: true });
      for (const w of lock.queue) if (!w.dead) out.push({ k: "wait", a: w.agent, f: lock.name, s: w.since, e: t, open: true });
    }
    return out;
  }

  function rowNames(item) {
    if (item.k === "deadlock") {
      const names = new Set();
      for (const step of item.cycle || []) names.add(state.by === "file" ? step[1] : step[0]);
      return [...names];
    }
    const name = state.by === "file" ? item.f : item.a;
    return name ? [name] : [];
  }

  function buildRows() {
    const [from, to] = windowRange();
    const rows = new Map();
    const all = state.custom ? state.items : state.items.concat(openItems());
    for (const it of all) {
      const end = it.e === undefined || it.e === null ? it.s : it.e;
      if (end < from || it.s > to) continue;
      for (const name of rowNames(it)) {
        if (!rows.has(name)) rows.set(name, []);
        rows.get(name).push(it);
      }
    }
    state.rows = [...rows.keys()].sort().map((name) => ({ name, items: rows.get(name) }));
    state.layoutDirty = false;
    spacer.style.height = (AXIS + state.rows.length * ROW) + "px";
    const note = $("timeline-note");
    if (state.note) note.textContent = state.note;
    else note.textContent = state.rows.length ? state.rows.length + (state.by === "file" ? " files" : " agents") : "nothing happened in this window";
  }

  // ---- drawing -------------------------------------------------------------------------
  function resize() {
    const ratio = window.devicePixelRatio || 1;
    const width = view.width, height = view.height;
    if (canvas.width !== Math.round(width * ratio) || canvas.height !== Math.round(height * ratio)) {
      canvas.width = Math.round(width * ratio); canvas.height = Math.round(height * ratio);
      canvas.style.width = width + "px"; canvas.style.height = height + "px";
    }
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    return [width, height];
  }

  function hatchPattern() {
    if (hatch) return hatch;
    const tile = document.createElement("canvas");
    tile.width = 8; tile.height = 8;
    const t = tile.getContext("2d");
    t.fillStyle = "#fff3dd"; t.fillRect(0, 0, 8, 8);
    t.strokeStyle = COLORS.wait; t.lineWidth = 2;
    t.beginPath(); t.moveTo(-2, 10); t.lineTo(10, -2); t.moveTo(-2, 2); t.lineTo(2, -2); t.moveTo(6, 10); t.lineTo(10, 6); t.stroke();
    hatch = ctx.createPattern(tile, "repeat");
    return hatch;
  }

  function ticks(from, to, width) {
    const span = to - from, steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400];
    const step = steps.find((s) => span / s <= width / 90) || 86400;
    const out = [];
    for (let t = Math.ceil(from / step) * step; t <= to; t += step) out.push(t);
    return [out, step];
  }
  function clock(t, step) {
    const d = new Date(t * 1000), p = (n) => String(n).padStart(2, "0");
    const hm = p(d.getHours()) + ":" + p(d.getMinutes());
    return step < 60 ? hm + ":" + p(d.getSeconds()) : hm;
  }

  let drawPending = false;
  function draw() {
    if (drawPending) return;
    drawPending = true;
    requestAnimationFrame(() => { drawPending = false; paint(); });
  }

  function paint() {
    if (state.layoutDirty || !state.custom) buildRows();
    const [width, height] = resize();
    const [from, to] = windowRange();
    const plot = width - LABEL - 8, x = (t) => LABEL + ((t - from) / (to - from)) * plot;
    ctx.clearRect(0, 0, width, height);
    ctx.font = "12px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    const first = Math.max(0, Math.floor(view.top / ROW)), last = Math.min(state.rows.length, first + Math.ceil(height / ROW) + 1);
    const offset = -(view.top % ROW);
    const [marks, step] = ticks(from, to, plot);
    for (let i = first; i < last; i++) {
      const row = state.rows[i], y = AXIS + (i - first) * ROW + offset;
      if (y + ROW < AXIS) continue;
      if (i % 2) { ctx.fillStyle = "#fafbfc"; ctx.fillRect(0, y, width, ROW); }
      ctx.fillStyle = COLORS.ink;
      ctx.fillText(fitted(row.name), 6, y + ROW / 2);
      ctx.save(); ctx.beginPath(); ctx.rect(LABEL, y, plot, ROW); ctx.clip();
      // Bars first, then the markers over them (a deadlock's diamond sits where a wait ends
      // and the next bar begins: drawn before it, it was half hidden).
      for (const it of row.items) if (it.k === "hold" || it.k === "wait") drawItem(it, x, y, from, to);
      for (const it of row.items) if (it.k !== "hold" && it.k !== "wait") drawItem(it, x, y, from, to);
      ctx.restore();
    }
    // the time axis, over the rows
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, width, AXIS);
    ctx.strokeStyle = COLORS.grid; ctx.fillStyle = COLORS.dim; ctx.lineWidth = 1;
    for (const t of marks) {
      const px = Math.round(x(t)) + 0.5;
      ctx.beginPath(); ctx.moveTo(px, AXIS - 4); ctx.lineTo(px, height); ctx.stroke();
      ctx.fillText(clock(t, step), px + 3, AXIS / 2);
    }
    ctx.strokeStyle = "#dde1e7"; ctx.beginPath(); ctx.moveTo(0, AXIS - 0.5); ctx.lineTo(width, AXIS - 0.5); ctx.stroke();
    ctx.fillStyle = COLORS.dim;
    ctx.fillText(state.by === "file" ? "file" : "agent", 6, AXIS / 2);
  }

  // A row's name in its label's width, cut with an ellipsis (hovering it shows it whole).
  const fits = new Map();
  function fitted(name) {
    let shown = fits.get(name);
    if (shown !== undefined) return shown;
    if (fits.size > 5000) fits.clear();
    const room = LABEL - 14;
    shown = name;
    if (ctx.measureText(name).width > room) {
      let low = 0, high = name.length;  // the longest start that fits with the ellipsis
      while (low < high) {
        const mid = Math.ceil((low + high) / 2);
        if (ctx.measureText(name.slice(0, mid) + "…").width <= room) low = mid; else high = mid - 1;
      }
      shown = name.slice(0, low) + "…";
    }
    fits.set(name, shown);
    return shown;
  }

  function drawItem(it, x, y, from, to) {
    if (it.k === "hold" || it.k === "wait") {
      const x0 = x(Math.max(it.s, from)), x1 = Math.max(x0 + 2, x(Math.min(it.e, to)));
      const top = it.k === "hold" ? y + 4 : y + 5, h = it.k === "hold" ? ROW - 8 : ROW - 10;
      ctx.fillStyle = it.k === "hold" ? (it.cycle ? COLORS.cycle : COLORS.hold) : hatchPattern();
      ctx.fillRect(x0, top, x1 - x0, h);
      if (it.k === "wait") { ctx.strokeStyle = it.o === "victim" ? COLORS.cycle : COLORS.wait; ctx.lineWidth = 1; ctx.strokeRect(x0 + 0.5, top + 0.5, x1 - x0 - 1, h - 1); }
      const label = state.by === "file" ? it.a : it.f;
      if (x1 - x0 > 50 && label) {
        ctx.fillStyle = it.k === "hold" ? "#fff" : COLORS.ink;
        ctx.save(); ctx.beginPath(); ctx.rect(x0, top, x1 - x0 - 2, h); ctx.clip();
        ctx.font = "11px system-ui, sans-serif"; ctx.fillText(label, x0 + 4, y + ROW / 2); ctx.restore();
      }
      return;
    }
    const px = x(it.s), cy = y + ROW / 2;
    if (it.k === "deadlock") {
      ctx.fillStyle = COLORS.cycle;
      ctx.beginPath(); ctx.moveTo(px, cy - 7); ctx.lineTo(px + 7, cy); ctx.lineTo(px, cy + 7); ctx.lineTo(px - 7, cy); ctx.closePath(); ctx.fill();
      ctx.strokeStyle = "#fff"; ctx.lineWidth = 1; ctx.stroke();
    } else if (it.k === "denied") {
      ctx.fillStyle = COLORS.denied;
      ctx.beginPath(); ctx.moveTo(px, cy - 7); ctx.lineTo(px + 6, cy + 5); ctx.lineTo(px - 6, cy + 5); ctx.closePath(); ctx.fill();
    } else {
      ctx.fillStyle = COLORS.dim; ctx.fillRect(px - 1, y + 3, 2, ROW - 6);
    }
  }

  // ---- hover ---------------------------------------------------------------------------
  function describe(it) {
    const when = (t) => new Date(t * 1000).toLocaleTimeString([], { hour12: false });
    const lines = [];
    const span = () => when(it.s) + (it.open ? " – now" : " – " + when(it.e)) + "  (" + window.LockyardFormat.duration(it.e - it.s) + ")";
    if (it.k === "hold") lines.push(it.a + " held " + it.f, span());
    else if (it.k === "wait") lines.push(it.a + " waited for " + it.f, span() + (it.o ? ", " + it.o : ""));
    else if (it.k === "deadlock") {
      lines.push("deadlock at " + when(it.s));
      for (const step of it.cycle || []) lines.push("  " + step[0] + " waited for " + step[1] + " (held by " + step[2] + ")");
      lines.push("victim: " + it.a + (it.x ? " — " + it.x : ""));
    } else if (it.k === "denied") lines.push("denied write at " + when(it.s), it.a + " → " + it.f, it.x || "");
    else lines.push(it.k + " at " + when(it.s), it.a + " " + it.f, it.x || "");
    return lines.join("\n");
  }

  scroll.addEventListener("mousemove", (event) => {
    const rect = scroll.getBoundingClientRect();
    const mx = event.clientX - rect.left, my = event.clientY - rect.top;
    const index = Math.floor((my - AXIS + scroll.scrollTop) / ROW);
    const row = my > AXIS ? state.rows[index] : undefined;
    const [from, to] = windowRange();
    const plot = rect.width - LABEL - 8, t = from + ((mx - LABEL) / plot) * (to - from), slack = 5 * (to - from) / plot;
    let hit = null;
    if (row && mx < LABEL && fitted(row.name) !== row.name) {
      tip.textContent = row.name;  // a name cut in its label, whole
      tip.hidden = false;
      tip.style.left = Math.min(event.clientX + 12, window.innerWidth - 430) + "px";
      tip.style.top = (event.clientY + 14) + "px";
      return;
    }
    if (row && mx > LABEL) {
      for (const it of row.items) {
        const end = it.e === undefined || it.e === null ? it.s : it.e;
        if (t >= it.s - slack && t <= end + slack && (!hit || (hit.k !== "deadlock" && hit.k !== "denied"))) hit = it;
      }
    }
    if (!hit) { tip.hidden = true; return; }
    tip.textContent = describe(hit);
    tip.hidden = false;
    tip.style.left = Math.min(event.clientX + 12, window.innerWidth - 430) + "px";
    tip.style.top = (event.clientY + 14) + "px";
  });
  scroll.addEventListener("mouseleave", () => { tip.hidden = true; });
  scroll.addEventListener("scroll", () => { view.top = scroll.scrollTop; draw(); });
  new ResizeObserver(() => { view.width = scroll.clientWidth; view.height = scroll.clientHeight; draw(); }).observe(scroll);

  // ---- loading -------------------------------------------------------------------------
  async function load() {
    const [from, to] = windowRange();
    const ticket = ++state.loading;
    const query = new URLSearchParams({ from: from.toFixed(3), to: state.custom ? to.toFixed(3) : "" });
    state.note = "loading…";
    draw();
    try {
      const response = await fetch("/api/timeline?" + query.toString(), { credentials: "same-origin" });
      const body = await response.json();
      if (ticket !== state.loading) return;
      if (!response.ok) { state.note = body.error || "the timeline could not be read"; draw(); return; }
      state.items = []; state.keys = new Set(); state.latest = 0;
      state.note = body.note || "";
      state.storeless = body.store === false;
      if (body.truncated) state.note = (state.note ? state.note + " · " : "") + "showing the latest " + body.items.length + " events of this window";
      addItems(body.items || []);
    } catch (error) {
      state.note = "the timeline could not be read";
      draw();
    }
  }

  for (const button of document.querySelectorAll(".segmented button")) {
    button.addEventListener("click", () => {
      state.by = button.dataset.by;
      for (const b of document.querySelectorAll(".segmented button")) b.classList.toggle("on", b === button);
      state.layoutDirty = true; scroll.scrollTop = 0; draw();
    });
  }
  function toInput(t) { const d = new Date(t * 1000 - new Date().getTimezoneOffset() * 60000); return d.toISOString().slice(0, 19); }
  $("window").addEventListener("change", (event) => {
    const value = event.target.value;
    $("custom-window").hidden = value !== "custom";
    if (value === "custom") {
      const [from, to] = windowRange();
      $("from").value = toInput(from); $("to").value = toInput(to);
      return;
    }
    state.custom = null; state.since = value === "since" ? state.asked : null;
    if (state.since === null) state.seconds = Number(value);
    load();
  });
  $("apply").addEventListener("click", () => {
    const from = Date.parse($("from").value) / 1000, to = Date.parse($("to").value) / 1000;
    if (!(from < to)) { state.note = "the window must end after it starts"; draw(); return; }
    state.custom = [from, to]; load();
  });

  window.LockyardTimeline = {
    setBoard(board) {
      state.board = board; state.skew = board.taken_at - Date.now() / 1000;
      state.busy = (board.locks || []).some((lock) => lock.holder !== null || lock.queue.length > 0);
      // The page opened before the store existed (a demo starting): read the window now.
      if (state.storeless && !board.note) { state.storeless = false; load(); }
      if (!state.custom) draw();
    },
    addItems(items) { if (!state.custom) addItems(items); },
    rows() { return state.rows.map((row) => row.name); },
    range() { return windowRange(); },
    latest() { return state.latest; },
    counts() {
      const out = {};
      for (const it of state.items) out[it.k] = (out[it.k] || 0) + 1;
      return out;
    },
  };
  // `#window=SECONDS` in the address picks the last minutes; `#from=T` (seconds since the
  // epoch) a run's window, from T to its latest event (`demo --web` asks for its own run's).
  const asked = Number((/window=(\d+)/.exec(location.hash) || [])[1]);
  const option = [...$("window").options].find((o) => Number(o.value) === asked);
  if (option) { $("window").value = option.value; state.seconds = asked; }
  const from = Number((/from=(\d+(?:\.\d+)?)/.exec(location.hash) || [])[1]);
  if (from > 0) {
    state.asked = state.since = from;
    const run = document.createElement("option");
    run.value = "since";
    run.textContent = "since " + new Date(from * 1000).toLocaleTimeString([], { hour12: false });
    $("window").prepend(run);
    $("window").value = "since";
  }
  setInterval(() => { if (!state.custom) draw(); }, 1000);
  load();
})();
