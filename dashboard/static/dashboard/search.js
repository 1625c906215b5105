// The search page: marks the words searched for in each result's piece of text (text nodes
// only: a turn's text is never read as HTML).
"use strict";

(function () {
  const list = document.getElementById("search-results");
  if (!list) return;
  // The words as search read them (groups/search.py): what was typed between spaces, without
  // the punctuation around it; the longest first, so a word inside another marks the longer.
  const terms = list.dataset.terms.toLowerCase().split(/\s+/)
    .map((piece) => piece.replace(/^[^\p{L}\p{N}]+|[^\p{L}\p{N}]+$/gu, ""))
    .filter(Boolean).sort((a, b) => b.length - a.length);
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
