// runnerd's dashboard: each page fetches its JSON and draws it; the overview follows the live
// stream (server-sent events). No build step: plain browser JavaScript and uPlot.
"use strict";

const UNITS = ["B", "K", "M", "G", "T"];

function bytes(n) {
  if (n === null || n === undefined) return "-";
  let i = 0;
  let v = n;
  while (v >= 1024 && i < UNITS.length - 1) { v /= 1024; i += 1; }
  const text = v >= 100 || Number.isInteger(v) ? v.toFixed(0) : v.toFixed(v >= 10 ? 1 : 2);
  return (text.includes(".") ? text.replace(/\.?0+$/, "") : text) + UNITS[i];
}

// "1 job", "3 jobs": a count and its noun, agreeing.
function plural(count, noun, many) {
  return `${count} ${count === 1 ? noun : (many || noun + "s")}`;
}

// What a sizing change changed, and only that: "memory 7G → 3G", never "slots 1 → 1".
function changed(c) {
  const parts = [];
  if (c.new.memory !== c.old.memory) parts.push(`memory ${bytes(c.old.memory)} → ${bytes(c.new.memory)}`);
  if (c.new.slots !== c.old.slots) parts.push(`slots ${c.old.slots} → ${c.new.slots}`);
  if (c.old.cpus !== undefined && c.new.cpus !== c.old.cpus) parts.push(`cpus ${c.old.cpus} → ${c.new.cpus}`);
  return parts.join(", ") || "no change";
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") node.textContent = v;
    else if (k === "style") node.setAttribute("style", v);
    else node.setAttribute(k, v);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

function clock(t) {
  return new Date(t * 1000).toLocaleTimeString([], {hour: "2-digit", minute: "2-digit", second: "2-digit"});
}

// ---- chart pieces shared by every page ------------------------------------------------------

// Time ticks the eye reads at once: 14:05 (14:05:30 when ticks are seconds apart, never
// ":32.500"), a date only when ticks are days apart, and no second line running into the next.
const TIME_INCRS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800,
  21600, 43200, 86400, 172800, 604800];
function two(n) { return String(n).padStart(2, "0"); }
function timeTicks(u, splits, axis, space, incr) {
  return splits.map(t => {
    const d = new Date(t * 1000);
    // Days apart, or hours apart at a midnight: the date, so a long window says which day.
    const midnight = d.getHours() === 0 && d.getMinutes() === 0;
    if (incr >= 86400 || (incr >= 21600 && midnight)) {
      return d.toLocaleDateString([], {month: "short", day: "numeric"});
    }
    const hm = `${two(d.getHours())}:${two(d.getMinutes())}`;
    return incr < 60 ? `${hm}:${two(d.getSeconds())}` : hm;
  });
}
const TIME_AXIS = {values: timeTicks, incrs: TIME_INCRS, space: 64};
// A legend shows values only while the cursor is on the chart: no "--" placeholders.
const TIME_SERIES = {label: "time", value: (u, v) => v == null ? "" : clock(v)};
function shown(format) { return (u, v) => v == null ? "" : format(v); }

// Memory is charted in one unit system, the one runnerd.toml and systemd's MemoryMax use:
// M = MiB and G = GiB (powers of 1024), so a 1000M MemoryMax meets the axis at 1000M.
function memoryUnit(top) {
  return top >= 4 * 1024 ** 3 ? {div: 1024 ** 3, suffix: "G"} : {div: 1024 ** 2, suffix: "M"};
}
function inUnit(values, unit) { return values.map(v => v == null ? null : v / unit.div); }
// A tick in the unit's steps, written as the rest of the page writes sizes: 800M, 1G, 1.5G.
function unitTick(unit) { return v => bytes(Math.round(v * unit.div)); }

// Ticks at the axis's own steps, plus the marked values (a cap) the eye looks for; a step
// too close to a mark gives way to it.
function ticksWith(marks) {
  return (u, axis, min, max, incr) => {
    const ticks = [];
    for (let v = Math.ceil(min / incr) * incr; v <= max + 1e-9; v += incr) ticks.push(+v.toFixed(6));
    const near = (max - min) * 0.06;
    const kept = ticks.filter(t => !marks.some(m => Math.abs(m - t) < near && m !== t));
    return [...new Set([...kept, ...marks.filter(m => m >= min && m <= max)])].sort((a, b) => a - b);
  };
}

