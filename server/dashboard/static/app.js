// kyu dashboard: fills the page shells from the REST API and keeps them
// live with the server's event stream. Plain JavaScript, no build step.
"use strict";
(() => {
  const body = document.body;
  const BASE = body.dataset.base;
  const API = BASE + "/api/v1";
  const PAGE = body.dataset.page;
  const READONLY = body.dataset.readonly === "true";
  const STATES = ["scheduled", "pending", "active", "retry", "completed", "failed", "cancelled"];
  const FINAL = new Set(["completed", "failed", "cancelled"]);
  const app = document.getElementById("app");

  // ---- helpers ----

  // el builds an element: attrs sets attributes (on* keys add listeners),
  // children are nodes or strings.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else if (k === "text") e.textContent = v;
      else e.setAttribute(k, v === true ? "" : v);
    }
    e.append(...nodes(children));
    return e;
  }

  // nodes flattens children into nodes, dropping empty ones.
  function nodes(children) {
    return children.flat(Infinity).filter((c) => c !== undefined && c !== null && c !== false)
      .map((c) => (c instanceof Node ? c : String(c)));
  }

  // show replaces the page's content.
  function show(...children) { app.replaceChildren(...nodes(children)); }

  function svg(tag, attrs) {
    const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  }

  class APIError extends Error {
    constructor(status, msg) { super(msg); this.status = status; }
  }

  // api calls the REST API with the session cookie; every state change is
  // a JSON request, as the server requires.
  async function api(method, path, data) {
    const opt = { method, headers: { Accept: "application/json" }, credentials: "same-origin" };
    if (method !== "GET") {
      opt.headers["Content-Type"] = "application/json";
      if (data !== undefined) opt.body = JSON.stringify(data);
    }
    const r = await fetch(API + path, opt);
    if (r.status === 401) {
      location.href = BASE + "/login?next=" + encodeURIComponent(location.pathname.slice(BASE.length) + location.search);
      throw new APIError(401, "log in again");
    }
    const text = await r.text();
    let out = null;
    if (text) { try { out = JSON.parse(text); } catch (_) { out = null; } }
    if (!r.ok) throw new APIError(r.status, out && out.error ? out.error.message : r.status + " " + r.statusText);
    return out;
  }

  function flash(msg, bad) {
    const f = document.getElementById("flash");
    if (!f) return;
    f.textContent = msg;
    f.className = bad ? "bad" : "";
  }

  // time shows a time in the browser's zone, with UTC on hover.
  function time(iso) {
    if (!iso || iso.startsWith("0001-")) return el("span", { class: "muted" }, "—");
    const d = new Date(iso);
    return el("time", { datetime: iso, title: d.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC") }, d.toLocaleString());
  }

  function ago(iso) {
    if (!iso || iso.startsWith("0001-")) return "—";
    return dur(Date.now() - new Date(iso).getTime());
  }

  function dur(ms) {
    if (ms < 0) ms = 0;
    const s = Math.round(ms / 1000);
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
    if (s < 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
    return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
  }

  function stateBadge(s) { return el("span", { class: "badge s-" + s, "data-state": s }, s); }
  function jobLink(id) { return el("a", { href: BASE + "/jobs/" + encodeURIComponent(id), class: "mono" }, id); }
  function sum(counts) { return Object.values(counts || {}).reduce((a, b) => a + b, 0); }

  function markUpdated() {
    const u = document.getElementById("updated");
    const now = new Date();
    u.textContent = "updated " + now.toLocaleTimeString();
    u.title = now.toISOString();
  }

  // confirmDialog asks in the page's own dialog; resolves true on Confirm.
  function confirmDialog(text) {
    const d = document.getElementById("confirm");
    document.getElementById("confirm-text").textContent = text;
    return new Promise((resolve) => {
      d.addEventListener("close", () => resolve(d.returnValue === "ok"), { once: true });
      d.returnValue = "";
      d.showModal();
      document.getElementById("confirm-no").focus();
    });
  }

  // act runs a state change, reports it and reloads the page's data.
  async function act(label, fn) {
    try {
      const msg = await fn();
      flash(msg || label + ": done");
    } catch (e) {
      flash(label + ": " + e.message, true);
    }
    refresh();
  }

  // ---- live updates ----

  let source = null;
  let loading = false, again = false, lastLoad = 0, timer = null;
  const liveDot = document.getElementById("live");

  // refresh reloads the page's data, at most about once a second.
  function refresh() {
    if (document.hidden) return;
    const wait = lastLoad + 1000 - Date.now();
    if (loading) { again = true; return; }
    if (wait > 0) { if (!timer) timer = setTimeout(() => { timer = null; refresh(); }, wait); return; }
    loading = true;
    lastLoad = Date.now();
    const focus = focusKey(document.activeElement);
    Promise.resolve(page.load()).then(() => { restoreFocus(focus); markUpdated(); }, (e) => flash(e.message, true)).finally(() => {
      loading = false;
      if (again) { again = false; refresh(); }
    });
  }

  // focusKey names the focused control so that it can be focused again
  // after the page's content is rebuilt.
  function focusKey(e) {
    if (!e || !app.contains(e)) return null;
    if (e.id) return "#" + CSS.escape(e.id);
    if (e.dataset && e.dataset.key) return '[data-key="' + CSS.escape(e.dataset.key) + '"]';
    return null;
  }

  function restoreFocus(key) {
    if (!key || app.contains(document.activeElement)) return;
    const e = app.querySelector(key);
    if (e) e.focus();
  }

  function connect() {
    if (source || !page.live) return;
    source = new EventSource(API + "/events", { withCredentials: true });
    source.onopen = () => liveDot.classList.add("on");
    source.onerror = () => {
      liveDot.classList.remove("on");
      // The browser retries a dropped stream by itself, but not one the
      // server refused (a session that expired, too many streams): try
      // again in a while, and reload the data, which leads to the login
      // page when the session is over.
      if (source && source.readyState === EventSource.CLOSED) {
        disconnect();
        setTimeout(() => { if (!document.hidden) { connect(); refresh(); } }, 5000);
      }
    };
    for (const kind of ["job", "queue", "queues", "worker"]) {
      source.addEventListener(kind, (ev) => {
        let data = null;
        try { data = JSON.parse(ev.data); } catch (_) { return; }
        if (page.live(kind, data)) refresh();
      });
    }
  }

  function disconnect() {
    if (source) { source.close(); source = null; }
    liveDot.classList.remove("on");
  }

  document.addEventListener("visibilitychange", () => {
    if (document.hidden) { disconnect(); return; }
    connect();
    refresh();
  });

  // ---- pages ----

  async function loadQueuesAndWorkers() {
    const [q, w] = await Promise.all([api("GET", "/queues"), api("GET", "/workers")]);
    const workers = w.workers || [];
    const perQueue = {};
    for (const wk of workers) if (!wk.dead) for (const name of wk.queues || []) perQueue[name] = (perQueue[name] || 0) + 1;
    return { queues: q.queues || [], workers, perQueue };
  }

  function queueTable(data, withActions) {
    const head = el("tr", {}, el("th", {}, "Queue"), STATES.map((s) => el("th", { class: "num" }, s)),
      el("th", { class: "num" }, "Latency"), el("th", { class: "num", title: "Failed attempts among those that ended in the last 5 minutes" }, "Errors 5m"),
      el("th", { class: "num", title: "Failed attempts among those that ended in the last hour" }, "Errors 1h"),
      el("th", {}, "Paused"), el("th", { class: "num" }, "Workers"),
      withActions && !READONLY ? el("th", {}, "Actions") : null);
    const rows = data.queues.map((q) => {
      const c = q.counts || {};
      const workers = data.perQueue[q.name] || 0;
      const backlog = (c.pending || 0) > 0;
      const warn = backlog && workers === 0 && !q.paused;
      return el("tr", { "data-queue": q.name },
        el("td", {}, el("a", { href: BASE + "/jobs?queue=" + encodeURIComponent(q.name) }, q.name),
          warn ? el("span", { class: "warn", title: "jobs are waiting and no worker serves this queue" }, " ⚠ no worker") : null),
        STATES.map((s) => el("td", { class: "num" }, c[s] ? el("a", { href: BASE + "/jobs?queue=" + encodeURIComponent(q.name) + "&state=" + s }, c[s]) : "0")),
        el("td", { class: "num" }, q.oldest_pending ? ago(q.oldest_pending) : "—"),
        errorRate(q.last_5m, "err-5m", "the last 5 minutes"), errorRate(q.last_hour, "err-1h", "the last hour"),
        el("td", { class: "paused" }, q.paused ? "paused" : "no"),
        el("td", { class: "num" }, workers),
        withActions && !READONLY ? el("td", {}, queueActions(q)) : null);
    });
    return el("div", { class: "scroll" }, el("table", { id: "queues" }, el("thead", {}, head), el("tbody", {}, rows)));
  }

  // errorRate is a queue's cell of failed attempts among those that ended
  // in a window, as a percentage.
  function errorRate(c, cls, window) {
    if (!c || !c.processed) return el("td", { class: "num " + cls, title: "no attempt ended in " + window }, "—");
    const pct = (100 * c.failed) / c.processed;
    return el("td", { class: "num " + cls + (c.failed ? " bad" : ""), title: c.failed + " failed of " + c.processed + " ended in " + window },
      (pct > 0 && pct < 0.1 ? "<0.1" : pct.toFixed(pct >= 10 || pct === 0 ? 0 : 1)) + "%");
  }

  // purgeChoice keeps each queue's chosen purge state across live updates.
  const purgeChoice = {};

  function queueActions(q) {
    const name = encodeURIComponent(q.name);
    const c = q.counts || {};
    const purgeState = el("select", { "aria-label": "State to purge in " + q.name, class: "purge-state", "data-key": "purge-state-" + q.name, onchange: (e) => { purgeChoice[q.name] = e.target.value; } },
      STATES.filter((s) => s !== "active").map((s) => el("option", { value: s, selected: purgeChoice[q.name] === s }, s + " (" + (c[s] || 0) + ")")));
    return el("div", { class: "actions" },
      q.paused
        ? el("button", { class: "resume", "data-key": "pause-toggle-" + q.name, onclick: () => act("Resume " + q.name, () => api("POST", "/queues/" + name + "/resume").then(() => q.name + " resumed")) }, "Resume")
        : el("button", { class: "pause", "data-key": "pause-toggle-" + q.name, onclick: () => act("Pause " + q.name, () => api("POST", "/queues/" + name + "/pause").then(() => q.name + " paused")) }, "Pause"),
      el("button", {
        class: "retry-failed", "data-key": "retry-failed-" + q.name, disabled: !c.failed,
        onclick: async () => {
          if (!(await confirmDialog("Retry all " + (c.failed || 0) + " failed jobs of " + q.name + "?"))) return;
          act("Retry failed", () => api("POST", "/queues/" + name + "/retry?state=failed").then((r) => r.count + " jobs retried"));
        },
      }, "Retry failed"),
      purgeState,
      el("button", {
        class: "danger purge", "data-key": "purge-" + q.name,
        onclick: async () => {
          const st = purgeState.value;
          if (!(await confirmDialog("Delete all " + (c[st] || 0) + " " + st + " jobs of " + q.name + "? This cannot be undone."))) return;
          act("Purge", () => api("DELETE", "/queues/" + name + "/jobs?state=" + st).then((r) => r.count + " jobs deleted"));
        },
      }, "Purge"));
  }

  const overview = {
    window: 60,
    async load() {
      const [qw, stats] = await Promise.all([loadQueuesAndWorkers(), api("GET", "/stats?minutes=" + this.window)]);
      const totals = {};
      for (const q of qw.queues) for (const s of STATES) totals[s] = (totals[s] || 0) + ((q.counts || {})[s] || 0);
      const cards = el("div", { class: "cards", id: "counts" }, STATES.map((s) =>
        el("a", { class: "card", href: BASE + "/jobs?state=" + s, "data-state": s }, el("span", { class: "n" }, totals[s] || 0), s)));
      const warnings = qw.queues.filter((q) => ((q.counts || {}).pending || 0) > 0 && !qw.perQueue[q.name] && !q.paused)
        .map((q) => el("p", { class: "warn", role: "alert" }, "Queue " + q.name + " has " + q.counts.pending + " pending jobs and no worker."));
      const sel = el("select", { id: "window", "aria-label": "Chart window", onchange: (e) => { this.window = +e.target.value; refresh(); } },
        el("option", { value: 60, selected: this.window === 60 }, "last hour"), el("option", { value: 1440, selected: this.window === 1440 }, "last 24 hours"));
      show(
        el("h2", {}, "Jobs by state"), cards, warnings,
        el("h2", {}, "Throughput"),
        el("div", { class: "bar" }, sel, el("span", { class: "legend" }, el("span", { class: "p" }, "processed"), el("span", { class: "f" }, "failed")),
          el("span", { class: "muted" }, "total processed " + stats.processed + ", failed " + stats.failed)),
        chart(stats.minutes || []),
        el("h2", {}, "Queues"), qw.queues.length ? queueTable(qw, false) : el("p", { class: "muted" }, "No queues yet."),
        el("h2", {}, "Server"), el("dl", { class: "fields" }, el("dt", {}, "Store"), el("dd", {}, document.getElementById("store").textContent),
          el("dt", {}, "Workers"), el("dd", {}, qw.workers.length), el("dt", {}, "Mode"), el("dd", {}, READONLY ? "read-only" : "read-write")));
    },
    live(kind) { return kind === "queues" || kind === "queue" || kind === "worker"; },
  };

  // chart draws processed and failed per minute as bars.
  function chart(minutes) {
    // One unit per CSS pixel of the page's width, so labels keep their size.
    const W = Math.max(300, Math.round(app.clientWidth || 720)), H = 180, pad = 24;
    const max = Math.max(1, ...minutes.map((m) => m.processed));
    const s = svg("svg", { viewBox: `0 0 ${W} ${H + pad}`, role: "img", "aria-label": "Processed and failed jobs per minute" });
    s.append(svg("line", { x1: 0, y1: H, x2: W, y2: H, class: "axis" }));
    const bw = W / Math.max(1, minutes.length);
    minutes.forEach((m, i) => {
      const ph = (m.processed / max) * (H - 10), fh = (m.failed / max) * (H - 10);
      const t = svg("title", {});
      t.textContent = new Date(m.minute).toLocaleTimeString() + ": " + m.processed + " processed, " + m.failed + " failed";
      const g = svg("g", {});
      g.append(t, svg("rect", { x: i * bw, y: H - ph, width: Math.max(1, bw - 1), height: ph, class: "p" }),
        svg("rect", { x: i * bw, y: H - fh, width: Math.max(1, bw - 1), height: fh, class: "f" }));
      s.append(g);
    });
    const lab = (x, text, anchor) => { const t = svg("text", { x, y: H + 16, "text-anchor": anchor }); t.textContent = text; s.append(t); };
    if (minutes.length) {
      lab(2, new Date(minutes[0].minute).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }), "start");
      lab(W - 2, "now", "end");
    }
    const top = svg("text", { x: 2, y: 12 }); top.textContent = "max " + max + "/min"; s.append(top);
    return el("div", { class: "chart", id: "chart" }, s);
  }

  const jobs = {
    cursor: "", stack: [], selected: new Set(),
    filter() {
      const p = new URLSearchParams(location.search);
      return { state: p.get("state") || "", queue: p.get("queue") || "", type: p.get("type") || "", tag: p.get("tag") || "", q: p.get("q") || "", order: p.get("order") || "newest" };
    },
    setFilter(f) {
      const p = new URLSearchParams();
      for (const [k, v] of Object.entries(f)) if (v && !(k === "order" && v === "newest")) p.set(k, v);
      history.replaceState(null, "", location.pathname + (p.toString() ? "?" + p : ""));
      this.cursor = ""; this.stack = []; this.selected.clear();
      refresh();
    },
    query(f, extra) {
      const p = new URLSearchParams();
      for (const k of ["state", "queue", "type", "tag", "q", "order"]) if (f[k]) p.set(k, f[k]);
      for (const [k, v] of Object.entries(extra || {})) if (v) p.set(k, v);
      return p.toString();
    },
    async load() {
      const f = this.filter();
      const [ql, list] = await Promise.all([api("GET", "/queues"), api("GET", "/jobs?" + this.query(f, { limit: 50, cursor: this.cursor }))]);
      const queues = ql.queues || [];
      const counts = {};
      for (const q of queues) if (!f.queue || q.name === f.queue) for (const s of STATES) counts[s] = (counts[s] || 0) + ((q.counts || {})[s] || 0);
      const tabs = el("div", { class: "tabs", role: "navigation", "aria-label": "States" },
        el("a", { href: "?" + this.query({ ...f, state: "" }), "data-key": "tab-all", "aria-current": f.state === "" ? "true" : "false", "data-state": "", onclick: (e) => { e.preventDefault(); this.setFilter({ ...f, state: "" }); } }, "all (" + sum(counts) + ")"),
        STATES.map((s) => el("a", { href: "?" + this.query({ ...f, state: s }), "data-state": s, "data-key": "tab-" + s, "aria-current": f.state === s ? "true" : "false", onclick: (e) => { e.preventDefault(); this.setFilter({ ...f, state: s }); } }, s + " (" + (counts[s] || 0) + ")")));
      const key = JSON.stringify(f);
      if (this.key !== key || !app.contains(this.listBox)) {
        this.key = key;
        this.tabsBox = el("div");
        this.datalist = el("datalist", { id: "queue-names" });
        this.listBox = el("div");
        show(this.tabsBox, this.form(f), this.datalist, READONLY ? null : this.actions(f), this.listBox);
      }
      this.tabsBox.replaceChildren(tabs);
      this.datalist.replaceChildren(...queues.map((q) => el("option", { value: q.name })));
      this.listBox.replaceChildren(...nodes([this.table(list)]));
    },
    form(f) {
      const input = (name, label, value, list) => el("div", {}, el("label", { for: "f-" + name }, label), el("input", { id: "f-" + name, name, value, list, size: 14 }));
      const form = el("form", {
        class: "filters", id: "filters", role: "search",
        onsubmit: (e) => { e.preventDefault(); const d = new FormData(e.target); this.setFilter({ ...f, queue: d.get("queue"), type: d.get("type"), tag: d.get("tag"), q: d.get("q"), order: d.get("order") }); },
      },
      input("queue", "Queue", f.queue, "queue-names"),
      input("type", "Type", f.type), input("tag", "Tag", f.tag), input("q", "Search id prefix, title", f.q),
      el("div", {}, el("label", { for: "f-order" }, "Order"), el("select", { id: "f-order", name: "order" },
        el("option", { value: "newest", selected: f.order === "newest" }, "newest first"), el("option", { value: "oldest", selected: f.order === "oldest" }, "oldest first"))),
      el("button", { type: "submit" }, "Filter"));
      return form;
    },
    table(list) {
      const items = list.jobs || [];
      const ids = new Set(items.map((j) => j.id));
      for (const id of [...this.selected]) if (!ids.has(id)) this.selected.delete(id);
      const all = el("input", { type: "checkbox", "aria-label": "Select all on this page", checked: items.length > 0 && items.every((j) => this.selected.has(j.id)),
        onchange: (e) => { for (const j of items) e.target.checked ? this.selected.add(j.id) : this.selected.delete(j.id); refresh(); } });
      const rows = items.map((j) => el("tr", { "data-id": j.id, "data-state": j.state },
        READONLY ? null : el("td", {}, el("input", { type: "checkbox", class: "pick", "data-key": "pick-" + j.id, "aria-label": "Select " + j.id, checked: this.selected.has(j.id), onchange: (e) => { e.target.checked ? this.selected.add(j.id) : this.selected.delete(j.id); } })),
        el("td", {}, jobLink(j.id)), el("td", {}, stateBadge(j.state)), el("td", {}, j.type), el("td", {}, j.queue),
        el("td", { class: "wrap" }, j.title || ""), el("td", { class: "num" }, j.attempt + "/" + j.max_attempts),
        el("td", {}, time(j.created_at)), el("td", {}, time(j.run_at))));
      const table = el("div", { class: "scroll" }, el("table", { id: "jobs" },
        el("thead", {}, el("tr", {}, READONLY ? null : el("th", {}, all), ["Id", "State", "Type", "Queue", "Title", "Attempt", "Created", "Run at"].map((h) => el("th", {}, h)))),
        el("tbody", {}, rows)));
      const paging = el("div", { class: "bar" },
        el("button", { id: "first-page", disabled: !this.cursor, onclick: () => { this.cursor = ""; this.stack = []; refresh(); } }, "First page"),
        el("button", { id: "prev-page", disabled: !this.stack.length, onclick: () => { this.cursor = this.stack.pop() || ""; refresh(); } }, "Previous"),
        el("button", { id: "next-page", disabled: !list.next_cursor, onclick: () => { this.stack.push(this.cursor); this.cursor = list.next_cursor; refresh(); } }, "Next page"));
      // A store reads a bounded stretch of jobs per page under a search or
      // type filter, so an empty page with a cursor is not the end.
      const empty = items.length ? null : list.next_cursor
        ? el("p", { class: "muted", id: "empty-so-far" }, "No match in the jobs read for this page; Next page reads further.")
        : el("p", { class: "muted", id: "empty" }, "No jobs match.");
      return [table, empty, paging];
    },
    actions(f) {
      const one = (action, label) => el("button", {
        class: "sel-" + action, onclick: () => {
          const ids = [...this.selected];
          if (!ids.length) { flash("Select jobs first.", true); return; }
          act(label, async () => {
            let ok = 0, bad = 0;
            for (const id of ids) {
              try { await (action === "delete" ? api("DELETE", "/jobs/" + id) : api("POST", "/jobs/" + id + "/" + action)); ok++; } catch (_) { bad++; }
            }
            this.selected.clear();
            return label + ": " + ok + " done" + (bad ? ", " + bad + " refused" : "");
          });
        },
      }, label + " selected");
      const bulkSel = el("select", { id: "bulk-action", "aria-label": "Action on every job matching the filter" },
        el("option", { value: "retry" }, "retry"), el("option", { value: "cancel" }, "cancel"), el("option", { value: "delete" }, "delete"));
      const filter = { state: f.state, queue: f.queue, type: f.type, tag: f.tag, q: f.q };
      return el("div", { class: "actions" }, one("retry", "Retry"), one("cancel", "Cancel"), one("delete", "Delete"),
        el("span", { class: "muted" }, "or every match:"), bulkSel,
        el("button", {
          id: "bulk-go", onclick: async () => {
            const action = bulkSel.value;
            try {
              const dry = await api("POST", "/jobs/bulk", { filter, action, dry_run: true });
              if (!dry.matched) { flash("No job matches this filter."); return; }
              const verb = action[0].toUpperCase() + action.slice(1);
              const text = dry.more
                ? verb + " the oldest " + dry.matched + " jobs matching this filter? More match; one action takes at most " + dry.matched + "."
                : verb + " " + dry.matched + " jobs matching this filter?";
              if (!(await confirmDialog(text))) return;
              act("Bulk " + action, () => api("POST", "/jobs/bulk", { filter, action, limit: dry.matched }).then((r) => "Bulk " + action + ": " + r.done + " of " + r.matched + " done" + (r.errors && r.errors.length ? ", " + (r.matched - r.done) + " refused" : "")));
            } catch (e) { flash(e.message, true); }
          },
        }, "Apply to all matching…"));
    },
    live(kind) { return (kind === "job" || kind === "queues") && !this.cursor; },
  };

  const job = {
    id: body.dataset.job, data: null, poll: null,
    async load() {
      let j;
      try {
        j = await api("GET", "/jobs/" + encodeURIComponent(this.id));
      } catch (e) {
        if (e.status === 404) { show(el("p", { class: "error", id: "gone" }, "No job " + this.id + " (deleted, or removed by retention).")); return; }
        throw e;
      }
      this.data = j;
      document.getElementById("title").textContent = "Job " + (j.title ? j.title + " · " : "") + j.id;
      const p = j.progress;
      const fields = el("dl", { class: "fields" },
        el("dt", {}, "State"), el("dd", { id: "job-state" }, stateBadge(j.state), j.cancel_requested ? " (cancel requested)" : ""),
        el("dt", {}, "Type"), el("dd", {}, j.type), el("dt", {}, "Queue"), el("dd", {}, el("a", { href: BASE + "/jobs?queue=" + encodeURIComponent(j.queue) }, j.queue)),
        el("dt", {}, "Priority"), el("dd", {}, j.priority), el("dt", {}, "Attempt"), el("dd", {}, j.attempt + " of " + j.max_attempts),
        el("dt", {}, "Worker"), el("dd", {}, j.worker_id ? el("a", { href: BASE + "/workers#" + encodeURIComponent(j.worker_id) }, j.worker_id) : "—"),
        el("dt", {}, "Tags"), el("dd", {}, (j.tags || []).map((t) => el("a", { href: BASE + "/jobs?tag=" + encodeURIComponent(t), class: "badge" }, t))),
        el("dt", {}, "Unique key"), el("dd", {}, j.unique_key || "—"),
        el("dt", {}, "Timeout"), el("dd", {}, j.timeout), el("dt", {}, "Deadline"), el("dd", {}, time(j.deadline)),
        j.cancel_reason ? [el("dt", {}, "Cancel reason"), el("dd", {}, j.cancel_reason)] : null);
      const progress = p ? el("div", { id: "progress" }, el("progress", { max: 100, value: p.percent, "aria-label": "Progress" }), " ", Math.round(p.percent) + "%", p.message ? " · " + p.message : "") : null;
      const timeline = [["created", j.created_at]];
      if (j.run_at && j.run_at !== j.created_at) timeline.push([new Date(j.run_at) > new Date() ? "scheduled to run" : "run at", j.run_at]);
      for (const e of j.errors || []) timeline.push(["attempt " + e.attempt + " failed (" + e.kind + ")", e.at]);
      if (j.started_at) timeline.push(["started attempt " + j.attempt, j.started_at]);
      if (j.finished_at) timeline.push([j.state, j.finished_at]);
      timeline.sort((a, b) => new Date(a[1]) - new Date(b[1]));
      const errors = (j.errors || []).map((e) => el("li", {}, el("strong", {}, "Attempt " + e.attempt), " · ", time(e.at), " · ", e.kind, el("pre", { class: "error-msg" }, e.message), e.stack ? el("details", {}, el("summary", {}, "stack"), el("pre", {}, e.stack)) : null));
      const logs = j.logs || [];
      show(
        READONLY ? null : this.actions(j), progress,
        el("div", { class: "grid2" },
          el("section", {}, el("h2", {}, "Details"), fields),
          el("section", {}, el("h2", {}, "Timeline"), el("ol", { class: "timeline", id: "timeline" }, timeline.map(([what, at]) => el("li", {}, time(at), " ", what))))),
        errors.length ? [el("h2", {}, "Errors"), el("ol", { id: "errors" }, errors)] : null,
        jsonBlock("Payload", j.payload !== undefined ? j.payload : j.payload_b64 !== undefined ? { base64: j.payload_b64 } : undefined, "payload"),
        jsonBlock("Result", j.result !== undefined ? j.result : j.result_b64 !== undefined ? { base64: j.result_b64 } : undefined, "result"),
        jsonBlock("Metadata", j.metadata, "metadata"),
        el("h2", {}, "Logs"), logs.length ? el("pre", { id: "logs" }, logs.map((l) => new Date(l.at).toLocaleTimeString() + "  " + l.line + "\n")) : el("p", { class: "muted" }, "No log lines."),
        j.logs_dropped ? el("p", { class: "muted" }, j.logs_dropped + " earlier lines dropped") : null);
      clearTimeout(this.poll);
      // Progress and logs reach the store without an event: poll while
      // the job runs.
      if (j.state === "active") this.poll = setTimeout(() => refresh(), 2000);
    },
    actions(j) {
      const id = encodeURIComponent(j.id);
      const post = (what) => () => act(what, () => api("POST", "/jobs/" + id + "/" + what).then(() => what + ": done"));
      return el("div", { class: "actions", id: "job-actions" },
        j.state === "failed" || j.state === "cancelled" ? el("button", { id: "retry", onclick: post("retry") }, "Retry now") : null,
        j.state === "scheduled" || j.state === "retry" ? el("button", { id: "run", onclick: post("run") }, "Run now") : null,
        !FINAL.has(j.state) && !j.cancel_requested ? el("button", { id: "cancel", onclick: post("cancel") }, "Cancel") : null,
        j.state !== "active" ? el("button", {
          id: "delete", class: "danger", onclick: async () => {
            if (!(await confirmDialog("Delete job " + j.id + "?"))) return;
            try { await api("DELETE", "/jobs/" + id); location.href = BASE + "/jobs"; } catch (e) { flash(e.message, true); }
          },
        }, "Delete") : null,
        el("button", {
          id: "copy", onclick: async () => {
            const nj = { type: j.type, queue: j.queue, title: j.title || undefined, priority: j.priority, tags: j.tags, metadata: j.metadata, max_attempts: j.max_attempts };
            if (j.payload !== undefined) nj.payload = j.payload; else if (j.payload_b64 !== undefined) nj.payload_b64 = j.payload_b64;
            try { const r = await api("POST", "/jobs", nj); location.href = BASE + "/jobs/" + encodeURIComponent(r.id); } catch (e) { flash(e.message, true); }
          },
        }, "Enqueue a copy"));
    },
    // Changes made through this server arrive as job events; the queue
    // counts every few seconds also catch changes made elsewhere (a worker
    // on the store directly) while the job is not final.
    live(kind, data) {
      if (kind === "job") return data.job && data.job.id === this.id;
      return kind === "queues" && this.data !== null && !FINAL.has(this.data.state);
    },
  };

  function jsonBlock(title, value, id) {
    if (value === undefined || value === null) return null;
    const text = JSON.stringify(value, null, 2);
    const pre = el("pre", { id: id }, text);
    return [el("h2", {}, title, " ", el("button", {
      class: "copy", "aria-label": "Copy " + title,
      onclick: async (e) => {
        try { await navigator.clipboard.writeText(text); e.target.textContent = "copied"; } catch (_) {
          const r = document.createRange(); r.selectNodeContents(pre); const s = getSelection(); s.removeAllRanges(); s.addRange(r);
          e.target.textContent = "selected: press Ctrl+C";
        }
      },
    }, "copy")), pre];
  }

  const queues = {
    async load() {
      const qw = await loadQueuesAndWorkers();
      show(qw.queues.length ? queueTable(qw, true) : el("p", { class: "muted" }, "No queues yet."));
    },
    live(kind) { return kind === "queues" || kind === "queue" || kind === "worker"; },
  };

  // workerState is a worker's state as its entry says, dead for a silent
  // one, with a command given and not yet taken up beside it.
  function workerState(x) {
    if (x.dead) return "dead";
    const st = x.state || "running";
    const taken = (x.command === "quiet" && st !== "running") || (x.command === "stop" && st === "stopping");
    return x.command && !taken ? st + " (" + x.command + " sent)" : st;
  }

  function workerActions(x) {
    const id = encodeURIComponent(x.id);
    const send = (cmd, text) => async () => {
      if (!(await confirmDialog(text))) return;
      act(cmd[0].toUpperCase() + cmd.slice(1) + " " + x.id, () => api("POST", "/workers/" + id + "/" + cmd).then(() => cmd + " sent to " + x.id + "; it acts at its next registry refresh"));
    };
    const busy = x.dead || x.command === "stop" || x.state === "stopping";
    return el("div", { class: "actions" },
      el("button", { class: "quiet", "data-key": "quiet-" + x.id, disabled: busy || x.command === "quiet" || x.state === "quiet",
        onclick: send("quiet", "Quiet worker " + x.id + "? It claims no more jobs, finishes those it runs and stays up.") }, "Quiet"),
      el("button", { class: "danger stop", "data-key": "stop-" + x.id, disabled: busy,
        onclick: send("stop", "Stop worker " + x.id + "? It finishes or hands back the jobs it runs and shuts down.") }, "Stop"));
  }

  const workers = {
    async load() {
      const w = (await api("GET", "/workers")).workers || [];
      if (!w.length) { show(el("p", { class: "muted", id: "no-workers" }, "No worker is registered.")); return; }
      show(el("div", { class: "scroll" }, el("table", { id: "workers" },
        el("thead", {}, el("tr", {}, ["Id", "State", "Host", "PID", "Version", "Queues", "In flight", "Processed", "Failed", "Started", "Last heartbeat"].map((h) => el("th", {}, h)),
          READONLY ? null : el("th", {}, "Actions"))),
        el("tbody", {}, w.map((x) => el("tr", { id: x.id, "data-state": workerState(x) },
          el("td", {}, x.id, x.dead ? el("span", { class: "badge warn" }, " dead") : null),
          el("td", { class: "worker-state" }, el("span", { class: "badge w-" + (x.dead ? "dead" : x.state || "running") }, workerState(x))),
          el("td", {}, x.host), el("td", { class: "num" }, x.pid), el("td", {}, x.version || "—"),
          el("td", { class: "wrap" }, (x.queues || []).join(", ")), el("td", { class: "num" }, (x.running || []).length + " / " + x.concurrency),
          el("td", { class: "num" }, x.processed), el("td", { class: "num" }, x.failed), el("td", {}, time(x.started_at)),
          el("td", {}, x.last_seen ? [ago(x.last_seen), " ago"] : "—"),
          READONLY ? null : el("td", {}, workerActions(x))))))));
    },
    live(kind) { return kind === "worker" || kind === "queues"; },
  };

  const periodic = {
    async load() {
      const list = (await api("GET", "/periodic")).periodic || [];
      if (!list.length) { show(el("p", { class: "muted", id: "no-periodic" }, "No live worker runs a periodic job.")); return; }
      show(el("div", { class: "scroll" }, el("table", { id: "periodic" },
        el("thead", {}, el("tr", {}, ["Name", "Schedule", "Queue", "Type", "Last run", "Next run", "Workers"].map((h) => el("th", {}, h)))),
        el("tbody", {}, list.map((p) => el("tr", { "data-name": p.name },
          el("td", {}, p.name), el("td", { class: "mono" }, p.spec),
          el("td", {}, el("a", { href: BASE + "/jobs?queue=" + encodeURIComponent(p.queue) }, p.queue)),
          el("td", {}, el("a", { href: BASE + "/jobs?type=" + encodeURIComponent(p.type) }, p.type)),
          el("td", {}, time(p.last_run)), el("td", {}, time(p.next_run)),
          el("td", { class: "wrap" }, (p.workers || []).map((id, i) => [i ? ", " : "", el("a", { href: BASE + "/workers#" + encodeURIComponent(id) }, id)]))))))));
    },
    live(kind) { return kind === "worker" || kind === "queues"; },
  };

  const enqueue = {
    async load() {
      if (app.querySelector("form")) return; // keep what the user typed
      const err = el("p", { class: "error", id: "payload-error", role: "alert" });
      const payload = el("textarea", { id: "e-payload", name: "payload", spellcheck: "false" }, "{}");
      const submit = el("button", { type: "submit", id: "enqueue-submit" }, "Enqueue");
      const check = () => {
        try { if (payload.value.trim()) JSON.parse(payload.value); err.textContent = ""; submit.disabled = false; return true; } catch (e) { err.textContent = "Payload is not JSON: " + e.message; submit.disabled = true; return false; }
      };
      payload.addEventListener("input", check);
      const field = (id, label, attrs) => el("div", {}, el("label", { for: id }, label), el("input", { id, name: id.slice(2), ...attrs }));
      const form = el("form", {
        id: "enqueue", class: "login",
        onsubmit: async (e) => {
          e.preventDefault();
          if (!check()) return;
          const d = new FormData(form);
          const nj = { type: d.get("type"), queue: d.get("queue") || undefined, title: d.get("title") || undefined, priority: +d.get("priority") || 0, delay: d.get("delay") || undefined, unique_key: d.get("unique_key") || undefined };
          if (payload.value.trim()) nj.payload = JSON.parse(payload.value);
          try { const r = await api("POST", "/jobs", nj); location.href = BASE + "/jobs/" + encodeURIComponent(r.id); } catch (ex) { flash(ex.message, true); }
        },
      },
      field("e-type", "Type", { required: true }), field("e-queue", "Queue", { placeholder: "default" }), field("e-title", "Title", {}),
      el("div", {}, el("label", { for: "e-payload" }, "Payload (JSON)"), payload, err),
      field("e-priority", "Priority (-100 to 100)", { type: "number", min: -100, max: 100, value: 0 }),
      field("e-delay", "Delay (a duration such as 30s or 5m)", { pattern: "^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$" }),
      field("e-unique_key", "Unique key", {}), submit);
      show(READONLY ? el("p", { class: "muted" }, "This server is read-only.") : form);
    },
    live: null,
  };

  const pages = { overview, jobs, job, queues, workers, periodic, enqueue };
  const page = pages[PAGE] || { load() {}, live: null };
  connect();
  refresh();
})();
