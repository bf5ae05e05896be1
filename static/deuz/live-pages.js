// Pages that update themselves: a page whose <main> names `data-live-topic` follows those topics over the
// `ws/live/` WebSocket (runs.api.pages_socket). A frame only says that something changed; the page then fetches itself
// again and swaps in each `[data-live-region]` whose content changed, so everything shown still comes from the
// server through the view's own permission checks. No HTML is built from frames. A static module, so the page
// keeps its strict CSP.
//
// A region with `data-live-key` is swapped only when its key changes (a form being filled in stays as it is
// until what it decides changes); `data-live-announce` on a region is said politely when it changes.

const FATAL_CLOSE_CODES = new Set([4400, 4401, 4403, 4404]); // refusals retrying cannot fix
const announcer = () => document.getElementById("live-announcement");

/**
 * Follow `topics` (an array) and call `onFrame({topic, event, run_id, status})` for each change; `onOpen(isReconnect)`
 * runs on every (re)connection, since changes while disconnected were not sent; `onDrop(delayMs)` when the
 * connection is lost (or a reconnection fails) and is tried again in `delayMs`. Returns `{close()}`.
 */
export function liveSubscribe(topics, { onFrame, onOpen, onRefused, onDrop } = {}) {
  const address = new URL("/ws/live/", location.href);
  address.protocol = address.protocol.replace(/^http/, "ws");
  for (const topic of topics) address.searchParams.append("topic", topic);
  let socket = null, closed = false, attempt = 0, connectedBefore = false;

  function connect() {
    socket = new WebSocket(address);
    socket.onopen = () => {
      attempt = 0;
      onOpen?.(connectedBefore);
      connectedBefore = true;
    };
    socket.onmessage = (event) => {
      let frame;
      try { frame = JSON.parse(event.data); } catch { return; }
      onFrame?.(frame);
    };
    socket.onclose = (event) => {
      if (closed) return;
      if (FATAL_CLOSE_CODES.has(event.code)) { onRefused?.(event.code); return; }
      // Backoff with jitter, so a restarted server is not met by every open page at once.
      const delay = Math.min(15000, 500 * 2 ** attempt++) * (0.5 + Math.random() / 2);
      onDrop?.(delay);
      setTimeout(connect, delay);
    };
  }

  connect();
  return { close() { closed = true; socket?.close(); } };
}

/** The page as the server renders it now, parsed (never inserted as a whole), or null when it cannot be read. */
export async function fetchPage() {
  const response = await fetch(location.href, {
    credentials: "same-origin", cache: "no-store", headers: { Accept: "text/html" },
  });
  if (!response.ok) return null; // signed out, or no longer allowed: keep what is shown
  return new DOMParser().parseFromString(await response.text(), "text/html");
}

function isChanged(current, fresh) {
  if (current.dataset.liveKey !== undefined || fresh.dataset.liveKey !== undefined) {
    return current.dataset.liveKey !== fresh.dataset.liveKey;
  }
  return current.innerHTML !== fresh.innerHTML;
}

/** Replace `current` by `fresh`, keeping which <details> were open and, where it can, the keyboard focus. */
function swap(current, fresh) {
  const opened = [...current.querySelectorAll("details")].map((details) => details.open);
  const freshDetails = [...fresh.querySelectorAll("details")];
  if (opened.length === freshDetails.length) freshDetails.forEach((details, index) => (details.open = opened[index]));
  const focused = current.contains(document.activeElement) ? document.activeElement : null;
  const imported = document.importNode(fresh, true);
  current.replaceWith(imported);
  if (focused) {
    const href = focused.getAttribute("href");
    const again = (focused.id && document.getElementById(focused.id))
      || (href && imported.querySelector(`a[href="${CSS.escape(href)}"]`));
    (again || imported).focus?.({ preventScroll: true });
  }
  return imported;
}

/** Swap in every live region of `doc` that changed; returns the announcements of those that did. */
export function applyRegions(doc) {
  const said = [];
  for (const current of document.querySelectorAll("[data-live-region][id]")) {
    const fresh = doc.getElementById(current.id);
    if (!fresh || !isChanged(current, fresh)) continue;
    const before = current.dataset.liveAnnounce;
    const after = fresh.dataset.liveAnnounce;
    swap(current, fresh);
    if (after && after !== before) said.push(after);
  }
  if (doc.title && doc.title !== document.title) document.title = doc.title;
  return said;
}

export function announce(texts) {
  const node = announcer();
  if (node && texts.length) node.textContent = texts.join(". ");
}

/** A refresher that coalesces bursts of frames into one fetch at a time, and fetches again if more came. */
export function refresher(apply) {
  let running = false, again = false, timer = null;
  async function run() {
    if (running) { again = true; return; }
    running = true;
    try {
      do {
        again = false;
        const doc = await fetchPage().catch(() => null);
        if (doc) apply(doc);
      } while (again);
    } finally {
      running = false;
    }
  }
  return () => {
    clearTimeout(timer);
    timer = setTimeout(run, 150);
  };
}

/**
 * The notice a live page shows while it is not live (the live transcript's words): "Connection lost; reconnecting
 * in 2.0 s…", so nobody reads a page that stopped updating as current. Hidden while connected.
 */
function connectionNotice(main) {
  const notice = document.createElement("p");
  notice.id = "live-connection";
  notice.className = "status";
  notice.setAttribute("role", "status");
  notice.hidden = true;
  main.prepend(notice);
  let isDown = false;
  return {
    drop(delayMs) {
      const wasDown = isDown;
      isDown = true;
      notice.dataset.state = "reconnecting";
      notice.textContent = `Connection lost; reconnecting in ${(delayMs / 1000).toFixed(1)} s… `
        + "What this page shows may be out of date until then.";
      notice.hidden = false;
      if (!wasDown) announce(["Connection lost; this page stopped updating"]);
    },
    refused() {
      isDown = true;
      notice.dataset.state = "refused";
      notice.textContent = "Live updates stopped: sign in again and reload this page.";
      notice.hidden = false;
      announce([notice.textContent]);
    },
    restore() {
      if (!isDown) return;
      isDown = false;
      notice.hidden = true;
      notice.textContent = "";
      delete notice.dataset.state;
    },
  };
}

// Pages that name their topics follow them on their own.
const main = document.querySelector("main[data-live-topic]");
if (main) {
  const refresh = refresher((doc) => {
    announce(applyRegions(doc));
    document.dispatchEvent(new CustomEvent("deuz:live-refreshed"));
  });
  const notice = connectionNotice(main);
  main.dataset.liveState = "connecting";
  liveSubscribe(main.dataset.liveTopic.split(/\s+/).filter(Boolean), {
    onFrame: refresh,
    onOpen(isReconnect) {
      main.dataset.liveState = "live";
      notice.restore();
      if (isReconnect) refresh(); // what changed while the connection was down was not sent
    },
    onDrop(delayMs) {
      main.dataset.liveState = "reconnecting";
      notice.drop(delayMs);
    },
    onRefused(code) {
      main.dataset.liveState = `refused-${code}`;
      notice.refused();
    },
  });
}
