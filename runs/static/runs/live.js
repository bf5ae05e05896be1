// The live transcript page (templates/runs/live.html): renders the run's stream into #transcript; every node
// is built with textContent, never HTML. A static module, so the page passes a CSP without inline scripts.
import { followRun } from "./deuz-stream.js";

const list = document.getElementById("transcript");
const status = document.getElementById("run-status");
const announcement = document.getElementById("run-announcement");
const { runId, transport, eventsUrl } = list.dataset;
const nodes = []; // one <li> per transcript entry, in order
let isAnnounced = false;

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

const pretty = (value) => JSON.stringify(value, null, 2);

/** The <li> of one entry; only text entries change after they are built. */
function build(entry) {
  const item = element("li", `entry ${entry.kind}`);
  const label = (text) => item.append(element("span", "entry-label", text));
  if (entry.kind === "text") {
    label(`Assistant, step ${entry.step}`);
    item.text = item.appendChild(element("p", "assistant-text", entry.text));
    item.text.dataset.step = entry.step;
  } else if (entry.kind === "tool-call") {
    label(`Tool call: ${entry.toolName}`);
    item.append(element("pre", "", pretty(entry.input)));
  } else if (entry.kind === "tool-result") {
    label(`${entry.isError ? "Tool error" : "Tool result"}: ${entry.toolName}`);
    item.append(element("pre", "", pretty(entry.output)));
  } else if (entry.kind === "approval") {
    const line = item.appendChild(element("p", "approval-line"));
    line.append(element("strong", "", "Waiting for review:"), " ", element("code", "", entry.toolName), " ",
      element("code", "", JSON.stringify(entry.input)));
    if (entry.agentPath.length) label(`Requested by ${entry.agentPath.join(" › ")}`);
  } else if (entry.kind === "error") {
    item.append(element("p", "", `Error: ${entry.name}: ${entry.message}`));
  } else {
    item.append(element("p", "", entry.text));
  }
  return item;
}

function statusText(transcript) {
  const last = transcript.entries.at(-1);
  const pending = [];
  for (let i = transcript.entries.length - 1; transcript.entries[i]?.kind === "approval"; i--) {
    pending.unshift(transcript.entries[i].toolName);
  }
  switch (transcript.status) {
    case "waiting": return `Waiting for review: ${pending.join(", ") || "a tool call"}.`;
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
  transcript.entries.forEach((entry, index) => {
    const key = entry.kind === "text" ? `text:${entry.step}` : JSON.stringify(entry);
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
  for (const stale of nodes.splice(transcript.entries.length)) stale.remove();
  list.dataset.resumedFrom = transcript.resumedFrom;
  showStatus(statusText(transcript), transcript.status);
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

followRun(runId, { render, transport, onRetry, url: transport === "sse" ? eventsUrl : undefined }).catch((error) => {
  const text = error.status === 401 || error.status === 4401
    ? "You are signed out: sign in again and reload this page."
    : `Could not follow the run: ${error.message}`;
  showStatus(text, "refused");
  announce(text);
});
