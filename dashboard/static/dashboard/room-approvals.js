// The room's approval cards: each placed after the turn that made its call (standing for the
// activity line that says it waits), what it asks in words, its arguments, what its decision
// led to; and deciding one — Approve, Reject, or Approve with changes in a sheet. The transcript
// (room-transcript.js) places and builds them through window.garden.room.
"use strict";

(function () {
  const { api, errorsOf, showErrors, make, face } = window.garden;
  const shared = window.garden.room;
  const { urls, $, state: room } = shared;
  const { details, pretty, textOf } = shared.parts;
  const textarea = $("composer-text");

  // --- the cards ---------------------------------------------

  // What an approval asks, in words: the API says it ("Ledger wants to write plan.md"), as the
  // Telegram message and the activity line do.
  function actionLabel(agent, action, approval) {
    return (approval && approval.label) || `${agent.name} wants to use ${action.name}`;
  }

  // Arguments as fields a person reads, never raw JSON: a name and its value; a list of plain
  // values on one line; an object or a list of objects as fields of their own (to a few levels,
  // past which the rest is shown as written). Long or many-lined text keeps its lines.
  const FIELD_DEPTH = 3;
  const plain = (v) => v === null || ["string", "number", "boolean"].includes(typeof v);
  const shown = (v) => (v === null ? "(none)" : typeof v === "boolean" ? (v ? "yes" : "no") : String(v));

  function fieldValue(name, value, depth) {
    if (typeof value === "string" && (value.includes("\n") || value.length > 120)) {
      return make("pre", { text: value, tabindex: 0, "aria-label": name });
    }
    if (plain(value)) return make("span", { className: "arg-value", text: shown(value) });
    if (Array.isArray(value) && value.every(plain)) {
      return make("span", { className: "arg-value", text: value.length ? value.map(shown).join(", ") : "(empty)" });
    }
    if (depth >= FIELD_DEPTH) return make("pre", { text: pretty(value), tabindex: 0, "aria-label": name });
    if (Array.isArray(value)) {
      return make("ol", { className: "arg-list" }, ...value.map((item, i) => make("li", {},
        fieldValue(`${name} ${i + 1}`, item, depth + 1))));
    }
    return buildArguments(value, depth + 1) || make("span", { className: "arg-value", text: "(empty)" });
  }

  function buildArguments(args, depth = 0) {
    const rows = Object.entries(args || {}).flatMap(([name, value]) => [
      make("dt", { text: name }),
      make("dd", {}, fieldValue(name, value, depth)),
    ]);
    return rows.length ? make("dl", { className: "approval-args" }, ...rows) : null;
  }

  function buildApproval(a, outcome) {
    const agent = a.agent;
    const action = a.action || {};
    const label = actionLabel(agent, action, a);
    const pending = a.status === "pending";
    const card = make("div", {
      className: `approval${pending ? "" : " approval--decided"}`, role: "group",
      "aria-label": `${agent.name} asks for approval`,
    });
    card.append(
      make("div", { className: "approval-head" }, face(agent, { small: true }), make("span", { text: label }),
        make("span", { className: "tag", text: action.name })),
      buildArguments(action.arguments) || "",
    );
    const button = (decision, text, className) => make("button", {
      type: "button", className: `button ${className}`, "data-decide": decision, "data-approval": a.id,
      disabled: Boolean(a.busy), text, "aria-label": `${text}: ${label}`,
    });
    if (pending) {
      const edit = Object.keys(action.arguments || {}).length
        ? make("button", { type: "button", className: "button", "data-edit-approval": a.id,
          disabled: Boolean(a.busy), text: "Edit…", "aria-label": `Edit before approving: ${label}` })
        : "";
      card.append(make("div", { className: "approval-actions" },
        button("approve", "Approve", "default"), edit, button("reject", "Reject", "")));
    } else {
      if (a.approved_arguments) {
        card.append(make("p", { className: "approval-changed", text: "Approved with these arguments instead:" }),
          buildArguments(a.approved_arguments) || "");
      }
      // One line for the decision and what it led to (the line that said it ran, or the
      // refusal); the action's result is a click away, as a tool's is.
      card.append(make("p", { className: "approval-outcome",
        text: outcome.line || (a.status === "approved" ? "Approved." : "Rejected.") }));
      if (outcome.result) {
        card.append(details(`a${a.id}.result`, "tool", outcome.result.is_error ? "Result (error)" : "Result",
          make("pre", { text: pretty(outcome.result.content) })));
      }
    }
    if (a.error) card.append(make("p", { className: "field-error", role: "alert", text: a.error }));
    return card;
  }

  // A card follows the turn that made its call, and stands for the activity line that says the
  // call waits, so deciding it moves nothing.
  function approvalPlaces(list) {
    const outcomes = new Map(); // approval id -> {line, result}: what its decision led to
    const after = new Map(); // message id -> the approvals shown after it
    const unplaced = [];
    const replaced = new Set(); // activity lines a card stands for
    for (const a of room.approvals.values()) {
      const caller = list.find((m) => m.request === a.request
        && (m.content || []).some((b) => b.type === "tool_call" && b.id === a.tool_call_id));
      if (!caller) { unplaced.push(a); continue; }
      if (!after.has(caller.id)) after.set(caller.id, []);
      after.get(caller.id).push(a);
      const agent = a.agent && a.agent.id;
      const line = list.find((m) => m.kind === "activity" && m.seq > caller.seq && m.request === a.request
        && m.addressed_agent == null && m.speaker.agent === agent && !replaced.has(m.id));
      if (line) replaced.add(line.id);
      // Its result and the line that says it ran are written together, one after the other.
      const resultTurn = list.find((m) => m.request === a.request && (m.content || []).some(
        (b) => b.type === "tool_result" && b.call_id === a.tool_call_id));
      if (!resultTurn) continue;
      const result = resultTurn.content.find((b) => b.type === "tool_result" && b.call_id === a.tool_call_id);
      const ran = list.find((m) => m.seq === resultTurn.seq + 1 && m.kind === "activity"
        && m.speaker.agent === agent);
      if (ran) replaced.add(ran.id);
      outcomes.set(a.id, { line: ran ? textOf(ran) : "", result });
    }
    return { after, unplaced, replaced, outcomes };
  }

  // --- deciding: the live list, Approve / Reject, and Approve with changes ----------------------------------------------------------------------------

  // Each approval remembers when the page learned of it, so a list the API read before then
  // (its answer still on the way) cannot take it away as "decided elsewhere".
  let learned = 0;
  function onApproval(approval) {
    room.approvals.set(approval.id, { ...approval, busy: false, learned: ++learned });
  }

  // The open thread's approvals, decided ones too, so a card stays where its call was made
  // after a reload; before the thread is known, the pending ones.
  async function loadApprovals() {
    const query = room.conversation !== null ? `conversation=${room.conversation}` : "state=pending";
    const asked = learned;
    const result = await api("GET", `${urls.approvals}?${query}`);
    if (!result.ok) return;
    const list = result.data.approvals;
    const ours = (approval) => approval.group === room.group.id;
    const listed = new Set();
    for (const approval of list) {
      if (!ours(approval)) continue;
      listed.add(approval.id);
      room.approvals.set(approval.id, { ...(room.approvals.get(approval.id) || {}), ...approval });
    }
    // Shown as pending here but not listed as such there: decided elsewhere, or its request ended.
    for (const [id, approval] of room.approvals) {
      if (approval.status === "pending" && !listed.has(id) && (approval.learned || 0) <= asked) {
        room.approvals.delete(id);
      }
    }
  }

  // ``changes``: the arguments to approve it with instead of the requested ones.
  async function decide(id, decision, changes) {
    const approval = room.approvals.get(id);
    if (!approval || approval.busy) return null;
    approval.busy = true;
    approval.error = "";
    shared.render();
    const body = { decision, surface: "dashboard", ...(changes ? { arguments: changes } : {}) };
    const result = await api("POST", `${urls.approvals}/${id}/decide`, body);
    approval.busy = false;
    if (result.ok) {
      approval.status = result.data.status;
      approval.approved_arguments = result.data.approved_arguments;
    } else if (!changes) {
      approval.error = errorsOf(result)[0].message;
    }
    shared.render();
    if (result.ok || !changes) textarea.focus();
    return result;
  }

  // Approve with changes: a sheet with one field per argument (text as it is, anything else
  // as JSON); the API checks them against the tool's schema and names what does not fit.
  const editDialog = $("approval-edit-dialog");
  const editForm = $("approval-edit-form");
  let editing = null;
  function editApproval(id, opener) {
    const approval = room.approvals.get(id);
    if (!approval || approval.status !== "pending") return;
    editing = { id, opener, kinds: {} };
    const args = (approval.action && approval.action.arguments) || {};
    $("approval-edit-label").textContent = approval.label || "";
    const fields = Object.entries(args).map(([name, value], i) => {
      const text = typeof value === "string";
      editing.kinds[name] = text ? "text" : "json";
      const id = `approval-edit-${i}`;
      const input = make("textarea", { id, name: `arg-${i}`, rows: text && value.length > 60 ? 4 : 1,
        "data-argument": name });
      input.value = text ? value : JSON.stringify(value);
      return make("div", { className: "form-row" },
        make("label", { for: id, text: text ? name : `${name} (JSON)` }), input);
    });
    $("approval-edit-fields").replaceChildren(...fields);
    showErrors(editForm, []);
    editDialog.showModal();
    const first = editForm.querySelector("textarea");
    if (first) first.focus();
  }
  editForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!editing) return;
    const changes = {};
    for (const input of editForm.querySelectorAll("[data-argument]")) {
      const name = input.dataset.argument;
      if (editing.kinds[name] === "text") { changes[name] = input.value; continue; }
      try { changes[name] = JSON.parse(input.value); } catch (err) {
        showErrors(editForm, [{ field: "arguments", message: `${name} is not valid JSON.` }]);
        input.focus();
        return;
      }
    }
    const submit = editForm.querySelector("[type=submit]");
    submit.disabled = true;
    const result = await decide(editing.id, "approve", changes);
    submit.disabled = false;
    if (result && !result.ok) { showErrors(editForm, errorsOf(result)); return; }
    editDialog.close();
    editing = null;
  });
  editDialog.addEventListener("close", () => {
    if (editing && editing.opener && editing.opener.isConnected) editing.opener.focus();
    editing = null;
  });

  Object.assign(shared, {
    approvalPlaces, approvalCard: buildApproval, onApproval, loadApprovals, decide, editApproval,
  });
})();