function chartWidth(holder, most) {
  return Math.max(200, Math.min(most, holder.clientWidth || most));
}

async function getJSON(url) {
  const answer = await fetch(url, {headers: {accept: "application/json"}});
  const body = await answer.json();
  if (!answer.ok) throw new Error(body.error || answer.statusText);
  return body;
}

const COLORS = {in_use: "#2f7d32", reserved: "#8fbf5a", mirror: "#7b8fa6", host: "#b0413e", free: "#e9ecef"};

// ---- overview -------------------------------------------------------------------------------

const sparks = new Map();

function spark(cell, name, series) {
  const data = [series.times, series.memory];
  let chart = sparks.get(name);
  if (chart && !cell.contains(chart.root)) { chart.destroy(); chart = null; }
  if (!chart) {
    chart = new uPlot({
      width: 220, height: 40, legend: {show: false}, cursor: {show: false},
      axes: [{show: false}, {show: false}],
      // From 0 to a little over its largest sample: the shape of its use, not its cap.
      scales: {x: {time: true}, y: {range: (u, lo, hi) => [0, Math.max(hi, 1) * 1.15]}},
      series: [{}, {stroke: "#2f7d32", fill: "rgba(47,125,50,0.15)", width: 1.5, points: {show: false}}],
    }, data, cell);
    sparks.set(name, chart);
  } else {
    chart.setData(data);
  }
}

const sliceCharts = {};

function drawSlice(s) {
  const t = s.slice_series;
  const topBytes = s.memory_max || Math.max(1, ...t.memory, ...t.reserved);
  const unit = memoryUnit(topBytes);
  const memory = [t.times, inUnit(t.memory, unit), inUnit(t.reserved, unit),
    t.times.map(() => s.memory_max == null ? null : s.memory_max / unit.div)];
  const cpus = s.slice_cpus || Math.max(1, ...t.cpu.filter(v => v !== null));
  const cpu = [t.times, t.cpu, t.reserved_cpu, t.times.map(() => cpus)];
  const holder = document.getElementById("slice-memory");
  const width = chartWidth(holder, 520);
  if (!sliceCharts.memory || sliceCharts.unit.suffix !== unit.suffix || sliceCharts.width !== width) {
    for (const c of [sliceCharts.memory, sliceCharts.cpu]) if (c) c.destroy();
    const base = (format, topOf, marks) => ({
      width, height: 180,
      scales: {x: {time: true}, y: {range: (u, lo, hi) => [0, topOf() * 1.05]}},
      axes: [TIME_AXIS, {values: (u, ticks) => ticks.map(format), size: 60, splits: ticksWith(marks)}],
    });
    sliceCharts.unit = unit;
    sliceCharts.width = width;
    const mb = v => bytes(v * unit.div);
    const memoryMarks = s.memory_max ? [s.memory_max / unit.div] : [];
    sliceCharts.memory = new uPlot({...base(unitTick(unit), () => sliceCharts.top, memoryMarks), series: [TIME_SERIES,
      {label: "used", stroke: "#2f7d32", fill: "rgba(47,125,50,0.12)", points: {show: false}, value: shown(mb)},
      {label: "reserved", stroke: "#c77c02", dash: [6, 4], width: 2, points: {show: false}, value: shown(mb)},
      {label: "MemoryMax", stroke: "rgba(176,65,62,0.55)", width: 5, points: {show: false}, value: shown(mb)},
    ]}, memory, holder);
    const cpuFormat = v => v === null ? "-" : v.toFixed(1);
    sliceCharts.cpu = new uPlot({...base(cpuFormat, () => sliceCharts.cpus, [cpus]), series: [TIME_SERIES,
      {label: "used", stroke: "#1f5fa8", fill: "rgba(31,95,168,0.12)", points: {show: false}, value: shown(cpuFormat)},
      {label: "reserved", stroke: "#c77c02", dash: [6, 4], width: 2, points: {show: false}, value: shown(cpuFormat)},
      {label: "the slice's CPUs", stroke: "rgba(176,65,62,0.55)", width: 5, points: {show: false}, value: shown(cpuFormat)},
    ]}, cpu, document.getElementById("slice-cpu"));
  }
  sliceCharts.top = topBytes / unit.div;
  sliceCharts.cpus = cpus;
  sliceCharts.memory.setData(memory);
  sliceCharts.cpu.setData(cpu);
}

