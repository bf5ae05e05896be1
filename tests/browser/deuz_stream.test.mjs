// Unit tests of runs/static/runs/deuz-stream.js on node's built-in test runner (`node --test`), no npm packages.
// tests/browser/test_js_client.py runs this file, so the Python suite (and CI) runs it too.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { test as nodeTest } from "node:test";

// A data: URL, because the module is a plain .js file outside any package.json with "type": "module".
const source = readFileSync(new URL("../../runs/static/runs/deuz-stream.js", import.meta.url), "utf8");
const { applyPart, connectDeuzStream, DeuzStreamError, emptyTranscript, followRun } = await import(
  `data:text/javascript,${encodeURIComponent(source)}`
);

// A client that retries forever would hang a broken test: each gets 10 s.
const test = (name, body) => nodeTest(name, { timeout: 10_000 }, body);
const FAST = { maxDelayMs: 5 };
const delta = (text) => ({ type: "text-delta", text });
const event = (seq, part) => `id: ${seq}\ndata: ${JSON.stringify(part)}\n\n`;

/** An SSE server whose n-th connection (from 0) is answered by `connections[n](request, response)`. */
async function serve(connections) {
  const requests = [];
  const server = createServer((request, response) => {
    requests.push(request.headers);
    const answer = connections[Math.min(requests.length - 1, connections.length - 1)];
    response.writeHead(200, { "content-type": "text/event-stream" });
    answer(request, response);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${server.address().port}/events/`, requests, close: () => server.close() };
}

async function collect(stream) {
  const parts = [];
  for await (const part of stream) parts.push(part);
  return parts;
}

test("parses SSE framing: CR, LF and CRLF line ends, comments, multi-line data, chunks split anywhere", async () => {
  const body = ": keep-alive\r\n\r\nid: 0\r\ndata: {\"type\":\"text-delta\",\r\ndata: \"text\":\"caf\u00e9 \"}\r\n\r\n"
    + "retry: 1000\nid:1\ndata:" + JSON.stringify(delta("ok")) + "\n\nevent\rid: 2\rdata: " + JSON.stringify(delta("!"))
    + "\r\rdata: [DONE]\r\n\r\n";
  const bytes = Buffer.from(body, "utf8");
  const server = await serve([async (request, response) => {
    for (const byte of bytes) { // one byte at a time: splits CRLF pairs and the two bytes of "é"
      response.write(Buffer.from([byte]));
      await new Promise((resolve) => setImmediate(resolve));
    }
    response.end();
  }]);
  try {
    const parts = await collect(connectDeuzStream(server.url, FAST));
    assert.deepEqual(parts, [delta("caf\u00e9 "), delta("ok"), delta("!")]);
    assert.equal(server.requests.length, 1);
  } finally {
    server.close();
  }
});

test("reconnects after a drop with Last-Event-ID and drops the parts it has seen", async () => {
  const server = await serve([
    (request, response) => response.end(event(0, delta("a")) + event(1, delta("b")) + event(2, delta("c"))),
    (request, response) => response.end(event(1, delta("b")) + event(2, delta("c")) + event(3, delta("d")) + "data: [DONE]\n\n"),
  ]);
  const cursors = [];
  try {
    const parts = await collect(connectDeuzStream(server.url, { ...FAST, onCursor: (seq) => cursors.push(seq) }));
    assert.deepEqual(parts.map((part) => part.text).join(""), "abcd");
    assert.deepEqual(cursors, [0, 1, 2, 3]);
    assert.equal(server.requests[0]["last-event-id"], undefined);
    assert.equal(server.requests[1]["last-event-id"], "2");
  } finally {
    server.close();
  }
});

test("a server failure reported without a seq is retried, not shown; one followed by [DONE] is shown", async () => {
  const failure = { type: "error", error: { name: "OperationalError", message: "database is locked" } };
  const missing = { type: "error", error: { name: "RunNotFound", message: "No run 'x'." } };
  const server = await serve([
    (request, response) => response.end(event(0, delta("a")) + `data: ${JSON.stringify(failure)}\n\n`),
    (request, response) => response.end(event(1, delta("b")) + `data: ${JSON.stringify(missing)}\n\ndata: [DONE]\n\n`),
  ]);
  const retries = [];
  try {
    const parts = await collect(connectDeuzStream(server.url, { ...FAST, onRetry: (retry) => retries.push(retry) }));
    assert.deepEqual(parts, [delta("a"), delta("b"), missing]);
    assert.equal(retries.length, 1);
    assert.match(retries[0].error.message, /database is locked/);
  } finally {
    server.close();
  }
});

for (const [status, reason] of [[401, "signed-out"], [403, "forbidden"], [404, "not-found"], [429, "too-many-streams"]]) {
  test(`an SSE answer ${status} throws DeuzStreamError (${reason}) at once instead of retrying`, async () => {
    let requests = 0;
    const server = createServer((request, response) => (requests++, response.writeHead(status).end("{}")));
    await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const stream = connectDeuzStream(`http://127.0.0.1:${server.address().port}/`, FAST);
      await assert.rejects(collect(stream), (error) => error instanceof DeuzStreamError && error.status === status
        && error.reason === reason && error.isSignedOut === (status === 401));
      assert.equal(requests, 1);
    } finally {
      server.close();
    }
  });
}

