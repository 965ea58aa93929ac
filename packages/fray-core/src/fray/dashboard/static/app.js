// The Fray dashboard page: plain JavaScript, no build step, no network beyond this server.
// Routes (in the URL's hash): #/jobs, #/job/<source>/<job id>, #/actors, #/gangs.
// Text from jobs is only ever set as textContent, never parsed as HTML.
"use strict";

const FINISHED = new Set(["succeeded", "failed", "stopped"]);
const POLL_MS = { jobs: 5000, job: 3000, actors: 10000, gangs: 10000 };
const PAGE = 50;

const ui = {
  filters: { source: "", state: "", prefix: "" },
  offset: 0,
  expanded: new Set(),      // "source\u0000id" of job rows whose children are shown
  logFilter: "",
  tail: 200,
  timer: null,
  typing: null,             // the prefix filter applies once typing pauses
  jobsDrawn: 0,             // the latest renderJobs: an earlier one still awaiting draws nothing
  route: null,
  sources: [],
};

// -- small helpers -----------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function text(value, fallback = "-") {
  if (value === null || value === undefined) return fallback;
  if (typeof value === "number" && !Number.isFinite(value)) return fallback;
  return String(value);
}

function when(stamp) {
  if (typeof stamp !== "number" || !Number.isFinite(stamp)) return "-";
  const d = new Date(stamp * 1000);
  const two = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
}

function plural(n, word) {
  return `${n.toLocaleString()} ${word}${n === 1 ? "" : "s"}`;
}

function span(seconds) {
  if (typeof seconds !== "number" || !Number.isFinite(seconds) || seconds < 0) return "-";
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 1 : 0)}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ${Math.round(seconds % 60)}s`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h ${Math.floor((seconds % 3600) / 60)}m`;
  return `${Math.floor(seconds / 86400)}d ${Math.floor((seconds % 86400) / 3600)}h`;
}

function age(stamp) {
  return typeof stamp === "number" ? span(Date.now() / 1000 - stamp) : "-";
}

function took(start, end) {
  if (typeof start !== "number") return "-";
  return span((typeof end === "number" ? end : Date.now() / 1000) - start);
}

function pill(state) {
  return h("span", { class: `pill ${state}` }, text(state));
}

function count(n, kind) {
  const value = typeof n === "number" ? n : 0;
  return h("span", { class: `count ${value === 0 ? "zero" : kind}` }, String(value));
}

function jobLink(source, id, label) {
  return h("a", { href: `#/job/${encodeURIComponent(source)}/${encodeURIComponent(id)}` }, label);
}

