// The chat page (templates/runs/chat_detail.html): the latest turn's answer streams into #transcript through the
// run stream client (gapless, resumed from sessionStorage after a reload, reconnecting after a server restart), and
// the page follows the thread's live topic (ws/live/), so a verdict given elsewhere, a turn started in another tab
// or a turn's end swaps in the server's own regions: the turns, the requests waiting, the message box.
// Every node is built with textContent, never HTML. A static module, so the page keeps its strict CSP.
import { followRun } from "../runs/deuz-stream.js";
import { announce, applyRegions, liveSubscribe, refresher } from "./live-pages.js";

const STREAMING = new Set(["queued", "running"]);
const threadId = document.querySelector("[data-thread-id]").dataset.threadId;
const statusLine = document.getElementById("chat-status");
const announcement = document.getElementById("chat-announcement");
let following = null; // {runId, controller} while a turn's stream is followed
let shown = null; // {runId, nodes, transcript}: what the stream rendered into the latest turn
let retrying = null;

const latestTurn = () => document.getElementById("latest-turn");
const approvals = () => document.getElementById("chat-approvals");

function readVerdicts() {
  try { return JSON.parse(document.getElementById("chat-verdicts")?.textContent ?? "[]"); } catch { return []; }
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** JSON on one line with sorted keys, as the server's json_compact writes it. */
function compact(value) {
  if (Array.isArray(value)) return `[${value.map(compact).join(", ")}]`;
  if (value && typeof value === "object") {
    return `{${Object.keys(value).sort().map((key) => `${JSON.stringify(key)}: ${compact(value[key])}`).join(", ")}}`;
  }
  return JSON.stringify(value ?? null);
}

const VERDICT_KINDS = { approved: "approved", used: "approved", denied: "denied" };

/** The stream's entries with each closed request's verdict after it (matched by tool and input). */
function withVerdicts(entries) {
  const verdicts = readVerdicts();
  const placed = new Set();
  const out = [];
  for (const entry of entries) {
    out.push(entry);
    if (entry.kind !== "approval") continue;
    const verdict = verdicts.find((candidate) => !placed.has(candidate.approval_id)
      && candidate.tool_name === entry.toolName && compact(candidate.input) === compact(entry.input));
    if (!verdict) continue;
    placed.add(verdict.approval_id);
    out.push({ kind: "verdict", verdict });
  }
  return out;
}

/** The <li> of one entry, as templates/runs/_chat_entry.html renders the same entry. */
function build(entry) {
  const item = element("li", `entry ${entry.kind}`);
  const label = (text) => item.append(element("span", "entry-label", text));
  const by = entry.agentPath?.length ? ` (${entry.agentPath.join(" › ")})` : "";
  if (entry.kind === "text") {
    label(entry.agentPath?.length ? `Sub-agent ${entry.agentPath.join(" › ")}` : latestTurn()?.dataset.agent ?? "Agent");
    item.text = item.appendChild(element("p", "assistant-text", entry.text));
  } else if (entry.kind === "tool-call") {
    label(`Tool call: ${entry.toolName}${by}`);
    item.append(element("pre", "", compact(entry.input)));
  } else if (entry.kind === "tool-result") {
    if (entry.isError) item.classList.add("error");
    label(`${entry.isError ? "Tool error" : "Tool result"}: ${entry.toolName}${by}`);
    item.append(element("pre", "", compact(entry.output)));
  } else if (entry.kind === "approval") {
    label(`Approval requested: ${entry.toolName}${by}`);
    item.append(element("pre", "", compact(entry.input)));
  } else if (entry.kind === "verdict") {
    const { verdict } = entry;
    const kind = VERDICT_KINDS[verdict.status];
    if (kind) item.classList.add(kind);
    item.dataset.verdict = verdict.status;
    label(`Verdict on ${verdict.tool_name}`);
    const line = item.appendChild(element("p", "verdict-line"));
    line.append(element("strong", "", `${verdict.label}.`));
    if (verdict.reason) line.append(" Reason: ", element("q", "verdict-reason", verdict.reason));
  } else if (entry.kind === "error") {
    label("Error");
    item.append(element("p", "", `${entry.name}: ${entry.message}`));
  } else {
    label("Note");
    item.append(element("p", "recovery-note", entry.text));
  }
  return item;
}

const entryKey = (entry) => (entry.kind === "text" ? `text:${entry.step}:${(entry.agentPath ?? []).join("/")}`
  : entry.kind === "verdict" ? `verdict:${entry.verdict.approval_id}:${entry.verdict.status}` : JSON.stringify(entry));

/** Render the streamed transcript into the latest turn's list, changing only what changed. */
function render(transcript) {
  const list = document.getElementById("transcript");
  if (!list || !shown) return;
  retrying = null; // parts flow again
  shown.transcript = transcript;
  if (!shown.nodes) { // the stream replaces what the server rendered from the turn's checkpoint
    list.replaceChildren();
    shown.nodes = [];
  }
  const entries = withVerdicts(transcript.entries);
  entries.forEach((entry, index) => {
    const key = entryKey(entry);
    let node = shown.nodes[index];
    if (node?.dataset.key !== key) {
      const fresh = build(entry);
      fresh.dataset.key = key;
      if (node) node.replaceWith(fresh); else list.append(fresh);
      shown.nodes[index] = node = fresh;
    } else if (entry.kind === "text" && node.text.textContent !== entry.text) {
      node.text.textContent = entry.text;
    }
  });
  for (const stale of shown.nodes.splice(entries.length)) stale.remove();
  list.dataset.resumedFrom = transcript.resumedFrom;
  list.dataset.cursor = transcript.cursor;
  showStatus();
}

/** The status line: the stream's view while it is followed, the server's (its regions) otherwise. */
function showStatus() {
  const box = approvals();
  const serverStatus = box?.dataset.runStatus ?? "";
  const transcript = following && shown?.transcript;
  let text, state;
  if (retrying) [text, state] = [retrying, "reconnecting"];
  else if (transcript && transcript.status !== "waiting") {
    const last = transcript.entries.at(-1);
    [text, state] = transcript.status === "failed" ? [`The turn failed: ${last?.message ?? "see its run"}.`, "failed"]
      : transcript.status === "connecting" ? ["Connecting…", "connecting"]
        : [`The agent is answering (step ${transcript.step})…`, "streaming"];
  } else if (box?.dataset.waitingFor === "you") [text, state] = ["Waiting for your answer.", "waiting"];
  else if (box?.dataset.waitingFor) [text, state] = ["Waiting for a reviewer.", "waiting"];
  else if (serverStatus === "needs_review") [text, state] = ["A reviewer must settle a step whose outcome is unknown.", "waiting"];
  else if (STREAMING.has(serverStatus) || (transcript && transcript.status === "waiting")) [text, state] = ["The agent goes on…", "streaming"];
  else if (!serverStatus) [text, state] = ["Write the first message.", "finished"];
  else [text, state] = [`The turn is over (${serverStatus}).`, serverStatus === "failed" ? "failed" : "finished"];
  if (statusLine.textContent !== text) statusLine.textContent = text;
  statusLine.dataset.state = state;
}

/** Follow the latest turn's stream until its [DONE]; the page's regions are read again once it ends. */
async function follow() {
  const turn = latestTurn();
  if (!turn || following) return;
  const { runId, eventsUrl } = turn.dataset;
  const controller = new AbortController();
  following = { runId, controller };
  if (shown?.runId !== runId) shown = { runId, nodes: null, transcript: null };
  document.getElementById("transcript")?.setAttribute("aria-busy", "true");
  try {
    await followRun(runId, {
      render, url: eventsUrl, signal: controller.signal,
      onRetry({ delayMs, error }) {
        retrying = `Connection lost (${error.message}); reconnecting in ${(delayMs / 1000).toFixed(1)} s…`;
        showStatus();
      },
    });
  } catch (error) {
    statusLine.textContent = error.isSignedOut ? "You are signed out: sign in again and reload this page."
      : `Could not follow the answer: ${error.message}`;
    statusLine.dataset.state = "refused";
  } finally {
    if (following?.controller === controller) following = null;
  }
  if (controller.signal.aborted) return;
  document.getElementById("transcript")?.setAttribute("aria-busy", "false");
  check(); // the turn's end changed the server's regions: the message box, the requests waiting
}

function onRefreshed() {
  const turn = latestTurn();
  if (following && following.runId !== turn?.dataset.runId) { // a new turn started (another tab, another client)
    following.controller.abort();
    following = null;
  }
  if (shown && shown.runId === turn?.dataset.runId && shown.transcript) render(shown.transcript); // verdicts moved in
  const status = approvals()?.dataset.runStatus ?? "";
  const label = approvals()?.dataset.runStatusLabel;
  const shownStatus = turn?.querySelector(".turn-status"); // the turns region is swapped only for a new turn
  if (label && shownStatus && shownStatus.textContent !== label) shownStatus.textContent = label;
  if (!following && turn && STREAMING.has(status)) follow();
  showStatus();
}

let lastSaid = statusLine.textContent;

const check = refresher((doc) => {
  announce(applyRegions(doc));
  onRefreshed();
  if (!following && statusLine.textContent !== lastSaid) { // said once per state a turn rests in, politely
    lastSaid = announcement.textContent = statusLine.textContent;
  }
});

liveSubscribe([`thread:${threadId}`], { onFrame: check, onOpen: (isReconnect) => isReconnect && check() });
if (latestTurn() && STREAMING.has(approvals()?.dataset.runStatus ?? "")) follow();
showStatus();
