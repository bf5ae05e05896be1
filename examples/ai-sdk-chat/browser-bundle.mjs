// What the browser example (runs/static/deuz/examples/ai-sdk-chat.js) imports from the `ai` package: esbuild bundles
// these names with their dependencies (zod, @ai-sdk/*) from node_modules into static/vendor/ai/ai.js, one ES module
// served by Deuz itself (no CDN, no build step at run time). Rebuild with scripts/build-ai-bundle after changing
// this list or the `ai` version in package.json.
import "./zod-jitless.mjs"; // first: zod must not probe eval under the page's CSP

export {
  AbstractChat,
  DefaultChatTransport,
  getToolName,
  isToolUIPart,
  lastAssistantMessageIsCompleteWithApprovalResponses,
} from "ai";