function query(params) {
  const parts = Object.entries(params)
    .filter(([, v]) => v !== "" && v !== null && v !== undefined)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`);
  return parts.length ? `?${parts.join("&")}` : "";
}

async function api(path, params = {}) {
  const response = await fetch(`/api/${path}${query(params)}`, { cache: "no-store" });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
  return body;
}

function banners(errors) {
  const box = document.getElementById("banners");
  box.replaceChildren(...(errors || []).map((e) =>
    h("p", { class: "banner", role: "alert" }, h("b", {}, `Source ${text(e.source)} is unreachable: `), text(e.error))));
}

function stamp(note) {
  document.getElementById("updated").textContent =
    `${note} · updated ${new Date().toLocaleTimeString(undefined, { hour12: false })}`;
}

function empty(message) {
  return h("div", { class: "empty" }, message);
}

function schedule(fn, ms) {
  clearTimeout(ui.timer);
  ui.timer = ms ? setTimeout(() => { if (!document.hidden) fn(); else schedule(fn, ms); }, ms) : null;
}

// -- jobs ----------------------------------------------------------------------------------

function jobRow(job, depth) {
  const key = `${job.source}\u0000${job.id}`;
  const open = ui.expanded.has(key);
  const toggle = job.children > 0
    ? h("button", {
        class: "toggle", title: open ? "hide children" : "show children", "aria-expanded": String(open),
        onclick: () => { open ? ui.expanded.delete(key) : ui.expanded.add(key); renderJobs(); },
      }, open ? "▾" : "▸")
    : null;
  return h("tr", { class: depth ? "child" : null, "data-job": job.id },
    h("td", {}, toggle),
    h("td", {}, pill(job.state)),
    h("td", { class: "name" }, jobLink(job.source, job.id, job.name), h("span", { class: "id mono", title: job.id }, depth ? `…/${job.id.split("/").pop()}` : job.id)),
    h("td", {}, job.source),
    h("td", { class: "num failures" }, count(job.failures, "bad")),
    h("td", { class: "num preemptions" }, count(job.preemptions, "warn")),
    h("td", { class: "num" }, text(job.replicas), job.children ? h("span", { class: "muted" }, ` · ${job.children} child${job.children === 1 ? "" : "ren"}`) : null),
    h("td", { class: "num", title: when(job.submitted_at) }, age(job.submitted_at)),
    h("td", { class: "reason", title: text(job.reason, "") }, text(job.reason, "")));
}

async function jobRows(job, depth) {
  const rows = [jobRow(job, depth)];
  if (!ui.expanded.has(`${job.source}\u0000${job.id}`)) return rows;
  const kids = await api("jobs", { source: job.source, parent: job.id, limit: PAGE });
  for (const kid of kids.jobs) rows.push(...await jobRows(kid, depth + 1));
  if (kids.total > kids.jobs.length) {
    rows.push(h("tr", { class: "child" }, h("td", { colspan: 9, class: "muted" },
      `${kids.total - kids.jobs.length} more children: open `, jobLink(job.source, job.id, job.name))));
  }
  return rows;
}

function jobFilters() {
  const f = ui.filters;
  const change = (key) => (event) => { f[key] = event.target.value; ui.offset = 0; renderJobs(); };
  const sources = h("select", { id: "f-source", onchange: change("source") },
    h("option", { value: "" }, "all backends"),
    ui.sources.map((s) => h("option", { value: s.name, selected: s.name === f.source }, s.name)));
  const states = h("select", { id: "f-state", onchange: change("state") },
    h("option", { value: "" }, "any state"),
    ["pending", "running", "succeeded", "failed", "stopped"].map((s) => h("option", { value: s, selected: s === f.state }, s)));
  const prefix = h("input", { id: "f-prefix", placeholder: "name or id prefix", value: f.prefix,
    oninput: (event) => { clearTimeout(ui.typing); ui.typing = setTimeout(() => change("prefix")(event), 250); } });
  return h("div", { class: "filters" }, h("label", {}, "Backend"), sources, h("label", {}, "State"), states, prefix);
}

function pager(total, shown, go) {
  const first = total ? ui.offset + 1 : 0;
  return h("div", { class: "pager" },
    h("button", { disabled: ui.offset === 0, onclick: () => go(Math.max(0, ui.offset - PAGE)) }, "‹ newer"),
    `${first}–${ui.offset + shown} of ${total.toLocaleString()}`,
    h("button", { disabled: ui.offset + shown >= total, onclick: () => go(ui.offset + PAGE) }, "older ›"));
}

async function renderJobs() {
  const f = ui.filters;
  const mine = ++ui.jobsDrawn;  // a filter change or a poll may start another while this one awaits
  if (!ui.sources.length) ui.sources = (await api("sources")).sources;  // their names, once
  const page = await api("jobs", { source: f.source, state: f.state, prefix: f.prefix, offset: ui.offset, limit: PAGE });
  banners(page.errors);
  const body = [];
  for (const job of page.jobs) body.push(...await jobRows(job, 0));
  const head = h("tr", {}, h("th", {}), h("th", {}, "State"), h("th", {}, "Job"), h("th", {}, "Backend"),
    h("th", { class: "num" }, "Failures"), h("th", { class: "num" }, "Preemptions"),
    h("th", { class: "num" }, "Tasks"), h("th", { class: "num" }, "Age"), h("th", {}, "Reason"));
  const table = page.jobs.length
    ? h("table", { id: "jobs" }, h("thead", {}, head), h("tbody", {}, body))
    : empty("No jobs match. Local runs are recorded by 'fray run' and by LocalClient(record=True).");
  if (ui.route !== "jobs" || mine !== ui.jobsDrawn) return;
  document.getElementById("view").replaceChildren(h("h1", {}, "Jobs"), jobFilters(), table,
    pager(page.total, page.jobs.length, (offset) => { ui.offset = offset; renderJobs(); }));
  stamp(plural(page.total, "top-level job"));
  schedule(renderJobs, POLL_MS.jobs);
}

// -- one job -------------------------------------------------------------------------------

function facts(job) {
  const items = [
    ["State", pill(job.state)], ["Backend", job.source], ["Attempts", text(job.attempts)],
    ["Failures", count(job.failures, "bad")], ["Preemptions", count(job.preemptions, "warn")],
    ["Tasks", text(job.replicas)], ["Exit code", text(job.exit_code)],
    ["Submitted", when(job.submitted_at)], ["Started", when(job.started_at)],
    ["Finished", when(job.finished_at)], ["Duration", took(job.started_at, job.finished_at)],
  ];
  if (job.parent) items.push(["Parent", jobLink(job.source, job.parent, job.parent)]);
  return h("div", { class: "facts" }, items.map(([label, value]) => h("div", {}, h("span", { class: "label" }, label), value)));
}

function rootCause(detail) {
  const cause = detail.root_cause;
  const job = detail.job;
  if (!cause) {
    if (job.state === "pending" && job.pending_reason) {
      return h("div", { class: "card cause waiting", id: "root-cause" }, h("h2", {}, "Why it waits"),
        h("div", { class: "error" }, job.pending_reason));
    }
    return null;
  }
  const title = cause.recovered ? "Recovered from a failure" : "Root cause";
  const where = cause.attempt === null ? "The job failed" : `Attempt ${cause.attempt} failed first`;
  const lines = [
    h("h2", {}, title),
    h("p", {}, `${where}${cause.exit_code === null ? "" : ` (exit code ${cause.exit_code})`}${cause.at ? ` at ${when(cause.at)}` : ""}:`),
    h("div", { class: "error" }, text(cause.error, "no error text")),
  ];
  if (cause.task) lines.push(h("p", {}, h("b", {}, "First failed task: "), cause.task));
  if (cause.child) lines.push(h("p", {}, h("b", {}, "First failed child: "), jobLink(job.source, cause.child, cause.child)));
  return h("div", { class: `card cause${cause.recovered ? " recovered" : ""}`, id: "root-cause" }, lines);
}

function attemptsTable(detail) {
  if (!detail.attempts.length) {
    return h("p", { class: "note" }, detail.job.attempts
      ? `${detail.job.attempts} attempt(s) started; this backend keeps no per-attempt history (the cluster runs the attempts), only the totals above.`
      : "No attempt has started yet.");
  }
  return h("table", { id: "attempts" },
    h("thead", {}, h("tr", {}, ["Attempt", "Kind", "Exit code", "Started", "Finished", "Took", "Error"].map((c, i) => h("th", { class: [0, 2, 5].includes(i) ? "num" : null }, c)))),
    h("tbody", {}, detail.attempts.map((a) => h("tr", {},
      h("td", { class: "num" }, text(a.attempt)), h("td", {}, pill(a.kind)), h("td", { class: "num" }, text(a.exit_code)),
      h("td", {}, when(a.started_at)), h("td", {}, when(a.finished_at)), h("td", { class: "num" }, took(a.started_at, a.finished_at)),
      h("td", { class: "mono" }, text(a.error, ""))))));
}

function logView(logs) {
  const needle = ui.logFilter.toLowerCase();
  const lines = logs.lines.filter((line) => !needle || line.toLowerCase().includes(needle));
  const pre = h("pre", { class: "logs", id: "logs" }, lines.length ? lines.map((line) => {
    const match = /^(\[[^\]]{1,80}\] )(.*)$/.exec(line);
    return match ? [h("span", { class: "prefix" }, match[1]), match[2], "\n"] : [line, "\n"];
  }) : h("span", { class: "muted" }, logs.lines.length ? "no line matches the filter" : "no output yet"));
  const filter = h("input", { id: "log-filter", placeholder: "filter lines", value: ui.logFilter,
    oninput: (event) => { ui.logFilter = event.target.value; document.getElementById("logs").replaceWith(logView(logs).querySelector("pre")); } });
  const tail = h("select", { id: "log-tail", onchange: (event) => { ui.tail = Number(event.target.value); route(); } },
    [100, 200, 500, 1000].map((n) => h("option", { value: n, selected: n === ui.tail }, `last ${n} lines`)));
  const cut = logs.cut ? h("span", { class: "muted" }, `${logs.cut} long line(s) cut at 2,000 characters`) : null;
  return h("div", {}, h("div", { class: "filters" }, filter, tail, cut), pre);
}

async function renderJob(source, id) {
  let detail;
  try {
    detail = await api(`jobs/${id.split("/").map(encodeURIComponent).join("/")}`, { source });
  } catch (err) {
    document.getElementById("view").replaceChildren(h("h1", {}, "Job not found"), empty(err.message));
    return;
  }
  const logs = await api(`jobs/${id.split("/").map(encodeURIComponent).join("/")}/logs`, { source, tail: ui.tail })
    .catch((err) => ({ lines: [`(logs unavailable: ${err.message})`], cut: 0, errors: [] }));
  banners([...detail.errors, ...logs.errors]);
  const job = detail.job;
  const parts = [
    h("p", { class: "muted" }, h("a", { href: "#/jobs" }, "Jobs"), " / ", job.id),
    h("div", { class: "card" }, h("h1", {}, job.name, " ", pill(job.state)), h("div", { class: "mono muted" }, job.id), facts(job)),
    rootCause(detail),
    h("h2", {}, "Attempts"), attemptsTable(detail),
    h("h2", {}, "Output"), logView(logs),
  ];
  if (detail.children.total) {
    parts.push(h("h2", {}, `Children (${detail.children.total})`), h("table", { id: "children" },
      h("tbody", {}, detail.children.rows.map((kid) => jobRow(kid, 0)))));
  }
  if (detail.groups.length) parts.push(h("h2", {}, "Actor groups it hosts"), groupsTable(detail.groups));
  if (detail.gang) parts.push(h("h2", {}, "TPU gang"), gangCard(detail.gang));
  if (ui.route !== "job") return;
  document.getElementById("view").replaceChildren(...parts.filter(Boolean));
  const ended = FINISHED.has(job.state);
  stamp(ended ? `job ${job.state}: not refreshed` : "refreshing every 3s");
  schedule(() => renderJob(source, id), ended ? 0 : POLL_MS.job);
}

// -- actor groups --------------------------------------------------------------------------

function groupsTable(groups) {
  return h("table", { id: "groups" },
    h("thead", {}, h("tr", {}, ["Group", "Backend", "Job", "Ready", "Pending", "Restarting", "Dead", "Restarts", "Members"].map((c) => h("th", {}, c)))),
    h("tbody", {}, groups.map((g) => h("tr", { "data-group": g.name },
      h("td", { class: "nowrap" }, h("b", {}, g.name), h("div", { class: "muted" }, plural(g.size, "member"))),
      h("td", {}, g.source),
      h("td", {}, g.job_id ? jobLink(g.source, g.job_id, g.job_id) : "-"),
      h("td", { class: "num" }, count(g.ready, "ok")), h("td", { class: "num" }, count(g.pending, "")),
      h("td", { class: "num" }, count(g.restarting, "warn")), h("td", { class: "num dead" }, count(g.dead, "bad")),
      h("td", { class: "num" }, text(g.restarts, "not kept")),
      h("td", {}, h("div", { class: "members" }, g.members.map((m) =>
        h("span", { class: `pill ${m.state}`, title: text(m.error, m.state) }, `${m.name} · ${m.state}`))),
        g.members.filter((m) => m.error).map((m) => h("div", { class: "note mono" }, `${m.name}: ${m.error}`)))))));
}

async function renderActors() {
  const page = await api("actors", { offset: ui.offset, limit: PAGE });
  banners(page.errors);
  if (ui.route !== "actors") return;
  document.getElementById("view").replaceChildren(h("h1", {}, "Actor groups"),
    page.groups.length ? groupsTable(page.groups) : empty("No actor groups: the sources made none yet (fray.dashboard.serve(client, groups=[...]) adds another client's)."),
    pager(page.total, page.groups.length, (offset) => { ui.offset = offset; renderActors(); }));
  stamp(plural(page.total, "group"));
  schedule(renderActors, POLL_MS.actors);
}

// -- TPU gangs -----------------------------------------------------------------------------

function gangCard(g) {
  const first = g.first_failed_slice;
  const firstHost = (s) => s.hosts.filter((x) => typeof x.failed_at === "number")
    .reduce((a, b) => (a === null || b.failed_at < a.failed_at ? b : a), null);
  const slices = g.slices.map((s) => {
    const earliest = s.index === first ? firstHost(s) : null;
    return h("div", { class: "slice", "data-slice": s.index },
      h("div", {}, h("b", {}, `Slice ${s.index}`), " ", h("span", { class: "muted mono" }, s.name),
        s.index === first ? h("div", {}, h("span", { class: "pill failed" }, "failed first")) : null),
      h("div", {}, h("div", { class: "hosts" }, s.hosts.map((x) =>
        h("div", { class: `host ${x.state}${earliest === x ? " first" : ""}`, title: `host ${x.worker}: ${x.state}${x.error ? ` (${x.error})` : ""}` }, `h${x.worker}`))),
        s.hosts.filter((x) => x.error).map((x) => h("div", { class: "note mono" }, `host ${x.worker}${x.failed_at ? ` at ${when(x.failed_at)}` : ""}: ${x.error}`))));
  });
  const keys = [...new Set(g.attempts.flatMap((a) => Object.keys(a.megascale)))].sort();
  const attempts = g.attempts.length ? h("table", { class: "megascale" },
    h("thead", {}, h("tr", {}, h("th", { class: "num" }, "Attempt"), h("th", {}, "Outcome"), keys.map((k) => h("th", {}, k)))),
    h("tbody", {}, g.attempts.map((a) => h("tr", {}, h("td", { class: "num" }, text(a.attempt)), h("td", {}, pill(a.outcome)),
      keys.map((k) => h("td", { class: "mono" }, text(a.megascale[k]))))))) : h("p", { class: "note" }, "No attempt recorded.");
  return h("div", { class: "card gang", "data-gang": g.job_id },
    h("h2", {}, jobLink(g.source, g.job_id, g.job_id), " ", h("span", { class: "muted" }, `${g.tpu_type} × ${g.slices.length} slices`)),
    first === null ? h("p", { class: "muted" }, "No slice has failed.") : h("p", {}, h("b", {}, `Slice ${first} failed first.`)),
    h("div", { class: "legend" }, ["running", "succeeded", "failed", "preempted", "stopped"].map((state) =>
      h("span", {}, h("i", { class: `host ${state}` }), state)), h("span", {}, h("i", { class: "host failed first" }), "failed first")),
    slices, h("h3", {}, "MEGASCALE per attempt"), attempts);
}

async function renderGangs() {
  const page = await api("gangs", { offset: ui.offset, limit: PAGE });
  banners(page.errors);
  if (ui.route !== "gangs") return;
  document.getElementById("view").replaceChildren(h("h1", {}, "TPU gangs"),
    ...(page.gangs.length ? page.gangs.map(gangCard) : [empty("No multi-host TPU gang is described by these sources.")]),
    pager(page.total, page.gangs.length, (offset) => { ui.offset = offset; renderGangs(); }));
  stamp(plural(page.total, "gang"));
  schedule(renderGangs, POLL_MS.gangs);
}

// -- routing -------------------------------------------------------------------------------

function route() {
  const parts = (location.hash.replace(/^#\/?/, "") || "jobs").split("/");
  const name = parts[0] === "job" && parts.length >= 3 ? "job" : ["actors", "gangs"].includes(parts[0]) ? parts[0] : "jobs";
  if (name !== ui.route) ui.offset = 0;
  ui.route = name;
  schedule(null, 0);
  for (const tab of document.querySelectorAll("nav a")) {
    tab.classList.toggle("active", tab.dataset.tab === (name === "job" ? "jobs" : name));
  }
  const fail = (err) => {
    document.getElementById("view").replaceChildren(h("h1", {}, "The dashboard did not answer"), empty(err.message));
  };
  if (name === "job") renderJob(decodeURIComponent(parts[1]), decodeURIComponent(parts.slice(2).join("/"))).catch(fail);
  else if (name === "actors") renderActors().catch(fail);
  else if (name === "gangs") renderGangs().catch(fail);
  else renderJobs().catch(fail);
}

window.addEventListener("hashchange", () => { ui.logFilter = ""; route(); });
document.addEventListener("visibilitychange", () => { if (!document.hidden && ui.timer === null && ui.route !== "job") route(); });
route();