// Without a CPU budget (cpu_overcommit unset) runnerd reserves no CPU: say so, and what the
// slice uses, rather than leave the line empty.
function cpuLine(s) {
  const used = (s.slice_series.cpu || []).filter(v => v !== null);
  const now = used.length ? ` ${used[used.length - 1].toFixed(1)} of` : "";
  const of = s.slice_cpus ? `${now} ${s.slice_cpus} CPUs in use;` : "";
  return `CPU:${of} no CPU budget (cpu_overcommit unset), so CPU holds no job back`;
}

function drawOverview(s) {
  const bar = document.getElementById("bar");
  const total = s.parts.reduce((sum, p) => sum + p.bytes, 0);
  bar.dataset.total = String(total);
  bar.dataset.memoryMax = s.memory_max === null ? "" : String(s.memory_max);
  bar.replaceChildren(...s.parts.filter(p => p.bytes > 0).map(p => el("div", {
    class: "part part-" + p.key, "data-part": p.key, "data-bytes": String(p.bytes),
    title: `${p.label}: ${bytes(p.bytes)}`,
    style: `width:${total ? (100 * p.bytes / total).toFixed(3) : 0}%`,
  }, el("span", {text: p.bytes / total > 0.08 ? `${p.label} ${bytes(p.bytes)}` : ""}))));
  document.getElementById("legend").replaceChildren(...s.parts.filter(p => p.bytes > 0 || p.key !== "mirror").map(p => el("li", {},
    el("i", {class: "swatch part-" + p.key}), `${p.label} ${bytes(p.bytes)}`)));
  document.getElementById("budget-line").textContent = s.budget;
  document.getElementById("host-line").textContent = s.host || "host: no reading yet";
  document.getElementById("cpu-line").textContent = s.cpu || cpuLine(s);
  drawSlice(s);

  const body = document.querySelector("#runners tbody");
  const seen = new Set();
  for (const r of s.runners) {
    seen.add(r.name);
    let row = body.querySelector(`tr[data-runner="${CSS.escape(r.name)}"]`);
    if (!row) {
      row = el("tr", {"data-runner": r.name});
      // Profile, cap and the sparkline give way on a phone, as their headers do.
      for (let i = 0; i < 7; i += 1) row.append(el("td", [1, 5, 6].includes(i) ? {class: "opt"} : {}));
      body.append(row);
    }
    const cells = row.children;
    cells[0].textContent = r.name;
    cells[1].textContent = r.profile;
    cells[2].replaceChildren(r.job ? el("a", {href: `/jobs/${encodeURIComponent(r.job_id)}`, text: r.job})
      : el("a", {href: `/jobs/${encodeURIComponent(r.job_id)}`, class: "quiet", text: "waiting for a job"}));
    cells[3].textContent = bytes(r.counted);
    cells[4].textContent = bytes(r.used);
    cells[5].textContent = bytes(r.cap);
    row.dataset.state = r.state;
    spark(cells[6], r.name, r.series);
    cells[6].dataset.points = String(r.series.times.length);
    cells[6].title = `peak ${bytes(r.peak)} of its ${bytes(r.cap)} cap`;
  }
  for (const row of [...body.children]) {
    if (!seen.has(row.dataset.runner)) { sparks.delete(row.dataset.runner); row.remove(); }
  }
  document.getElementById("no-runners").hidden = s.runners.length > 0;

  const queue = document.getElementById("queue");
  queue.replaceChildren(...s.queue.map(q => el("li", {"data-scale-set": q.scale_set},
    el("strong", {text: q.scale_set}), ` waits for ${q.waits_for} since ${clock(q.since)}: `, q.why)));
  document.getElementById("no-queue").hidden = s.queue.length > 0;
}

function addEvent(e) {
  const list = document.getElementById("events");
  list.prepend(el("li", {}, el("time", {text: clock(e.at)}), el("code", {text: e.kind}), e.message));
  while (list.children.length > 20) list.lastChild.remove();
  document.getElementById("no-events").hidden = true;
}

// A page whose source stopped answering says so plainly, above what it last showed.
function stale(on, why) {
  const banner = document.getElementById("stale");
  if (!on) { banner.hidden = true; document.body.classList.remove("is-stale"); return; }
  if (!banner.hidden) return;
  banner.textContent = `Stale: ${why} at ${clock(Date.now() / 1000)}. ` +
    "What this page shows is runnerd's last word, not what happens now.";
  banner.hidden = false;
  document.body.classList.add("is-stale");
}

