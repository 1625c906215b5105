// The roster: an empty roster's one-click team, and the creation sheet (name, members,
// coordinator; the rule set's errors by their fields).
"use strict";

(function () {
  const { api, errorsOf, showErrors } = window.garden;
  // An empty roster's one-click team.
  const starter = document.getElementById("starter");
  if (!starter) return;
  const button = document.getElementById("create-starter");
  button.addEventListener("click", async () => {
    button.disabled = true;
    const result = await api("POST", "/api/groups/starter");
    if (result.ok) {
      window.location.assign(starter.dataset.roomUrl.replace("/0/", `/${result.data.id}/`));
      return;
    }
    button.disabled = false;
    showErrors(starter, errorsOf(result));
  });
})();

(function () {
  const { api, errorsOf, showErrors, checkedIds } = window.garden;
  const sheet = document.getElementById("create-sheet");
  const form = document.getElementById("create-form");
  const opener = document.getElementById("new-group");
  if (!sheet || !form || !opener) return;

  opener.addEventListener("click", () => {
    showErrors(form, []);
    sheet.showModal();
    form.elements.name.focus();
  });

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const submit = form.querySelector("[type=submit]");
    submit.disabled = true;
    const body = {
      name: form.elements.name.value,
      members: checkedIds(form, "members"),
      coordinator: Number(form.elements.coordinator.value) || null,
    };
    // The room cap as typed: the API says why a value is refused.
    const cap = form.elements.room_cap_chars.value.trim();
    if (cap) body.room_cap_chars = /^-?\d+$/.test(cap) ? Number(cap) : cap;
    const result = await api("POST", "/api/groups", body);
    submit.disabled = false;
    if (result.ok) {
      window.location.assign(form.dataset.roomUrl.replace("/0/", `/${result.data.id}/`));
      return;
    }
    showErrors(form, errorsOf(result));
    const invalid = form.querySelector("[aria-invalid=true]");
    if (invalid) {
      const details = invalid.closest("details");
      if (details) details.open = true;
      invalid.focus();
    }
  });
})();
