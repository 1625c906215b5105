// The room's composer: sending a message (with files attached, as a multipart form), Enter to
// send, and @ completion of the members' handles (a combobox over the textarea).
"use strict";

(function () {
  const { api, apiForm, errorsOf, showErrors, make, face } = window.garden;
  const shared = window.garden.room;
  const { urls, $, state: room } = shared;

  const composer = $("composer");
  const textarea = $("composer-text");
  const mentionList = $("mention-list");

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
    // The member typed in full comes first: Enter after "@scribe" picks @scribe, not @scribe2.
    const options = query
      ? members.filter((m) => m.handle.startsWith(query.prefix))
        .sort((a, b) => (b.handle === query.prefix) - (a.handle === query.prefix))
      : [];
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

  // --- the limit: counted as the person types, shown near it; past it Send waits ------------

  const limit = shared.data.message_max_chars;
  const counter = $("composer-count");
  const limitError = $("composer-limit");
  const sendButton = composer.querySelector("[type=submit]");
  const number = (n) => n.toLocaleString("en");
  // Counted as the server counts: the spaces around the text are trimmed first.
  const tooLong = () => textarea.value.trim().length > limit;
  let wasOver = false;
  function showLength() {
    const length = textarea.value.trim().length;
    const over = length > limit;
    counter.hidden = length < limit * 0.9;
    counter.textContent = over
      ? `${number(length)} / ${number(limit)} characters: ${number(length - limit)} over the limit`
      : `${number(length)} / ${number(limit)} characters`;
    counter.classList.toggle("is-over", over);
    // Said once as it goes over (an alert), not at every key; the count itself is not announced.
    if (over !== wasOver) {
      wasOver = over;
      limitError.textContent = over
        ? `Too long to send: a message can be at most ${number(limit)} characters. Shorten it, or attach the text as a file.`
        : "";
      if (!over) textarea.removeAttribute("aria-invalid");
    }
    if (over) textarea.setAttribute("aria-invalid", "true");
    sendButton.disabled = over || Boolean(room.deleted);
  }
  // On the document, after common.js's listener that clears a field's error as it is edited.
  document.addEventListener("input", (event) => { if (event.target === textarea) showLength(); });

  // --- the skip link: the first stop of Tab, to the message box ----------------------------

  const skip = $("skip-to-composer");
  if (skip) {
    // Before the admin's "Skip to main content", which its template puts first in the body.
    document.body.prepend(skip);
    // Focus without a new #fragment: the room's own fragments open it at a turn.
    skip.addEventListener("click", (event) => { event.preventDefault(); textarea.focus(); });
  }

  // --- attachments: chosen with the file input, each removable before sending ----------------

  const fileInput = $("composer-files");
  const fileList = $("composer-files-list");
  const limits = shared.data.attachments;
  let chosen = [];

  const sizeText = (bytes) => (bytes < 1024 ? `${bytes} B`
    : bytes < 1048576 ? `${Math.round(bytes / 1024)} KB` : `${(bytes / 1048576).toFixed(1)} MB`);

  function renderFiles() {
    fileList.replaceChildren(...chosen.map((file, index) => make("li", {},
      make("span", { className: "file-name", text: file.name }),
      make("span", { className: "file-size", text: sizeText(file.size) }),
      make("button", { type: "button", "data-remove": index, "aria-label": `Remove ${file.name}`, text: "×" }))));
    fileList.hidden = chosen.length === 0;
  }

  // The server decides what it accepts; these say early what it would refuse anyway.
  function fileProblem(files) {
    if (files.length > limits.max) return `At most ${limits.max} files may be attached to one message.`;
    const large = files.find((file) => file.size > limits.max_bytes);
    return large ? `${large.name} is larger than ${sizeText(limits.max_bytes)}, the limit for one file.` : "";
  }

  fileInput.addEventListener("change", () => {
    const next = [...chosen, ...fileInput.files];
    fileInput.value = ""; // the same file may be chosen again after it is removed
    const problem = fileProblem(next);
    showErrors(composer, problem ? [{ field: "files", code: "invalid", message: problem }] : []);
    if (problem) return;
    chosen = next;
    renderFiles();
  });
  fileList.addEventListener("click", (event) => {
    const remove = event.target.closest("[data-remove]");
    if (!remove) return;
    chosen.splice(Number(remove.dataset.remove), 1);
    renderFiles();
    (fileList.querySelector("[data-remove]") || fileInput).focus();
  });

  function messageRequest(text) {
    if (!chosen.length) return api("POST", `${urls.api}/messages`, { text });
    const form = new FormData();
    form.append("text", text);
    chosen.forEach((file) => form.append("files", file, file.name));
    return apiForm("POST", `${urls.api}/messages`, form);
  }

  composer.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = textarea.value.trim();
    if ((!text && !chosen.length) || room.deleted || tooLong()) return;
    const send = composer.querySelector("[type=submit]");
    showErrors(composer, []);
    send.disabled = true;
    const result = await messageRequest(text);
    send.disabled = false;
    if (!result.ok) { showErrors(composer, errorsOf(result)); return; }
    textarea.value = "";
    showLength();
    chosen = [];
    renderFiles();
    closeMentions();
    if (result.data && result.data.message) shared.onMessage(result.data.message);
    if (result.data && result.data.request) shared.onRequest(result.data.request);
    shared.schedule();
  });
})();
