// The documents page: delete one (DELETE /api/artifacts/:id), then show the storage used as
// the API now counts it.
"use strict";

(function () {
  const { api, errorsOf } = window.garden;
  const list = document.getElementById("document-list");
  const error = document.getElementById("documents-error");
  if (!list) return;

  function size(bytes) {
    const units = ["bytes", "KB", "MB", "GB"];
    let value = bytes;
    let unit = 0;
    while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit += 1; }
    return unit === 0 ? `${value} bytes` : `${value.toFixed(1)} ${units[unit]}`;
  }

  async function refreshUsage() {
    const result = await api("GET", "/api/artifacts?limit=1");
    if (!result.ok) return;
    const usage = result.data.usage;
    document.querySelector(".js-usage-text").textContent = `${size(usage.total)} of ${size(usage.limit)} used`;
    const meter = document.querySelector(".js-usage-meter");
    meter.value = usage.total;
    meter.textContent = size(usage.total);
    for (const part of ["artifacts", "notes", "turns"]) {
      document.querySelector(`.js-part-${part}`).textContent = size(usage[part]);
    }
  }

  // View: the document in full, read from its download (the page lists it without its text).
  const view = window.garden.documentView;
  list.querySelectorAll(".document").forEach((row) => {
    row.querySelector(".js-view").hidden = row.dataset.kind === "chart" || !view.isText(row.dataset.mime);
  });
  list.addEventListener("click", (event) => {
    const button = event.target.closest(".js-view");
    if (!button) return;
    const row = button.closest(".document");
    view.open({ title: row.dataset.title, meta: row.dataset.meta, mime: row.dataset.mime, download: row.dataset.download });
  });

  list.addEventListener("click", async (event) => {
    const button = event.target.closest(".js-delete");
    if (!button) return;
    const row = button.closest(".document");
    const title = row.dataset.title;
    if (!window.confirm(`Delete ${title}? It cannot be undone; a turn that refers to it keeps only its name.`)) return;
    button.disabled = true;
    const result = await api("DELETE", `/api/artifacts/${row.dataset.id}`);
    if (!result.ok) {
      button.disabled = false;
      error.textContent = errorsOf(result)[0].message;
      return;
    }
    error.textContent = "";
    // Focus moves to the next row's Delete (or the heading), never to a removed node.
    const next = row.nextElementSibling || row.previousElementSibling;
    row.remove();
    if (!list.querySelector(".document")) {
      list.hidden = true;
      document.getElementById("documents-empty").hidden = false;
      document.getElementById("documents-title").setAttribute("tabindex", "-1");
      document.getElementById("documents-title").focus();
    } else if (next) {
      next.querySelector(".js-delete").focus();
    }
    document.getElementById("documents-status").textContent = `Deleted ${title}.`;
    await refreshUsage();
  });
})();