function live(onStatus) {
  const dot = document.getElementById("live");
  const stream = new EventSource("/api/live");
  stream.addEventListener("open", () => { dot.classList.add("on"); stale(false); });
  stream.addEventListener("error", () => {
    dot.classList.remove("on");
    stale(true, "runnerd stopped answering");
  });
  stream.addEventListener("status", m => onStatus(JSON.parse(m.data)));
  stream.addEventListener("runnerd", m => addEvent(JSON.parse(m.data)));
}

async function overview() {
  drawOverview(await getJSON("/api/status"));
  live(drawOverview);
}

// ---- sizing ---------------------------------------------------------------------------------

async function sizing() {
  const report = await getJSON("/api/sizing");
  document.getElementById("sizing-head").textContent =
    `MemoryMax ${report.memory_max ? bytes(report.memory_max) : "none"}. ` +
    "Need = largest peak + the margin, at least 1G, in 256M steps.";
  const holder = document.getElementById("profiles");
  holder.replaceChildren(...report.profiles.map(a => {
    const applicable = (a.action === "lower" || a.action === "raise") &&
      (a.new_memory !== a.memory || a.new_slots !== a.slots);
    const stats = el("table", {class: "stats"},
      el("thead", {}, el("tr", {}, ...["memory", "slots", "runs", "peak p50", "peak p95", "peak max",
        "need", "wait p95", "busy"].map(h => el("th", {text: h})))),
      el("tbody", {}, el("tr", {}, ...[bytes(a.memory), a.slots, a.runs,
        a.runs ? bytes(a.peaks.p50) : "-", a.runs ? bytes(a.peaks.p95) : "-",
        a.runs ? bytes(a.peaks.max) : "-", a.need ? bytes(a.need) : "-",
        `${Math.round(a.wait_p95)}s`, `${Math.round(100 * a.busy)}%`].map(v => el("td", {text: String(v)})))));
    const evidence = el("details", {}, el("summary", {text: `evidence: ${plural(a.jobs.length, "job")}`}),
      el("table", {class: "stats"},
        el("thead", {}, el("tr", {}, ...["repository", "workflow", "job", "runs", "largest", "need",
          "on its cap"].map(h => el("th", {text: h})))),
        el("tbody", {}, ...a.jobs.map(j => el("tr", {}, ...[j.repository, j.workflow, j.job, j.runs,
          bytes(j.largest), bytes(j.need), j.on_cap ? "yes" : ""].map(v => el("td", {text: String(v)})))))));
    const action = applicable
      ? el("a", {class: "button", href: `/config?profile=${encodeURIComponent(a.profile)}`,
          "data-apply": a.profile, text: `Apply: memory ${bytes(a.new_memory)}, slots ${a.new_slots}`})
      : null;
    const last = (report.undoable || {})[a.profile];
    const undo = last
      ? el("a", {class: "undo", href: `/config?profile=${encodeURIComponent(a.profile)}&undo=1`,
          "data-undo": a.profile,
          text: `Undo change ${last.id}: back to memory ${bytes(last.old.memory)}, slots ${last.old.slots}, cpus ${last.old.cpus}`})
      : null;
    return el("article", {class: "profile", "data-profile": a.profile},
      el("h3", {text: a.profile}), stats, el("p", {class: "advice", text: a.line}),
      el("div", {class: "actions"}, action, undo), evidence);
  }));
  for (const note of report.notes) holder.append(el("p", {class: "line", text: note}));
  const changes = document.getElementById("changes");
  changes.replaceChildren(...report.changes.slice().reverse().map(c => el("li", {},
    el("time", {text: new Date(c.at * 1000).toLocaleString()}),
    ` ${c.profile}: ${c.source} ${c.kind}: ${changed(c)}: ${c.reason}`)));
  document.getElementById("no-changes").hidden = report.changes.length > 0;
}

// ---- a job ----------------------------------------------------------------------------------

function lineChart(holder, title, times, series, opts) {
  return new uPlot({
    width: chartWidth(holder, 1100), height: 240, title,
    scales: {x: {time: true}, y: {range: [0, opts.top]}},
    axes: [TIME_AXIS, {values: (u, ticks) => ticks.map(opts.format), size: 70,
      splits: ticksWith(opts.marks || [])}],
    series: [TIME_SERIES, ...series.map(s => ({label: s.label, stroke: s.color, width: s.width || 1.5,
      dash: s.dash, fill: s.fill, points: {show: false},
      value: shown(opts.legend || opts.format)}))],
  }, [times, ...series.map(s => s.values)], holder);
}

