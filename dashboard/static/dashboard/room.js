// The room: the transcript with its speakers, activity lines, approvals, the budget, Stop, the
// composer with @ completion, the ⋯ menu and the Canvas. Live over the group's websocket; the
// API is the truth, so a dropped connection or a gap in seq means a re-fetch.
"use strict";

(function () {
  const { api, errorsOf, showErrors, make, face, checkedIds } = window.garden;
  const data = JSON.parse(document.getElementById("room-data").textContent);
  const urls = data.urls;
  const $ = (id) => document.getElementById(id);

  const ACTIVE = new Set(["queued", "running", "awaiting_approval", "synthesizing"]);
  const STATE_LABEL = {
    queued: "Queued", running: "Working", awaiting_approval: "Waiting for your approval",
    synthesizing: "Writing the conclusion", completed: "Completed", stopped: "Stopped",
    failed: "Ended early",
  };

  const room = {
    group: data.group,
    members: new Map(),
    conversation: null,   // the open thread, the one shown; seq is counted per thread
    lastSeq: 0,
    messages: new Map(),  // seq -> message payload
    request: null,        // the request the budget indicator shows
    approvals: new Map(), // id -> approval, with the page's own busy/error flags
    open: new Set(),      // keys of the <details> a person opened
    deleted: false,
  };
  const setMembers = (list) => { room.members = new Map(list.map((m) => [m.id, m])); };
  setMembers(data.group.members);

  const transcript = $("transcript");
  const budget = $("budget");
  const stopButton = $("stop");
  const composer = $("composer");
  const textarea = $("composer-text");
  const mentionList = $("mention-list");

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
    renderBudget();
    if (atBottom) window.scrollTo(0, document.body.scrollHeight);
  }

  let renderQueued = false;
  function schedule() {
    if (renderQueued) return;
    renderQueued = true;
    setTimeout(() => { renderQueued = false; render(); }, 0);
  }

  // --- the request: budget and Stop ----------------------------------------------------------

  function meterPart(label, used, limit) {
    return make("span", { className: "budget-part" },
      make("meter", { min: 0, max: limit, value: used || 0, "aria-label": `${label} calls used` }),
      ` ${label} ${used || 0}/${limit}`);
  }

  function renderBudget() {
    const r = room.request;
    budget.hidden = !r;
    stopButton.hidden = !r || !ACTIVE.has(r.state) || room.deleted;
    if (!r) return;
    // Waiting for one of the owner's model-call slots is a state, not an error: say so.
    const label = r.waiting_for === "calls_in_flight" && r.state === "running"
      ? "Waiting for a free model slot (your other requests are using them)"
      : STATE_LABEL[r.state] || r.state;
    budget.replaceChildren(make("strong", { text: label }),
      meterPart("working", r.budget.working_reserved, r.budget.working_limit),
      meterPart("synthesis", r.budget.synthesis_reserved, r.budget.synthesis_limit));
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
  function onRequest(request) {
    if (!request) return;
    const current = room.request;
    if (current && current.id === request.id) {
      if (staler(request, current)) return;
      room.request = request;
    }
    else if (!current || running(request) || (!running(current) && request.id > current.id)) room.request = request;
    else return;
    if (!ACTIVE.has(request.state)) refreshCanvas();
  }

  stopButton.addEventListener("click", async () => {
    stopButton.disabled = true;
    const result = await api("POST", `${urls.api}/stop`);
    stopButton.disabled = false;
    if (!result.ok) showErrors(composer, errorsOf(result));
    else if (result.data) onRequest(result.data.stopped || result.data.request);
    sync();
  });

  // --- approvals ----------------------------------------------------------------------------

  function onApproval(approval) {
    room.approvals.set(approval.id, { ...approval, busy: false });
  }

  async function loadApprovals() {
    const result = await api("GET", `${urls.approvals}?state=pending`);
    if (!result.ok) return;
    const list = Array.isArray(result.data) ? result.data : (result.data && result.data.approvals) || [];
    const ours = (approval) => approval.group === room.group.id;
    const pending = new Set();
    for (const approval of list) {
      if (!ours(approval)) continue;
      pending.add(approval.id);
      room.approvals.set(approval.id, { ...(room.approvals.get(approval.id) || {}), ...approval });
    }
    // Shown as pending here but no longer pending there: decided elsewhere, or its request ended.
    for (const [id, approval] of room.approvals) {
      if (approval.status === "pending" && !pending.has(id)) room.approvals.delete(id);
    }
  }

  async function decide(id, decision) {
    const approval = room.approvals.get(id);
    if (!approval || approval.busy) return;
    approval.busy = true;
    approval.error = "";
    render();
    const result = await api("POST", `${urls.approvals}/${id}/decide`, { decision, surface: "dashboard" });
    approval.busy = false;
    if (result.ok) {
      const decided = result.data && (result.data.approval || result.data);
      approval.status = (decided && decided.status) || (decision === "approve" ? "approved" : "rejected");
    } else {
      approval.error = errorsOf(result)[0].message;
    }
    render();
    if (!approval.error) textarea.focus();
  }

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
    if ((m.content || []).some((b) => b.type === "artifact_ref")) refreshCanvas();
  }

  function onMessage(m) {
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
    if (result.ok && result.data) onRequest(result.data.request || result.data);
  }

  let syncing = null;
  let syncAgain = false;
  function sync() {
    if (syncing) { syncAgain = true; return syncing; }
    syncing = (async () => {
      do {
        syncAgain = false;
        const result = await api("GET", `${urls.api}/messages?after=${room.lastSeq}`);
        if (result.status === 404) { gone(); return; }
        if (!result.ok || !result.data) return;
        const page = result.data;
        const messages = page.messages || [];
        const lastSeq = page.last_seq || 0;
        const thread = page.conversation ?? (messages.length ? messages[0].conversation : null);
        if ((room.conversation !== null && thread !== room.conversation) || lastSeq < room.lastSeq) {
          // Cleared or rolled over while we were away: show the open thread from its start.
          resetTranscript();
          syncAgain = thread !== null;
          continue;
        }
        room.conversation = thread;
        messages.forEach(store);
        if (messages.length && lastSeq > room.lastSeq) syncAgain = true; // one page at a time
        if (page.active_request) onRequest(page.active_request);
        else if (room.request && ACTIVE.has(room.request.state)) await refreshRequest(room.request.id);
        await loadApprovals();
      } while (syncAgain);
    })().finally(() => { syncing = null; schedule(); });
    return syncing;
  }

  // --- live ---------------------------------------------------------------------------------

  function handle(event) {
    switch (event.type) {
      case "batch": (event.events || []).forEach(handle); break;
      case "message.created": onMessage(event.message); break;
      case "request.state": onRequest(event.request); break;
      case "approval.created":
      case "approval.decided": onApproval(event.approval); break;
      case "conversation.rolled": resetTranscript(); sync(); break;
      case "group.updated": onGroupChange(event); break;
      case "group.deleted": if (!room.deleted) gone(); break;
      default: break;
    }
  }

  const live = $("live");
  function setLive(on, text) {
    live.textContent = on ? "Live" : text;
    live.classList.toggle("is-live", on);
  }

  let socket = null;
  let retries = 0;
  function connect() {
    const scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
    socket = new WebSocket(`${scheme}//${window.location.host}${urls.socket}`);
    socket.addEventListener("open", () => { retries = 0; setLive(true); sync(); });
    socket.addEventListener("message", (event) => {
      try { handle(JSON.parse(event.data)); } catch (err) { console.error("garden: bad event", err); }
      schedule();
    });
    socket.addEventListener("close", (event) => {
      if (event.code === 4403) { setLive(false, "Not available"); return; }
      setLive(false, "Reconnecting…");
      setTimeout(connect, Math.min(5000, 250 * 2 ** retries++));
    });
  }

  // --- the group: header, ⋯ menu, members, rename, clear, delete --------------------------

  function applyGroup(group) {
    room.group = { id: group.id, name: group.name, members: group.members,
      coordinator: group.coordinator ? group.coordinator.id : room.group.coordinator };
    setMembers(group.members);
    document.querySelectorAll(".js-group-name").forEach((node) => { node.textContent = group.name; });
    document.title = document.title.replace(/^[^|]*\|/, `${group.name} |`);
    const label = `Members: ${group.members.map((m) => m.name).join(", ")}`;
    const faces = make("span", { className: "faces", role: "img", "aria-label": label }, ...group.members.map((m) => face(m)));
    $("room-faces").replaceChildren(faces);
  }

  async function refreshGroup() {
    const result = await api("GET", urls.api);
    if (result.status === 404) gone();
    else if (result.ok) applyGroup(result.data);
  }

  function onGroupChange(event) {
    if (event.change === "cleared") { resetTranscript(); room.request = null; sync(); refreshCanvas(); }
    refreshGroup();
  }

  const menuButton = $("menu-button");
  const menu = $("group-menu");
  const menuItems = () => [...menu.querySelectorAll("[role=menuitem]")];
  function openMenu() {
    menu.hidden = false;
    menuButton.setAttribute("aria-expanded", "true");
    menuItems()[0].focus();
  }
  function closeMenu(returnFocus) {
    if (menu.hidden) return;
    menu.hidden = true;
    menuButton.setAttribute("aria-expanded", "false");
    if (returnFocus) menuButton.focus();
  }
  menuButton.addEventListener("click", () => (menu.hidden ? openMenu() : closeMenu(false)));
  menuButton.addEventListener("keydown", (event) => {
    if (event.key === "ArrowDown") { event.preventDefault(); openMenu(); }
  });
  menu.addEventListener("keydown", (event) => {
    const list = menuItems();
    const at = list.indexOf(document.activeElement);
    const moves = { ArrowDown: at + 1, ArrowUp: at - 1, Home: 0, End: list.length - 1 };
    if (event.key in moves) {
      event.preventDefault();
      list[(moves[event.key] + list.length) % list.length].focus();
    } else if (event.key === "Escape") {
      event.preventDefault();
      closeMenu(true);
    } else if (event.key === "Tab") {
      closeMenu(false);
    }
  });
  document.addEventListener("click", (event) => {
    if (!event.target.closest(".menu-wrap")) closeMenu(false);
  });

  const dialogs = {
    members: $("members-dialog"), rename: $("rename-dialog"), clear: $("clear-dialog"), delete: $("delete-dialog"),
  };
  const agentPage = (id) => urls.agent.replace("/0/", `/${id}/`);

  function renderMemberRows() {
    const rows = room.group.members.map((m) => {
      const row = make("li", {}, face(m), make("span", { text: m.name }),
        make("span", { className: "handle", text: `@${m.handle}` }));
      if (m.id === room.group.coordinator) row.append(make("span", { className: "tag", text: "coordinator" }));
      if (m.removed) row.append(make("span", { className: "tag", text: "removed" }));
      else if (m.can_run === false) row.append(make("span", { className: "tag", text: "cannot run" }));
      row.append(make("a", { className: "secondary", href: agentPage(m.id), text: "Agent page",
        "aria-label": `Open ${m.name}'s page` }));
      return row;
    });
    $("member-rows").replaceChildren(...rows);
  }

  const actions = {
    members() {
      const form = $("members-form");
      const ids = new Set(room.group.members.map((m) => m.id));
      form.querySelectorAll("input[name=members]").forEach((box) => { box.checked = ids.has(Number(box.value)); });
      form.elements.coordinator.value = String(room.group.coordinator);
      showErrors(form, []);
      renderMemberRows();
      dialogs.members.showModal();
    },
    rename() {
      const form = $("rename-form");
      form.elements.name.value = room.group.name;
      showErrors(form, []);
      dialogs.rename.showModal();
      form.elements.name.select();
    },
    clear() { showErrors($("clear-form"), []); dialogs.clear.showModal(); },
    delete() { showErrors($("delete-form"), []); dialogs.delete.showModal(); },
  };
  menu.addEventListener("click", (event) => {
    const item = event.target.closest("[data-action]");
    if (!item) return;
    closeMenu(false);
    actions[item.dataset.action]();
  });

  // Each sheet's form: call the API; then close the sheet and apply the answer, or show the
  // errors by their fields. Closing first lets what follows take the focus from the sheet.
  function onSubmit(formId, call, apply) {
    const form = $(formId);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const submit = form.querySelector("[type=submit]");
      submit.disabled = true;
      const result = await call(form);
      submit.disabled = false;
      if (!result.ok) { showErrors(form, errorsOf(result)); return; }
      form.closest("dialog").close();
      apply(result.data);
    });
  }

  onSubmit("members-form", (form) => {
    const chosen = checkedIds(form, "members");
    const kept = room.group.members.map((m) => m.id).filter((id) => chosen.includes(id));
    const members = [...kept, ...chosen.filter((id) => !kept.includes(id))];
    return api("PATCH", urls.api, { members, coordinator: Number(form.elements.coordinator.value) });
  }, applyGroup);
  onSubmit("rename-form", (form) => api("PATCH", urls.api, { name: form.elements.name.value }), applyGroup);
  onSubmit("clear-form", () => api("POST", `${urls.api}/clear`), () => {
    resetTranscript();
    room.request = null;
    schedule();
    sync();
    refreshCanvas();
  });
  onSubmit("delete-form", () => api("DELETE", urls.api), offerUndo);

  const toast = $("toast");
  let undoTimer = null;
  function setDeleted(deleted) {
    room.deleted = deleted;
    composer.querySelectorAll("textarea, button").forEach((control) => { control.disabled = deleted; });
    renderBudget();
  }

  // The API allows a minute; the page offers Undo for ten seconds of it, then leaves the room.
  function offerUndo() {
    setDeleted(true);
    let left = 10;
    const count = make("span", { text: `(${left})` });
    const undo = make("button", { type: "button", text: "Undo" });
    const message = make("span", { text: `“${room.group.name}” was deleted. ` }, count);
    toast.replaceChildren(message, undo);
    toast.hidden = false;
    undo.focus();
    undoTimer = setInterval(() => {
      left -= 1;
      count.textContent = `(${left})`;
      if (left <= 0) { clearInterval(undoTimer); window.location.assign(urls.roster); }
    }, 1000);
    undo.addEventListener("click", async () => {
      clearInterval(undoTimer);
      const result = await api("POST", `${urls.api}/restore`);
      if (!result.ok) {
        toast.replaceChildren(make("span", { text: errorsOf(result)[0].message }),
          make("a", { href: urls.roster, text: "Back to the roster" }));
        return;
      }
      toast.hidden = true;
      setDeleted(false);
      applyGroup(result.data);
      textarea.focus();
      sync();
    });
  }

  // The group is gone (deleted from elsewhere, or purged): say so and offer the way back.
  function gone() {
    if (room.deleted) return;
    setDeleted(true);
    toast.replaceChildren(make("span", { text: "This group no longer exists. " }),
      make("a", { href: urls.roster, text: "Back to the roster" }));
    toast.hidden = false;
  }

  // --- the composer and @ completion -------------------------------------------------------

  let mention = null; // {start, end, options, active}

  function mentionQuery() {
    const caret = textarea.selectionStart;
    if (caret !== textarea.selectionEnd) return null;
    const match = /(^|\s)@([a-z0-9_-]*)$/i.exec(textarea.value.slice(0, caret));
    return match ? { start: caret - match[2].length - 1, end: caret, prefix: match[2].toLowerCase() } : null;
  }

  function closeMentions() {
    mention = null;
    mentionList.hidden = true;
    textarea.setAttribute("aria-expanded", "false");
    textarea.removeAttribute("aria-activedescendant");
  }

  function renderMentions() {
    const option = (m, i) => make("li", {
      id: `mention-${m.id}`, role: "option", "data-handle": m.handle,
      "aria-selected": i === mention.active ? "true" : "false",
    }, face(m, { small: true }), make("span", { text: `@${m.handle}` }), make("span", { className: "handle", text: m.name }));
    mentionList.replaceChildren(...mention.options.map(option));
    mentionList.hidden = false;
    textarea.setAttribute("aria-expanded", "true");
    textarea.setAttribute("aria-activedescendant", `mention-${mention.options[mention.active].id}`);
  }

  function updateMentions() {
    const query = mentionQuery();
    const members = [...room.members.values()].filter((m) => !m.removed);
    const options = query ? members.filter((m) => m.handle.startsWith(query.prefix)) : [];
    if (!options.length) { closeMentions(); return; }
    const same = mention && mention.prefix === query.prefix;
    mention = { ...query, options, active: same ? Math.min(mention.active, options.length - 1) : 0 };
    renderMentions();
  }

  function insertMention(handle) {
    const { start, end } = mention;
    const rest = textarea.value.slice(end).replace(/^ /, "");
    textarea.value = `${textarea.value.slice(0, start)}@${handle} ${rest}`;
    const caret = start + handle.length + 2;
    textarea.setSelectionRange(caret, caret);
    closeMentions();
    textarea.focus();
  }

  textarea.addEventListener("keydown", (event) => {
    if (mention) {
      const count = mention.options.length;
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault();
        mention.active = (mention.active + (event.key === "ArrowDown" ? 1 : count - 1)) % count;
        renderMentions();
        return;
      }
      if (event.key === "Enter" || event.key === "Tab") {
        event.preventDefault();
        insertMention(mention.options[mention.active].handle);
        return;
      }
      if (event.key === "Escape") { event.preventDefault(); closeMentions(); return; }
    }
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      composer.requestSubmit();
    }
  });
  textarea.addEventListener("input", updateMentions);
  textarea.addEventListener("click", updateMentions);
  textarea.addEventListener("blur", closeMentions);
  // mousedown would blur the textarea and close the list before the click lands.
  mentionList.addEventListener("mousedown", (event) => event.preventDefault());
  mentionList.addEventListener("click", (event) => {
    const option = event.target.closest("[data-handle]");
    if (option && mention) insertMention(option.dataset.handle);
  });

  composer.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = textarea.value.trim();
    if (!text || room.deleted) return;
    const send = composer.querySelector("[type=submit]");
    showErrors(composer, []);
    send.disabled = true;
    const result = await api("POST", `${urls.api}/messages`, { text });
    send.disabled = false;
    if (!result.ok) { showErrors(composer, errorsOf(result)); return; }
    textarea.value = "";
    closeMentions();
    if (result.data && result.data.message) onMessage(result.data.message);
    if (result.data && result.data.request) onRequest(result.data.request);
    schedule();
  });

  // --- the Canvas ----------------------------------------------------------------------------

  const canvasList = $("canvas-list");
  const canvasView = $("canvas-view");
  let shownArtifact = null;

  async function refreshCanvas() {
    let response;
    try { response = await fetch(urls.canvas, { credentials: "same-origin" }); } catch (err) { return; }
    if (!response.ok) return;
    canvasList.innerHTML = await response.text(); // rendered and escaped by the server's template
    if (shownArtifact !== null && !openArtifact(shownArtifact, { focus: false })) closeArtifact();
  }

  function openArtifact(id, { focus = true } = {}) {
    const content = canvasList.querySelector(`template[data-artifact-content="${id}"]`);
    const button = canvasList.querySelector(`[data-artifact="${id}"]`);
    if (!content || !button) return false;
    const mime = content.dataset.mime || "text/plain";
    const text = /^text\/|json|xml|markdown|csv/.test(mime) ? content.content.textContent
      : `This artifact is ${mime}; it is kept in your library.`;
    $("canvas-view-title").textContent = button.querySelector(".artifact-title").textContent;
    $("canvas-view-meta").textContent = button.dataset.meta;
    $("canvas-view-content").textContent = text;
    canvasList.querySelectorAll("[aria-current]").forEach((node) => node.removeAttribute("aria-current"));
    button.setAttribute("aria-current", "true");
    canvasView.hidden = false;
    shownArtifact = id;
    if (focus) $("canvas-view-content").focus();
    return true;
  }

  function closeArtifact() {
    canvasView.hidden = true;
    const button = canvasList.querySelector(`[data-artifact="${shownArtifact}"]`);
    shownArtifact = null;
    canvasList.querySelectorAll("[aria-current]").forEach((node) => node.removeAttribute("aria-current"));
    if (button) button.focus();
  }

  canvasList.addEventListener("click", (event) => {
    const button = event.target.closest("[data-artifact]");
    if (button) openArtifact(Number(button.dataset.artifact));
  });
  $("canvas-close").addEventListener("click", closeArtifact);

  transcript.addEventListener("click", async (event) => {
    const decision = event.target.closest("[data-decide]");
    if (decision) { decide(Number(decision.dataset.approval), decision.dataset.decide); return; }
    const ref = event.target.closest("[data-artifact]");
    if (ref) {
      const id = Number(ref.dataset.artifact);
      if (!openArtifact(id)) { await refreshCanvas(); openArtifact(id); }
    }
  });

  // --- start ----------------------------------------------------------------------------------

  window.gardenRoom = { room, sync, get socket() { return socket; } };
  setLive(false, "Connecting…");
  sync();
  connect();
})();
