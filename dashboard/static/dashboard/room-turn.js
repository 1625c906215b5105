// Opens the room at a turn: a link ending #turn-<seq> (a search result's) scrolls the
// transcript to that turn once it is loaded, marks it and moves the focus there. A turn the
// room shows inside another (a hand-off's call under its activity line) is reached through the
// item it is shown in, the last one before it.
"use strict";

(function () {
  const shared = window.garden.room;
  const transcript = shared.$("transcript");

  function wanted() {
    const found = /^#turn-(\d+)$/.exec(window.location.hash);
    return found ? Number(found[1]) : null;
  }

  function showTurn() {
    const seq = wanted();
    if (seq === null) return;
    shared.render();
    const node = [...transcript.querySelectorAll(":scope > li[data-seq]")]
      .filter((li) => Number(li.dataset.seq) <= seq).pop();
    if (!node) return;
    transcript.querySelectorAll(":scope > li.turn-found").forEach((li) => {
      li.classList.remove("turn-found");
      li.removeAttribute("aria-current");
    });
    node.classList.add("turn-found");
    node.setAttribute("aria-current", "true");
    // Only the transcript scrolls (not the page): the turn a third of the way down it.
    const offset = node.getBoundingClientRect().top - transcript.getBoundingClientRect().top;
    transcript.scrollTop += offset - transcript.clientHeight / 3;
    node.focus({ preventScroll: true });
  }

  window.addEventListener("hashchange", showTurn);
  shared.showTurn = showTurn;
})();
