// The roster: an empty roster's one-click team, and the creation sheet (name, members,
// coordinator; the rule set's errors by their fields).
"use strict";

(function () {
  const { api, errorsOf, showErrors } = window.garden;
  // An empty roster's one-click team.
  const starter = document.getElementById("starter");
  if (!starter) return;
  const button = document.getElementById("create-starter");
  button.addEventListener("click", async () => {
    button.disabled = true;
    const result = await api("POST", "/api/groups/starter");
    if (result.ok) {
      window.location.assign(starter.dataset.roomUrl.replace("/0/", `/${result.data.id}/`));
      return;
    }
    button.disabled = false;
    showErrors(starter, errorsOf(result));
  });
})();

(function () {
  const { api, errorsOf, showErrors, checkedIds } = window.garden;
  const sheet = document.getElementById("create-sheet");
  const form = document.getElementById("create-form");
  const opener = document.getElementById("new-group");
  if (!sheet || !form || !opener) return;

  opener.addEventListener("click", () => {
    showErrors(form, []);
    sheet.showModal();
    form.elements.name.focus();
  });

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const submit = form.querySelector("[type=submit]");
    submit.disabled = true;
    const body = {
      name: form.elements.name.value,
      members: checkedIds(form, "members"),
      coordinator: Number(form.elements.coordinator.value) || null,
    };
    // The room cap as typed: the API says why a value is refused.
    const cap = form.elements.room_cap_chars.value.trim();
    if (cap) body.room_cap_chars = /^-?\d+$/.test(cap) ? Number(cap) : cap;
    const result = await api("POST", "/api/groups", body);
    submit.disabled = false;
    if (result.ok) {
      window.location.assign(form.dataset.roomUrl.replace("/0/", `/${result.data.id}/`));
      return;
    }
    showErrors(form, errorsOf(result));
    const invalid = form.querySelector("[aria-invalid=true]");
    if (invalid) {
      const details = invalid.closest("details");
      if (details) details.open = true;
      invalid.focus();
    }
  });
})();

// Who needs you: each group's state (working, waiting for your approval, failed), kept live from
// the roster's socket, and the tab's title counting the groups that wait for your approval.
(function () {
  const list = document.getElementById("group-list");
  if (!list) return;
  const LABELS = { working: "Working", approval: "Waiting for your approval", failed: "Failed" };
  const REQUEST_STATES = {
    running: "working", synthesizing: "working", awaiting_approval: "approval", failed: "failed",
  };
  const baseTitle = document.title;

  function show(groupId, state) {
    const tag = list.querySelector(`[data-group-state="${groupId}"]`);
    if (!tag) return;
    tag.dataset.state = state || "";
    tag.className = `tag roster-state roster-state--${state || "idle"}`;
    tag.textContent = LABELS[state] || "";
    tag.hidden = !state;
    const waiting = list.querySelectorAll('[data-state="approval"]').length;
    document.title = waiting ? `(${waiting}) ${baseTitle}` : baseTitle;
  }
  list.querySelectorAll("[data-group-state]").forEach((tag) => show(tag.dataset.groupState, tag.dataset.state));

  // The agents' part: working while a call of theirs is out, waiting while an action of theirs
  // waits for you (the agents list's tags, kept from the same events).
  const agentList = document.getElementById("agent-list");
  const workingIn = new Map(); // request id -> the agent whose call is out in it
  const pendingOf = new Map(); // approval id -> its agent
  function showAgent(agentId) {
    const tag = agentList && agentList.querySelector(`[data-agent-state="${agentId}"]`);
    if (!tag) return;
    const state = [...pendingOf.values()].includes(agentId) ? "approval"
      : [...workingIn.values()].includes(agentId) ? "working" : "";
    tag.dataset.state = state;
    tag.className = `tag roster-state roster-state--${state || "idle"}`;
    tag.textContent = LABELS[state] || "";
    tag.hidden = !state;
  }

  function onEvent(event) {
    if (event.type === "request.state" && event.request) {
      const r = event.request;
      // A queued request's event says nothing of the one that runs; a finished one clears the
      // state unless it failed.
      if (r.state === "queued") return;
      show(r.group, REQUEST_STATES[r.state] || "");
      const before = workingIn.get(r.id);
      const now = r.working && r.working.agent ? r.working.agent.id : undefined;
      if (now === undefined) workingIn.delete(r.id); else workingIn.set(r.id, now);
      [before, now].forEach((id) => { if (id !== undefined) showAgent(id); });
    } else if (event.approval && event.approval.agent) {
      const a = event.approval;
      if (a.status === "pending") pendingOf.set(a.id, a.agent.id); else pendingOf.delete(a.id);
      showAgent(a.agent.id);
    }
  }

  let delay = 1000;
  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}${list.dataset.socket}`);
    socket.addEventListener("open", () => { delay = 1000; });
    socket.addEventListener("message", (message) => {
      let event = null;
      try { event = JSON.parse(message.data); } catch (error) { return; } // not an event of ours
      onEvent(event);
      // notifications.js shows a reply's notification from this socket's events.
      document.dispatchEvent(new CustomEvent("garden:roster-event", { detail: event }));
    });
    socket.addEventListener("close", (closed) => {
      if (closed.code === 4401) { location.reload(); return; } // signed out
      if (closed.code === 4403 || closed.code === 4429) return;
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 30000);
    });
  }
  connect();
})();
