// The AI SDK example (templates/runs/chat_example.html, /examples/ai-sdk-chat/): a chat on Deuz driven by the `ai`
// package's own Chat (AbstractChat, what useChat wraps) and DefaultChatTransport, with no adapter of its own. The
// transport sends only the last message (prepareSendMessagesRequest): the thread holds the history. An approval is
// answered with addToolApprovalResponse, and sendAutomaticallyWhen sends it (the POST carries the tool part in state
// approval-responded). The chat id is in the address (?chat=ID): a reload loads GET /api/chat/ID/messages and rejoins
// a running turn with resumeStream (reconnectToStream). Same origin: the session cookie and the CSRF token
// authenticate it. Every node is built with textContent, never HTML. static/vendor/ai/ai.js is the `ai` package
// bundled by scripts/build-ai-bundle; nothing is fetched from another origin.
import {
  AbstractChat,
  DefaultChatTransport,
  getToolName,
  isToolUIPart,
  lastAssistantMessageIsCompleteWithApprovalResponses,
} from "../../vendor/ai/ai.js";

const csrfToken = document.querySelector('meta[name="csrf-token"]').content;
const form = document.getElementById("ai-chat");
const agentSelect = document.getElementById("ai-agent");
const list = document.getElementById("ai-messages");
const statusLine = document.getElementById("ai-status");
const input = document.getElementById("ai-input");
const sendButton = document.getElementById("ai-send");

/** The state AbstractChat keeps (what @ai-sdk/react's Chat keeps in React): every change re-renders the page. */
class PageChatState {
  #status = "ready";
  #messages;
  constructor(messages, changed) {
    this.#messages = messages;
    this.changed = changed;
    this.error = undefined;
  }
  get status() { return this.#status; }
  set status(status) { this.#status = status; this.changed(); }
  get messages() { return this.#messages; }
  set messages(messages) { this.#messages = messages; this.changed(); }
  pushMessage = (message) => { this.messages = [...this.#messages, message]; };
  popMessage = () => { this.messages = this.#messages.slice(0, -1); };
  replaceMessage = (index, message) => {
    this.messages = [...this.#messages.slice(0, index), message, ...this.#messages.slice(index + 1)];
  };
  snapshot = (thing) => structuredClone(thing);
}

class PageChat extends AbstractChat {
  constructor({ messages, changed, ...init }) {
    super({ ...init, state: new PageChatState(messages, changed) });
  }
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** Who decides each approval, from the data-deuz-approval parts beside the requests: approval id -> "creator"... */
function decidedBy(message) {
  const who = new Map();
  for (const part of message.parts) {
    if (part.type === "data-deuz-approval") who.set(part.data.approval_id, part.data.approvals_decided_by);
  }
  return who;
}

const TOOL_STATES = {
  "input-streaming": "preparing the call", "input-available": "running", "approval-requested": "waiting for a verdict",
  "approval-responded": "verdict sent", "output-available": "done", "output-error": "failed", "output-denied": "denied",
};

function toolPart(chat, part, who) {
  const box = element("div", `tool ${part.state}`);
  box.append(element("span", "", `Tool ${getToolName(part)} `), element("span", "state", `(${TOOL_STATES[part.state]})`));
  box.append(element("pre", "tool-input", JSON.stringify(part.input ?? null)));
  if (part.state === "output-available") box.append(element("pre", "tool-output", JSON.stringify(part.output)));
  if (part.state === "output-error") box.append(element("pre", "tool-output", part.errorText));
  if (part.state === "approval-requested") {
    if (who.get(part.approval.id) !== "creator") {
      box.append(element("p", "", "A reviewer decides this request; the turn goes on once they have."));
      return box;
    }
    const decide = element("p", "decide");
    for (const [label, approved] of [["Approve", true], ["Deny", false]]) {
      const button = element("button", approved ? "approve" : "deny", label);
      button.type = "button";
      button.addEventListener("click", () => chat.addToolApprovalResponse({ id: part.approval.id, approved }));
      decide.append(button);
    }
    box.append(decide);
  }
  return box;
}

function waitsForUser(chat) {
  const last = chat.lastMessage;
  return last?.role === "assistant" && last.parts.some((part) => isToolUIPart(part) && part.state === "approval-requested");
}

function render(chat) {
  const items = chat.messages.map((message) => {
    const item = element("li", message.role);
    item.dataset.messageId = message.id;
    item.append(element("span", "role", message.role === "user" ? "You" : agentSelect.value));
    const who = decidedBy(message);
    for (const part of message.parts) {
      if (part.type === "text") item.append(element("p", `${message.role}-text`, part.text));
      else if (isToolUIPart(part)) item.append(toolPart(chat, part, who));
    }
    return item;
  });
  list.replaceChildren(...items);
  const busy = chat.status === "submitted" || chat.status === "streaming";
  const waiting = !busy && waitsForUser(chat);
  input.disabled = sendButton.disabled = busy || waiting;
  agentSelect.disabled = busy || chat.messages.length > 0;
  statusLine.textContent = chat.status === "error" ? `Error: ${chat.error?.message ?? "the request failed"}`
    : busy ? "The agent is answering…" : waiting ? "Waiting for a verdict." : "Ready.";
}

async function existingChat(chatId) {
  const answer = await fetch(`/api/chat/${encodeURIComponent(chatId)}/messages`);
  if (!answer.ok) return null; // 404: no such chat yet (or one you may not read)
  const thread = await (await fetch(`/api/threads/${encodeURIComponent(chatId)}/`)).json();
  return { messages: await answer.json(), agent: thread.agent };
}

async function start() {
  const address = new URL(window.location.href);
  const chatId = address.searchParams.get("chat") ?? `chat-${crypto.randomUUID()}`;
  const found = await existingChat(chatId);
  if (found) {
    agentSelect.value = found.agent;
    document.getElementById("ai-chat-id").textContent = chatId;
  }
  let frame = null;
  const transport = new DefaultChatTransport({
    api: "/api/chat",
    headers: { "X-CSRFToken": csrfToken },
    body: () => ({ agent: agentSelect.value }), // read by Deuz only when the chat id names no thread yet
    prepareSendMessagesRequest: ({ id, messages, trigger, messageId, body }) => ({
      body: { ...body, id, messages: messages.slice(-1), trigger, ...(messageId ? { messageId } : {}) },
    }),
  });
  const chat = new PageChat({
    id: chatId,
    messages: found?.messages ?? [],
    changed: () => { frame ??= requestAnimationFrame(() => { frame = null; render(chat); }); },
    transport,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    onError: () => render(chat),
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = input.value.trim();
    if (!text || input.disabled) return;
    input.value = "";
    if (!address.searchParams.has("chat")) { // a reload comes back to this chat
      address.searchParams.set("chat", chatId);
      window.history.replaceState(null, "", address);
      document.getElementById("ai-chat-id").textContent = chatId;
    }
    chat.sendMessage({ text });
  });
  render(chat);
  if (found) await chat.resumeStream(); // a turn still running is rejoined (204 when none is)
  input.focus();
}

start().catch((error) => { statusLine.textContent = `Error: ${error.message}`; });