test("a signed-out page says so: the 401's message", async () => {
  const server = createServer((request, response) => response.writeHead(401).end("{}"));
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    await assert.rejects(collect(connectDeuzStream(`http://127.0.0.1:${server.address().port}/`, FAST)), /^DeuzStreamError: You are signed out\./);
  } finally {
    server.close();
  }
});

/** A fake WebSocket whose every connection sends `frames`, then closes with `code`; returns the URLs opened. */
function fakeSockets(frames, code) {
  const opened = [];
  globalThis.WebSocket = class {
    constructor(url) {
      opened.push(String(url));
      setTimeout(() => {
        for (const frame of frames) this.onmessage({ data: JSON.stringify(frame) });
        this.onclose({ code });
      });
    }
    close() {}
  };
  return opened;
}

for (const [code, reason] of [[4401, "signed-out"], [4403, "forbidden"], [4404, "not-found"], [4429, "too-many-streams"]]) {
  test(`a WebSocket closed with ${code} throws DeuzStreamError (${reason}) instead of reconnecting`, async () => {
    const opened = fakeSockets([], code);
    try {
      const stream = connectDeuzStream("http://deuz.test/ws/runs/r1/", { ...FAST, transport: "websocket" });
      await assert.rejects(collect(stream), (error) => error instanceof DeuzStreamError && error.status === code
        && error.reason === reason && error.isSignedOut === (code === 4401));
      assert.equal(opened.length, 1);
    } finally {
      delete globalThis.WebSocket;
    }
  });
}

test("a WebSocket closed with 1011 (a server error) is retried", async () => {
  const opened = fakeSockets([{ seq: null, part: { type: "error", error: { name: "OperationalError", message: "down" } } }], 1011);
  const controller = new AbortController();
  const retries = [];
  try {
    const stream = connectDeuzStream("http://deuz.test/ws/runs/r1/", {
      ...FAST, transport: "websocket", signal: controller.signal,
      onRetry: (retry) => (retries.push(retry), retries.length === 2 && controller.abort()),
    });
    assert.deepEqual(await collect(stream), []);
    assert.equal(opened.length, 2);
    assert.match(retries[0].error.message, /down/);
  } finally {
    delete globalThis.WebSocket;
  }
});

test("aborting the signal ends the stream quietly, also while it waits for parts", async () => {
  const server = await serve([(request, response) => response.write(event(0, delta("a")))]); // then silence
  const controller = new AbortController();
  try {
    const parts = [];
    for await (const part of connectDeuzStream(server.url, { signal: controller.signal })) {
      parts.push(part);
      setTimeout(() => controller.abort(), 20);
    }
    assert.deepEqual(parts, [delta("a")]);
  } finally {
    server.close();
  }
});

test("the WebSocket transport resumes with ?cursor= and de-duplicates frames", async () => {
  const opened = [];
  globalThis.WebSocket = class {
    constructor(url) {
      opened.push(String(url));
      const frames = opened.length === 1
        ? [{ seq: 0, part: delta("a") }, { seq: 1, part: delta("b") }]
        : [{ seq: 1, part: delta("b") }, { seq: 2, part: delta("c") }, { done: true }];
      setTimeout(() => {
        for (const frame of frames) this.onmessage({ data: JSON.stringify(frame) });
        if (opened.length === 1) this.onclose({ code: 1011 });
      });
    }
    close() {}
  };
  try {
    const parts = await collect(connectDeuzStream("http://deuz.test/ws/runs/r1/", { ...FAST, transport: "websocket" }));
    assert.equal(parts.map((part) => part.text).join(""), "abc");
    assert.deepEqual(opened, ["ws://deuz.test/ws/runs/r1/?cursor=-1", "ws://deuz.test/ws/runs/r1/?cursor=1"]);
  } finally {
    delete globalThis.WebSocket;
  }
});

