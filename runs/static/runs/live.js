// The live transcript page (templates/runs/live.html): renders the run's stream into #transcript, with each
// verdict (who, approve or deny, why) as an entry of its own after the request it answers. Every node is built
// with textContent, never HTML. A static module, so the page passes a CSP without inline scripts.
//
// A stream ends when the run suspends for review. The page also follows the run's live topic (ws/live/), so
// when the run leaves "suspended" (a verdict in the console, the admin or the API) it follows the stream
// again from its cursor and the transcript goes on without a reload.
import { followRun } from "./deuz-stream.js";
import { liveSubscribe, refresher } from "../deuz/live-pages.js";

const list = document.getElementById("transcript");
const status = document.getElementById("run-status");
const announcement = document.getElementById("run-announcement");
const { runId, transport, eventsUrl } = list.dataset;
const nodes = []; // one <li> per shown entry, in order
let isAnnounced = false;
let verdicts = readVerdicts(document);
let lastTranscript = null;
let following = false;
// The run's status as the server said it after the stream last ended (null while following): only a read made
// after the end can tell a verdict that came in from the suspension that ended the stream.
let serverStatus = null;

function readVerdicts(doc) {
  try { return JSON.parse(doc.getElementById("run-verdicts")?.textContent ?? "[]"); } catch { return []; }
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

const pretty = (value) => JSON.stringify(value, null, 2);

/** JSON with sorted keys, so a request's input matches its verdict's whatever the key order. */
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object") {
    return `{${Object.keys(value).sort().map((key) => `${JSON.stringify(key)}:${canonical(value[key])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

const VERDICT_KINDS = { approved: "approved", used: "approved", denied: "denied" };

/** The transcript's entries with a verdict entry after each request that has one (matched by tool and input). */
function withVerdicts(entries) {
  const open = verdicts.map((verdict) => ({ ...verdict, key: `${verdict.tool_name}|${canonical(verdict.input)}` }));
  const shown = [];
  const placed = new Set();
  for (const entry of entries) {
    shown.push(entry);
    if (entry.kind !== "approval") continue;
    const key = `${entry.toolName}|${canonical(entry.input)}`;
    const verdict = open.find((candidate) => candidate.key === key && !placed.has(candidate.approval_id));
    if (!verdict) continue;
    placed.add(verdict.approval_id);
    shown.push({ kind: "verdict", verdict });
  }
  return shown;
}

/** The <li> of one entry; only text entries change after they are built. */
function build(entry) {
  const item = element("li", `entry ${entry.kind}`);
  const label = (text) => item.append(element("span", "entry-label", text));
  const by = entry.agentPath?.length ? ` (${entry.agentPath.join(" › ")})` : "";
  if (entry.kind === "text") {
    label(entry.agentPath?.length ? `Sub-agent ${entry.agentPath.join(" › ")}, step ${entry.step}` : `Assistant, step ${entry.step}`);
    item.text = item.appendChild(element("p", "assistant-text", entry.text));
    item.text.dataset.step = entry.step;
  } else if (entry.kind === "tool-call") {
    label(`Tool call: ${entry.toolName}${by}`);
    item.append(element("pre", "", pretty(entry.input)));
  } else if (entry.kind === "tool-result") {
    label(`${entry.isError ? "Tool error" : "Tool result"}: ${entry.toolName}${by}`);
    if (entry.edit) {
      const edited = item.appendChild(element("div", "edit-line"));
      edited.dataset.editedBy = entry.edit.by ?? "";
      edited.append(element("p", "", `Ran with the input ${entry.edit.by ?? "a reviewer"} edited before approving:`),
        element("pre", "", pretty(entry.edit.input)));
    }
    item.append(element("pre", "", pretty(entry.output)));
  } else if (entry.kind === "approval") {
    const line = item.appendChild(element("p", "approval-line"));
    line.append(element("strong", "", "Waiting for review:"), " ", element("code", "", entry.toolName), " ",
      element("code", "", JSON.stringify(entry.input)));
    if (entry.agentPath.length) label(`Requested by ${entry.agentPath.join(" › ")}`);
  } else if (entry.kind === "verdict") {
    const { verdict } = entry;
    item.classList.add(VERDICT_KINDS[verdict.status] ?? verdict.status);
    item.dataset.verdict = verdict.status;
    label(`Verdict on ${verdict.tool_name}`);
    const line = item.appendChild(element("p", "verdict-line"));
    line.append(element("strong", "", `${verdict.label}.`));
    if (verdict.reason) line.append(" Reason: ", element("q", "verdict-reason", verdict.reason));
    if (verdict.edited_input) {
      item.append(element("p", "", "The agent asked for the input above; it was approved with this one instead:"),
        element("pre", "verdict-edit", pretty(verdict.edited_input)));
    }
  } else if (entry.kind === "error") {
    item.append(element("p", "", `Error: ${entry.name}: ${entry.message}`));
  } else {
    item.append(element("p", "", entry.text));
  }
  return item;
}

function entryKey(entry) {
  if (entry.kind === "text") return `text:${entry.step}:${(entry.agentPath ?? []).join("/")}`;
  if (entry.kind === "verdict") return `verdict:${entry.verdict.approval_id}:${entry.verdict.status}`;
  return JSON.stringify(entry);
}

function statusText(transcript) {
  const last = transcript.entries.at(-1);
  const pending = [];
  for (let i = transcript.entries.length - 1; transcript.entries[i]?.kind === "approval"; i--) {
    pending.unshift(transcript.entries[i].toolName);
  }
  switch (transcript.status) {
    case "waiting":
      if (serverStatus && serverStatus !== "suspended") return "A verdict came in: the run goes on…";
      return `Waiting for review: ${pending.join(", ") || "a tool call"}.`;
    case "finished": return "Finished.";
    case "cancelled": return "Cancelled.";
    case "failed": return `Failed: ${last?.kind === "error" ? last.message : "see the transcript"}.`;
    case "streaming": return transcript.isTurnOver ? "The turn is over." : `Streaming step ${transcript.step}…`;
    default: return "Connecting…";
  }
}

function showStatus(text, state) {
  if (status.textContent !== text) status.textContent = text;
  status.dataset.state = state;
}

function render(transcript) {
  lastTranscript = transcript;
  const shown = withVerdicts(transcript.entries);
  shown.forEach((entry, index) => {
    const key = entryKey(entry);
    let node = nodes[index];
    if (node?.dataset.key !== key) {
      const fresh = build(entry);
      fresh.dataset.key = key;
      if (node) node.replaceWith(fresh);
      else list.append(fresh);
      nodes[index] = node = fresh;
    } else if (entry.kind === "text" && node.text.textContent !== entry.text) {
      node.text.textContent = entry.text;
    }
  });
  for (const stale of nodes.splice(shown.length)) stale.remove();
  list.dataset.resumedFrom = transcript.resumedFrom;
  list.dataset.verdicts = String(shown.filter((entry) => entry.kind === "verdict").length);
  const isResuming = transcript.status === "waiting" && serverStatus && serverStatus !== "suspended";
  showStatus(statusText(transcript), isResuming ? "resuming" : transcript.status);
  if (transcript.isTurnOver) announce(statusText(transcript));
}

function announce(text) {
  if (isAnnounced) return;
  isAnnounced = true;
  list.setAttribute("aria-busy", "false");
  announcement.textContent = text;
}

function onRetry({ delayMs, error }) {
  showStatus(`Connection lost (${error.message}); reconnecting in ${(delayMs / 1000).toFixed(1)} s…`, "reconnecting");
}

/** Follow the stream from the saved cursor until its [DONE]; again later if the run goes on after a verdict. */
async function follow() {
  if (following) return;
  following = true;
  serverStatus = null;
  isAnnounced = false;
  list.setAttribute("aria-busy", "true");
  try {
    const transcript = await followRun(runId, { render, transport, onRetry, url: transport === "sse" ? eventsUrl : undefined });
    following = false;
    if (transcript.status === "waiting") check(); // a verdict may have come in while the stream was ending
  } catch (error) {
    following = false;
    const text = error.status === 401 || error.status === 4401
      ? "You are signed out: sign in again and reload this page."
      : `Could not follow the run: ${error.message}`;
    showStatus(text, "refused");
    announce(text);
  }
}

/** Read the page again: its verdicts, and the run's status; a run no longer suspended is followed again. */
const check = refresher((doc) => {
  verdicts = readVerdicts(doc);
  const fresh = doc.getElementById("transcript")?.dataset.runStatus;
  if (!following && fresh) {
    serverStatus = fresh;
    list.dataset.runStatus = fresh;
  }
  if (lastTranscript) render(lastTranscript);
  if (!following && lastTranscript?.status === "waiting" && serverStatus && serverStatus !== "suspended") follow();
});

// Each change of the run (its status, its requests) is a reason to look again; so is a reconnection.
liveSubscribe([`run:${runId}`], { onFrame: check, onOpen: (isReconnect) => isReconnect && check() });
follow();
