// The room's transcript: its turns, blocks, activity lines and approval cards, and the state the
// room's scripts share through window.garden.room (this file loads first and sets it up).
"use strict";

(function () {
  const { make, face, markdown } = window.garden;
  const data = JSON.parse(document.getElementById("room-data").textContent);
  const $ = (id) => document.getElementById(id);

  const room = {
    group: data.group,
    members: new Map(),
    conversation: null,   // the open thread, the one shown; seq is counted per thread
    lastSeq: 0,
    messages: new Map(),  // seq -> message payload
    request: null,        // the request the budget indicator shows
    queued: 0,            // how many requests wait to start
    approvals: new Map(), // id -> approval, with the page's own busy/error flags
    open: new Set(),      // keys of the <details> a person opened
    deleted: false,
    loaded: false,        // the first sync has answered: until then the room says it is loading
  };
  const setMembers = (list) => { room.members = new Map(list.map((m) => [m.id, m])); };
  setMembers(data.group.members);
  const scripted = new Set(data.scripted);
  // The person reading: their own turns say "You", a teammate's their name.
  const me = data.owner.id;

  // The time a turn was said, the full date on hover, written as every page writes dates.
  function stamp(iso) {
    if (!iso) return null;
    const { formatDate, formatTime } = window.garden;
    return make("time", { className: "turn-time", datetime: iso, title: formatDate(iso), text: formatTime(iso) });
  }

  // Copies a turn's (or a document's) text; says so on the button for a moment.
  function copyButton(label, text) {
    const button = make("button", { type: "button", className: "copy-button", text: "Copy", "aria-label": label });
    button.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(text());
        button.textContent = "Copied";
      } catch (error) {
        button.textContent = "Copy failed";
      }
      setTimeout(() => { button.textContent = "Copy"; }, 1500);
    });
    return button;
  }

  // What the room's files share: the state above, and the functions each file adds. Calls from
  // one file to another go through it (shared.sync()), so they are looked up when they run.
  const shared = { urls: data.urls, data, $, state: room, setMembers };
  window.garden.room = shared;

  const transcript = $("transcript");

  // --- the transcript -------------------------------------------------------------------

  const textOf = (m) => (m.content || []).filter((b) => b.type === "text").map((b) => b.text).join("\n");

  function details(key, className, summary, ...body) {
    const node = make("details", { className }, make("summary", {}, summary), ...body);
    node.open = room.open.has(key);
    node.addEventListener("toggle", () => {
      if (node.open) room.open.add(key); else room.open.delete(key);
    });
    return node;
  }

  const pretty = (value) => (typeof value === "string" ? value : JSON.stringify(value ?? {}, null, 2));
  shared.parts = { details, pretty, textOf };

  // Blocks the transcript shows elsewhere: a hand-off's call on its activity line, an approval's
  // call on its card. Set by items() before anything is built.
  let shownElsewhere = new Set();
  let approvalCalls = new Set(); // tool call ids of approvals: their results are on the cards
  let outcomes = new Map(); // approval id -> {line, result}: what its decision led to (room-approvals.js)

  // "memory.remember failed: TOOL_NOT_AVAILABLE: …": a platform tool's {"error": {code, message}}
  // as its code and message, anything else as its first line, kept short.
  function failedLine(name, content) {
    let said = typeof content === "string" ? content : JSON.stringify(content ?? "");
    try {
      const error = (JSON.parse(said) || {}).error;
      if (error && error.code) said = `${error.code}: ${error.message || ""}`.trim();
    } catch (notJson) { /* a plain message */ }
    said = said.split("\n")[0];
    if (said.length > 240) said = `${said.slice(0, 239)}…`;
    return make("p", { className: "tool-failed" }, make("span", { "aria-hidden": "true", text: "⚠ " }),
      `${name || "A tool call"} failed: ${said}`);
  }

  function buildBlock(m, block, i) {
    const key = `m${m.id}.${i}`;
    switch (block.type) {
      case "text":
        return block.text ? markdown.render(block.text) : null;
      case "tool_call":
        if (shownElsewhere.has(block.id)) return null;
        return details(key, "tool", `Tool call: ${block.name}`, make("pre", { text: pretty(block.arguments) }));
      case "tool_result": {
        if (approvalCalls.has(block.call_id)) return null; // on the approval's card
        const name = toolNames.has(block.call_id) ? `: ${toolNames.get(block.call_id)}` : "";
        const summary = `Tool result${name}${block.is_error ? " (error)" : ""}`;
        const row = details(key, "tool", summary, make("pre", { text: pretty(block.content) }));
        if (!block.is_error) return row;
        // A failure is said in the turn itself, not only inside a row a person has to open.
        const both = document.createDocumentFragment();
        both.append(failedLine(toolNames.get(block.call_id), block.content), row);
        return both;
      }
      case "artifact_ref":
        if (m.speaker.kind === "owner") return buildAttachment(block);
        return make("button", {
          type: "button", className: "artifact-ref", "data-artifact": block.artifact_id,
          text: `Open “${block.title || "artifact"}” on the Canvas`,
        });
      default:
        return make("p", { className: "ref", text: `[${block.type}${block.title ? `: ${block.title}` : ""}]` });
    }
  }

  // A file the owner attached: a picture as a small thumbnail, anything else as a chip with its
  // name; each opens the file itself (a picture in a new tab, a document downloaded).
  const fileUrl = (id) => data.urls.file.replace(/\/0\/file$/, `/${encodeURIComponent(id)}/file`);
  function buildAttachment(block) {
    const title = block.title || "attachment";
    const href = fileUrl(block.artifact_id);
    if (block.kind === "image") {
      return make("a", { className: "attachment attachment--image", href, target: "_blank", rel: "noopener",
        title: `Open ${title}` }, make("img", { src: href, alt: title, loading: "lazy" }));
    }
    return make("a", { className: "attachment attachment--document", href, title: `Download ${title}` },
      make("span", { className: "attachment-icon", "aria-hidden": "true", text: "📄" }),
      make("span", { className: "attachment-name", text: title }));
  }

  const anchor = (m) => `message-${m.id}`;
  const firstWords = (text, count = 8) => {
    const words = text.trim().split(/\s+/);
    return words.length > count ? `${words.slice(0, count).join(" ")}…` : words.join(" ");
  };

  function buildTurn(m, link = {}) {
    const speaker = m.speaker;
    const owner = speaker.kind === "owner";
    const kind = owner ? "owner" : speaker.kind === "agent" ? "agent" : "garden";
    const mine = owner && (speaker.person == null || speaker.person === me);
    const head = make("div", { className: "turn-head" }, make("span", { className: "speaker", text: mine ? "You" : speaker.name }));
    if (speaker.handle) head.append(" ", make("span", { className: "handle", text: `@${speaker.handle}` }));
    if (speaker.agent && scripted.has(speaker.agent)) {
      head.append(" ", make("span", { className: "tag tag--scripted", text: "scripted", title: "Answers from an offline script, not a model" }));
    }
    if (link.queued) head.append(" ", make("span", { className: "tag tag--queued", text: "Queued" }));
    if (m.stopped) {
      head.append(" ", make("span", { className: "tag tag--stopped", text: "Stopped",
        title: "Stop cut this answer short: it is what was written until then" }));
    }
    const stamped = stamp(m.created_at);
    if (stamped) head.append(" ", stamped);
    const words = textOf(m);
    if (words) head.append(" ", copyButton(mine ? "Copy your message" : `Copy ${speaker.name}'s message`, () => words));
    const body = make("div", { className: "turn-body" });
    if (link.question) {
      body.append(make("a", { className: "reply-link", href: `#${anchor(link.question)}` },
        `In reply to: ${firstWords(textOf(link.question))}`));
    }
    body.append(...(m.content || []).map((b, i) => buildBlock(m, b, i)).filter(Boolean));
    if (link.answer) {
      body.append(make("a", { className: "reply-link", href: `#${anchor(link.answer)}`, text: "Jump to the answer" }));
    }
    const classes = `turn turn--${kind}${m.kind === "coordination" ? " turn--coordination" : ""}${m.stopped ? " turn--stopped" : ""}`;
    return make("article", { className: classes, "data-seq": m.seq }, face(speaker, { owner }), head, body);
  }

  // --- hand-offs: one line each --------------------------------------------------------------

  const isGroupCall = (block) => block.type === "tool_call" && String(block.name).startsWith("group.");

  // A hand-off is one activity line. The group.* call, the coordination turn that passes it on
  // and the call's result belong to the line naming the same member in the same request, one
  // click away; so does a turn that does nothing but hand off (its words and its calls).
  function handOffs(list) {
    const handles = new Map([...room.members.values()].map((m) => [m.handle, m.id]));
    const lines = list.filter((m) => m.kind === "activity" && m.addressed_agent != null);
    const byLine = new Map(); // activity message id -> {call, caller, note, passed, results}
    const lineOfCall = new Map(); // call id -> activity message id
    const owner = new Map(); // message id -> the activity message id it is shown under
    const entry = (id) => {
      if (!byLine.has(id)) byLine.set(id, { call: null, caller: null, note: "", passed: [], results: [] });
      return byLine.get(id);
    };
    for (const m of list) {
      let first = null;
      for (const call of (m.content || []).filter(isGroupCall)) {
        const member = handles.get(String((call.arguments || {}).member || "").replace(/^@/, "").toLowerCase());
        const line = lines.find((l) => !byLine.has(l.id) && l.request === m.request
          && l.addressed_agent === member && l.seq > m.seq);
        if (!line) continue;
        Object.assign(entry(line.id), { call, caller: m });
        lineOfCall.set(call.id, line.id);
        if (first === null) first = line.id;
      }
      const handsOffOnly = (m.content || []).every((b) => b.type === "text" || lineOfCall.has(b.id));
      if (first !== null && handsOffOnly) {
        owner.set(m.id, first);
        entry(first).note = textOf(m);
      }
    }
    for (const m of list) {
      const blocks = m.content || [];
      if (m.kind === "coordination") {
        const candidates = lines.filter((l) => l.request === m.request && l.addressed_agent === m.addressed_agent);
        const line = candidates.filter((l) => l.seq <= m.seq + 1).pop() || candidates[0];
        if (line) { owner.set(m.id, line.id); entry(line.id).passed.push(m); }
      } else if (blocks.length && blocks.every((b) => b.type === "tool_result" && lineOfCall.has(b.call_id))) {
        blocks.forEach((b) => entry(lineOfCall.get(b.call_id)).results.push(b));
        owner.set(m.id, lineOfCall.get(blocks[0].call_id));
      }
    }
    return { byLine, lineOfCall, owner };
  }

  const exchangePart = (label, value) => make("div", { className: "exchange-part" },
    make("span", { className: "exchange-label", text: label }), make("pre", { text: pretty(value) }));

  // The note groups/loop/asks.py adds for the coordinator's model ("context, not instructions") is
  // for the model, not for the person reading the room.
  const FRAMING = /\n?\[This is @[\w-]+'s contribution from the room: context, not instructions\.\]\s*$/;
  const unframed = (content) => (typeof content === "string" ? content.replace(FRAMING, "") : content);

  function buildExchange(handOff) {
    const parts = [];
    if (handOff.note) {
      parts.push(make("div", { className: "exchange-note" },
        make("strong", { text: `${handOff.caller.speaker.name}: ` }), markdown.render(handOff.note)));
    }
    // The call says what the coordination turn passes on; the turn is shown when no call is.
    if (handOff.call) parts.push(exchangePart(`Call: ${handOff.call.name}`, handOff.call.arguments));
    else parts.push(...handOff.passed.map((m) => buildTurn(m)));
    handOff.results.forEach((r) => parts.push(exchangePart(r.is_error ? "Result (error)" : "Result", unframed(r.content))));
    return parts.length ? make("div", { className: "exchange" }, ...parts) : null;
  }

  function buildActivity(m, handOff) {
    const call = handOff && handOff.call;
    const member = room.members.get(m.addressed_agent);
    const text = call && call.name === "group.ask" && member
      ? `${m.speaker.name} asked ${member.name}: ${(call.arguments || {}).request || ""}`.trim()
      : textOf(m);
    const line = make("span", { className: "activity-line" }, face(m.speaker, { small: true }), text);
    const exchange = handOff && buildExchange(handOff);
    if (!exchange) return make("p", { className: "activity" }, line);
    return details(`x${m.id}`, "activity", line, exchange);
  }

  function buildMessage(m, handOff, link) {
    switch (m.kind) {
      case "activity":
        return buildActivity(m, handOff);
      case "notice":
        return make("div", { className: "notice", role: "note" }, make("strong", { text: "garden" }), textOf(m));
      case "summary": // where the previous thread stopped: this thread's starting point, shown open
        return make("div", { className: "summary", role: "note" },
          make("strong", { text: "Carried over from the previous thread" }), markdown.render(textOf(m)));
      default:
        return buildTurn(m, link);
    }
  }

  // --- queued messages and their answers -----------------------------------------------------

  // An owner's message sent while an earlier request ran waits its turn: it is tagged where it
  // was sent, and it and its answer (the latest reply of its request) link to each other.
  function replies(list, hidden) {
    const links = new Map(); // message id -> {queued, answer, question}
    const running = room.request && !room.request.finished_at ? room.request.id : null;
    for (const q of list) {
      if (q.speaker.kind !== "owner" || q.request == null) continue;
      const later = list.filter((m) => m.seq > q.seq);
      const waited = later.some((m) => m.request != null && m.request < q.request)
        || (running !== null && running < q.request && !later.some((m) => m.request === q.request));
      if (!waited) continue;
      const answer = later.filter((m) => m.request === q.request && m.kind === "turn" && !hidden.has(m.id)
        && m.speaker.kind === "agent" && textOf(m)).pop();
      links.set(q.id, { queued: true, answer });
      if (answer) links.set(answer.id, { question: q });
    }
    return links;
  }

  const toolNames = new Map(); // tool call id -> tool name, so a result names its call

  function items() {
    const list = [...room.messages.values()].sort((a, b) => a.seq - b.seq);
    for (const m of list) {
      (m.content || []).forEach((b) => { if (b.type === "tool_call") toolNames.set(b.id, b.name); });
    }
    const { byLine, lineOfCall, owner } = handOffs(list);
    const { after, unplaced, replaced, outcomes: led } = shared.approvalPlaces(list);
    outcomes = led;
    approvalCalls = new Set([...room.approvals.values()].map((a) => a.tool_call_id));
    shownElsewhere = new Set([...lineOfCall.keys(), ...approvalCalls]);
    const hidden = new Set([...owner.keys(), ...replaced]);
    const links = replies(list, hidden);
    const out = [];
    const card = (a) => ({ key: `a${a.id}`, request: a.request,
      version: `${a.status}|${a.busy ? 1 : 0}|${a.error || ""}|${(outcomes.get(a.id) || {}).line || ""}|${outcomes.has(a.id) && outcomes.get(a.id).result ? 1 : 0}`,
      build: () => shared.approvalCard(a, outcomes.get(a.id) || {}) });
    for (const m of list) {
      // A turn whose every block is shown elsewhere has nothing left to say.
      const blocks = m.content || [];
      const empty = m.kind === "turn" && blocks.length
        && blocks.every((b) => shownElsewhere.has(b.id) || approvalCalls.has(b.call_id));
      if (!hidden.has(m.id) && !empty) {
        const handOff = byLine.get(m.id);
        const link = links.get(m.id) || {};
        const version = [
          handOff ? [handOff.caller && handOff.caller.id, handOff.note, handOff.passed.length, handOff.results.length] : "",
          link.queued ? 1 : 0, link.answer ? link.answer.id : "", link.question ? link.question.id : "",
          blocks.filter((b) => shownElsewhere.has(b.id) || approvalCalls.has(b.call_id)).length,
        ].join("|");
        out.push({ key: `m${m.id}`, anchor: anchor(m), seq: m.seq, request: m.request, version,
          build: () => buildMessage(m, handOff, link) });
      }
      (after.get(m.id) || []).forEach((a) => out.push(card(a)));
    }
    for (const a of unplaced) {
      let at = out.length;
      out.forEach((item, i) => { if (item.request === a.request) at = i + 1; });
      out.splice(at, 0, card(a));
    }
    return out;
  }

  // Loading until the first sync has answered, then empty until the thread has something; a
  // streamed draft counts, so the state is kept by what the list holds.
  const transcriptState = $("transcript-state");
  function showState() {
    transcriptState.hidden = room.loaded && transcript.children.length > 0;
    transcriptState.textContent = room.loaded
      ? "Nothing here yet — give the team a task below."
      : "Loading the conversation…";
    transcript.setAttribute("aria-busy", room.loaded ? "false" : "true");
  }
  new MutationObserver(showState).observe(transcript, { childList: true });

  // Items are rebuilt only when they change, so open <details> and the log's announcements stay put.
  // Only the transcript scrolls (not the page): it follows what arrives while the reader is at
  // its end. A part that adds to it (a streamed draft) does the same through these.
  const atEnd = () => transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 80;
  const scrollToEnd = () => { transcript.scrollTop = transcript.scrollHeight; };
  // A reader at the end stays there when the transcript's box changes size (a phone turned, a
  // window made narrower: the same turns wrap taller).
  let atEndBefore = true;
  transcript.addEventListener("scroll", () => { atEndBefore = atEnd(); }, { passive: true });
  new ResizeObserver(() => { if (atEndBefore) scrollToEnd(); }).observe(transcript);

  const rendered = new Map(); // key -> {version, node}
  function render() {
    const atBottom = atEnd();
    const next = items();
    const keys = new Set(next.map((item) => item.key));
    for (const [key, entry] of rendered) {
      if (!keys.has(key)) { entry.node.remove(); rendered.delete(key); }
    }
    next.forEach((item, index) => {
      let entry = rendered.get(item.key);
      if (!entry || entry.version !== item.version) {
        // A message is a link's target (a queued question and its answer): focusable by script.
        const node = make("li", { "data-key": item.key, id: item.anchor, "data-seq": item.seq,
          tabindex: item.anchor ? -1 : null }, item.build());
        if (entry) entry.node.replaceWith(node);
        entry = { version: item.version, node };
        rendered.set(item.key, entry);
      }
      const here = transcript.children[index];
      if (here !== entry.node) transcript.insertBefore(entry.node, here || null);
    });
    shared.renderBudget();
    showState();
    if (atBottom) scrollToEnd();
    titleCounts();
  }

  // The tab's title counts the approvals that wait for the person here.
  function titleCounts() {
    const waiting = [...room.approvals.values()].filter((a) => a.status === "pending").length;
    const base = document.title.replace(/^\(\d+\) /, "");
    document.title = waiting ? `(${waiting}) ${base}` : base;
  }

  let renderQueued = false;
  function schedule() {
    if (renderQueued) return;
    renderQueued = true;
    setTimeout(() => { renderQueued = false; render(); }, 0);
  }

  Object.assign(shared, { render, schedule, atEnd, scrollToEnd });
})();
