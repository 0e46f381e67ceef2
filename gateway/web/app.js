// The gateway's page: sign in, list shells, and a terminal in one. Talks only to the gateway
// that served it (the Content-Security-Policy allows nothing else).
"use strict";

const $ = (id) => document.getElementById(id);
const state = { user: null, csrf: null, term: null, fit: null, socket: null, moving: null, moves: 0, target: null, ended: false, retry: 0 };
// A paste larger than this is sent in pieces (the gateway refuses messages above 1 MiB).
const CHUNK = 64 * 1024;
// How long the page keeps trying to reattach after the connection dropped: a held session stays
// in the shell's pod (its holder's detached timeout, an hour by default) and any replica of the
// gateway reattaches it, so this only bounds how long a page waits for a gateway to answer; a
// plain terminal (a pod without the holder) is kept by its gateway for its reattach grace, 60 s.
const REATTACH_FOR_MS = 120000;
const CONNECT_TIMEOUT_MS = 10000;

async function api(method, path, body) {
  const headers = { "Accept": "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET" && state.csrf) headers["X-CSRF-Token"] = state.csrf;
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: "same-origin" });
  const text = await response.text();
  const json = text ? JSON.parse(text) : {};
  if (!response.ok) throw Object.assign(new Error(json.error || response.statusText), { status: response.status, signIn: json.signIn });
  return json;
}

function show(section) {
  for (const id of ["sign-in", "shells", "terminal-view"]) $(id).hidden = id !== section;
  $("who").hidden = $("sign-out").hidden = !state.user;
}

function signedIn(who) {
  state.user = who.user;
  state.csrf = who.csrf;
  $("who").textContent = who.user;
  route();
}

async function signIn() {
  $("sign-in-error").textContent = "";
  const token = $("token").value.trim();
  $("token").value = "";
  try {
    signedIn(await api("POST", "/api/session", { token }));
  } catch (e) {
    $("sign-in-error").textContent = e.message;
  }
}

async function signOut() {
  try { await api("DELETE", "/api/session"); } catch (_) { /* signed out either way */ }
  closeTerminal();
  unfollow();
  state.user = state.csrf = null;
  location.hash = "";
  show("sign-in");
}

function status(text) { $("terminal-status").textContent = text; }

function line(text, color) {
  // Gateway lines in the terminal: yellow notices, red errors.
  state.term.write(`\r\n\x1b[${color}m${text}\x1b[0m\r\n`);
}

function openTerminal(namespace, name, options) {
  closeTerminal();
  unfollow();
  show("terminal-view");
  $("terminal-title").textContent = `${namespace}/${name}`;
  // `joined`: a session picked from the sessions list, as opposed to the one this tab last had.
  state.target = { namespace, name, key: `terminal:${namespace}/${name}`, readOnly: !!options.readOnly, joined: !!options.session };
  // Joining a session by its id (the sessions list's Join or Watch) reattaches to it.
  if (options.session) sessionStorage.setItem(state.target.key, JSON.stringify({ held: true, session: options.session }));
  $("sessions-panel").hidden = true;
  state.ended = false;
  state.forgotten = false;
  state.retry = 0;
  $("stopping").hidden = true;
  const term = new Terminal({ cursorBlink: true, scrollback: 5000, fontFamily: "monospace" });
  const fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open($("terminal"));
  fit.fit();
  term.focus();
  state.term = term;
  state.fit = fit;
  const encoder = new TextEncoder();
  term.onData((data) => {
    const bytes = encoder.encode(data);
    for (let i = 0; i < bytes.length; i += CHUNK) send(bytes.subarray(i, i + CHUNK));
  });
  term.onResize(({ cols, rows }) => send(JSON.stringify({ type: "resize", cols, rows })));
  connect(Date.now());
}

function send(data) {
  if (state.socket && state.socket.readyState === WebSocket.OPEN) state.socket.send(data);
}

function known() {
  try { return JSON.parse(sessionStorage.getItem(state.target.key) || "null"); } catch (_) { return null; }
}

function presence(attached, allowDrive) {
  // Who is attached, shown to everyone attached.
  const who = (attached || []).map((a) => `${a.user}${a.readOnly ? " (watching)" : a.driving ? " (typing)" : ""}`);
  $("presence").textContent = who.length ? `attached: ${who.join(", ")}` : "";
  $("allow-drive").checked = !!allowDrive;
}

