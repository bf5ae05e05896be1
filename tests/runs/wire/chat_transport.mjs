// Drives a live Deuz as a front end built on the real `ai` package does (pinned in package.json), for
// tests/runs/wire/test_chat_ai.py: DefaultChatTransport against /api/chat, sending only the last message
// (prepareSendMessagesRequest), each answer read with readUIMessageStream. stdin is one action as JSON; stdout is
// what it read: {"message", "chunks", "errors"} (and more for "send-and-reconnect").
//
//   {"action": "send", "base", "token", "chatId", "text", "agent"?}
//   {"action": "answer", "base", "token", "chatId", "message", "approved", "reason"?}   addToolApprovalResponse's POST
//   {"action": "reconnect", "base", "token", "chatId"}                                 {"message": null} on a 204
//   {"action": "send-and-reconnect", ...send's}   reconnects once the first tool output came, reads both to the end
import { DefaultChatTransport, readUIMessageStream } from "ai";

function transport({ base, token, agent }) {
  return new DefaultChatTransport({
    api: `${base}api/chat`,
    headers: { Authorization: `Token ${token}` },
    body: agent ? { agent } : {},
    // The thread holds the history: send only the last message.
    prepareSendMessagesRequest: ({ id, messages, trigger, messageId, body }) => ({
      body: { ...body, id, messages: messages.slice(-1), trigger, ...(messageId ? { messageId } : {}) },
    }),
  });
}

/** Reads a chunk stream to its end: every chunk, and the message readUIMessageStream builds (continuing `message`). */
async function read(stream, message, onChunk) {
  const chunks = [];
  const errors = [];
  const [forMessage, forChunks] = stream.tee();
  const collecting = (async () => {
    for await (const chunk of forChunks) {
      chunks.push(chunk);
      if (onChunk) onChunk(chunk);
    }
  })();
  let last = message ?? null;
  for await (const snapshot of readUIMessageStream({ message, stream: forMessage,
    onError: (error) => errors.push(String(error.message)) })) {
    last = snapshot;
  }
  await collecting;
  return { message: last, chunks, errors };
}

function userMessage(text) {
  return { id: `user-${Date.now()}`, role: "user", parts: [{ type: "text", text }] };
}

async function send(given, onChunk) {
  const stream = await transport(given).sendMessages({
    chatId: given.chatId, messages: [userMessage(given.text)], trigger: "submit-message", messageId: undefined,
    abortSignal: undefined,
  });
  return read(stream, undefined, onChunk);
}

async function answer(given) {
  // What addToolApprovalResponse does to the message useChat holds, then the POST it makes.
  const message = structuredClone(given.message);
  message.parts = message.parts.map((part) => (part.state === "approval-requested"
    ? { ...part, state: "approval-responded",
      approval: { ...part.approval, approved: given.approved, ...(given.reason ? { reason: given.reason } : {}) } }
    : part));
  const stream = await transport(given).sendMessages({
    chatId: given.chatId, messages: [userMessage("earlier"), message], trigger: "submit-message",
    messageId: message.id, abortSignal: undefined,
  });
  return read(stream, message);
}

async function reconnect(given) {
  const stream = await transport(given).reconnectToStream({ chatId: given.chatId });
  return stream === null ? { message: null } : read(stream);
}

async function sendAndReconnect(given) {
  let joined;
  let joinedAt = null;
  const sent = await send(given, (chunk) => {
    if (joined === undefined && chunk.type === "tool-output-available") {
      joined = new Promise((resolve) => setTimeout(resolve, 0)).then(() => reconnect(given));
    }
    if (joinedAt === null && joined !== undefined) joinedAt = chunk.type;
  });
  return { sent, reconnected: await joined };
}

const actions = { send, answer, reconnect, "send-and-reconnect": sendAndReconnect };
let input = "";
for await (const piece of process.stdin) input += piece;
const given = JSON.parse(input);
process.stdout.write(JSON.stringify(await actions[given.action](given)));
