// The room's request (budget, who is working, tokens, Stop), approvals and its sync: live over the
// group's websocket; the API is the truth, so a dropped connection or a gap in seq means a re-fetch.
"use strict";

(function () {
  const { api, errorsOf, showErrors, make, face } = window.garden;
  const shared = window.garden.room;
  const { urls, data, $, state: room } = shared;

  const ACTIVE = new Set(["queued", "running", "awaiting_approval", "synthesizing"]);
  const STATE_LABEL = {
    queued: "Queued", running: "Working", awaiting_approval: "Waiting for your approval",
    synthesizing: "Writing the conclusion", completed: "Completed", stopped: "Stopped",
    failed: "Ended early",
  };

  const budget = $("budget");
  const stopButton = $("stop");
  const composer = $("composer");
  const textarea = $("composer-text");

  // --- the request: budget and Stop ----------------------------------------------------------

  // The request's calls in words a person reads: its steps (working calls) and its conclusion
  // (the synthesis call); the raw counters one click away.
  function conclusionWords(r) {
    // A completed request concluded, by the synthesis call or by the coordinator's own answer.
    if (r.state === "completed") return "conclusion written";
    if (r.state === "synthesizing") return "writing the conclusion";
    return ACTIVE.has(r.state) ? "conclusion not yet written" : "no conclusion written";
  }
  let stepsOpen = false; // kept open across the bar's redraws, as the members' costs are
  function stepsPart(r) {
    const used = r.budget.working_reserved || 0;
    const limit = r.budget.working_limit;
    const part = make("details", { className: "budget-part budget-steps" },
      make("summary", { title: "Open for the model calls counted" },
        make("meter", { min: 0, max: limit, value: used, "aria-label": "steps used" }),
        ` ${used} of ${limit} steps used · ${conclusionWords(r)}`),
      make("span", { className: "budget-figures",
        text: `Model calls: working ${used}/${limit} · synthesis ${r.budget.synthesis_reserved || 0}/${r.budget.synthesis_limit}` }));
    part.open = stepsOpen;
    part.addEventListener("toggle", () => { stepsOpen = part.open; });
    return part;
  }

  // A request that ended on a failure says what happened, in the words of its outcome; where
  // asking again may help (a model server down, slow or busy), Retry sends the owner's message
  // of that request again.
  function ownerText(r) {
    const own = [...room.messages.values()].find((m) => m.request === r.id && m.speaker.kind === "owner");
    return own ? (own.content || []).filter((b) => b.type === "text").map((b) => b.text).join("\n").trim() : "";
  }
  function outcomePart(r) {
    if (r.state !== "failed" || !r.outcome) return null;
    const part = make("span", { className: "budget-part budget-outcome", text: r.outcome });
    const text = r.retry_may_help ? ownerText(r) : "";
    if (text && !room.deleted) {
      const retry = make("button", { type: "button", className: "button retry", text: "Retry",
        "aria-label": "Retry: send your message again" });
      retry.addEventListener("click", async () => {
        retry.disabled = true;
        const result = await api("POST", `${urls.api}/messages`, { text });
        retry.disabled = false;
        if (!result.ok) { showErrors(composer, errorsOf(result)); return; }
        if (result.data && result.data.message) onMessage(result.data.message);
        if (result.data && result.data.request) onRequest(result.data.request);
        textarea.focus();
        shared.schedule();
      });
      part.append(" ", retry);
    }
    return part;
  }

  // How long the member has been working, counted here from the server's timestamp.
  function elapsed(since) {
    const seconds = Math.max(0, Math.floor((Date.now() - Date.parse(since)) / 1000));
    return seconds < 60 ? `${seconds} s` : `${Math.floor(seconds / 60)} min ${seconds % 60} s`;
  }

  // Who is working now (the member of the request with a call out) and for how long, after the
  // state: "Working · Ledger · 12 s". The seconds tick without being announced; the name is, once.
  function workingPart(w) {
    return make("span", { className: "working", title: `${w.agent.name} is working` },
      face(w.agent, { small: true }), make("span", { className: "working-who", text: w.agent.name }),
      make("span", { className: "working-time", "aria-live": "off", text: ` · ${elapsed(w.since)}` }));
  }
  setInterval(() => {
    const time = budget.querySelector(".working-time");
    const r = room.request;
    if (time && r && r.working) time.textContent = ` · ${elapsed(r.working.since)}`;
  }, 1000);

  const count = (n) => Number(n || 0).toLocaleString("en");
  // What the request's calls cost so far (US dollars, a decimal string), beside its tokens;
  // calls whose model has no price are said, not counted as free.
  function cost(usage) {
    const dollars = Number(usage.cost || 0);
    const shown = dollars === 0 ? "$0"
      : dollars >= 0.01 ? `$${dollars.toFixed(2)}`
        : dollars >= 0.000001 ? `$${dollars.toFixed(6).replace(/0+$/, "")}` : "under $0.000001";
    const unpriced = usage.unpriced_calls
      ? ` + ${usage.unpriced_calls} unpriced call${usage.unpriced_calls === 1 ? "" : "s"}` : "";
    return `${shown}${unpriced}`;
  }
  // The tokens and cost, opening to each member's share (read from the API when opened, and
  // again as the request goes on while it stays open).
  let membersOpen = false;
  function usagePart(r) {
    const usage = r.usage;
    if (!usage || !(usage.input_tokens || usage.output_tokens || Number(usage.cost) || usage.unpriced_calls)) return null;
    const list = make("ul", { className: "member-costs" });
    const part = make("details", { className: "budget-part usage" },
      make("summary", { title: `Cost: $${usage.cost} (US dollars). Open for each member's share.`,
        text: `${count(usage.input_tokens)} tokens in · ${count(usage.output_tokens)} out · ${cost(usage)}` }),
      list);
    part.open = membersOpen;
    const fill = async () => {
      const result = await api("GET", `${urls.api}/requests/${r.id}/costs`);
      if (!result.ok || !result.data) return;
      list.replaceChildren(...result.data.members.map((m) => make("li", {},
        face(m.agent, { small: true }), ` ${m.agent.name}: ${m.calls} call${m.calls === 1 ? "" : "s"} · `
          + `${count(m.input_tokens)} in · ${count(m.output_tokens)} out · ${cost(m)}`)));
    };
    part.addEventListener("toggle", () => { membersOpen = part.open; if (part.open) fill(); });
    if (membersOpen) fill();
    return part;
  }

  function renderBudget() {
    const r = room.request;
    budget.hidden = !r;
    stopButton.hidden = !r || !ACTIVE.has(r.state) || room.deleted;
    // A request that has not started is cancelled, not stopped.
    if (r) stopButton.textContent = r.state === "queued" ? "Cancel" : "Stop";
    showLive();
    shared.renderDraft();
    if (!r) return;
    // Waiting for one of the owner's model-call slots, or for a worker, is a state, not an
    // error: say so.
    let label = r.waiting_for === "worker"
      ? "No worker is running — messages will be answered when one starts"
      : r.waiting_for === "calls_in_flight" && r.state === "running"
        ? "Waiting for a free model slot (your other requests are using them)"
        : r.waiting_for === "tools_in_flight" && r.state === "running"
          ? "Waiting to run its tools (your other requests' tools are running)"
          : r.waiting_for === "token_budget" && r.state === "running"
            ? "Waiting for the next minute (this minute's token budget is spent)"
            : STATE_LABEL[r.state] || r.state;
    if (r.state === "queued" && r.waiting_for !== "worker") label = "Queued — next to start";
    const missing = r.state === "completed" ? missingMembers(r) : [];
    if (missing.length) label = `Completed without ${missing.map((m) => m.name).join(", ")}`;
    const behind = Math.max(0, room.queued - (r.state === "queued" ? 1 : 0));
    const working = r.working && running(r) && !r.waiting_for;
    // A status region announces what changes: redrawn only when something did (a draft
    // arriving re-renders the room several times a second).
    const shown = JSON.stringify([label, working && r.working, r.budget, r.usage, behind, r.state,
      missing.map((m) => m.id), r.outcome, Boolean(r.retry_may_help && ownerText(r))]);
    if (shown === budget.dataset.shown) return;
    budget.dataset.shown = shown;
    const parts = [make("strong", { text: label }), working ? workingPart(r.working) : null,
      stepsPart(r), usagePart(r), outcomePart(r)];
    if (behind && ACTIVE.has(r.state)) {
      parts.push(make("span", { className: "budget-part", text: ` · ${behind} more waiting` }));
    }
    // A member whose model failed: its settings are where that is put right.
    missing.forEach((m) => parts.push(make("a", { className: "budget-part", href: urls.agent.replace("/0/", `/${m.id}/`),
      text: `${m.name}'s settings` })));
    budget.replaceChildren(...parts.filter(Boolean));
  }

  // The members of a request whose contribution did not come because their model call failed
  // (the notice groups/loop/asks.py skip_member writes, its member as metadata).
  function missingMembers(r) {
    const found = new Map();
    for (const m of room.messages.values()) {
      if (m.request !== r.id || m.kind !== "notice" || m.addressed_agent == null) continue;
      const text = (m.content || []).map((b) => b.text || "").join(" ");
      if (!/model call failed \(/.test(text)) continue;
      const member = room.members.get(m.addressed_agent);
      if (member) found.set(member.id, member);
    }
    return [...found.values()];
  }

  // The indicator follows one request: the running one, else the latest one posted.
  const running = (r) => Boolean(r) && ACTIVE.has(r.state) && r.state !== "queued";
  // A re-fetch answered before a live event arrived must not turn the indicator back: every
  // step and every ending moves the request's fence forward, and a started request never
  // becomes queued again.
  function staler(a, b) {
    if (a.fence !== undefined && b.fence !== undefined && a.fence !== b.fence) return a.fence < b.fence;
    return a.state === "queued" && b.state !== "queued";
  }
  // The API and the events carry one payload (groups/payloads.py): whole, never partial.
  // The requests known to wait: the count of those behind the running one follows every
  // request's event, not only a re-fetch.
  const queuedIds = new Set();
  function countQueued(request) {
    if (request.state === "queued" && !queuedIds.has(request.id)) {
      queuedIds.add(request.id);
      room.queued += 1;
    } else if (request.state !== "queued" && queuedIds.delete(request.id)) {
      room.queued = Math.max(0, room.queued - 1);
    }
  }

  function onRequest(request) {
    if (!request) return;
    countQueued(request);
    const current = room.request;
    if (current && current.id === request.id) {
      if (staler(request, current)) return;
      room.request = request;
    }
    else if (!current || running(request) || (!running(current) && request.id > current.id)) room.request = request;
    else return;
    if (!ACTIVE.has(request.state)) shared.refreshCanvas();
  }

  stopButton.addEventListener("click", async () => {
    const r = room.request;
    const cancel = Boolean(r) && r.state === "queued";
    stopButton.disabled = true;
    const result = cancel
      ? await api("POST", `${urls.api}/requests/${r.id}/cancel`)
      : await api("POST", `${urls.api}/stop`);
    stopButton.disabled = false;
    if (!result.ok) showErrors(composer, errorsOf(result));
    else if (result.data) onRequest(cancel ? result.data : result.data.stopped);
    // Stop hides itself: focus goes where the next message is written, not to the page.
    if (result.ok) textarea.focus();
    sync();
  });

  // --- the truth from the API -----------------------------------------------------------------

  function resetTranscript() {
    room.messages.clear();
    room.approvals.clear();
    room.conversation = null;
    room.lastSeq = 0;
  }

  function store(m) {
    if (room.conversation === null) room.conversation = m.conversation;
    room.messages.set(m.seq, m);
    room.lastSeq = Math.max(room.lastSeq, m.seq);
    if ((m.content || []).some((b) => b.type === "artifact_ref")) shared.refreshCanvas();
  }

  function onMessage(m) {
    if (data.thread !== null && m.conversation !== data.thread) return; // a closed thread, shown as it was
    if (room.conversation !== null && m.conversation !== room.conversation) {
      if (m.conversation < room.conversation) return; // late news from a closed thread
      resetTranscript(); // a new thread: cleared, or rolled over
      sync();
    } else if (m.seq <= room.lastSeq + 1) {
      store(m);
    } else {
      sync(); // a gap in seq: something never reached us
    }
  }

  async function refreshRequest(id) {
    const result = await api("GET", `${urls.api}/requests/${id}`);
    if (result.ok) onRequest(result.data);
  }

  let syncing = null;
  let syncAgain = false;
  function sync() {
    if (syncing) { syncAgain = true; return syncing; }
    syncing = (async () => {
      do {
        syncAgain = false;
        const threadParam = data.thread !== null && !data.solo ? `&conversation=${data.thread}` : "";
        const result = await api("GET", `${urls.api}/messages?after=${room.lastSeq}${threadParam}`);
        if (result.status === 404) { shared.gone(); return; }
        if (!result.ok) return;
        const page = result.data;
        const { messages, last_seq: lastSeq, conversation: thread } = page;
        if ((room.conversation !== null && thread !== room.conversation) || lastSeq < room.lastSeq) {
          // Cleared or rolled over while we were away: show the open thread from its start.
          // An answer with no thread may be older than a turn that came live meanwhile (it
          // opened a new thread): ask once more rather than wipe that turn and stop.
          const seenLive = room.conversation !== null;
          resetTranscript();
          syncAgain = thread !== null || seenLive;
          continue;
        }
        room.conversation = thread;
        messages.forEach(store);
        if (messages.length && lastSeq > room.lastSeq) syncAgain = true; // one page at a time
        room.queued = page.queued_requests;
        queuedIds.clear();
        page.queued.forEach((r) => queuedIds.add(r.id));
        // A request that has not started is shown too: its place, its budget and Cancel.
        const current = page.active_request || page.queued[0];
        if (current) onRequest(current);
        else if (room.request && ACTIVE.has(room.request.state)) await refreshRequest(room.request.id);
        await shared.loadApprovals();
      } while (syncAgain);
    })().finally(() => { syncing = null; shared.schedule(); });
    return syncing;
  }

  // --- live ---------------------------------------------------------------------------------

  function handle(event) {
    switch (event.type) {
      case "batch": (event.events || []).forEach(handle); break;
      case "message.created": onMessage(event.message); break;
      case "request.state": onRequest(event.request); break;
      case "request.draft": shared.onDraft(event); break;
      case "approval.created":
      case "approval.decided": shared.onApproval(event.approval); break;
      case "conversation.rolled": if (data.thread === null) { resetTranscript(); sync(); } break;
      case "group.updated": shared.onGroupChange(event); break;
      case "group.deleted": if (!room.deleted) shared.gone(); break;
      default: break;
    }
  }

  const live = $("live");
  let connected = false;
  let offline = "Connecting…";
  function setLive(on, text) {
    connected = on;
    offline = text || offline;
    showLive();
  }
  // Connected but with no worker to answer is not "Live".
  function showLive() {
    const noWorker = Boolean(room.request) && room.request.waiting_for === "worker";
    live.textContent = !connected ? offline : noWorker ? "No worker running" : "Live";
    live.classList.toggle("is-live", connected && !noWorker);
  }

  let socket = null;
  let retries = 0;
  function connect() {
    const scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
    socket = new WebSocket(`${scheme}//${window.location.host}${urls.socket}`);
    socket.addEventListener("open", () => { retries = 0; setLive(true); sync(); });
    socket.addEventListener("message", (event) => {
      try { handle(JSON.parse(event.data)); } catch (err) { console.error("garden: bad event", err); }
      shared.schedule();
    });
    socket.addEventListener("close", (event) => {
      if (event.code === 4403) { setLive(false, "Not available"); return; }
      // Too many rooms open at once for this account: no retry until the page is reloaded.
      if (event.code === 4429) { setLive(false, "Too many rooms open — close one and reload"); return; }
      // Signed out, deactivated or a new password: reload, which leads to the sign-in page
      // when this session has ended (and reconnects when it has not).
      if (event.code === 4401) { setLive(false, "Signed out"); window.location.reload(); return; }
      setLive(false, "Reconnecting…");
      setTimeout(connect, Math.min(5000, 250 * 2 ** retries++));
    });
  }

  Object.assign(shared, {
    renderBudget, onRequest, resetTranscript, onMessage, sync, connect, setLive,
    socket: () => socket,
  });
})();
