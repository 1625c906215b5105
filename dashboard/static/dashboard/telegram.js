// The Telegram page: get a one-time link code (POST /api/telegram/link-code), watch for the
// chat to be linked (GET /api/telegram/link), unlink (DELETE /api/telegram/link).
"use strict";

(function () {
  const { api, errorsOf } = window.garden;
  const error = document.getElementById("telegram-error");
  const box = document.getElementById("telegram-code");
  const command = document.getElementById("telegram-command");
  const expiry = document.getElementById("telegram-expiry");
  const open = document.getElementById("telegram-open");
  const wasLinked = document.getElementById("telegram-link").dataset.linked === "true";
  let watching = null;
  let countdown = null;

  function stop() {
    clearInterval(watching);
    clearInterval(countdown);
  }

  // Until the code expires, look every few seconds whether the chat has been linked.
  function watch(expiresAt, linkedAt) {
    stop();
    const tick = () => {
      const left = Math.round((expiresAt - Date.now()) / 1000);
      if (left <= 0) {
        stop();
        expiry.textContent = "This code has expired; get a new one.";
        command.value = "";
        return;
      }
      expiry.textContent = `Good for ${Math.floor(left / 60)}:${String(left % 60).padStart(2, "0")} more, once.`;
    };
    tick();
    countdown = setInterval(tick, 1000);
    watching = setInterval(async () => {
      const result = await api("GET", "/api/telegram/link");
      if (result.ok && result.data.linked && (!wasLinked || result.data.linked_at !== linkedAt)) {
        stop();
        window.location.reload();
      }
    }, 3000);
  }

  document.getElementById("telegram-code-button").addEventListener("click", async (event) => {
    const button = event.currentTarget;
    button.disabled = true;
    const before = await api("GET", "/api/telegram/link");
    const result = await api("POST", "/api/telegram/link-code");
    button.disabled = false;
    error.textContent = result.ok ? "" : errorsOf(result)[0].message;
    if (!result.ok) return;
    const data = result.data;
    command.value = data.command;
    if (data.bot_username) {
      document.getElementById("telegram-bot-name").textContent = `@${data.bot_username}`;
    }
    open.hidden = !data.link_url;
    if (data.link_url) open.href = data.link_url;
    box.hidden = false;
    command.focus();
    command.select();
    watch(Date.parse(data.expires_at), before.ok ? before.data.linked_at : null);
  });

  document.getElementById("telegram-copy").addEventListener("click", async () => {
    command.select();
    try { await navigator.clipboard.writeText(command.value); } catch (err) { /* selected: Ctrl+C works */ }
  });

  const unlink = document.getElementById("telegram-unlink");
  if (unlink) {
    unlink.addEventListener("click", async () => {
      if (!window.confirm("Unlink Telegram? Approvals stop going there; decide them in the room.")) return;
      const result = await api("DELETE", "/api/telegram/link");
      if (result.ok) { window.location.reload(); return; }
      error.textContent = errorsOf(result)[0].message;
    });
  }
})();
