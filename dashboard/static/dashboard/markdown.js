// Markdown as people read it, made safe: what a model (or anyone) writes is rendered by
// markdown-it with raw HTML off — a `<script>` in a reply is text — and then sanitised by
// DOMPurify against an allowlist of elements and attributes. Links open in a new tab, with
// no opener and no referrer, and only to http(s) and mailto addresses. No pictures: a reply
// cannot make the page fetch anything.
"use strict";

window.garden.markdown = (function () {
  const md = window.markdownit({ html: false, linkify: true, breaks: true, typographer: false });

  const ALLOWED_TAGS = [
    "p", "br", "strong", "em", "s", "del", "code", "pre", "blockquote", "hr",
    "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6", "a",
    "table", "thead", "tbody", "tr", "th", "td",
  ];
  const ALLOWED_ATTR = ["href", "title", "start", "target", "rel"];
  const SAFE_URL = /^(?:https?:|mailto:)/i;

  const purify = window.DOMPurify;
  purify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A") {
      const href = node.getAttribute("href") || "";
      if (!SAFE_URL.test(href)) node.removeAttribute("href");
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer nofollow");
    }
  });
  const CONFIG = {
    ALLOWED_TAGS,
    ALLOWED_ATTR,
    ALLOWED_URI_REGEXP: SAFE_URL,
    ALLOW_DATA_ATTR: false,
    ALLOW_ARIA_ATTR: false,
    RETURN_DOM_FRAGMENT: true,
  };

  // A fragment of the rendered text; a div of class "md" holds it where it is shown.
  function fragment(text) {
    return purify.sanitize(md.render(String(text || "")), CONFIG);
  }

  function render(text, className = "md") {
    const box = document.createElement("div");
    box.className = className;
    box.append(fragment(text));
    // A code block or a table wider than the turn scrolls inside it: reachable by keyboard.
    box.querySelectorAll("pre, table").forEach((region) => { region.tabIndex = 0; });
    return box;
  }

  return { render, fragment, ALLOWED_TAGS, ALLOWED_ATTR };
})();
