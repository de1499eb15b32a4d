// lockyard web: holders and queues, the wait-for graph, deadlocks, and the timeline.
// Every name shown comes from agents and files: it is put in the page as text only
// (textContent, canvas labels), never as HTML.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const state = { board: null, filter: "", contended: false, allFiles: null, shownCycles: new Map() };
  const RENDER_GAP_MS = 150;   // at most ~7 table/graph renders a second, whatever the churn
  const LAYOUT_GAP_MS = 1200;  // a new layout at most this often (nodes keep their places between)
  const BIG_GRAPH = 150;       // above this many nodes, a cheap layout and contended files only
  const PAST_DEADLOCK_MS = 60000;

  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }

  const age = (seconds) => window.LockyardFormat.duration(seconds);
  // The server's clock and this browser's may differ: ages are measured on the server's.
  let skew = 0;
  const now = () => Date.now() / 1000 + skew;

  // ---- header and deadlocks ------------------------------------------------------------
  function renderCounts(board) {
    const c = board.counts, box = $("counts");
    box.replaceChildren();
    const add = (n, label, cls) => { const b = el("b", n); box.append(b, " " + label + "  "); if (cls) b.className = cls; };
    add(c.held, "held"); add(c.waiting, "waiting"); add(c.agents, "agents");
    if (c.deadlocks) { const d = el("span", c.deadlocks + " DEADLOCK", "deadlock"); box.append(d); }
    $("location").textContent = board.location || "";
  }

  function cycleText(cycle) {
    const parts = [];
    for (const step of cycle.steps) parts.push(step.agent + " → " + step.lock + " →");
    parts.push(cycle.steps[0].agent);
    return parts.join(" ");
  }

  function renderDeadlocks(board) {
    const t = Date.now();
    for (const cycle of board.cycles) {
      const key = cycleText(cycle);
      const known = state.shownCycles.get(key);
      state.shownCycles.set(key, { cycle, first: known ? known.first : t, last: t, live: true, at: known ? known.at : undefined });
    }
    const liveKeys = new Set(board.cycles.map(cycleText));
    for (const [key, entry] of state.shownCycles) {
      if (!liveKeys.has(key)) entry.live = false;
      if (!entry.live && t - entry.last > PAST_DEADLOCK_MS) state.shownCycles.delete(key);
    }
    const list = $("deadlock-list");
    list.replaceChildren();
    for (const entry of [...state.shownCycles.values()].sort((a, b) => b.first - a.first)) {
      const li = el("li", null, entry.live ? "live" : "past");
      li.append(el("span", entry.live ? "DEADLOCK" : "broken", "tag"));
      li.append(cycleText(entry.cycle) + "  ");
      li.append(entry.live ? "— the monitor asks " : "— ");
      li.append(el("span", entry.cycle.victim, "victim"));
      li.append(entry.live ? " to give way (victim)" : " gave way (victim)");
      if (!entry.live && entry.at) li.append(el("span", "  at " + new Date(entry.at * 1000).toLocaleTimeString([], { hour12: false }), "dim"));
      list.append(li);
    }
    $("deadlocks").hidden = state.shownCycles.size === 0;
  }

  // A deadlock from the journal: often broken before any board showed it (an in-process
  // monitor answers in a millisecond), so it is listed from its record.
  function rememberDeadlock(it) {
    if (!Array.isArray(it.cycle) || !it.cycle.length || typeof it.a !== "string") return;
    const steps = it.cycle.map((s) => ({ agent: String(s[0]), lock: String(s[1]), holder: String(s[2]) }));
    const cycle = { steps, victim: it.a };
    const key = cycleText(cycle);
    const known = state.shownCycles.get(key);
    const t = Date.now();
    state.shownCycles.set(key, { cycle, first: known ? known.first : t, last: t, live: known ? known.live : false, at: it.s });
  }

  // ---- holders and queues ----------------------------------------------------------------
  function keep(lock) {
    if (state.contended && lock.queue.length === 0) return false;
    if (!state.filter) return true;
    const f = state.filter;
    if (lock.name.toLowerCase().includes(f)) return true;
    if (lock.holder && lock.holder.toLowerCase().includes(f)) return true;
    if ((lock.readers || []).some((r) => r.toLowerCase().includes(f))) return true;
    return lock.queue.some((q) => q.agent.toLowerCase().includes(f));
  }

  // Only the rows in view (and a margin around them) are in the page, between two spacers:
  // five hundred rows made afresh at every render would cost the browser most of its time in
  // style and layout, and the ages' tick would touch every one of them each second.
  const ROW_MARGIN = 15;
  const tableScroll = $("locks").parentElement;
  const tableView = { top: 0, height: 600, width: 500, rowHeight: 0 };
  let rowsPending = false;
  function scheduleRows() {
    if (rowsPending) return;
    rowsPending = true;
    requestAnimationFrame(() => { rowsPending = false; if (state.board) renderLocks(state.board); });
  }
  tableScroll.addEventListener("scroll", () => { tableView.top = tableScroll.scrollTop; scheduleRows(); });
  // Sizes come from the observer (after the browser's own layout), never read while drawing.
  new ResizeObserver(() => {
    tableView.height = tableScroll.clientHeight; tableView.width = tableScroll.clientWidth; scheduleRows();
  }).observe(tableScroll);

  // Column widths from what the rows' texts need (measured once per text on a canvas, not in
  // the page's layout), over every row kept, not only those in view, so that scrolling
  // never moves the columns. The holder comes first: up to nearly half the room is its, more
  // when the file and queue columns need less; a holder wider still wraps (never cut). The
  // file and the queue share the rest (each shows whole on hover).
  const measure = document.createElement("canvas").getContext("2d");
  const widths = new Map();
  const CELL_PAD = 19, MIN_COLUMN = 72, WAITER_EXTRA = 45;  // padding; a waiter's age and gap
  const BOLD = 1.08;  // a holder in a cycle and the headers are bold: wider than measured
  function textWidth(text) {
    let width = widths.get(text);
    if (width === undefined) {
      if (widths.size > 20000) widths.clear();
      if (!widths.size) { const style = getComputedStyle($("locks")); measure.font = style.fontSize + " " + style.fontFamily; }
      width = measure.measureText(text).width;
      widths.set(text, width);
    }
    return width;
  }
  function holderText(lock) {
    const readers = lock.readers || [];
    if (readers.length) return "shared: " + readers.join(", ");
    return lock.holder === null ? (lock.problem ? "unreadable" : "free") : lock.holder;
  }
  function queueWidth(lock) {
    let width = 0;
    if ((lock.readers || []).length && lock.holder !== null) width += textWidth(lock.holder) + WAITER_EXTRA;
    for (const w of lock.queue) width += textWidth(w.agent) + WAITER_EXTRA;
    return width;
  }
  const shownColumns = { key: "" };
  function setColumns(kept) {
    const need = (text) => Math.ceil(textWidth(text) * BOLD) + CELL_PAD;
    let file = need("file"), holder = need("holder"), queue = need("queue, in order"), fence = need("fence");
    for (const lock of kept) {
      file = Math.max(file, Math.ceil(textWidth(lock.name)) + CELL_PAD);
      holder = Math.max(holder, need(holderText(lock)));
      queue = Math.max(queue, Math.ceil(queueWidth(lock)) + CELL_PAD);
      if (lock.fence !== null) fence = Math.max(fence, need(String(lock.fence)));
    }
    const held = need("00m00s");
    const room = Math.max(tableView.width - held - fence, 3 * MIN_COLUMN);
    let holderWidth = Math.min(holder, Math.max(MIN_COLUMN, Math.floor(room * 0.45)));
    let rest = room - holderWidth, fileWidth;
    if (file + queue <= rest) {
      holderWidth += Math.min(rest - file - queue, holder - holderWidth);
      rest = room - holderWidth;
      fileWidth = file;
    } else if (file <= rest / 2) fileWidth = file;
    else if (queue <= rest / 2) fileWidth = rest - queue;
    else fileWidth = Math.floor(rest / 2);
    fileWidth = Math.max(MIN_COLUMN, fileWidth);
    const columns = [fileWidth, holderWidth, held, fence, Math.max(MIN_COLUMN, rest - fileWidth)];
    const key = columns.join(" ");
    if (key === shownColumns.key) return;
    shownColumns.key = key;
    [...$("locks").querySelectorAll("col")].forEach((col, i) => { col.style.width = columns[i] + "px"; });
  }

  function renderLocks(board) {
    const t = now();
    const cycleAgents = new Set(), cycleLocks = new Set(), victims = new Set();
    for (const cycle of board.cycles) {
      victims.add(cycle.victim);
      for (const s of cycle.steps) { cycleAgents.add(s.agent); cycleLocks.add(s.lock); }
    }
    const body = document.createElement("tbody");
    const kept = board.locks.filter(keep), shown = kept.length;
    setColumns(kept);
    const height = tableView.rowHeight || 24;
    const first = Math.max(0, Math.floor(tableView.top / height) - ROW_MARGIN);
    const last = Math.min(shown, first + Math.ceil(tableView.height / height) + 2 * ROW_MARGIN);
    for (const lock of kept.slice(first, last)) {
      const tr = el("tr");
      if (cycleLocks.has(lock.name)) tr.className = "cycle";
      const name = el("td", lock.name, cycleLocks.has(lock.name) ? "in-cycle" : "");
      name.title = lock.name;
      let holder;
      const readers = lock.readers || [];
      if (readers.length) {
        // Readers hold it together; a holder beside them is the next writer, waiting for them.
        holder = el("td", holderText(lock), "shared");
        holder.title = readers.join(", ") + " hold it shared" + (lock.holder ? "; " + lock.holder + " waits for them to leave" : "");
      } else if (lock.holder === null) holder = el("td", lock.problem ? "unreadable" : "free", "free");
      else {
        holder = el("td", lock.holder, lock.liveness === "dead" ? "deadholder" : (cycleAgents.has(lock.holder) ? "in-cycle" : ""));
        holder.title = lock.holder + (lock.pid ? "  pid " + lock.pid + "@" + lock.host : "") + (lock.liveness === "dead" ? " (dead)" : "");
      }
      holder.classList.add("holder");
      const since = readers.length ? null : lock.held_since;  // a writer waiting for readers holds nothing yet
      const held = el("td", since === null ? "-" : age(t - since), "num");
      held.dataset.since = since === null ? "" : since;
      const fence = el("td", lock.fence === null ? "-" : lock.fence, "num");
      const queue = el("td", null, "queue");
      if (readers.length && lock.holder !== null) {
        const next = el("span", lock.holder, cycleAgents.has(lock.holder) ? "in-cycle" : "");
        next.append(el("span", "next", "next-tag"));
        queue.append(next);
      } else if (!lock.queue.length) queue.append(el("span", "-", "dim"));
      for (const w of lock.queue) {
        const span = el("span", w.agent, w.dead ? "dead" : (cycleAgents.has(w.agent) ? "in-cycle" : ""));
        if (victims.has(w.agent) && cycleAgents.has(w.agent) && cycleLocks.has(lock.name)) span.append(el("span", "victim", "victim-tag"));
        const a = el("span", age(t - w.since), "age");
        a.dataset.since = w.since;
        span.append(a);
        queue.append(span);
      }
      queue.title = lock.queue.map((w) => w.agent).join(", ");
      tr.append(name, holder, held, fence, queue);
      body.append(tr);
    }
    $("locks").replaceChild(body, $("locks").tBodies[0]);
    $("locks-above").style.height = first * height + "px";
    $("locks-below").style.height = (shown - last) * height + "px";
    if (!tableView.rowHeight && body.rows.length) {
      // Once: one layout. The lowest row (a holder that wraps makes its row taller).
      tableView.rowHeight = Math.min(...[...body.rows].map((row) => row.getBoundingClientRect().height));
      if (shown > last) scheduleRows();
    }
    const empty = $("locks-empty");
    empty.hidden = shown > 0;
    empty.textContent = board.note ? board.note : (board.locks.length ? "No lock matches the filter." : "Nothing is held or awaited.");
  }

  function tickAges() {
    const t = now();
    for (const cell of document.querySelectorAll("[data-since]")) {
      if (cell.dataset.since) cell.textContent = age(t - Number(cell.dataset.since));
    }
  }

  // ---- the wait-for graph ----------------------------------------------------------------
  let cy = null, lastLayout = 0, layoutPending = false;

  function graphStyle() {
    return [
      { selector: "node", style: { "label": "data(label)", "font-size": 10, "text-valign": "bottom", "text-margin-y": 3, "color": "#1d2430", "text-max-width": 140, "text-wrap": "ellipsis", "min-zoomed-font-size": 7,
        "text-background-color": "#ffffff", "text-background-opacity": 0.8, "text-background-padding": 1 } },
      { selector: "node.agent", style: { "shape": "ellipse", "width": 22, "height": 22, "background-color": "#6a4fb3" } },
      { selector: "node.file", style: { "shape": "round-rectangle", "width": 16, "height": 12, "background-color": "#dfe7ef", "border-width": 1, "border-color": "#4f6b86" } },
      { selector: "edge", style: { "width": 1.6, "curve-style": "bezier", "target-arrow-shape": "triangle", "arrow-scale": 0.8 } },
      { selector: "edge.hold", style: { "line-color": "#3b82c4", "target-arrow-color": "#3b82c4" } },
      { selector: "edge.shared", style: { "line-style": "dotted", "width": 2.4 } },
      { selector: "edge.wait", style: { "line-color": "#e59a1c", "target-arrow-color": "#e59a1c", "line-style": "dashed" } },
      { selector: "edge.cycle", style: { "line-color": "#d62f2f", "target-arrow-color": "#d62f2f", "width": 3.5, "z-index": 10 } },
      { selector: "node.cycle", style: { "border-width": 3, "border-color": "#d62f2f", "color": "#d62f2f", "font-weight": "bold" } },
      { selector: "node.agent.cycle", style: { "background-color": "#d62f2f" } },
      { selector: "node.victim", style: { "border-width": 5, "border-style": "double", "border-color": "#7a0000", "width": 30, "height": 30 } },
    ];
  }

  function graphElements(board) {
    const small = board.locks.filter((l) => l.holder !== null || (l.readers || []).length).length + board.counts.agents <= BIG_GRAPH;
    const all = state.allFiles === null ? small : state.allFiles;
    const cycleEdges = new Set(), cycleAgents = new Set(), cycleLocks = new Set(), victims = new Set();
    for (const cycle of board.cycles) {
      victims.add(cycle.victim);
      for (const s of cycle.steps) {
        cycleEdges.add("w|" + s.agent + "|" + s.lock); cycleEdges.add("h|" + s.lock + "|" + s.holder);
        cycleAgents.add(s.agent); cycleLocks.add(s.lock);
      }
    }
    const nodes = new Map(), edges = [];
    const agent = (name) => {
      const id = "a|" + name;
      if (!nodes.has(id)) {
        const classes = ["agent"];
        if (cycleAgents.has(name)) classes.push("cycle");
        if (victims.has(name) && cycleAgents.has(name)) classes.push("victim");
        nodes.set(id, { group: "nodes", data: { id, label: victims.has(name) && cycleAgents.has(name) ? name + " (victim)" : name }, classes: classes.join(" ") });
      }
      return id;
    };
    let files = 0, hidden = 0;
    for (const lock of board.locks) {
      const readers = lock.readers || [];
      if (lock.holder === null && !lock.queue.length && !readers.length) continue;
      if (!all && !lock.queue.length && !(readers.length && lock.holder !== null)) { hidden++; continue; }
      if (!keep(lock)) continue;
      const id = "f|" + lock.name;
      files++;
      nodes.set(id, { group: "nodes", data: { id, label: lock.name }, classes: "file" + (cycleLocks.has(lock.name) ? " cycle" : "") });
      for (const reader of readers) {
        const key = "h|" + lock.name + "|" + reader;
        edges.push({ group: "edges", data: { id: key, source: id, target: agent(reader) }, classes: "hold shared" + (cycleEdges.has(key) ? " cycle" : "") });
      }
      if (lock.holder !== null && readers.length) {
        // The next writer has the lock's line and waits for the readers: a wait, not a hold.
        const key = "w|" + lock.holder + "|" + lock.name;
        edges.push({ group: "edges", data: { id: key, source: agent(lock.holder), target: id }, classes: "wait" + (cycleEdges.has(key) ? " cycle" : "") });
      } else if (lock.holder !== null) {
        const key = "h|" + lock.name + "|" + lock.holder;
        edges.push({ group: "edges", data: { id: key, source: id, target: agent(lock.holder) }, classes: "hold" + (cycleEdges.has(key) ? " cycle" : "") });
      }
      for (const w of lock.queue) {
        if (w.dead) continue;
        const key = "w|" + w.agent + "|" + lock.name;
        edges.push({ group: "edges", data: { id: key, source: agent(w.agent), target: id }, classes: "wait" + (cycleEdges.has(key) ? " cycle" : "") });
      }
    }
    return { nodes: [...nodes.values()], edges, all, files, hidden };
  }

  function renderGraph(board) {
    if (!window.cytoscape) return;
    if (!cy) {
      cy = window.cytoscape({ container: $("graph"), style: graphStyle(), minZoom: 0.1, maxZoom: 3, boxSelectionEnabled: false });
      // A name too small to draw when zoomed out (many nodes) is shown on hover, as text.
      cy.on("mouseover", "node", (event) => { $("graph").title = event.target.data("label"); });
      cy.on("mouseout", "node", () => { $("graph").title = ""; });
      // A window made smaller or larger: the graph is fitted to its new box (it was left cut).
      let fitPending = false;
      new ResizeObserver(() => {
        if (fitPending) return;
        fitPending = true;
        requestAnimationFrame(() => { fitPending = false; cy.resize(); fitGraph(); });
      }).observe($("graph"));
    }
    const { nodes, edges, all, files, hidden } = graphElements(board);
    $("all-files").checked = all;
    const wanted = new Set([...nodes, ...edges].map((e) => e.data.id));
    let added = 0;
    // A new node appears beside a neighbour already drawn (else amid the view), not at random
    // off screen: the next layout (at most LAYOUT_GAP_MS away) then places it for good.
    const view = cy.extent(), middle = { x: (view.x1 + view.x2) / 2, y: (view.y1 + view.y2) / 2 };
    const near = (id) => {
      for (const edge of edges) {
        const other = edge.data.source === id ? edge.data.target : edge.data.target === id ? edge.data.source : null;
        const drawn = other === null ? null : cy.getElementById(other);
        if (drawn && drawn.nonempty()) return drawn.position();
      }
      return middle;
    };
    cy.batch(() => {
      cy.elements().forEach((e) => { if (!wanted.has(e.id())) { e.remove(); added++; } });
      for (const item of [...nodes, ...edges]) {
        const existing = cy.getElementById(item.data.id);
        if (existing.nonempty()) {
          existing.classes(item.classes);
          if (item.group === "nodes") existing.data("label", item.data.label);
        } else {
          if (item.group === "nodes") {
            const at = near(item.data.id);
            item.position = { x: at.x + (Math.random() - 0.5) * 60, y: at.y + (Math.random() - 0.5) * 60 };
          }
          cy.add(item);
          added++;
        }
      }
    });
    if (added) scheduleLayout();
    const note = $("graph-note");
    if (!nodes.length) note.textContent = board.locks.length ? "No one waits for a lock." + (hidden ? "" : "") : "Nothing is held or awaited.";
    else note.textContent = files + " files, " + (nodes.length - files) + " agents" + (hidden ? " · " + hidden + " held files no one waits for are hidden (tick “every held file”)" : "");
  }

  // The whole graph in view, never blown up past 1.5x (two nodes filled the panel at 3x).
  function fitGraph() {
    cy.fit(undefined, 24);
    if (cy.zoom() > 1.5) { cy.zoom(1.5); cy.center(); }
  }

  function scheduleLayout() {
    if (layoutPending) return;
    layoutPending = true;
    const wait = Math.max(0, LAYOUT_GAP_MS - (Date.now() - lastLayout));
    setTimeout(() => {
      layoutPending = false;
      lastLayout = Date.now();
      const big = cy.nodes().length > BIG_GRAPH;
      const options = big
        ? { name: "concentric", animate: false, minNodeSpacing: 6, concentric: (n) => n.degree(), levelWidth: () => 2 }
        : { name: "cose", animate: false, randomize: false, nodeRepulsion: () => 9000, idealEdgeLength: () => 50, numIter: 400, padding: 20 };
      cy.layout(options).run();
      fitGraph();
    }, wait);
  }

  // ---- board stream --------------------------------------------------------------------
  let renderTimer = null, lastRender = 0;
  function scheduleRender() {
    if (renderTimer) return;
    renderTimer = setTimeout(() => {
      renderTimer = null;
      lastRender = Date.now();
      renderAll();
    }, Math.max(0, RENDER_GAP_MS - (Date.now() - lastRender)));
  }

  function renderAll() {
    const board = state.board;
    if (!board) return;
    renderCounts(board);
    renderDeadlocks(board);
    renderLocks(board);
    renderGraph(board);
    if (window.LockyardTimeline) window.LockyardTimeline.setBoard(board);
  }

  function connect() {
    const source = new EventSource("/events");
    const pill = $("connection");
    source.onopen = () => { pill.textContent = "live"; pill.className = "pill live"; };
    source.onerror = () => { pill.textContent = "reconnecting…"; pill.className = "pill lost"; };
    source.addEventListener("board", (event) => {
      let board;
      try { board = JSON.parse(event.data); } catch (e) { return; }
      if (!board || !Array.isArray(board.locks)) return;
      skew = board.taken_at - Date.now() / 1000;
      state.board = board;
      document.body.dataset.boards = String(Number(document.body.dataset.boards || 0) + 1);
      scheduleRender();
    });
    source.addEventListener("journal", (event) => {
      let items;
      try { items = JSON.parse(event.data); } catch (e) { return; }
      if (!Array.isArray(items)) return;
      for (const it of items) if (it && it.k === "deadlock") rememberDeadlock(it);
      if (window.LockyardTimeline) window.LockyardTimeline.addItems(items);
      scheduleRender();
    });
  }

  // ---- controls ------------------------------------------------------------------------
  $("filter").addEventListener("input", (e) => { state.filter = e.target.value.trim().toLowerCase(); scheduleRender(); });
  $("contended").addEventListener("change", (e) => { state.contended = e.target.checked; scheduleRender(); });
  $("all-files").addEventListener("change", (e) => { state.allFiles = e.target.checked; scheduleRender(); });
  setInterval(tickAges, 1000);
  // For the page's own tests and a curious person at the console: read-only looks.
  window.lockyardView = Object.freeze({
    graph: () => (cy ? cy.elements().map((e) => ({ id: e.id(), classes: e.classes(), label: e.data("label") || "" })) : []),
    boards: () => Number(document.body.dataset.boards || 0),
  });
  connect();
})();
