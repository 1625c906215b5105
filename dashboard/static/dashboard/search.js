// The search page: marks the words searched for in each result's piece of text (text nodes
// only: a turn's text is never read as HTML).
"use strict";

(function () {
  const list = document.getElementById("search-results");
  if (!list) return;
  const terms = (list.dataset.terms.toLowerCase().match(/[\p{L}\p{N}]+/gu) || [])
    .sort((a, b) => b.length - a.length);
  if (!terms.length) return;
  const escape = (word) => word.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const pattern = new RegExp(`(${terms.map(escape).join("|")})`, "giu");
  list.querySelectorAll(".search-result-snippet").forEach((node) => {
    const parts = node.textContent.split(pattern);
    node.replaceChildren(...parts.map((part, i) => {
      if (i % 2 === 0) return document.createTextNode(part);
      const mark = document.createElement("mark");
      mark.textContent = part;
      return mark;
    }));
  });
})();