test("a recovery part drops the partial output of the restarted step only", () => {
  const transcript = emptyTranscript();
  const parts = [
    { type: "step-start", step_index: 0 }, delta("Look"), delta("ing up."),
    { type: "tool-call", tool_name: "lookup_expense", input: { expense_id: "exp-1" } },
    { type: "tool-result", tool_name: "lookup_expense", output: { amount: "4" }, is_error: false },
    { type: "step-start", step_index: 1 }, delta("Paying hal"),
    { type: "recovery", restarted_step_index: 1, message: "The previous leg was interrupted." },
    { type: "step-start", step_index: 1 }, delta("Paying it."),
  ];
  for (const part of parts) applyPart(transcript, part);
  const texts = transcript.entries.filter((entry) => entry.kind === "text").map(({ step, text }) => [step, text]);
  assert.deepEqual(texts, [[0, "Looking up."], [1, "Paying it."]]);
  assert.equal(transcript.entries.filter((entry) => entry.kind === "notice").length, 1);
});

test("a cancelled part says who cancelled and why, and its finish reads cancelled", () => {
  const transcript = emptyTranscript();
  for (const part of [{ type: "step-start", step_index: 0 }, delta("Look"),
    { type: "cancelled", by: "olga", reason: "wrong expense" },
    { type: "finish", finish_reason: "cancelled", usage: {} }]) applyPart(transcript, part);
  assert.deepEqual(transcript.entries.at(-1), { kind: "notice", step: 0, text: "Cancelled by olga: “wrong expense”." });
  assert.equal(transcript.status, "cancelled");
});

test("a sub-agent's parts show within the parent's step with their agent path, its own steps and finish ignored", () => {
  const transcript = emptyTranscript();
  const coder = ["coder"];
  for (const part of [{ type: "step-start", step_index: 0 }, delta("Handing over."),
    { type: "tool-call", tool_name: "coder", input: { prompt: "fix" } },
    { type: "step-start", step_index: 0, agent_path: coder }, { ...delta("Running."), agent_path: coder },
    { type: "tool-call", tool_name: "run_shell", input: { command: "ls" }, agent_path: coder },
    { type: "step-finish", step_index: 0, agent_path: coder }]) applyPart(transcript, part);
  assert.deepEqual(transcript.entries.map(({ kind, text, toolName, agentPath }) => [kind, text ?? toolName, agentPath]), [
    ["text", "Handing over.", undefined], ["tool-call", "coder", undefined], ["text", "Running.", coder],
    ["tool-call", "run_shell", coder]]);
  assert.equal(transcript.status, "streaming");
});

test("a step that starts again without a recovery part (no checkpoint yet) replaces what it had shown", () => {
  const transcript = emptyTranscript();
  for (const part of [{ type: "step-start", step_index: 0 }, delta("Let "), delta("me "),
    { type: "step-start", step_index: 0 }, delta("Let "), delta("me "), delta("look.")]) applyPart(transcript, part);
  assert.deepEqual(transcript.entries, [{ kind: "text", step: 0, text: "Let me look." }]);
});

test("followRun after a reload renders the saved transcript and asks only for the parts after its cursor", async () => {
  const all = [delta("one "), delta("two "), delta("three "), { type: "finish", finish_reason: "stop" }];
  const server = await serve([(request, response) => {
    const after = Number(request.headers["last-event-id"] ?? -1);
    response.end(all.slice(after + 1).map((part, index) => event(after + 1 + index, part)).join("") + "data: [DONE]\n\n");
  }]);
  const saved = new Map();
  const storage = { getItem: (key) => saved.get(key) ?? null, setItem: (key, value) => saved.set(key, value) };
  const text = (transcript) => transcript.entries.map((entry) => entry.text).join("");
  try {
    // The first page stops after two parts, as a reload would stop it.
    const controller = new AbortController();
    let rendered = 0;
    await followRun("r1", { url: server.url, storage, signal: controller.signal, render: () => {
      if (++rendered === 3) controller.abort(); // the initial render, then two parts
    } });
    assert.equal(saved.get("deuz:cursor:r1"), "1");
    const first = [];
    const final = await followRun("r1", { url: server.url, storage, render: (transcript) => first.push(text(transcript)) });
    assert.equal(first[0], "one two "); // restored before the network answered
    assert.equal(server.requests.at(-1)["last-event-id"], "1");
    assert.equal(text(final), "one two three ");
    assert.equal(final.status, "finished");
    assert.equal(final.isTurnOver, true);
  } finally {
    server.close();
  }
});