// `previous`: the socket of a stopping gateway that hands this terminal over. It goes on showing
// the session, and taking keys, until this socket is attached to it through another replica;
// then it is closed, so the move leaves no gap in output or input.
function connect(droppedAt, previous) {
  const { namespace, name } = state.target;
  const params = new URLSearchParams({ cols: state.term.cols, rows: state.term.rows });
  const remembered = known();
  if (remembered && remembered.held) params.set("session", remembered.session);
  else if (remembered) params.set("terminal", remembered.terminal);
  if (state.target.readOnly) params.set("readOnly", "1");
  const url = `wss://${location.host}/api/terminal/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}?${params}`;
  const socket = new WebSocket(url);
  socket.binaryType = "arraybuffer";
  if (previous) state.moving = socket;
  else state.socket = socket;
  let attached = false;
  // A browser waits minutes for a connection that goes nowhere (an address a stopped replica
  // left behind); give up sooner, and try again (onclose).
  const opening = setTimeout(() => { if (socket.readyState === WebSocket.CONNECTING) socket.close(); }, CONNECT_TIMEOUT_MS);
  socket.onopen = () => clearTimeout(opening);
  if (!previous) status(remembered ? "reattaching…" : "connecting…");
  socket.onmessage = (event) => {
    if (typeof event.data !== "string") {
      if (state.socket === socket) state.term.write(new Uint8Array(event.data));
      return;
    }
    const message = JSON.parse(event.data);
    // A move that was not let in (refused, unavailable): abandoned, the old socket still shows
    // the session and is told to reattach in time.
    if (previous && !attached && message.type !== "attached") {
      if (message.type !== "notice") socket.close();
      return;
    }
    switch (message.type) {
      case "attached":
        attached = true;
        if (previous) {
          // Moved: this socket shows the session from now on.
          previous.onmessage = previous.onclose = null;
          previous.close();
          state.moving = null;
          state.socket = socket;
          state.moves++;
        }
        // The holder draws the session's recent screen next: drawn on a clean terminal, not
        // after what this page already shows of it.
        if (message.held && message.resumed) state.term.reset();
        sessionStorage.setItem(state.target.key, JSON.stringify(message.held
          ? { held: true, session: message.session } : { held: false, terminal: message.terminal }));
        state.retry = 0;
        state.creator = message.creator === state.user;
        $("allow-drive-label").hidden = !message.held || !state.creator;
        $("detach").hidden = !message.held;
        status(message.held
          ? `${message.resumed ? "reattached to" : "started"} session ${message.session} in pod ${message.pod}${message.readOnly ? " (watching)" : ""}`
          : `${message.resumed ? "reattached to" : "connected to"} pod ${message.pod}`);
        presence(message.attached, message.allowDrive);
        break;
      case "presence": presence(message.attached, message.allowDrive); break;
      case "detached": end("detached: the session goes on in the pod; open the shell again to come back"); break;
      case "notice": line(message.message, "33"); status(message.message); break;
      case "error": line(message.message, "31"); status(message.message); break;
      case "refused":
        // The session this tab last had is gone (the shell was stopped and started, its pod
        // replaced): forget it and start afresh, once. A session picked from the list, or a
        // refusal of the shell itself, is said as it is.
        if (!attached && remembered && !state.target.joined && !state.forgotten) {
          state.forgotten = true;
          sessionStorage.removeItem(state.target.key);
          socket.onclose = null;
          socket.close();
          status(`${message.message}: starting a new session`);
          connect(Date.now());
          break;
        }
        end(message.message);
        break;
      // Not opened this time (an apiserver or a holder that could not answer yet): the socket
      // closes, and the page tries again as for a dropped connection.
      case "unavailable": status(message.message); break;
      case "handover":
        // The gateway is stopping: open the session through another replica while this socket
        // still shows it.
        if (state.socket === socket && !state.moving && known()?.held) {
          status(message.message);
          connect(Date.now(), socket);
        }
        break;
      case "stopping": stopping(message.message, message.canExtend); break;
      case "exit": end(`exited with code ${message.code}`); break;
      case "closed":
        // The exec to a held session ended, not the session: reattach as for a dropped socket.
        if (message.reason === "execEnded" && known()?.held) { status(message.message); socket.close(); break; }
        end(message.message);
        break;
      case "replaced": end("opened in another tab"); break;
    }
  };
  socket.onclose = () => {
    // A move that did not happen: the old socket still shows the session, and its gateway tells
    // it to reattach in time.
    if (previous && !attached) {
      if (state.moving === socket) state.moving = null;
      return;
    }
    if (state.socket !== socket || state.ended) return;
    // Dropped: try again for a while, counted from this drop (a socket that had attached) or
    // from the first drop of the tries before it.
    const since = attached ? Date.now() : droppedAt;
    if (Date.now() - since > REATTACH_FOR_MS) { end("connection lost"); return; }
    status("connection lost; reattaching…");
    state.retry = Math.min(state.retry + 1, 5);
    // Jittered, so that the pages of a gateway that went away do not come back all in one beat.
    const wait = 500 * state.retry * (0.5 + Math.random());
    setTimeout(() => { if (state.socket === socket && !state.ended) connect(since); }, wait);
  };
}

function stopping(message, canExtend) {
  // The shell's lifetime stops it soon: say so in the terminal and above it, with the way out.
  line(`[${message}]`, "33");
  $("stopping-message").textContent = message;
  $("extend").hidden = !canExtend;
  $("stopping").hidden = false;
}

