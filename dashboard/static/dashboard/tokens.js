// The access tokens page: make one (POST /api/tokens; the token is shown once), revoke one.
"use strict";

(function () {
  const { api, errorsOf, showErrors } = window.garden;
  const form = document.getElementById("token-form");
  const made = document.getElementById("token-made");
  const value = document.getElementById("token-value");

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const days = form.elements.expires_in_days.value;
    const submit = form.querySelector("[type=submit]");
    submit.disabled = true;
    const result = await api("POST", "/api/tokens", {
      name: form.elements.name.value.trim(),
      expires_in_days: days ? Number(days) : null,
    });
    submit.disabled = false;
    showErrors(form, result.ok ? [] : errorsOf(result));
    if (!result.ok) return;
    value.value = result.data.token;
    document.getElementById("token-example").textContent =
      `curl -H "Authorization: Bearer ${result.data.token}" \\\n` +
      `     -H "Content-Type: application/json" \\\n` +
      `     -d '{"text": "Plan the month"}' \\\n` +
      `     ${window.location.origin}/api/groups/<group id>/messages`;
    made.hidden = false;
    form.reset();
    value.focus();
    value.select();
  });

  document.getElementById("token-copy").addEventListener("click", async () => {
    value.select();
    try { await navigator.clipboard.writeText(value.value); } catch (err) { /* selected: Ctrl+C works */ }
  });

  document.querySelectorAll(".token").forEach((row) => {
    row.querySelector(".js-revoke").addEventListener("click", async () => {
      const name = row.querySelector("h3").textContent;
      if (!window.confirm(`Revoke ${name}? Scripts using it stop working at once.`)) return;
      const result = await api("DELETE", `/api/tokens/${row.dataset.id}`);
      if (result.ok) { row.remove(); return; }
      row.querySelector(".js-row-error").textContent = errorsOf(result)[0].message;
    });
  });
})();
