// An agent's room: the list of its conversations (_conversations.html). New conversation starts
// one and opens it; Rename names the one shown; on a phone the list opens over the room from
// its bar and closes with Escape or a click elsewhere. Switching is a plain link.
"use strict";

(function () {
  const { api, errorsOf, showErrors } = window.garden;
  const shared = window.garden.room;
  const { urls, $ } = shared;
  const threads = $("threads");
  if (!threads) return;

  // --- the phone's bar ---------------------------------------------------------------------

  const toggle = $("threads-toggle");
  function setOpen(open, returnFocus) {
    threads.classList.toggle("is-open", open);
    toggle.setAttribute("aria-expanded", String(open));
    if (!open && returnFocus) toggle.focus();
  }
  toggle.addEventListener("click", () => setOpen(!threads.classList.contains("is-open"), false));
  threads.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && threads.classList.contains("is-open")) {
      event.preventDefault();
      setOpen(false, true);
    }
  });
  document.addEventListener("click", (event) => {
    if (!threads.contains(event.target)) setOpen(false, false);
  });
  // Tabbing on past the list closes it too: it never stays open over what has the focus.
  threads.addEventListener("focusout", (event) => {
    if (event.relatedTarget && !threads.contains(event.relatedTarget)) setOpen(false, false);
  });

  // --- New conversation --------------------------------------------------------------------

  const opened = (id) => `${urls.room}?conversation=${encodeURIComponent(id)}`;
  const newButton = $("thread-new");
  const newError = $("thread-new-error");
  newButton.addEventListener("click", async () => {
    newButton.disabled = true;
    newError.textContent = "";
    const result = await api("POST", urls.conversations, { agent: shared.data.agent });
    if (result.ok) {
      window.location.assign(opened(result.data.id));
      return;
    }
    newButton.disabled = false;
    newError.textContent = errorsOf(result).map((e) => e.message).join(" ");
  });

  // --- Rename ------------------------------------------------------------------------------

  const dialog = $("thread-rename-dialog");
  const form = $("thread-rename-form");
  const input = $("thread-rename-input");
  const renameButton = $("thread-rename");
  const current = shared.data.conversation;
  if (!renameButton || !current) return;

  function showLabel() {
    threads.querySelectorAll(".js-thread-label").forEach((node) => { node.textContent = current.label; });
    renameButton.setAttribute("aria-label", `Rename ${current.label}`);
  }

  // Spoken in now, the conversation shown is the one spoken in last: it goes to the top of the
  // list, and one that had no words yet is named by its first (as the API names it).
  const entry = renameButton.closest("li");
  const room = shared.state;
  let seen = current.last_seq; // the last turn's seq when the page was made: later ones are new
  new MutationObserver(async () => {
    if (room.lastSeq <= seen) return;
    seen = room.lastSeq;
    entry.parentElement.prepend(entry);
    if (current.title || current.first_words) return;
    const result = await api("GET", `${urls.conversations}/${current.id}`);
    if (result.ok) { Object.assign(current, result.data); showLabel(); }
  }).observe($("transcript"), { childList: true });

  renameButton.addEventListener("click", () => {
    showErrors(form, []);
    input.value = current.title;
    dialog.showModal();
    input.select();
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const submit = form.querySelector("[type=submit]");
    submit.disabled = true;
    const result = await api("PATCH", `${urls.conversations}/${current.id}`, { title: input.value });
    submit.disabled = false;
    if (!result.ok) {
      showErrors(form, errorsOf(result));
      return;
    }
    Object.assign(current, result.data);
    showLabel();
    dialog.close();
  });
  // Back to Rename, or on a phone, where the list closed behind the dialog, to its bar.
  dialog.addEventListener("close", () => {
    (renameButton.offsetParent ? renameButton : toggle).focus();
  });
})();
