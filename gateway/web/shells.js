// The page's shells: where the user may have them, the list kept live by a watch the gateway
// makes as the user (server-sent events), why a shell is not running, and creating, starting,
// stopping, extending and deleting, each made as the user (the apiserver and the webhooks say
// no in their own words). Uses `$` and `api` from app.js, called once the page is loaded.
"use strict";

const shells = { rows: new Map(), source: null, places: [], offers: null, retry: null, confirming: null };

const shellKey = (s) => `${s.namespace}/${s.name}`;
const shellPath = (s) => `/api/shells/${encodeURIComponent(s.namespace)}/${encodeURIComponent(s.name)}`;

function option(value, text) {
  const o = document.createElement("option");
  o.value = value;
  o.textContent = text;
  return o;
}

// The list's connection ("up to date"), and what the last button did: apart, so that one never
// hides the other.
function say(text) { $("shells-status").textContent = text; }
function connection(text) { $("live").textContent = text; }

// The list: where the user may have shells, then the shells of the chosen ones, live.
async function showShells() {
  $("shells-error").textContent = "";
  try {
    shells.places = (await api("GET", "/api/places")).places;
  } catch (e) {
    shells.places = [];
    $("shells-error").textContent = e.message;
  }
  fillPlaces();
  follow();
  await loadClasses();
}

function fillPlaces() {
  const filter = $("namespace");
  const chosen = filter.value || localStorage.getItem("namespace") || "";
  filter.replaceChildren(option("", "all my namespaces"), ...shells.places.map((p) => option(p.namespace, p.namespace)));
  filter.value = shells.places.some((p) => p.namespace === chosen) ? chosen : "";
  const creatable = shells.places.filter((p) => p.mayCreate);
  const target = $("create-namespace");
  const was = target.value || filter.value;
  target.replaceChildren(...creatable.map((p) => option(p.namespace, p.namespace)));
  if (creatable.some((p) => p.namespace === was)) target.value = was;
  if (!creatable.length) {
    cannotCreate(shells.places.length
      ? "RBAC lets you create shells in none of your namespaces. Ask your platform team for the myownshell-editor role in one."
      : "No namespace opened to shells is yours. Ask your platform team for one (labelled myownshell.io/shells=enabled, where you may create shells).");
  }
}

function unfollow() {
  if (shells.source) shells.source.close();
  clearTimeout(shells.retry);
  shells.source = null;
}

// The gateway lists each namespace and then watches it, as the user; the stream ends every few
// minutes and the browser opens it again (signed-in checks and all).
function follow() {
  unfollow();
  shells.rows.clear();
  render();
  const namespace = $("namespace").value;
  localStorage.setItem("namespace", namespace);
  const source = new EventSource("/api/shells/live" + (namespace ? "?namespace=" + encodeURIComponent(namespace) : ""));
  shells.source = source;
  connection("connecting…");
  source.addEventListener("reset", (e) => {
    const listed = JSON.parse(e.data);
    for (const key of [...shells.rows.keys()]) if (key.startsWith(listed.namespace + "/")) shells.rows.delete(key);
    for (const s of listed.shells) shells.rows.set(shellKey(s), s);
    connection("up to date");
    render();
  });
  source.addEventListener("row", (e) => {
    const s = JSON.parse(e.data);
    shells.rows.set(shellKey(s), s);
    render();
  });
  source.addEventListener("gone", (e) => {
    shells.rows.delete(shellKey(JSON.parse(e.data)));
    render();
  });
  source.addEventListener("stale", (e) => {
    const stale = JSON.parse(e.data);
    $("shells-error").textContent = `${stale.namespace}: ${stale.reason}`;
    source.close();
    shells.retry = setTimeout(() => { if (shells.source === source) follow(); }, 10000);
  });
  source.onerror = () => { if (shells.source === source) connection("reconnecting…"); };
}

function button(label, action, s, onclick) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  b.dataset.action = action;
  b.dataset.key = shellKey(s);
  b.setAttribute("aria-label", `${label} ${shellKey(s)}`);
  b.onclick = onclick;
  return b;
}

