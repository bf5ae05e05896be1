/**
 * Follow a Deuz run's resumable stream from a browser: no dependencies, one ES module.
 *
 * connectDeuzStream(url, options) yields the parts of one turn gaplessly, whatever happens to the
 * connection: it reconnects with backoff from the last seq it yielded and drops parts it has seen.
 * followRun(runId, {render}) keeps a rendered transcript and its cursor in sessionStorage, so a
 * full page reload restores what was on screen and asks the server only for what comes after it.
 */

// Answers that retrying cannot fix. The WebSocket consumer closes with 4000 + the status the SSE view answers.
const REFUSALS = {
  400: ["bad-request", "The server refused the cursor."],
  401: ["signed-out", "You are signed out."],
  403: ["forbidden", "You may not follow this run."],
  404: ["not-found", "There is no such run, or you may not follow it."],
  429: ["too-many-streams", "Too many open streams: close another tab that follows a run."],
};

/** The refusal behind an HTTP status or a WebSocket close code, or undefined when a retry may help. */
function refusal(code) {
  return REFUSALS[code >= 4000 && code < 5000 ? code - 4000 : code];
}

/**
 * A failure that retrying cannot fix: a bad cursor, no signed-in user, no such run, too many streams.
 * `status` is the HTTP status or the close code; `reason` is "signed-out", "forbidden", "not-found",
 * "bad-request" or "too-many-streams"; `isSignedOut` says whether signing in again would help.
 */
export class DeuzStreamError extends Error {
  name = "DeuzStreamError";
  constructor(message, { status, reason } = {}) {
    super(message);
    this.status = status;
    this.reason = reason;
    this.isSignedOut = reason === "signed-out";
  }
}

/** The DeuzStreamError of a refusal, or a plain Error (retried) for anything else. */
function connectionError(code, what) {
  const known = refusal(code);
  if (!known) return new Error(`${what} ${code}.`);
  return new DeuzStreamError(`${known[1]} (${what} ${code}.)`, { status: code, reason: known[0] });
}

/**
 * The parts of a run's turn, from the one after `lastEventId` (a seq already seen) to `[DONE]`.
 *
 * Options: `transport` "sse" (fetch, so the `Last-Event-ID` header is ours to send) or "websocket"
 * (frames `{seq, part}`, `?cursor=`); `onCursor(seq)` runs after each part was consumed; `signal`
 * ends the stream quietly; `onRetry({attempt, delayMs, error})` reports each reconnect;
 * `maxDelayMs` caps the backoff. Throws DeuzStreamError when the server refuses for good (signed out,
 * no such run, too many streams), so a signed-out page stops instead of retrying forever.
 */
export async function* connectDeuzStream(url, { lastEventId, onCursor, transport = "sse", signal, onRetry, maxDelayMs = 5000 } = {}) {
  const seen = Number.parseInt(lastEventId, 10);
  let cursor = Number.isNaN(seen) ? -1 : Math.max(seen, -1);
  const open = transport === "websocket" ? socketMessages : sseMessages;
  for (let attempt = 1; !signal?.aborted; attempt++) {
    // A part without a seq is the server's report of its own failure: shown only if the turn ends
    // right after it, since otherwise the reconnect that follows gets the real parts.
    let failure = null;
    let error = new Error("The stream ended before [DONE].");
    try {
      for await (const message of open(url, cursor, signal)) {
        if (signal?.aborted) return; // parts already buffered are not wanted any more
        if (message.done) {
          if (failure) yield failure;
          return;
        }
        if (message.seq === null) { failure = message.part; continue; }
        if (message.seq <= cursor) continue; // seen before this reconnect: de-duplicated
        if (message.seq !== cursor + 1) throw new Error(`Seq ${message.seq} follows ${cursor}: a gap.`);
        [failure, attempt] = [null, 1]; // progress: the next drop backs off from the start
        yield message.part;
        cursor = message.seq;
        onCursor?.(cursor);
      }
    } catch (caught) {
      if (signal?.aborted) return;
      if (caught instanceof DeuzStreamError) throw caught;
      error = caught;
    }
    if (signal?.aborted) return;
    // Exponential backoff with jitter, so a restarted server is not met by every client at once.
    const delayMs = Math.round(Math.min(maxDelayMs, 250 * 2 ** (attempt - 1)) * (0.5 + Math.random() / 2));
    onRetry?.({ attempt, delayMs, error: failure ? new Error(failure.error?.message ?? "Server error") : error });
    await sleep(delayMs, signal);
  }
}

