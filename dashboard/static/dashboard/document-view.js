// A document in full, in a sheet as wide as the screen allows: Markdown rendered by the room's
// sanitiser (markdown.js), any other text as it is, and its download. The page carries the start
// of a long document; the rest is read from its download when the sheet opens.
"use strict";

window.garden.documentView = (function () {
  const $ = (id) => document.getElementById(id);
  const dialog = $("document-dialog");

  const isMarkdown = (mime, title) => /markdown/.test(mime || "") || /\.md$/i.test(title || "");
  const isText = (mime) => /^text\/|json|xml|markdown|csv/.test(mime || "");

  function show(text, markdown) {
    const doc = $("document-dialog-doc");
    const plain = $("document-dialog-text");
    doc.replaceChildren(markdown ? window.garden.markdown.render(text, "md-body") : "");
    plain.textContent = markdown ? "" : text;
    doc.hidden = !markdown;
    plain.hidden = markdown;
  }

  // ``text``: what the page holds of it; ``chars``: how long it is in all.
  async function open({ title, meta = "", mime = "text/plain", text = "", chars = 0, download }) {
    const markdown = isMarkdown(mime, title);
    $("document-dialog-title").textContent = title;
    $("document-dialog-meta").textContent = meta;
    const link = $("document-dialog-download");
    link.href = download;
    link.setAttribute("aria-label", `Download ${title}`);
    const state = $("document-dialog-state");
    state.textContent = "";
    show(text, markdown);
    dialog.showModal();
    // From its top, its head in view: focus must not scroll the text under the head.
    dialog.scrollTop = 0;
    (markdown ? $("document-dialog-doc") : $("document-dialog-text")).focus({ preventScroll: true });
    if (text && (!chars || chars <= text.length)) return;
    state.textContent = "Loading the whole document…";
    let whole = null;
    try {
      const response = await fetch(download, { credentials: "same-origin" });
      if (response.ok) whole = await response.text();
    } catch (error) { whole = null; }
    if (whole === null) { state.textContent = "The rest could not be read: download it instead."; return; }
    state.textContent = "";
    show(whole, markdown);
  }

  return { open, isMarkdown, isText };
})();