// Why a shell is not running, as `kubectl describe` says it: its conditions, why it stopped,
// and when its lifetime stops it next.
function why(s) {
  const details = document.createElement("details");
  const summary = document.createElement("summary");
  summary.textContent = "Details";
  summary.setAttribute("aria-label", `Details of ${shellKey(s)}`);
  const list = document.createElement("dl");
  const item = (term, text) => {
    const dt = document.createElement("dt");
    dt.textContent = term;
    const dd = document.createElement("dd");
    dd.textContent = text;
    list.append(dt, dd);
  };
  if (s.home) item("Home", `${s.home.size || "default size"}${s.home.phase ? ", " + s.home.phase : ""}`);
  if (s.sharedWith.length) item("Shared with", s.sharedWith.join(", "));
  for (const c of s.conditions) item(`${c.type} ${c.status}`, [c.reason, c.message].filter(Boolean).join(": "));
  if (!s.conditions.length) item("Conditions", "none yet: the controller has not reported on it");
  details.append(summary, list);
  return details;
}

function stateText(s) {
  let text = s.reason ? `${s.state}: ${s.reason}` : s.state;
  if (s.nextStop) {
    const at = new Date(s.nextStop.at).toLocaleTimeString();
    text += s.nextStop.warned ? ` (stops at ${at}: ${s.nextStop.reason})` : ` (${s.nextStop.reason} at ${at})`;
  }
  return text;
}

function rowOf(s) {
  const tr = document.createElement("tr");
  tr.dataset.row = shellKey(s);
  for (const text of [s.namespace, s.name, s.owner, s.className || "—"]) {
    const td = document.createElement("td");
    td.textContent = text;
    tr.append(td);
  }
  const cell = document.createElement("td");
  cell.dataset.state = s.state;
  const words = document.createElement("span");
  words.textContent = stateText(s);
  if (s.nextStop && s.nextStop.warned) words.className = "warning";
  cell.append(words, why(s));
  tr.append(cell);
  const actions = document.createElement("td");
  const open = button("Open", "open", s, () => { location.hash = `#/${encodeURIComponent(s.namespace)}/${encodeURIComponent(s.name)}`; });
  open.dataset.shell = shellKey(s);
  if (!s.stopped) actions.append(open);
  if (s.stopped || s.state === "Stopped") actions.append(button("Start", "start", s, () => act(s, "start", "POST", "/start", "Starting")));
  if (!s.stopped) actions.append(button("Stop", "stop", s, () => act(s, "stop", "POST", "/stop", "Stopping")));
  if (s.nextStop) actions.append(button("Extend", "extend", s, () => act(s, "extend", "POST", "/extend", "Extending")));
  if (s.waitingForApproval && s.owner !== state.user) {
    actions.append(button("Approve", "approve", s, () => act(s, "approve", "POST", "/approve", "Approving")));
  }
  const del = button("Delete", "delete", s, () => confirmDelete(s));
  if (shells.confirming === shellKey(s)) {
    del.textContent = "Really delete?";
    del.setAttribute("aria-label", `Really delete ${shellKey(s)}? Press again to delete it`);
  }
  actions.append(del);
  tr.append(actions);
  return tr;
}

// Every row drawn again, keyboard focus kept on the same control of the same shell.
function render() {
  const focused = document.activeElement;
  const keep = focused && focused.dataset && focused.dataset.key ? [focused.dataset.key, focused.dataset.action] : null;
  const open = new Set([...document.querySelectorAll("#shell-rows details[open]")].map((d) => d.closest("tr").dataset.row));
  const rows = [...shells.rows.values()].sort((a, b) => shellKey(a).localeCompare(shellKey(b)));
  $("shell-rows").replaceChildren(...rows.map(rowOf));
  for (const tr of $("shell-rows").children) if (open.has(tr.dataset.row)) tr.querySelector("details").open = true;
  if (keep) {
    const again = [...document.querySelectorAll("#shell-rows button")].find((b) => b.dataset.key === keep[0] && b.dataset.action === keep[1]);
    if (again) again.focus();
  }
}

async function act(s, action, method, suffix, doing) {
  $("shells-error").textContent = "";
  say(`${doing} ${shellKey(s)}…`);
  try {
    const answer = await api(method, shellPath(s) + suffix);
    say(action === "extend" ? `${shellKey(s)}: no stop before ${answer.extendedUntil}` : `${doing} ${shellKey(s)}: asked`);
  } catch (e) {
    say("");
    $("shells-error").textContent = `${shellKey(s)}: ${e.message}`;
  }
}

