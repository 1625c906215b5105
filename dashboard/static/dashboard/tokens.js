// The access tokens page: make one (POST /api/tokens with the current password; the token is
// shown once), revoke one.
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
      scopes: [...form.querySelectorAll("input[name=scopes]:checked")].map((box) => box.value),
      password: form.elements.password.value,
    });
    form.elements.password.value = "";
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
    listToken(result.data);
    form.reset();
    value.focus();
    value.select();
  });

  // The new token joins the list at once (its start only, like the others); a reload shows
  // the same row from the server.
  function listToken(token) {
    const list = document.getElementById("token-list");
    const empty = list.querySelector(".empty");
    if (empty) empty.remove();
    const row = window.garden.make("li", { className: "account token", id: `token-${token.id}`, "data-id": token.id },
      window.garden.make("div", { className: "account-head" },
        window.garden.make("h3", { text: token.name }), " ", window.garden.make("code", { text: `${token.prefix}…` })),
      window.garden.make("p", { className: "help", text: token.expires_at ? `Expires ${window.garden.formatDate(token.expires_at, { time: false })}` : "Expires when revoked" }),
      window.garden.make("button", { type: "button", className: "button danger js-revoke", text: `Revoke ${token.name}` }),
      window.garden.make("p", { className: "field-error js-row-error", role: "alert" }));
    list.prepend(row);
  }

  document.getElementById("token-copy").addEventListener("click", async () => {
    value.select();
    try { await navigator.clipboard.writeText(value.value); } catch (err) { /* selected: Ctrl+C works */ }
  });

  // Revoke, for the rows the page came with and the ones made since.
  document.getElementById("token-list").addEventListener("click", async (event) => {
    const button = event.target.closest(".js-revoke");
    if (!button) return;
    const row = button.closest(".token");
    const name = row.querySelector("h3").textContent;
    if (!window.confirm(`Revoke ${name}? Scripts using it stop working at once.`)) return;
    const result = await api("DELETE", `/api/tokens/${row.dataset.id}`);
    if (!result.ok) { row.querySelector(".js-row-error").textContent = errorsOf(result)[0].message; return; }
    const list = row.parentElement;
    row.remove();
    if (!list.querySelector(".token")) list.append(window.garden.make("li", { className: "empty", text: "No tokens yet." }));
  });
})();
