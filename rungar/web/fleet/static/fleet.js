// The fleet page: one EventSource for the live view, one fetch per Usage question.
// Everything drawn comes from the daemon's status document, events and usage document.
"use strict";

const COLORS = ["#2f6fd6", "#1f8a4c", "#c0392b", "#7b3fc4", "#b86e00", "#138496", "#6b7385"];
const MAX_EVENTS = 200;
const state = { points: [], waits: [], charts: {}, providers: [] };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value; else node.setAttribute(key, value);
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(child ?? "-"));
  }
  return node;
}

// The status word is the leading capitals ("HELD", "HOLDING BACK"); the rest is its detail.
function statusBadge(text) {
  const match = /^[A-Z]+(?: [A-Z]+)*(?![a-z])/.exec(text || "");
  const word = match ? match[0] : (text || "");
  const rest = (text || "").slice(word.length).trim();
  const badge = el("span", { class: "status " + word.split(" ")[0].toLowerCase() }, word);
  return rest ? el("span", {}, badge, el("span", { class: "status-rest" }, rest)) : badge;
}

function age(seconds) {
  if (seconds == null) return "-";
  if (seconds < 60) return Math.floor(seconds) + "s";
  if (seconds < 3600) return Math.floor(seconds / 60) + "m";
  if (seconds < 86400) return Math.floor(seconds / 3600) + "h";
  return Math.floor(seconds / 86400) + "d";
}

// As `rungar usage` writes a duration (rungar/cli/usage.py duration_text): 12.5s, 1m 32s,
// 3h 12m; the Usage tab shows its numbers, so it rounds as it does.
function duration(seconds) {
  if (seconds == null) return "-";
  if (seconds < 60) return seconds.toFixed(1) + "s";
  const total = Math.round(seconds);
  const minutes = Math.floor(total / 60);
  if (minutes < 60) return minutes + "m " + String(total % 60).padStart(2, "0") + "s";
  return Math.floor(minutes / 60) + "h " + String(minutes % 60).padStart(2, "0") + "m";
}

