// The room's group: the header, the ⋯ menu and its sheets (members, rename, export, clear,
// delete), the Undo after a delete, and what the page says when the group is gone. An agent's
// room has the menu too, with Export alone.
"use strict";

(function () {
  const { api, errorsOf, showErrors, make, face, checkedIds } = window.garden;
  const shared = window.garden.room;
  const { urls, $, state: room } = shared;

  const composer = $("composer");
  const textarea = $("composer-text");
  const toast = $("toast");

  // --- the ⋯ menu: a group's (members, rename, export, clear, delete), an agent's (export) ---

  const menuButton = $("menu-button");
  const menu = $("group-menu");
  const menuItems = () => [...menu.querySelectorAll("[role=menuitem]")];
  function openMenu() {
    menu.hidden = false;
    menuButton.setAttribute("aria-expanded", "true");
    menuItems()[0].focus();
  }
  function closeMenu(returnFocus) {
    if (menu.hidden) return;
    menu.hidden = true;
    menuButton.setAttribute("aria-expanded", "false");
    if (returnFocus) menuButton.focus();
  }
  menuButton.addEventListener("click", () => (menu.hidden ? openMenu() : closeMenu(false)));
  menuButton.addEventListener("keydown", (event) => {
    if (event.key === "ArrowDown") { event.preventDefault(); openMenu(); }
  });
  menu.addEventListener("keydown", (event) => {
    const list = menuItems();
    const at = list.indexOf(document.activeElement);
    const moves = { ArrowDown: at + 1, ArrowUp: at - 1, Home: 0, End: list.length - 1 };
    if (event.key in moves) {
      event.preventDefault();
      list[(moves[event.key] + list.length) % list.length].focus();
    } else if (event.key === "Escape") {
      event.preventDefault();
      closeMenu(true);
    } else if (event.key === "Tab") {
      closeMenu(false);
    }
  });
  document.addEventListener("click", (event) => {
    if (!event.target.closest(".menu-wrap")) closeMenu(false);
  });

  // What each item does; a group's room adds its own below.
  const actions = {
    export() { $("export-dialog").showModal(); },
  };
  menu.addEventListener("click", (event) => {
    const item = event.target.closest("[data-action]");
    if (!item) return;
    closeMenu(false);
    actions[item.dataset.action]();
  });

  // An agent's room has no group to manage: its header links to the agent's settings, and its
  // menu holds only Export.
  if (shared.data.solo) {
    Object.assign(shared, {
      onGroupChange() {},
      gone() {
        if (room.deleted) return;
        room.deleted = true;
        composer.querySelectorAll("textarea, button").forEach((control) => { control.disabled = true; });
        toast.replaceChildren(make("span", { text: "This conversation is no longer available. " }),
          make("a", { href: urls.roster, text: "Back to the roster" }));
        toast.hidden = false;
      },
    });
    return;
  }

  // --- the group: header, members, rename, clear, delete ----------------------------------

  function applyGroup(group) {
    room.group = group;
    shared.setMembers(group.members);
    document.querySelectorAll(".js-group-name").forEach((node) => { node.textContent = group.name; });
    document.title = document.title.replace(/^[^|]*\|/, `${group.name} |`);
    const label = `Members: ${group.members.map((m) => m.name).join(", ")}`;
    const faces = make("span", { className: "faces", role: "img", "aria-label": label }, ...group.members.map((m) => face(m)));
    $("room-faces").replaceChildren(faces);
  }

  // A group.updated event carries the group as the API returns it: applied as it comes.
  function onGroupChange(event) {
    if (event.change === "cleared") {
      shared.resetTranscript(); room.request = null; shared.sync(); shared.refreshCanvas();
    }
    applyGroup(event.group);
  }

  const dialogs = {
    members: $("members-dialog"), rename: $("rename-dialog"), clear: $("clear-dialog"), delete: $("delete-dialog"),
  };
  const agentPage = (id) => urls.agent.replace("/0/", `/${id}/`);

  function renderMemberRows() {
    const rows = room.group.members.map((m) => {
      const row = make("li", {}, face(m), make("span", { text: m.name }),
        make("span", { className: "handle", text: `@${m.handle}` }));
      if (m.id === room.group.coordinator.id) row.append(make("span", { className: "tag", text: "coordinator" }));
      if (m.removed) row.append(make("span", { className: "tag", text: "removed" }));
      else if (m.can_run === false) row.append(make("span", { className: "tag", text: "cannot run" }));
      row.append(make("a", { className: "secondary", href: agentPage(m.id), text: "Agent page",
        "aria-label": `Open ${m.name}'s page` }));
      return row;
    });
    $("member-rows").replaceChildren(...rows);
  }

  // A removed agent is no candidate, so the page has no box for it: a member removed from the
  // site gets one here, ticked, so a save keeps it until the owner unticks it (only what a change
  // brings in is checked). A removed coordinator stays choosable, so a save keeps it too.
  function offerRemovedMembers(form) {
    form.querySelectorAll("[data-removed-member]").forEach((node) => node.remove());
    const fieldset = form.querySelector(".members-field");
    const select = form.elements.coordinator;
    for (const m of room.group.members.filter((member) => member.removed)) {
      const label = `${m.name} (removed)`;
      fieldset.querySelector("[data-error-for=members]").before(make("label",
        { className: "member-option", "data-removed-member": "" },
        make("input", { type: "checkbox", name: "members", value: String(m.id) }),
        face(m, { small: true }), make("span", { text: label }),
        make("span", { className: "handle", text: `@${m.handle}` })));
      if (m.id === room.group.coordinator.id) {
        select.append(make("option", { value: String(m.id), "data-removed-member": "", text: label }));
      }
    }
  }

  Object.assign(actions, {
    members() {
      const form = $("members-form");
      offerRemovedMembers(form);
      const ids = new Set(room.group.members.map((m) => m.id));
      form.querySelectorAll("input[name=members]").forEach((box) => { box.checked = ids.has(Number(box.value)); });
      form.elements.coordinator.value = String(room.group.coordinator.id);
      showErrors(form, []);
      renderMemberRows();
      dialogs.members.showModal();
    },
    rename() {
      const form = $("rename-form");
      form.elements.name.value = room.group.name;
      showErrors(form, []);
      dialogs.rename.showModal();
      form.elements.name.select();
    },
    clear() { showErrors($("clear-form"), []); dialogs.clear.showModal(); },
    delete() { showErrors($("delete-form"), []); dialogs.delete.showModal(); },
  });

  // Each sheet's form: call the API; then close the sheet and apply the answer, or show the
  // errors by their fields. Closing first lets what follows take the focus from the sheet.
  function onSubmit(formId, call, apply) {
    const form = $(formId);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const submit = form.querySelector("[type=submit]");
      submit.disabled = true;
      const result = await call(form);
      submit.disabled = false;
      if (!result.ok) { showErrors(form, errorsOf(result)); return; }
      form.closest("dialog").close();
      apply(result.data);
    });
  }

  onSubmit("members-form", (form) => {
    const chosen = checkedIds(form, "members");
    const kept = room.group.members.map((m) => m.id).filter((id) => chosen.includes(id));
    const members = [...kept, ...chosen.filter((id) => !kept.includes(id))];
    return api("PATCH", urls.api, { members, coordinator: Number(form.elements.coordinator.value) });
  }, applyGroup);
  onSubmit("rename-form", (form) => api("PATCH", urls.api, { name: form.elements.name.value }), applyGroup);
  onSubmit("clear-form", () => api("POST", `${urls.api}/clear`), () => {
    shared.resetTranscript();
    room.request = null;
    shared.schedule();
    shared.sync();
    shared.refreshCanvas();
  });
  onSubmit("delete-form", () => api("DELETE", urls.api), offerUndo);

  let undoTimer = null;
  function setDeleted(deleted) {
    room.deleted = deleted;
    composer.querySelectorAll("textarea, button").forEach((control) => { control.disabled = deleted; });
    shared.renderBudget();
  }

  // The API allows a minute; the page offers Undo for ten seconds of it, then leaves the room.
  function offerUndo() {
    setDeleted(true);
    let left = 10;
    const count = make("span", { text: `(${left})` });
    const undo = make("button", { type: "button", text: "Undo" });
    const message = make("span", { text: `“${room.group.name}” was deleted. ` }, count);
    toast.replaceChildren(message, undo);
    toast.hidden = false;
    undo.focus();
    undoTimer = setInterval(() => {
      left -= 1;
      count.textContent = `(${left})`;
      if (left <= 0) { clearInterval(undoTimer); window.location.assign(urls.roster); }
    }, 1000);
    undo.addEventListener("click", async () => {
      clearInterval(undoTimer);
      const result = await api("POST", `${urls.api}/restore`);
      if (!result.ok) {
        toast.replaceChildren(make("span", { text: errorsOf(result)[0].message }),
          make("a", { href: urls.roster, text: "Back to the roster" }));
        return;
      }
      toast.hidden = true;
      setDeleted(false);
      applyGroup(result.data);
      textarea.focus();
      shared.sync();
    });
  }

  // The group is gone (deleted from elsewhere, or purged): say so and offer the way back.
  function gone() {
    if (room.deleted) return;
    setDeleted(true);
    toast.replaceChildren(make("span", { text: "This group no longer exists. " }),
      make("a", { href: urls.roster, text: "Back to the roster" }));
    toast.hidden = false;
  }

  Object.assign(shared, { gone, onGroupChange });
})();
