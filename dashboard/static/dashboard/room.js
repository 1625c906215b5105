// Starts the room. Its parts are the files room.html loads before this one, each adding what it
// shares to window.garden.room: transcript, live (request, approvals, sync), group, composer, canvas.
"use strict";

(function () {
  const shared = window.garden.room;

  // The browser tests reach the room through this (they drop the live socket with it).
  window.gardenRoom = { room: shared.state, sync: shared.sync, get socket() { return shared.socket(); } };
  shared.setLive(false, "Connecting…");
  shared.sync().finally(() => { shared.state.loaded = true; shared.schedule(); shared.showTurn(); });
  shared.connect();
})();