async function job() {
  const ident = document.querySelector("[data-ident]").dataset.ident;
  let found;
  try {
    found = await getJSON(`/api/jobs/${encodeURIComponent(ident)}`);
  } catch (e) {
    stale(true, "runnerd stopped answering");
    setTimeout(job, 3000);
    return;
  }
  stale(false);
  const r = found.record;
  // A job without its conclusion is read again until it has one: the page never keeps
  // saying "running" after the job ended.
  if (!r.result) setTimeout(job, 3000);
  for (const id of ["memory-chart", "cpu-chart"]) document.getElementById(id).replaceChildren();
  document.getElementById("job-title").textContent =
    r.repository ? `${r.repository} ${r.workflow}/${r.job_name}` : `runner ${r.runner}`;
  document.getElementById("sentence").textContent = found.sentence;
  const s = found.series;
  if (!s || s.times.length === 0) { document.getElementById("no-series").hidden = false; return; }
  const flat = v => s.times.map(() => v);
  // The cap is a wide pale band and the reservation a dashed line on it: equal, both still show.
  const unit = memoryUnit(r.cap_memory);
  const mb = v => bytes(v * unit.div);
  lineChart(document.getElementById("memory-chart"), "", s.times, [
    {label: "used", values: inUnit(s.memory, unit), color: "#2f7d32", fill: "rgba(47,125,50,0.12)"},
    {label: `cap ${bytes(r.cap_memory)}`, values: flat(r.cap_memory / unit.div), color: "rgba(176,65,62,0.45)", width: 6},
    {label: `reservation ${bytes(r.reserved_memory)}`, values: flat(r.reserved_memory / unit.div), color: "#c77c02", dash: [6, 4], width: 2},
  ], {top: r.cap_memory * 1.1 / unit.div, format: unitTick(unit), legend: mb,
    marks: [r.cap_memory / unit.div, r.reserved_memory / unit.div]});
  const top = Math.max(r.cap_cpus, found.slice_cpus || 0) * 1.05;
  lineChart(document.getElementById("cpu-chart"), "", s.times, [
    {label: "used", values: s.cpu, color: "#1f5fa8", fill: "rgba(31,95,168,0.12)"},
    {label: `cap ${r.cap_cpus}`, values: flat(r.cap_cpus), color: "rgba(176,65,62,0.45)", width: 6},
    {label: `reservation ${r.reserved_cpu ?? "-"}`, values: flat(r.reserved_cpu), color: "#c77c02", dash: [6, 4], width: 2},
  ], {top, format: v => v.toFixed(1), marks: [r.cap_cpus]});
}

// ---- jobs -----------------------------------------------------------------------------------

function duration(seconds) {
  if (seconds == null) return "-";
  if (seconds < 60) return `${Math.round(seconds)}s`;
  const minutes = Math.round(seconds / 60);
  return minutes < 60 ? `${minutes}m` : `${Math.floor(minutes / 60)}h ${two(minutes % 60)}m`;
}

async function jobs() {
  const found = await getJSON("/api/jobs");
  const body = document.querySelector("#jobs tbody");
  body.replaceChildren(...found.jobs.map(j => el("tr", {"data-job": String(j.id)},
    el("td", {}, el("a", {href: `/jobs/${encodeURIComponent(j.id)}`, text: j.job || j.runner})),
    el("td", {text: j.repository || "-"}), el("td", {class: "opt", text: j.workflow || "-"}),
    el("td", {text: j.conclusion || "running"}), el("td", {class: "opt", text: bytes(j.peak_memory)}),
    el("td", {class: "opt", text: duration(j.waited)}),
    el("td", {text: new Date(j.started * 1000).toLocaleString()}), el("td", {text: duration(j.duration)}))));
  document.getElementById("no-jobs").hidden = found.jobs.length > 0;
}

// ---- utilization ----------------------------------------------------------------------------