// Deleting asks twice: the first press turns the button into the question (kept through the
// list's live changes).
function confirmDelete(s) {
  if (shells.confirming !== shellKey(s)) {
    shells.confirming = shellKey(s);
    render();
    say(`Press again to delete ${shellKey(s)}${s.home ? " (its home goes as its onDelete says)" : ""}.`);
    return;
  }
  shells.confirming = null;
  act(s, "delete", "DELETE", "", "Deleting");
}

// The form: the classes the user may use in the chosen namespace, each with what it offers.
function cannotCreate(why) {
  $("create-why").textContent = why;
  $("create-why").hidden = false;
  $("create-fields").hidden = true;
}

async function loadClasses() {
  const namespace = $("create-namespace").value;
  $("create-error").textContent = "";
  if (!namespace) return;
  try {
    shells.offers = await api("GET", "/api/classes?namespace=" + encodeURIComponent(namespace));
  } catch (e) {
    shells.offers = null;
    cannotCreate(e.message);
    return;
  }
  if (shells.offers.whyNone) { cannotCreate(shells.offers.whyNone); return; }
  $("create-why").hidden = true;
  $("create-fields").hidden = false;
  const classes = shells.offers.classes;
  $("create-class").replaceChildren(...(classes.length
    ? classes.map((c) => option(c.name, c.default ? `${c.name} (default)` : c.name))
    : [option("", "no class: the operator's defaults")]));
  describeClass();
}

function describeClass() {
  const offer = (shells.offers?.classes || []).find((c) => c.name === $("create-class").value);
  const box = $("class-description");
  box.replaceChildren();
  const home = offer?.spec.home || {};
  $("create-home-size").value = home.defaultSize || "1Gi";
  $("home-help").textContent = home.maxSize ? `at most ${home.maxSize}` : "";
  if (!offer) return;
  const spec = offer.spec;
  const p = document.createElement("p");
  p.textContent = spec.description || `Class ${offer.name}.`;
  const facts = [];
  if (spec.images?.default) facts.push(`image ${spec.images.default}${spec.images.allowed?.length ? ` (or ${spec.images.allowed.join(", ")})` : ""}`);
  const res = spec.resources || {};
  const q = (m) => Object.entries(m || {}).map(([k, v]) => `${k} ${v}`).join(", ");
  if (res.default) facts.push(`gets ${q(res.default)}`);
  if (res.max) facts.push(`at most ${q(res.max)}`);
  const life = spec.lifetime || {};
  for (const [k, v] of Object.entries(life)) facts.push(`${k.replace(/([A-Z])/g, " $1").toLowerCase()} ${v}`);
  if (spec.maxRunningPerUser !== undefined) facts.push(`${spec.maxRunningPerUser} running per person`);
  if (spec.approval) facts.push(`starts once ${spec.approval.required || 1} approver(s) say yes`);
  const list = document.createElement("ul");
  list.setAttribute("aria-label", `What class ${offer.name} offers`);
  for (const fact of facts) {
    const li = document.createElement("li");
    li.textContent = fact;
    list.append(li);
  }
  box.append(p, list);
}

const names = (id) => $(id).value.split(",").map((v) => v.trim()).filter(Boolean);

async function createShell(event) {
  event.preventDefault();
  $("create-error").textContent = "";
  const namespace = $("create-namespace").value;
  const body = {
    name: $("create-name").value.trim(),
    className: $("create-class").value || null,
    homeSize: $("create-home").checked ? $("create-home-size").value.trim() : null,
    sharedUsers: names("create-share-users"),
    sharedGroups: names("create-share-groups"),
  };
  try {
    const { shell } = await api("POST", `/api/shells/${encodeURIComponent(namespace)}`, body);
    say(`Created ${shellKey(shell)}: it is starting.`);
    $("create-name").value = "";
  } catch (e) {
    $("create-error").textContent = e.message;
  }
}

function wireShells() {
  $("namespace").onchange = follow;
  $("create-namespace").onchange = loadClasses;
  $("create-class").onchange = describeClass;
  $("create-form").onsubmit = createShell;
}
