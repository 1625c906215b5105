// The roster's creation sheet: name, members, coordinator; the rule set's errors by their fields.
"use strict";

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
    const result = await api("POST", "/api/groups", {
      name: form.elements.name.value,
      members: checkedIds(form, "members"),
      coordinator: Number(form.elements.coordinator.value) || null,
    });
    submit.disabled = false;
    if (result.ok) {
      window.location.assign(form.dataset.roomUrl.replace("/0/", `/${result.data.id}/`));
      return;
    }
    showErrors(form, errorsOf(result));
    const invalid = form.querySelector("[aria-invalid=true]");
    if (invalid) invalid.focus();
  });
})();