async function utilization() {
  const holder = document.getElementById("utilization");
  const select = document.getElementById("window");
  let first = true;
  async function draw() {
    // First the window the data calls for (the server chooses it), then the one picked.
    const asked = first ? "auto" : select.value;
    const found = await getJSON(`/api/utilization?window=${encodeURIComponent(asked)}`);
    if (first && found.window_text) select.value = found.window_text;
    first = false;
    holder.replaceChildren();
    for (const p of found.profiles) {
      const box = el("article", {class: "profile", "data-profile": p.profile}, el("h3", {text: p.profile}),
        el("p", {class: "reading", text: p.reading}),
        el("p", {class: "shares", text: `slots busy ${Math.round(p.busy * 100)}%, occupied ` +
          `${Math.round(p.occupied * 100)}% of this window (busy: from each job's queue time)`}));
      const chart = el("div", {class: "chart"});
      box.append(chart);
      holder.append(box);
      const pct = v => `${Math.round(v * 100)}%`;
      lineChart(chart, "", p.times, [
        {label: "concurrency", values: p.concurrency, color: "#6a3d9a", width: 2},
        {label: "memory", values: p.memory, color: "#2f7d32"},
        {label: "CPU", values: p.cpu, color: "#1f5fa8"},
      ], {top: Math.max(1.05, ...p.concurrency, ...p.memory, ...p.cpu), format: pct});
    }
  }
  select.addEventListener("change", draw);
  await draw();
}

// ---- the config editor ----------------------------------------------------------------------

// The lines of ``after`` that differ from ``before``, by number (an Apply or an undo rewrites
// values in place, so the lines stay where they were).
function changedLines(before, after) {
  const a = before.split("\n");
  const b = after.split("\n");
  const found = [];
  for (let i = 0; i < b.length; i += 1) if (a[i] !== b[i]) found.push({line: i + 1, was: a[i], now: b[i]});
  return found;
}

function showChanges(holder, changes) {
  holder.replaceChildren(...changes.map(c => el("li", {"data-line": String(c.line)},
    el("span", {class: "lineno", text: `line ${c.line}`}),
    el("del", {text: c.was ?? ""}), " → ", el("ins", {text: c.now}))));
  holder.hidden = changes.length === 0;
}

async function config() {
  const section = document.querySelector("[data-profile]");
  const profile = section.dataset.profile;
  const query = profile
    ? `?profile=${encodeURIComponent(profile)}${section.dataset.undo ? "&undo=1" : ""}` : "";
  const editor = document.getElementById("editor");
  const message = document.getElementById("message");
  const problems = document.getElementById("problems");
  const changed = document.getElementById("changed");
  const conflict = document.getElementById("conflict");
  const opened = await getJSON(`/api/config${query}`);
  editor.value = opened.text;
  editor.dataset.version = opened.version;
  if (opened.note) document.getElementById("note").textContent = `${opened.profile}: ${opened.note}`;
  if (profile) {
    // What this Apply (or undo) changes in the file, line by line, before it is saved.
    const file = await getJSON("/api/config");
    showChanges(changed, changedLines(file.text, opened.text));
  }
  document.getElementById("save").addEventListener("click", async () => {
    message.className = "message";
    message.textContent = "checking…";
    problems.replaceChildren();
    const answer = await fetch("/api/config", {
      method: "POST",
      headers: {"content-type": "application/json", "x-runnerd-dashboard": "1"},
      body: JSON.stringify({text: editor.value, version: editor.dataset.version,
        profile: opened.profile, undo: opened.undo}),
    });
    const body = await answer.json();
    if (answer.ok) {
      message.classList.add("ok");
      message.textContent = body.change ? `${body.message}: ${body.change}` : body.message;
      const reopened = await getJSON("/api/config");
      editor.dataset.version = reopened.version;
      conflict.hidden = true;
      return;
    }
    message.classList.add(answer.status === 409 ? "stale" : "refused");
    message.textContent = body.error;
    problems.replaceChildren(...(body.problems || []).map(p => el("li", {text: p})));
    if (answer.status === 409) {
      // The user's text stays in the editor; the file as it is now goes beside it, its
      // differing lines marked, and a second Save writes the editor's text over it.
      const now = await getJSON("/api/config");
      document.getElementById("theirs").value = now.text;
      showChanges(document.getElementById("conflict-lines"), changedLines(now.text, editor.value));
      editor.dataset.version = now.version;
      conflict.hidden = false;
      message.textContent += " Your text is kept on the left, the file as it is now on the right;" +
        " Save again to write yours over it.";
    }
  });
}

const PAGES = {overview, jobs, sizing, job, utilization, config};
const run = PAGES[document.body.dataset.page];
if (run) run().catch(e => {
  const main = document.querySelector("main");
  main.prepend(el("p", {class: "message refused", text: `could not load: ${e.message}`}));
});
