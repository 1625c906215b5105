// The operator-messages admin, live: each tend run that finishes while the page is open adds a
// line (a note written, and where, or none) from the gardener's channel, without a reload.
"use strict";

(function () {
  const list = document.getElementById("tend-finished");
  const state = document.getElementById("tend-live-state");
  if (!list) return;
  const scheme = window.location.protocol === "https:" ? "wss" : "ws";
  const url = `${scheme}://${window.location.host}/ws/operator/`;
  // Closed for good: not allowed to listen (4403), or signed out (4401).
  const FINAL = new Set([4403, 4401]);
  let wait = 1000;

  function sentence(event) {
    const note = event.operator_note_written
      ? `note written at ${event.operator_note_path || "the inbox"}`
      : "no note";
    const parts = [`Tend finished: ${note}`];
    if (event.status !== "succeeded") parts.push(`the run ${event.status}`);
    if (event.invalid_record_lines) {
      const lines = event.invalid_record_lines;
      parts.push(`${lines} invalid record ${lines === 1 ? "line" : "lines"}`);
    }
    return parts.join(" · ");
  }

  function add(event) {
    const item = document.createElement("li");
    const time = document.createElement("time");
    const now = new Date();
    time.dateTime = now.toISOString();
    time.textContent = now.toLocaleTimeString();
    const run = document.createElement("a");
    run.href = `?q=${encodeURIComponent(event.run_id)}`;
    run.textContent = `run ${event.run_id}`;
    item.append(time, ` ${sentence(event)} (`, run, ")");
    list.prepend(item);
  }

  function connect() {
    const socket = new WebSocket(url);
    socket.addEventListener("open", () => {
      wait = 1000;
      state.textContent = "Live: tend runs that finish now appear here.";
    });
    socket.addEventListener("message", (message) => {
      const event = JSON.parse(message.data);
      if (event.type === "tend.finished") add(event);
    });
    socket.addEventListener("close", (closed) => {
      if (FINAL.has(closed.code)) {
        state.textContent = "Not live: reload the page to see runs that finished since.";
        return;
      }
      state.textContent = "Reconnecting…";
      setTimeout(connect, wait);
      wait = Math.min(wait * 2, 30000);
    });
  }
  connect();
})();
