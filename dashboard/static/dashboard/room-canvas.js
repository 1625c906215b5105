// The room's Canvas: the group's artifacts — documents, charts (canvas-chart.js), files and the
// pages its agents visited — refreshed from the server's template, one open at a time,
// collapsed while there is nothing on it; and the transcript's buttons that act on it or on an
// approval.
"use strict";

(function () {
  const shared = window.garden.room;
  const { urls, $ } = shared;
  const { make } = window.garden;

  const transcript = $("transcript");

  // --- the Canvas ----------------------------------------------------------------------------

  const canvas = $("canvas");
  const canvasToggle = $("canvas-toggle");
  const canvasList = $("canvas-list");
  const canvasView = $("canvas-view");
  let shownArtifact = null;

  const artifactCount = () => canvasList.querySelectorAll("[data-artifact]").length;
  let known = artifactCount();

  function setCanvasOpen(open) {
    canvas.classList.toggle("canvas--collapsed", !open);
    canvasToggle.setAttribute("aria-expanded", String(open));
    $("canvas-body").hidden = !open;
  }
  canvasToggle.addEventListener("click", () => setCanvasOpen(canvasToggle.getAttribute("aria-expanded") !== "true"));
  // On a phone the open Canvas is a sheet over the room (dashboard.css): it opens when the
  // person opens it, or an artifact from the transcript, never by itself.
  const phone = window.matchMedia("(max-width: 900px)");
  if (phone.matches) setCanvasOpen(false);

  async function refreshCanvas() {
    let response;
    try { response = await fetch(urls.canvas, { credentials: "same-origin" }); } catch (err) { return; }
    if (!response.ok) return;
    canvasList.innerHTML = await response.text(); // rendered and escaped by the server's template
    // Something new was made: the Canvas opens to show it (closing it again is the reader's call).
    const count = artifactCount();
    if (!count || (count > known && !phone.matches)) setCanvasOpen(count > 0);
    known = count;
    if (shownArtifact !== null && !openArtifact(shownArtifact, { focus: false })) closeArtifact();
  }

  let shownText = ""; // the open document's text, for Copy
  let shownDoc = null; // the open document, for its full view
  function openArtifact(id, { focus = true } = {}) {
    const content = canvasList.querySelector(`template[data-artifact-content="${id}"]`);
    const button = canvasList.querySelector(`[data-artifact="${id}"]`);
    if (!content || !button) return false;
    const mime = content.dataset.mime || "text/plain";
    const kind = content.dataset.kind || "document";
    const title = button.querySelector(".artifact-title").textContent;
    const readable = /^text\/|json|xml|markdown|csv/.test(mime);
    const file = content.dataset.file; // a file the owner attached: its bytes are served apart
    const shown = content.content.textContent;
    // The page carries the start of a long document; say how much more there is.
    const more = Number(content.dataset.chars || 0) - shown.length;
    // A chart made with chart.create is drawn, its numbers in a table beside it; shown first,
    // so that the chart is drawn at the size it is given.
    const chartPlace = $("canvas-view-chart");
    chartPlace.hidden = kind !== "chart";
    if (kind === "chart") { setCanvasOpen(true); canvasView.hidden = false; }
    const chart = kind === "chart" && window.garden.canvasChart.render(chartPlace, shown);
    if (!chart) { window.garden.canvasChart.clear(chartPlace); chartPlace.hidden = true; }
    const visit = kind === "visit";
    let text = readable
      ? (more > 0 ? `${shown}\n\n[… ${more.toLocaleString()} more characters${file ? ": open the file" : ""}]` : shown)
      : file ? "" : `This artifact is ${mime}; it is kept in your library.`;
    if (chart) text = "";
    else if (visit && !text) text = "No text was kept from this page.";
    shownText = readable ? shown : "";
    $("canvas-copy").hidden = !shownText;
    // A document opens in full in a sheet, and any artifact downloads (a visit is not one).
    shownDoc = readable && !visit && !chart
      ? { title, meta: button.dataset.meta, mime, text: shown, chars: Number(content.dataset.chars || 0), download: content.dataset.download }
      : null;
    $("canvas-full").hidden = !shownDoc;
    const download = $("canvas-download");
    download.hidden = visit || !content.dataset.download;
    if (!download.hidden) {
      download.href = content.dataset.download;
      download.setAttribute("aria-label", `Download ${title}`);
    }
    $("canvas-view-title").textContent = title;
    $("canvas-view-meta").textContent = button.dataset.meta;
    // A Markdown document reads as a document; anything else as its text.
    const rich = readable && !visit && (/markdown/.test(mime) || /\.md$/i.test(title));
    $("canvas-view-content").textContent = rich ? "" : text;
    $("canvas-view-content").hidden = !text || rich;
    $("canvas-view-doc").replaceChildren(rich ? window.garden.markdown.render(text) : "");
    $("canvas-view-doc").hidden = !text || !rich;
    showVisit(visit ? content.dataset : null);
    showFile(file, mime, title);
    canvasList.querySelectorAll("[aria-current]").forEach((node) => node.removeAttribute("aria-current"));
    button.setAttribute("aria-current", "true");
    setCanvasOpen(true);
    canvasView.hidden = false;
    shownArtifact = id;
    if (focus) {
      const place = chart ? $("canvas-view-chart").querySelector(".canvas-chart-data")
        : text ? $(rich ? "canvas-view-doc" : "canvas-view-content") : $("canvas-view-file").querySelector("a");
      place.focus();
    }
    return true;
  }

  // A page an agent visited: where (a link that opens it apart, telling it nothing of this
  // site), its answer and when. Its excerpt is shown as text below, never as the page.
  function showVisit(visit) {
    const place = $("canvas-view-visit");
    place.hidden = !visit;
    if (!visit) { place.replaceChildren(); return; }
    const url = visit.url || "";
    const where = /^https?:\/\//i.test(url)
      ? make("a", { href: url, target: "_blank", rel: "noopener noreferrer", className: "canvas-visit-url", text: url })
      : make("span", { className: "canvas-visit-url", text: url });
    const answer = visit.status ? `HTTP ${visit.status}` : `No answer (${visit.error || "failed"})`;
    const when = make("time", { datetime: visit.when, text: window.garden.formatDate(visit.when) });
    place.replaceChildren(
      make("p", null, where),
      make("dl", { className: "canvas-visit-facts" },
        make("dt", { text: "Status" }), make("dd", { className: "canvas-visit-status", text: answer }),
        make("dt", { text: "Visited" }), make("dd", null, when)),
    );
  }

  // An attached file: a picture shown (and opened full size by a click), anything else a link
  // that downloads it.
  function showFile(file, mime, title) {
    const place = $("canvas-view-file");
    if (!file) { place.replaceChildren(); place.hidden = true; return; }
    const link = make("a", { href: file, target: "_blank", rel: "noopener", className: "canvas-file-link" });
    if (mime.startsWith("image/")) link.append(make("img", { src: file, alt: title, className: "canvas-image" }));
    else link.textContent = `Download ${title}`;
    place.replaceChildren(link);
    place.hidden = false;
  }

  function closeArtifact() {
    canvasView.hidden = true;
    window.garden.canvasChart.clear($("canvas-view-chart"));
    const button = canvasList.querySelector(`[data-artifact="${shownArtifact}"]`);
    shownArtifact = null;
    canvasList.querySelectorAll("[aria-current]").forEach((node) => node.removeAttribute("aria-current"));
    if (button) button.focus();
  }

  canvasList.addEventListener("click", (event) => {
    const button = event.target.closest("[data-artifact]");
    if (button) openArtifact(button.dataset.artifact); // an artifact's number, or a visit's key
  });
  $("canvas-close").addEventListener("click", closeArtifact);
  $("canvas-full").addEventListener("click", () => { if (shownDoc) window.garden.documentView.open(shownDoc); });
  $("canvas-copy").addEventListener("click", async (event) => {
    const button = event.currentTarget;
    try {
      await navigator.clipboard.writeText(shownText);
      button.textContent = "Copied";
    } catch (error) {
      button.textContent = "Copy failed";
    }
    setTimeout(() => { button.textContent = "Copy"; }, 1500);
  });
  // Escape closes the open artifact, as it closes a dialog; focus goes back to its entry.
  canvasView.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !canvasView.hidden) { event.preventDefault(); closeArtifact(); }
  });

  transcript.addEventListener("click", async (event) => {
    const decision = event.target.closest("[data-decide]");
    if (decision) { shared.decide(Number(decision.dataset.approval), decision.dataset.decide); return; }
    const edit = event.target.closest("[data-edit-approval]");
    if (edit) { shared.editApproval(Number(edit.dataset.editApproval), edit); return; }
    const ref = event.target.closest("[data-artifact]");
    if (ref) {
      const id = Number(ref.dataset.artifact);
      if (!openArtifact(id)) { await refreshCanvas(); openArtifact(id); }
    }
  });

  Object.assign(shared, { refreshCanvas });
})();
