// Notifications of agents' replies. On every page: a `notification.reply` event from the
// person's roster socket becomes a browser notification, when they allowed it here and the
// page is hidden or the reply is in another room (the roster page hands its socket's events
// over; any other page opens it, for notifications alone, only once they may be shown).
// On Settings → Notifications: each change is saved at once (PUT /api/notifications), and the
// browser's permission is asked for by a button, never on load.
"use strict";

(function () {
  const supported = "Notification" in window;
  let listening = false;

  // This page is the reply's room, showing its conversation (an agent's room holds several:
  // the URL names the one, ?conversation=<id>, and the room's data which it shows).
  function showing(url) {
    const target = new URL(url, location.href);
    if (target.pathname !== location.pathname) return false;
    const wanted = target.searchParams.get("conversation");
    if (!wanted) return true;
    const room = window.garden.room;
    const shown = room && room.data.conversation ? String(room.data.conversation.id)
      : new URLSearchParams(location.search).get("conversation");
    return shown === wanted;
  }

  function show(event) {
    if (!event || event.type !== "notification.reply") return;
    if (!supported || Notification.permission !== "granted") return;
    // The reply's own room, in view, shows it already.
    if (document.visibilityState === "visible" && showing(event.url)) return;
    // The tag keeps one notification per reply however many pages are open.
    const notice = new Notification(event.title, { body: event.body, tag: `garden-reply-${event.message}` });
    notice.addEventListener("click", () => {
      window.focus();
      location.assign(event.url);
      notice.close();
    });
  }

  function connect(delay) {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    // The roster's socket with the notifications channel alone: no group's traffic.
    const socket = new WebSocket(`${scheme}://${location.host}/ws/roster/?only=notifications`);
    socket.addEventListener("open", () => { delay = 1000; });
    socket.addEventListener("message", (message) => {
      let event = null;
      try { event = JSON.parse(message.data); } catch (error) { return; } // not an event of ours
      show(event);
    });
    socket.addEventListener("close", (closed) => {
      // Signed out, refused, or too many sockets: this page stays quiet.
      if ([4401, 4403, 4429].includes(closed.code)) return;
      setTimeout(() => connect(Math.min(delay * 2, 30000)), delay);
    });
  }

  function listen() {
    if (listening || !supported || Notification.permission !== "granted") return;
    listening = true;
    const roster = document.getElementById("group-list");
    if (roster && roster.dataset.socket) {
      document.addEventListener("garden:roster-event", (event) => show(event.detail));
    } else {
      connect(1000);
    }
  }
  listen();

  const form = document.getElementById("notifications-form");
  if (!form) return;
  const { api, errorsOf, showErrors } = window.garden;
  const saved = document.getElementById("notifications-saved");
  const button = document.getElementById("notify-permission");
  const state = document.getElementById("notify-permission-state");

  function showPermission() {
    if (!supported) {
      state.textContent = "This browser cannot show notifications.";
      button.hidden = true;
      return;
    }
    const permission = Notification.permission;
    button.hidden = permission !== "default";
    state.textContent = permission === "granted" ? "Allowed in this browser."
      : permission === "denied" ? "Blocked in this browser: allow notifications for this site in its settings."
        : "Not allowed in this browser yet.";
  }
  showPermission();

  button.addEventListener("click", async () => {
    button.disabled = true;
    try { await Notification.requestPermission(); } catch (error) { /* answered as denied */ }
    button.disabled = false;
    showPermission();
    listen();
  });

  form.addEventListener("submit", (event) => event.preventDefault());
  form.addEventListener("change", async () => {
    const body = {
      browser: form.elements.browser.checked,
      telegram: form.elements.telegram.checked,
      muted: [...form.querySelectorAll("input[name=muted]:checked")].map((input) => Number(input.value)),
    };
    saved.textContent = "Saving…";
    const result = await api("PUT", "/api/notifications", body);
    if (result.ok) {
      showErrors(form, []);
      saved.textContent = "Saved.";
    } else {
      saved.textContent = "";
      showErrors(form, errorsOf(result));
    }
  });
})();
