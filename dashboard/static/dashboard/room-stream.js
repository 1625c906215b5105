// The reply a member is generating, shown as it is written: a draft turn kept last in the
// transcript. It is never stored — the step stores the turn whole — so the page drops it when the
// turn lands, when its request stops or ends, or when a later step starts.
"use strict";

(function () {
  const { make, face } = window.garden;
  const shared = window.garden.room;
  const { $, state: room } = shared;

  const transcript = $("transcript");
  const STEPPING = new Set(["running", "synthesizing"]); // the states a step runs in
  let draft = null; // the last request.draft event kept: {request, step, agent, text}
  let node = null;

  // Whether the room's request says the draft's step is over: a later request is shown, the
  // request no longer steps, a later step holds its fence, or this step's call is no longer
  // out (its turn landed with the request event that cleared `working`).
  function over(d) {
    const r = room.request;
    if (!r) return false;
    if (d.request !== r.id) return d.request < r.id;
    if (!STEPPING.has(r.state) || r.fence > d.step) return true;
    return r.fence === d.step && !(r.working && r.working.step === d.step);
  }

  // Each draft carries only what is new: `text` follows the first `offset` characters. One that
  // does not follow what is shown (a draft lost on the way) is skipped; the turn lands whole.
  function onDraft(event) {
    if (draft && draft.request === event.request && event.step < draft.step) return;
    const same = draft && draft.request === event.request && draft.step === event.step;
    if (event.offset && !(same && draft.text.length === event.offset)) return;
    // An empty draft is a call that failed: nothing to show.
    if (!event.text || over(event)) { draft = null; return; }
    draft = event.offset ? { ...draft, text: draft.text + event.text } : event;
  }

  function build(d) {
    const head = make("div", { className: "turn-head" },
      make("span", { className: "speaker", text: d.agent.name }), " ",
      make("span", { className: "handle", text: `@${d.agent.handle}` }),
      make("span", { className: "draft-note", text: " · writing…" }));
    // Rendered anew as it grows: the draft is bounded (GARDEN_DRAFT_MAX_CHARS), so this stays cheap.
    const body = make("div", { className: "turn-body" }, window.garden.markdown.render(d.text));
    return make("article", { className: "turn draft", "data-request": d.request, "data-step": d.step },
      face(d.agent), head, body);
  }

  // Called after every render of the transcript (renderBudget), which never moves the draft: it
  // places its own items before whatever follows them.
  function renderDraft() {
    if (draft && over(draft)) draft = null;
    if (!draft) {
      if (node) { node.remove(); node = null; }
      return;
    }
    // The transcript follows the draft as it grows while the reader is at its end.
    const atBottom = shared.atEnd ? shared.atEnd() : false;
    // The log announces the turn when it lands; the draft's every change would be noise, and the
    // status line says who is working.
    if (!node) node = make("li", { className: "draft-item", "data-key": "draft", "aria-hidden": "true" });
    node.replaceChildren(build(draft));
    if (transcript.lastElementChild !== node) transcript.append(node);
    if (atBottom && shared.scrollToEnd) shared.scrollToEnd();
  }

  Object.assign(shared, { onDraft, renderDraft });
})();
