// Reads UI message streams (SSE bodies) with the real `ai` package pinned in package.json, for
// tests/runs/wire/test_ui_messages_ai.py: stdin is {"name": body, ...}; stdout is, per name, every chunk with the
// issues uiMessageChunkSchema finds in it (its objects are strict in the pinned version: an unknown key fails),
// and the message readUIMessageStream builds from what DefaultChatTransport.reconnectToStream reads off the body.
// A stream given as {"body", "continues": name} continues the message read from the stream named (as useChat goes
// on with the message it holds when a later answer comes).
import { DefaultChatTransport, readUIMessageStream, uiMessageChunkSchema } from "ai";

const schema = uiMessageChunkSchema();

/** The data of each event of an SSE body, comments and [DONE] left out. */
function events(body) {
  return body.split("\n\n").flatMap((block) => {
    const data = block.split("\n").filter((line) => line.startsWith("data: ")).map((line) => line.slice(6));
    return data.length && data.join("\n") !== "[DONE]" ? [data.join("\n")] : [];
  });
}

async function checkChunks(body) {
  const checked = [];
  for (const data of events(body)) {
    const chunk = JSON.parse(data);
    const result = await schema.validate(chunk);
    checked.push({ chunk, issues: result.success ? [] : result.error.issues.map((issue) => issue.message) });
  }
  return checked;
}

async function readMessage(name, body, message) {
  const errors = [];
  const transport = new DefaultChatTransport({
    api: "/api/chat",
    fetch: async (url) => new Response(body, {
      status: url === `/api/chat/${name}/stream` ? 200 : 404,
      headers: { "content-type": "text/event-stream", "x-vercel-ai-ui-message-stream": "v1" },
    }),
  });
  const stream = await transport.reconnectToStream({ chatId: name });
  let last = message ?? null;
  const read = readUIMessageStream({ message, stream, onError: (error) => errors.push(String(error.message)) });
  for await (const snapshot of read) last = snapshot;
  return { message: last, errors };
}

let input = "";
for await (const piece of process.stdin) input += piece;
const output = {};
for (const [name, given] of Object.entries(JSON.parse(input))) {
  const { body, continues } = typeof given === "string" ? { body: given } : given;
  const message = continues === undefined ? undefined : output[continues].message;
  output[name] = { chunks: await checkChunks(body), ...(await readMessage(name, body, message)) };
}
process.stdout.write(JSON.stringify(output));
