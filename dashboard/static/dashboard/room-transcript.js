// The room's transcript: its turns, blocks, activity lines and approval cards, and the state the
// room's scripts share through window.garden.room (this file loads first and sets it up).
"use strict";

(function () {
  const { make, face } = window.garden;
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
  };
  const setMembers = (list) => { room.members = new Map(list.map((m) => [m.id, m])); };
  setMembers(data.group.members);

  // What the room's files share: the state above, and the functions each file adds. Calls from
  // one file to another go through it (shared.sync()), so they are looked up when they run.
  const shared = { urls: data.urls, $, state: room, setMembers };
  window.garden.room = shared;

  const transcript = $("transcript");

  // --- the transcript -------------------------------------------------------------------

  const textOf = (m) => (m.content || []).filter((b) => b.type === "text").map((b) => b.text).join("\n");
  const speakerOf = (m) => m.speaker || { kind: "garden", name: "garden" };
  const agentOf = (agent) => agent || { name: "A member" };

  function details(key, className, summary, ...body) {
    const node = make("details", { className }, make("summary", {}, summary), ...body);
    node.open = room.open.has(key);
    node.addEventListener("toggle", () => {
      if (node.open) room.open.add(key); else room.open.delete(key);
    });
    return node;
  }

  const pretty = (value) => (typeof value === "string" ? value : JSON.stringify(value ?? {}, null, 2));

  function buildBlock(m, block, i) {
    const key = `m${m.id}.${i}`;
    switch (block.type) {
      case "text":
        return block.text ? make("p", { text: block.text }) : null;
      case "tool_call":
        return details(key, "tool", `Tool call: ${block.name}`, make("pre", { text: pretty(block.arguments) }));
      case "tool_result": {
        const name = toolNames.has(block.call_id) ? `: ${toolNames.get(block.call_id)}` : "";
        const summary = `Tool result${name}${block.is_error ? " (error)" : ""}`;
        return details(key, "tool", summary, make("pre", { text: pretty(block.content) }));
      }
      case "artifact_ref":
        return make("button", {
          type: "button", className: "artifact-ref", "data-artifact": block.artifact_id,
          text: `Open “${block.title || "artifact"}” on the Canvas`,
        });
      default:
        return make("p", { className: "ref", text: `[${block.type}${block.title ? `: ${block.title}` : ""}]` });
    }
  }

  function buildTurn(m) {
    const speaker = speakerOf(m);
    const owner = speaker.kind === "owner";
    const kind = owner ? "owner" : speaker.kind === "agent" ? "agent" : "garden";
    const head = make("div", { className: "turn-head" }, make("span", { className: "speaker", text: speaker.name }));
    if (speaker.handle) head.append(" ", make("span", { className: "handle", text: `@${speaker.handle}` }));
    const body = make("div", { className: "turn-body" }, ...(m.content || []).map((b, i) => buildBlock(m, b, i)));
    const classes = `turn turn--${kind}${m.kind === "coordination" ? " turn--coordination" : ""}`;
    return make("article", { className: classes, "data-seq": m.seq }, face(speaker, { owner }), head, body);
  }

  function buildActivity(m, exchange) {
    const line = make("span", { className: "activity-line" }, face(speakerOf(m), { small: true }), textOf(m));
    if (!exchange.length) return make("p", { className: "activity" }, line);
    const turns = make("div", { className: "exchange" }, ...exchange.map(buildTurn));
    return details(`x${m.id}`, "activity", line, turns);
  }

  function buildMessage(m, exchange) {
    switch (m.kind) {
      case "activity":
        return buildActivity(m, exchange);
      case "notice":
        return make("div", { className: "notice", role: "note" }, make("strong", { text: "garden" }), textOf(m));
      case "summary": // where the previous thread stopped: this thread's starting point, shown open
        return make("div", { className: "summary", role: "note" },
          make("strong", { text: "Carried over from the previous thread" }), make("p", { text: textOf(m) }));
      default:
        return buildTurn(m);
    }
  }

  function buildApproval(a) {
    const agent = agentOf(a.agent);
    const action = a.action || {};
    const pending = a.status === "pending";
    const card = make("div", {
      className: `approval${pending ? "" : " approval--decided"}`, role: "group",
      "aria-label": `${agent.name} asks for approval`,
    });
    card.append(
      make("div", { className: "approval-head" }, face(agent, { small: true }), `${agent.name} wants to run ${action.name}`),
      details(`ap${a.id}`, "tool", "What it will do", make("pre", { text: pretty(action.arguments) })),
    );
    const button = (decision, label, className) => make("button", {
      type: "button", className: `button ${className}`, "data-decide": decision, "data-approval": a.id,
      disabled: Boolean(a.busy), text: label, "aria-label": `${label} ${agent.name}'s ${action.name}`,
    });
    if (pending) {
      card.append(make("div", { className: "approval-actions" },
        button("approve", "Approve", "default"), button("reject", "Reject", "")));
    } else {
      card.append(make("p", { text: a.status === "approved" ? "Approved." : "Rejected." }));
    }
    if (a.error) card.append(make("p", { className: "field-error", role: "alert", text: a.error }));
    return card;
  }

  // Coordination turns and the answers to group.* calls belong to the activity line that names
  // the same member in the same request: the full exchange, one click away.
  const toolNames = new Map(); // tool call id -> tool name, so a result names its call
  function exchangeOwners(list) {
    const handles = new Map([...room.members.values()].map((m) => [m.handle, m.id]));
    const asked = new Map(); // tool call id -> member id
    for (const m of list) {
      for (const block of m.content || []) {
        if (block.type === "tool_call") toolNames.set(block.id, block.name);
        if (block.type === "tool_call" && String(block.name).startsWith("group.")) {
          const handle = String((block.arguments || {}).member || "").replace(/^@/, "").toLowerCase();
          asked.set(block.id, handles.get(handle) ?? null);
        }
      }
    }
    const lines = list.filter((m) => m.kind === "activity");
    const owners = new Map(); // message id -> activity message id
    for (const m of list) {
      let member = null;
      const blocks = m.content || [];
      if (m.kind === "coordination") member = m.addressed_agent;
      else if (m.kind === "turn" && blocks.length && blocks.every((b) => asked.has(b.call_id))) {
        member = asked.get(blocks[0].call_id); // only answers to group.* calls
      }
      if (member === null || member === undefined) continue;
      const candidates = lines.filter((l) => l.request === m.request && l.addressed_agent === member);
      const line = candidates.filter((l) => l.seq <= m.seq + 1).pop() || candidates[0];
      if (line) owners.set(m.id, line.id);
    }
    return owners;
  }

  function items() {
    const list = [...room.messages.values()].sort((a, b) => a.seq - b.seq);
    const owners = exchangeOwners(list);
    const nested = new Map();
    for (const m of list) {
      if (!owners.has(m.id)) continue;
      if (!nested.has(owners.get(m.id))) nested.set(owners.get(m.id), []);
      nested.get(owners.get(m.id)).push(m);
    }
    const out = [];
    for (const m of list) {
      if (owners.has(m.id)) continue;
      const exchange = nested.get(m.id) || [];
      out.push({ key: `m${m.id}`, request: m.request, version: exchange.map((n) => n.id).join(","),
        build: () => buildMessage(m, exchange) });
    }
    for (const a of room.approvals.values()) {
      let at = out.length;
      out.forEach((item, i) => { if (item.request === a.request) at = i + 1; });
      out.splice(at, 0, { key: `a${a.id}`, request: a.request,
        version: `${a.status}|${a.busy ? 1 : 0}|${a.error || ""}`, build: () => buildApproval(a) });
    }
    return out;
  }

  // Items are rebuilt only when they change, so open <details> and the log's announcements stay put.
  const rendered = new Map(); // key -> {version, node}
  function render() {
    const atBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
    const next = items();
    const keys = new Set(next.map((item) => item.key));
    for (const [key, entry] of rendered) {
      if (!keys.has(key)) { entry.node.remove(); rendered.delete(key); }
    }
    next.forEach((item, index) => {
      let entry = rendered.get(item.key);
      if (!entry || entry.version !== item.version) {
        const node = make("li", { "data-key": item.key }, item.build());
        if (entry) entry.node.replaceWith(node);
        entry = { version: item.version, node };
        rendered.set(item.key, entry);
      }
      const here = transcript.children[index];
      if (here !== entry.node) transcript.insertBefore(entry.node, here || null);
    });
    shared.renderBudget();
    if (atBottom) window.scrollTo(0, document.body.scrollHeight);
  }

  let renderQueued = false;
  function schedule() {
    if (renderQueued) return;
    renderQueued = true;
    setTimeout(() => { renderQueued = false; render(); }, 0);
  }

  Object.assign(shared, { render, schedule });
})();