async function extend() {
  const { namespace, name } = state.target;
  try {
    const { extendedUntil } = await api("POST", `/api/shells/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}/extend`);
    $("stopping-message").textContent = `Extended: no stop before ${extendedUntil}.`;
    $("extend").hidden = true;
  } catch (e) {
    $("stopping-message").textContent = e.message;
  }
}

function end(why) {
  state.ended = true;
  // A detached session is still there to come back to; anything else is over.
  if (state.target && !why.startsWith("detached")) sessionStorage.removeItem(state.target.key);
  line(`[${why}]`, "31");
  status(why);
}

function closeTerminal() {
  state.ended = true;
  if (state.socket) state.socket.close();
  if (state.moving) {
    state.moving.onmessage = state.moving.onclose = null;
    state.moving.close();
  }
  state.moving = null;
  if (state.term) state.term.dispose();
  state.socket = state.term = state.fit = null;
  $("terminal").replaceChildren();
}

async function listSessions() {
  const { namespace, name } = state.target;
  const rows = $("session-rows");
  rows.replaceChildren();
  $("sessions-panel").hidden = false;
  try {
    const { sessions } = await api("GET", `/api/sessions/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`);
    for (const s of sessions) {
      const tr = document.createElement("tr");
      const since = new Date(s.created * 1000).toLocaleString();
      const who = s.attached.map((a) => a.user).join(", ") || "nobody";
      for (const text of [s.id, s.user, since, who, s.command.join(" ")]) {
        const td = document.createElement("td");
        td.textContent = text;
        tr.append(td);
      }
      const td = document.createElement("td");
      for (const [label, readOnly] of [["Join", false], ["Watch", true]]) {
        const b = document.createElement("button");
        b.type = "button";
        b.textContent = label;
        b.onclick = () => {
          const q = new URLSearchParams({ session: s.id });
          if (readOnly) q.set("readOnly", "1");
          location.hash = `#/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}?${q}`;
        };
        td.append(b);
      }
      tr.append(td);
      rows.append(tr);
    }
    $("sessions-error").textContent = sessions.length ? "" : "No terminals run in this shell.";
  } catch (e) {
    $("sessions-error").textContent = e.message;
  }
}

function route() {
  if (!state.user) { show("sign-in"); return; }
  const m = location.hash.match(/^#\/([^/?]+)\/([^/?]+)(?:\?(.*))?$/);
  if (m) {
    const q = new URLSearchParams(m[3] || "");
    openTerminal(decodeURIComponent(m[1]), decodeURIComponent(m[2]), { session: q.get("session"), readOnly: q.get("readOnly") === "1" });
    return;
  }
  closeTerminal();
  show("shells");
  showShells();
}

// What the browser tests read: the terminal's text, its status line, its id.
window.myownshell = {
  screen: () => {
    const buffer = state.term ? state.term.buffer.active : null;
    if (!buffer) return "";
    const lines = [];
    for (let i = 0; i < buffer.length; i++) lines.push(buffer.getLine(i).translateToString(true));
    return lines.join("\n");
  },
  status: () => $("terminal-status").textContent,
  stopping: () => $("stopping").hidden ? null : $("stopping-message").textContent,
  terminal: () => { const k = state.target ? known() : null; return k ? (k.session || k.terminal) : null; },
  presence: () => $("presence").textContent,
  // How many times a stopping gateway handed this page's terminal over to another replica.
  moves: () => state.moves,
};

window.addEventListener("resize", () => { if (state.fit) state.fit.fit(); });
window.addEventListener("hashchange", route);
$("sign-in-button").onclick = signIn;
$("sign-out").onclick = signOut;
$("extend").onclick = extend;
$("back").onclick = () => { location.hash = ""; };
$("sessions").onclick = listSessions;
$("detach").onclick = () => send(JSON.stringify({ type: "detach" }));
$("allow-drive").onchange = (e) => send(JSON.stringify({ type: "allowDrive", allow: e.target.checked }));
wireShells();

// A sign-in through the identity provider is renewed when the page asks who is signed in: every
// few minutes, and when the page is seen again (a laptop that slept). One that has ended says so.
function checkSession() {
  if (!state.user) return;
  api("GET", "/api/session").catch((e) => {
    if (e.status !== 401 || state.socket) return;
    state.user = state.csrf = null;
    $("sign-in-error").textContent = e.message;
    show("sign-in");
  });
}
setInterval(checkSession, 240000);
document.addEventListener("visibilitychange", () => { if (!document.hidden) checkSession(); });

// Back from the identity provider with what went wrong (the gateway's own sentence, shown as
// text): said once, and taken out of the address.
const signInError = new URLSearchParams(location.search).get("sign-in-error");
if (signInError !== null) {
  $("sign-in-error").textContent = signInError;
  history.replaceState(null, "", location.pathname + location.hash);
}
api("GET", "/api/session").then(signedIn, (e) => {
  // The gateway names its identity provider's sign-in when it has one.
  if (e.signIn) {
    $("provider-sign-in").href = e.signIn;
    $("provider").hidden = false;
  }
  show("sign-in");
});
