// A terminal chat on Deuz through the AI SDK's own transport (the `ai` package pinned in the repository's
// package.json): DefaultChatTransport POSTs to /api/chat sending only the last message (the thread holds the
// history), readUIMessageStream builds each answer, approvals are answered as addToolApprovalResponse does, and a
// turn still running when you start is rejoined with reconnectToStream. See README.md beside this file.
//
//   DEUZ_TOKEN=KEY node examples/ai-sdk-chat/chat.mjs [agent] [chat-id]
import { createInterface } from "node:readline";
import { DefaultChatTransport, readUIMessageStream } from "ai";

const base = (process.env.DEUZ_URL ?? "http://127.0.0.1:8000/").replace(/\/?$/, "/");
/** Stop with a sentence on standard error (not a stack trace). */
function stop(sentence) {
  console.error(sentence);
  process.exit(1);
}
if (!process.env.DEUZ_TOKEN) stop(`Set DEUZ_TOKEN to an API token: make one at ${base}account/tokens/ signed in.`);
const headers = { Authorization: `Token ${process.env.DEUZ_TOKEN}` };
const [agent = "assistant", chatId = `chat-${Date.now()}`] = process.argv.slice(2);
const transport = new DefaultChatTransport({
  api: `${base}api/chat`,
  headers,
  body: { agent },
  prepareSendMessagesRequest: ({ id, messages, trigger, messageId, body }) => ({
    body: { ...body, id, messages: messages.slice(-1), trigger, ...(messageId ? { messageId } : {}) },
  }),
});
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function ask(question) {
  process.stdout.write(question);
  const { value, done } = await lines.next();
  return done ? null : value;
}

/** Print a stream's text as it comes, and answer the message readUIMessageStream builds (continuing `message`). */
async function show(stream, message) {
  const [forText, forMessage] = stream.tee();
  const printing = (async () => {
    for await (const chunk of forText) {
      if (chunk.type === "text-delta") process.stdout.write(chunk.delta);
      if (chunk.type === "tool-input-available") process.stdout.write(`\n  [${chunk.toolName} ${JSON.stringify(chunk.input)}]`);
      if (chunk.type === "tool-output-available") process.stdout.write(` -> ${JSON.stringify(chunk.output)}\n`);
      if (chunk.type === "tool-output-denied") process.stdout.write(" -> denied\n");
      if (chunk.type === "error") process.stdout.write(`\n  error: ${chunk.errorText}\n`);
    }
  })();
  let last = message;
  for await (const snapshot of readUIMessageStream({ message, stream: forMessage })) last = snapshot;
  await printing;
  process.stdout.write("\n");
  return last;
}

/** The approvals the answer waits for, answered here; then the turn goes on. */
async function answerApprovals(messages, assistant) {
  while (assistant.parts.some((part) => part.state === "approval-requested")) {
    const deciders = assistant.parts.filter((part) => part.type === "data-deuz-approval");
    if (deciders.some((part) => part.data.approvals_decided_by === "reviewers")) { // not yours to answer
      console.log(`A reviewer decides this in the console (${base}console/); run this again with the chat id ` +
        `${chatId} once they have.`);
      process.exit(0);
    }
    const parts = [];
    for (const part of assistant.parts) {
      if (part.state !== "approval-requested") { parts.push(part); continue; }
      const decided = (await ask(`Approve ${part.type.slice(5)} ${JSON.stringify(part.input)}? [y/n] `)) ?? "n";
      parts.push({ ...part, state: "approval-responded", approval: { ...part.approval, approved: decided.trim() === "y" } });
    }
    const responded = { ...assistant, parts };
    const stream = await transport.sendMessages({ chatId, messages: [...messages, responded], trigger: "submit-message",
      messageId: responded.id });
    assistant = await show(stream, responded);
  }
  return assistant;
}

const earlier = await fetch(`${base}api/chat/${chatId}/messages`, { headers })
  .catch((error) => stop(`Deuz is not answering at ${base} (${error.cause?.code ?? error.message}); set DEUZ_URL.`));
if (!earlier.ok && earlier.status !== 404) stop(`${base}api/chat/${chatId}/messages answered ${earlier.status}: ${await earlier.text()}`);
const messages = earlier.ok ? await earlier.json() : [];
console.log(`Chat ${chatId} with ${agent} at ${base} (${messages.length} earlier messages). An empty line ends it.`);
// A chat id that names no thread yet is a 404 here, as one you may not read: rejoin only a chat that exists.
const running = earlier.ok ? await transport.reconnectToStream({ chatId }) : null;
if (running) messages.push(await show(running));
try {
  for (let text = await ask("you> "); text; text = await ask("you> ")) {
    messages.push({ id: `user-${Date.now()}`, role: "user", parts: [{ type: "text", text }] });
    const stream = await transport.sendMessages({ chatId, messages, trigger: "submit-message", messageId: undefined });
    messages.push(await answerApprovals(messages, await show(stream)));
  }
} catch (error) { // a refusal (a turn still waiting on an approval is a 409, say): its JSON, said once
  stop(`\nDeuz refused: ${error.message}`);
}
process.exit(0);
