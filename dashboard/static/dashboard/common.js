// Shared by the dashboard's pages: the JSON API with the CSRF pair, field errors, faces.
"use strict";

window.garden = (function () {
  function csrfToken() {
    const input = document.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function requestOptions(method) {
    const options = { method, credentials: "same-origin", headers: { Accept: "application/json" } };
    if (method !== "GET") options.headers["X-CSRFToken"] = csrfToken();
    return options;
  }

  // Resolves to {ok, status, data}; never throws, so callers show a failure like any other.
  function api(method, url, body) {
    const options = requestOptions(method);
    if (body !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    return send(url, options);
  }

  // The same with a FormData body (files): the browser writes its multipart Content-Type,
  // boundary included, so none is set here.
  function apiForm(method, url, form) {
    const options = requestOptions(method);
    options.body = form;
    return send(url, options);
  }

  async function send(url, options) {
    let response;
    try {
      response = await fetch(url, options);
    } catch (err) {
      return { ok: false, status: 0, data: null };
    }
    let data = null;
    try { data = await response.json(); } catch (err) { data = null; }
    return { ok: response.ok, status: response.status, data };
  }

  // The API's errors ([{field, code, message}]), or one named after the HTTP status.
  function errorsOf(result) {
    const data = result.data || {};
    if (Array.isArray(data.errors) && data.errors.length) return data.errors;
    const message = result.status === 0 ? "The server could not be reached."
      : data.message || `The request failed (HTTP ${result.status}).`;
    return [{ field: "non_field_errors", code: data.code || "error", message }];
  }

  // Each error goes next to its field ([data-error-for=name]); unknown fields to the form's top.
  function showErrors(form, errors) {
    form.querySelectorAll("[data-error-for]").forEach((slot) => { slot.textContent = ""; });
    form.querySelectorAll("[aria-invalid]").forEach((input) => input.removeAttribute("aria-invalid"));
    for (const error of errors) {
      const key = String(error.field || "non_field_errors").split(/[.[]/)[0];
      const slot = form.querySelector(`[data-error-for="${key}"]`)
        || form.querySelector('[data-error-for="non_field_errors"]');
      if (!slot) continue;
      slot.textContent = slot.textContent ? `${slot.textContent} ${error.message}` : error.message;
      const input = form.querySelector(`[name="${key}"]`);
      if (input) input.setAttribute("aria-invalid", "true");
    }
  }

  // A field's error goes as soon as the field is changed: it said what to fix, and the person
  // is fixing it (the next answer from the server says again if it still is not right).
  document.addEventListener("input", (event) => {
    const input = event.target;
    if (!input || input.getAttribute("aria-invalid") !== "true" || !input.form || !input.name) return;
    input.removeAttribute("aria-invalid");
    const slot = input.form.querySelector(`[data-error-for="${input.name}"]`);
    if (slot) slot.textContent = "";
  });

  function make(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "className") node.className = value;
      else if (name === "text") node.textContent = value;
      else node.setAttribute(name, value === true ? "" : value);
    }
    for (const child of children) {
      if (child !== null && child !== undefined) node.append(child);
    }
    return node;
  }

  // A face: the initial on the agent's colour. Decorative; the name always stands beside it.
  function face(person, { small = false, owner = false } = {}) {
    const classes = ["face"];
    if (small) classes.push("face--small");
    if (owner) classes.push("face--owner");
    const node = make("span", { className: classes.join(" "), "aria-hidden": "true" });
    if (person && person.colour) node.style.setProperty("--face", person.colour);
    node.textContent = ((person && person.name) || "?").trim().charAt(0).toUpperCase();
    return node;
  }

  function checkedIds(form, name) {
    return [...form.querySelectorAll(`input[name="${name}"]:checked`)].map((input) => Number(input.value));
  }

  // A dialog gives focus back to the control that opened it when it closes (Escape, Cancel or
  // done); one opened from a menu item, which the menu hid, gives it to the menu's button.
  const showModal = HTMLDialogElement.prototype.showModal;
  HTMLDialogElement.prototype.showModal = function () {
    const opener = document.activeElement;
    this.addEventListener("close", () => {
      // Unless what the dialog did put focus somewhere already (an Undo, say).
      const now = document.activeElement;
      if (now && now !== document.body && !this.contains(now)) return;
      const menu = opener && opener.closest && opener.closest("[role=menu]");
      const target = menu ? document.getElementById(menu.getAttribute("aria-labelledby")) : opener;
      if (target && target.isConnected && typeof target.focus === "function") target.focus();
    }, { once: true });
    return showModal.call(this);
  };

  document.addEventListener("click", (event) => {
    const closer = event.target.closest("[data-close]");
    if (closer && closer.closest("dialog")) closer.closest("dialog").close();
    // The user menu closes when something else is clicked, like any menu.
    const menu = document.querySelector("details.user-menu[open]");
    if (menu && !menu.contains(event.target)) menu.open = false;
  });
  document.addEventListener("keydown", (event) => {
    const menu = document.querySelector("details.user-menu[open]");
    if (event.key !== "Escape" || !menu) return;
    menu.open = false;
    menu.querySelector("summary").focus();
  });

  // One way to write a date on every page, the one the server's pages use: "1 Dec 2026, 15:04"
  // (Django's "j M Y, H:i"), in the person's time zone.
  const DATE = new Intl.DateTimeFormat("en-GB", { day: "numeric", month: "short", year: "numeric" });
  const TIME = new Intl.DateTimeFormat("en-GB", { hour: "2-digit", minute: "2-digit", hour12: false });
  function formatDate(value, { time = true } = {}) {
    const at = value instanceof Date ? value : new Date(value);
    return time ? `${DATE.format(at)}, ${TIME.format(at)}` : DATE.format(at);
  }
  const formatTime = (value) => TIME.format(value instanceof Date ? value : new Date(value));

  return { api, apiForm, errorsOf, showErrors, make, face, checkedIds, formatDate, formatTime };
})();