// Cents, unless the amount is smaller than a cent (a few minutes of a cheap machine).
function money(cost) {
  if (cost == null) return "-";
  return cost >= 0.01 || cost === 0 ? cost.toFixed(2) : cost.toFixed(4);
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

function renderStatus(status) {
  if (!status) return;
  const d = status.daemon;
  // The readiness sentence starts with the word itself ("ready: 2 of 2 scale sets ...").
  document.getElementById("daemon").textContent =
    `${d.readiness || (d.ready ? "ready" : "not ready")} · v${d.version}`;
  fill(document.querySelector("#scale-sets tbody"), status.scale_sets.flatMap((s) => {
    const waiting = Math.max(0, (s.assigned || 0) - (s.busy || 0));
    const row = el("tr", { "data-scale-set": s.name },
      el("td", {}, s.name), el("td", {}, statusBadge(s.status)),
      el("td", { class: "num opt" }, String(s.desired ?? "-")),
      el("td", { class: "num" }, String(s.runners)),
      el("td", { class: "num" }, String(s.busy || 0)),
      el("td", { class: "num opt" }, String(s.idle || 0)),
      el("td", { class: "num opt" }, String(s.starting || 0)),
      el("td", { class: "num" }, String(waiting)),
      el("td", { class: "num opt" }, `${s.min} / ${s.max}`),
      el("td", { class: "opt" }, s.providers.join(", ")));
    return s.note ? [row, el("tr", {}, el("td", { class: "note", colspan: "10" }, s.note))] : [row];
  }));
  fill(document.querySelector("#providers tbody"), status.providers.map((p) =>
    el("tr", { "data-provider": p.name },
      el("td", {}, p.name), el("td", {}, p.type), el("td", {}, statusBadge(p.status)),
      el("td", { class: "num" }, String(p.runners)),
      el("td", { class: "num" }, p.max_runners ? String(p.max_runners) : "-"))));
  const sentences = status.skips.map((s) => (s.output && s.output.length)
    ? el("li", {}, s.sentence, el("pre", { class: "output" }, s.output.join("\n")))
    : el("li", {}, s.sentence));
  for (const p of status.providers) {
    if (!p.reachable) sentences.push(el("li", {}, `${p.name} is unreachable${p.error ? ": " + p.error : ""}`));
  }
  document.getElementById("skips").replaceChildren(...sentences);
  const notes = (d.notes || []).flatMap((n) =>
    [el("dt", { "data-label": n.label }, n.label + ":"), el("dd", { "data-label": n.label }, n.text)]);
  const noteList = document.getElementById("daemon-notes");
  noteList.replaceChildren(...notes);
  noteList.hidden = !notes.length;
  // Creates in flight count among a scale set's runners (and Starting) before their provider
  // lists them here: the count says so, as rungar status's closing line does.
  const creating = status.scale_sets.reduce((sum, s) => sum + (s.creating || 0), 0);
  const listed = status.runners.length;
  document.getElementById("runner-count").textContent =
    creating ? `(${listed} listed, ${creating} being created)` : `(${listed})`;
  const waiting = d.registrations && d.registrations.waiting;
  const creatingNote = document.getElementById("runners-creating");
  creatingNote.hidden = !creating;
  creatingNote.textContent = creating
    ? `${plural(creating, "runner")} being created, not listed until created` +
      (waiting ? `; ${waiting} waiting to register with GitHub` : "")
    : "";
  fill(document.querySelector("#runners tbody"), status.runners.length ? status.runners.map((r) =>
    el("tr", { "data-runner": r.name },
      el("td", {}, r.name), el("td", { class: "opt" }, r.scale_set), el("td", {}, r.provider),
      el("td", {}, word(r.state)), el("td", { class: "opt" }, word(r.github)), el("td", { class: "num" }, age(r.age)),
      el("td", {}, r.job || "-"))) : [el("tr", {}, el("td", { class: "empty", colspan: "7" }, "no runners"))]);
  const names = status.providers.map((p) => p.name);
  if (names.join() !== state.providers.join()) { state.providers = names; drawCharts(); }
}

// "1 runner", "3 runners": counts agree with their nouns (docs/cli.md).
function plural(count, noun) {
  return `${count} ${count === 1 ? noun : noun + "s"}`;
}

// rungar status's stable values in words, as the CLI's table says them.
const WORDS = { not_registered: "Not registered", not_listed: "Not listed yet" };
function word(value) {
  const text = String(value || "");
  return WORDS[text] || (text.charAt(0).toUpperCase() + text.slice(1)).replace(/_/g, " ");
}

function addEvents(events, fresh) {
  const list = document.getElementById("events");
  for (const e of events) {
    const when = new Date(e.time * 1000).toLocaleTimeString();
    const item = el("li", { class: fresh ? "new" : "", "data-action": e.action },
      el("time", {}, when), el("span", { class: "action" }, `${e.kind} ${words(e.action)}`),
      `${e.name}${e.message ? " — " + e.message : ""}`);
    list.prepend(item);
    const waited = e.attributes && e.attributes.waited_s;
    if (e.action === "job_started" && waited != null) state.waits.push([e.time, waited]);
  }
  while (list.children.length > MAX_EVENTS) list.lastChild.remove();
}

// An event's action as words: "job_started" reads "job started", as "connected" does.
function words(action) {
  return String(action || "").replaceAll("_", " ");
}

function chartSize(node) {
  return { width: Math.max(200, node.clientWidth), height: 220 };
}

// Time ticks the eye reads at once: 14:05 (14:05:30 when ticks are seconds apart), a date only
// when ticks are days apart, and never a second line that runs into the next label.
const TIME_INCRS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800,
  21600, 43200, 86400, 172800, 604800];
function timeTicks(u, splits, axis, space, incr) {
  return splits.map((t) => {
    const d = new Date(t * 1000);
    // Days apart, or hours apart at a midnight: the date, so a long window says which day.
    const midnight = d.getHours() === 0 && d.getMinutes() === 0;
    if (incr >= 86400 || (incr >= 21600 && midnight)) {
      return d.toLocaleDateString([], { month: "short", day: "numeric" });
    }
    const hm = `${String(d.getHours()).padStart(2, "0")}:${String(d.getMinutes()).padStart(2, "0")}`;
    return incr < 60 ? `${hm}:${String(d.getSeconds()).padStart(2, "0")}` : hm;
  });
}
const TIME_AXIS = { values: timeTicks, incrs: TIME_INCRS, space: 60 };
// The legend shows a value only while the cursor is on the chart: no "--" placeholders.
const TIME_SERIES = { label: "time", value: (u, v) => (v == null ? "" : new Date(v * 1000).toLocaleTimeString()) };
function shown(format) {
  return (u, v) => (v == null ? "" : format(v));
}

function runnerData() {
  const times = state.points.map((p) => p.time);
  return [times, ...state.providers.map((name) => state.points.map((p) => p.providers[name] ?? null))];
}

function waitData() {
  const sorted = state.waits.slice().sort((a, b) => a[0] - b[0]);
  return [sorted.map((w) => w[0]), sorted.map((w) => w[1])];
}