/** One SSE connection as messages `{seq, part}` or `{done: true}`. */
async function* sseMessages(url, cursor, signal) {
  const headers = { Accept: "text/event-stream" };
  if (cursor >= 0) headers["Last-Event-ID"] = String(cursor);
  const response = await fetch(url, { headers, signal, cache: "no-store", credentials: "same-origin" });
  if (!response.ok) {
    response.body?.cancel().catch(() => {});
    throw connectionError(response.status, `${url} answered`);
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  try {
    for await (const event of sseEvents(reader)) {
      const seq = event.id === undefined || event.id === "" ? null : Number(event.id);
      yield event.data === "[DONE]" ? { done: true } : { seq, part: JSON.parse(event.data) };
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

/**
 * Server-Sent Events `{id, data}` from a reader of text chunks, as the HTML standard parses them:
 * LF, CRLF or CR line ends, `:` comments, a field with or without a value, multi-line data; an
 * unfinished last event is dropped. `id` is the event's own (undefined when it has none), because
 * a seq must not carry over to the unnumbered events that follow it.
 */
async function* sseEvents(reader) {
  let buffer = "", data = [], id;
  for (let done = false; !done; ) {
    const chunk = await reader.read();
    done = chunk.done;
    buffer += chunk.value ?? "";
    for (;;) {
      const end = buffer.search(/[\r\n]/);
      // A CR at the end of a chunk may be the first half of a CRLF: wait for the next chunk.
      if (end === -1 || (end === buffer.length - 1 && buffer[end] === "\r" && !done)) break;
      const line = buffer.slice(0, end);
      buffer = buffer.slice(buffer.startsWith("\r\n", end) ? end + 2 : end + 1);
      if (line === "") {
        if (data.length) yield { id, data: data.join("\n") };
        [data, id] = [[], undefined];
      } else if (!line.startsWith(":")) {
        const colon = line.indexOf(":");
        const field = colon === -1 ? line : line.slice(0, colon);
        const value = colon === -1 ? "" : line.slice(colon + (line[colon + 1] === " " ? 2 : 1));
        if (field === "data") data.push(value);
        else if (field === "id" && !value.includes("\0")) id = value;
      }
    }
  }
}

/** One WebSocket connection as messages `{seq, part}` or `{done: true}`. */
async function* socketMessages(url, cursor, signal) {
  const address = new URL(url, globalThis.location?.href);
  address.protocol = address.protocol.replace(/^http/, "ws"); // http: -> ws:, https: -> wss:
  address.searchParams.set("cursor", String(cursor));
  const inbox = [];
  let wake = () => {};
  const push = (item) => (inbox.push(item), wake());
  const socket = new WebSocket(address);
  socket.onmessage = (event) => push({ frame: event.data });
  socket.onclose = (event) => push({ closed: event.code });
  const onAbort = () => push({ aborted: true });
  signal?.addEventListener("abort", onAbort);
  try {
    for (;;) {
      if (!inbox.length) await new Promise((resolve) => (wake = resolve));
      const item = inbox.shift();
      if (item.aborted) return;
      if (item.closed !== undefined) throw connectionError(item.closed, "The WebSocket closed with");
      const frame = JSON.parse(item.frame);
      yield frame.done ? { done: true } : { seq: frame.seq ?? null, part: frame.part };
    }
  } finally {
    signal?.removeEventListener("abort", onAbort);
    socket.close();
  }
}

/** Wait `ms`, or less if `signal` aborts first. */
function sleep(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
  });
}

/** A transcript before any part: `cursor` is the seq of the last part applied to it. */
export function emptyTranscript() {
  return { cursor: -1, step: 0, status: "connecting", finishReason: null, isTurnOver: false, entries: [] };
}

/**
 * Apply one part to a transcript in place and return it. Entries are
 * `{kind: "text" | "tool-call" | "tool-result" | "approval" | "error" | "notice", step, ...}`.
 * A `recovery` part, or a `step-start` of a step already shown, drops everything that step had
 * shown: it streams again from its start.
 */
export function applyPart(transcript, part) {
  const { entries, step } = transcript;
  const last = entries.at(-1);
  transcript.status = "streaming";
  if (part.agent_path?.length) return applySubAgentPart(transcript, part);
  switch (part.type) {
    case "step-start": // a step seen before starts again: a leg that died before any checkpoint sends no recovery
      transcript.entries = entries.filter((entry) => entry.step < part.step_index || entry.kind === "notice");
      transcript.step = part.step_index;
      break;
    case "text-delta":
      if (last?.kind === "text" && last.step === step && !last.agentPath) last.text += part.text;
      else entries.push({ kind: "text", step, text: part.text });
      break;
    case "tool-call": entries.push({ kind: "tool-call", step, toolName: part.tool_name, input: part.input }); break;
    case "tool-result":
      entries.push({ kind: "tool-result", step, toolName: part.tool_name, output: part.output, isError: Boolean(part.is_error),
        ...(part.edit ? { edit: part.edit } : {}) });
      break;
    case "tool-approval-request": {
      const { tool_name: toolName, input, agent_path: agentPath = [] } = part.approval ?? {};
      entries.push({ kind: "approval", step, toolName, input, agentPath });
      break;
    }
    case "error":
      entries.push({ kind: "error", step, name: part.error?.name, message: part.error?.message });
      transcript.status = "failed";
      break;
    case "cancelled": {
      const reason = part.reason ? `: “${part.reason}”` : "";
      entries.push({ kind: "notice", step, text: `Cancelled by ${part.by ?? "an operator"}${reason}.` });
      break;
    }
    case "finish":
      transcript.finishReason = part.finish_reason;
      transcript.status = { suspended: "waiting", aborted: "cancelled", cancelled: "cancelled" }[part.finish_reason] ?? "finished";
      break;
    case "recovery":
      transcript.entries = entries.filter((entry) => entry.step < part.restarted_step_index);
      transcript.step = part.restarted_step_index;
      transcript.entries.push({ kind: "notice", step: part.restarted_step_index, text: part.message });
      break;
    default: // start, step-finish and parts this client does not know change nothing shown
  }
  return transcript;
}

/**
 * A sub-agent's part (it has an `agent_path`): its text and tool calls are shown within the parent's
 * step, with `agentPath`; its own steps, recoveries and verdicts change nothing shown.
 */
function applySubAgentPart(transcript, part) {
  const { entries, step } = transcript;
  const last = entries.at(-1);
  const agentPath = part.agent_path;
  const samePath = last?.agentPath?.join("\u0000") === agentPath.join("\u0000");
  switch (part.type) {
    case "text-delta":
      if (last?.kind === "text" && last.step === step && samePath) last.text += part.text;
      else entries.push({ kind: "text", step, text: part.text, agentPath });
      break;
    case "tool-call": entries.push({ kind: "tool-call", step, toolName: part.tool_name, input: part.input, agentPath }); break;
    case "tool-result":
      entries.push({ kind: "tool-result", step, toolName: part.tool_name, output: part.output, isError: Boolean(part.is_error), agentPath });
      break;
    default:
  }
  return transcript;
}

/**
 * Follow a run's turn into `render(transcript)`, resuming from sessionStorage after a reload.
 *
 * The transcript (with the seq of its last applied part) is saved under `deuz:transcript:<runId>`
 * and the cursor under `deuz:cursor:<runId>`, both in the same task as the part was rendered, so
 * the saved pair never disagrees with the screen; on load the saved transcript is rendered first
 * and the stream asked for the parts after its cursor. Resolves to the transcript at `[DONE]`.
 */
export async function followRun(runId, { render, transport = "sse", url, signal, onRetry, storage = globalThis.sessionStorage } = {}) {
  const [transcriptKey, cursorKey] = [`deuz:transcript:${runId}`, `deuz:cursor:${runId}`];
  const transcript = { ...emptyTranscript(), ...readJSON(storage, transcriptKey), isTurnOver: false };
  transcript.resumedFrom = transcript.cursor;
  render(transcript);
  const id = encodeURIComponent(runId);
  url ??= transport === "websocket" ? `/ws/runs/${id}/` : `/api/runs/${id}/events/`;
  const parts = connectDeuzStream(url, {
    transport, signal, onRetry, lastEventId: transcript.cursor,
    onCursor(seq) {
      transcript.cursor = seq;
      write(storage, transcriptKey, JSON.stringify(transcript));
      write(storage, cursorKey, String(seq));
    },
  });
  for await (const part of parts) render(applyPart(transcript, part));
  transcript.isTurnOver = !signal?.aborted;
  render(transcript);
  return transcript;
}

// Unreadable storage means following from the start; full or blocked storage costs only the resume
// after a reload. Neither stops the live stream.
function readJSON(storage, key) {
  try { return JSON.parse(storage?.getItem(key) ?? "null"); } catch { return null; }
}

function write(storage, key, value) {
  try { storage?.setItem(key, value); } catch { /* see above */ }
}