function drawCharts() {
  const runners = document.getElementById("chart-runners");
  const waits = document.getElementById("chart-waits");
  for (const chart of Object.values(state.charts)) chart.destroy();
  state.charts.runners = new uPlot({
    ...chartSize(runners),
    series: [TIME_SERIES, ...state.providers.map((name, i) => ({
      label: name, stroke: COLORS[i % COLORS.length], width: 2, paths: uPlot.paths.stepped({ align: 1 }),
      value: shown(String) }))],
    axes: [TIME_AXIS, { label: "runners", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] }],
    scales: { y: { range: (u, min, max) => [0, Math.max(1, max + 1)] } },
  }, runnerData(), runners);
  state.charts.waits = new uPlot({
    ...chartSize(waits),
    series: [TIME_SERIES, { label: "wait (s)", stroke: COLORS[3], width: 0,
      points: { show: true, size: 7, fill: COLORS[3] }, value: shown((v) => v.toFixed(1)) }],
    axes: [TIME_AXIS, { label: "seconds" }],
    scales: { y: { range: (u, min, max) => [0, Math.max(1, max * 1.2)] } },
  }, waitData(), waits);
}

function updateCharts() {
  if (state.charts.runners) state.charts.runners.setData(runnerData());
  if (state.charts.waits) state.charts.waits.setData(waitData());
}

// A page that lost the daemon says so plainly, over what it last showed, until it is back.
function stale(on) {
  const banner = document.getElementById("stale");
  if (!on) { banner.hidden = true; document.body.classList.remove("is-stale"); return; }
  if (!banner.hidden) return;
  banner.textContent = `Stale: the daemon stopped answering at ${new Date().toLocaleTimeString()}. ` +
    "What this page shows is its last word, not what happens now.";
  banner.hidden = false;
  document.body.classList.add("is-stale");
}

function connect() {
  const live = document.getElementById("live");
  const source = new EventSource("/api/stream");
  source.addEventListener("snapshot", (m) => {
    const data = JSON.parse(m.data);
    state.points = data.points;
    state.waits = [];
    document.getElementById("events").replaceChildren();
    renderStatus(data.status);
    addEvents(data.events, false);
    drawCharts();
    live.textContent = "live"; live.className = "live on";
    stale(false);
  });
  source.addEventListener("update", (m) => {
    const data = JSON.parse(m.data);
    state.points.push(data.point);
    renderStatus(data.status);
    addEvents(data.events, true);
    updateCharts();
  });
  source.onerror = () => {
    live.textContent = "reconnecting…"; live.className = "live off";
    stale(true);
  };
}

async function loadUsage() {
  const by = document.getElementById("usage-by").value;
  const since = document.getElementById("usage-since").value;
  const answer = await fetch(`/api/usage?by=${encodeURIComponent(by)}&since=${encodeURIComponent(since)}`);
  const doc = await answer.json();
  document.getElementById("usage-key").textContent = by.replace("-", " ").replace(/^./, (c) => c.toUpperCase());
  const most = Math.max(1, ...doc.groups.map((g) => g.runner_seconds));
  const row = (g, bar) => {
    const ended = { ...g.conclusions };
    const succeeded = ended.succeeded || 0; const failed = ended.failed || 0;
    delete ended.succeeded; delete ended.failed;
    const other = Object.values(ended).reduce((a, b) => a + b, 0);
    return el("tr", { "data-key": g.key },
      el("td", {}, g.key), el("td", { class: "num" }, String(g.jobs)),
      el("td", { class: "num" }, String(succeeded)), el("td", { class: "num" }, String(failed)),
      el("td", { class: "num" }, String(other)), el("td", { class: "num" }, duration(g.runner_seconds)),
      el("td", { class: "num" }, duration(g.wait_p50)), el("td", { class: "num" }, duration(g.wait_p95)),
      el("td", { class: "num" }, money(g.cost)),
      el("td", {}, bar ? el("div", { class: "bar", style: `width:${(100 * g.runner_seconds / most).toFixed(1)}%` }) : ""));
  };
  const body = document.querySelector("#usage-table tbody");
  body.replaceChildren(...(doc.groups.length ? doc.groups.map((g) => row(g, true))
    : [el("tr", {}, el("td", { class: "empty", colspan: "10" }, "no jobs served in that time"))]));
  document.querySelector("#usage-table tfoot").replaceChildren(row({ ...doc.total, key: "Total" }, false));
}

// The tab is in the URL (#usage), so a reload or a shared link opens the same tab.
function showTab(name) {
  if (!["fleet", "usage"].includes(name)) name = "fleet";
  for (const tab of document.querySelectorAll(".tab")) tab.classList.toggle("active", tab.dataset.tab === name);
  for (const panel of document.querySelectorAll(".panel")) panel.hidden = panel.id !== name;
  if (name === "usage") loadUsage();
  else drawCharts();
}

window.addEventListener("hashchange", () => showTab(location.hash.slice(1)));
document.getElementById("usage-by").addEventListener("change", loadUsage);
document.getElementById("usage-since").addEventListener("change", loadUsage);
let resizing = null;
window.addEventListener("resize", () => {
  clearTimeout(resizing);
  resizing = setTimeout(() => { if (!document.getElementById("fleet").hidden) drawCharts(); }, 150);
});
if (location.hash === "#usage") showTab("usage");
connect();
