// The webhooks page: add one (POST /api/webhooks; the signing secret is shown once), send a
// test event, rotate the secret (shown once too), enable a disabled one, remove one.
"use strict";

(function () {
  const { api, errorsOf, showErrors, make } = window.garden;
  const form = document.getElementById("webhook-form");
  const secretBox = document.getElementById("webhook-secret");
  const secretValue = document.getElementById("webhook-secret-value");

  function showSecret(secret) {
    secretValue.value = secret;
    secretBox.hidden = false;
    secretValue.focus();
    secretValue.select();
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const submit = form.querySelector("[type=submit]");
    submit.disabled = true;
    const group = form.elements.group.value;
    const result = await api("POST", "/api/webhooks", {
      url: form.elements.url.value.trim(),
      events: [...form.querySelectorAll("input[name=events]:checked")].map((box) => box.value),
      group: group ? Number(group) : null,
      named_only: form.elements.named_only.checked,
      description: form.elements.description.value.trim(),
    });
    submit.disabled = false;
    showErrors(form, result.ok ? [] : errorsOf(result));
    if (!result.ok) return;
    listEndpoint(result.data);
    form.reset();
    showSecret(result.data.secret);
  });

  // The new endpoint joins the list at once; a reload shows it with its deliveries.
  function listEndpoint(endpoint) {
    const list = document.getElementById("webhook-list");
    const empty = list.querySelector(".empty");
    if (empty) empty.remove();
    list.append(make("li", { className: "account webhook", id: `webhook-${endpoint.id}`, "data-id": endpoint.id },
      make("div", { className: "account-head" }, make("h3", { text: endpoint.url }), " ", make("span", { className: "tag", text: "enabled" })),
      make("p", { className: "help", text: `Hears ${endpoint.events.join(", ")}` }),
      make("div", { className: "account-actions" },
        make("button", { type: "button", className: "button js-test", text: "Send a test event" }),
        make("button", { type: "button", className: "button js-rotate", text: "Rotate secret" }),
        make("button", { type: "button", className: "button danger js-remove", text: "Remove" })),
      make("p", { className: "field-error js-row-error", role: "alert" }),
      make("p", { className: "help js-row-status", role: "status" })));
  }

  document.getElementById("webhook-secret-copy").addEventListener("click", async () => {
    secretValue.select();
    try { await navigator.clipboard.writeText(secretValue.value); } catch (err) { /* selected: Ctrl+C works */ }
  });

  document.getElementById("webhook-list").addEventListener("click", async (event) => {
    const button = event.target.closest("button");
    const row = button && button.closest(".webhook");
    if (!row) return;
    const id = row.dataset.id;
    const error = row.querySelector(".js-row-error");
    const status = row.querySelector(".js-row-status");
    error.textContent = "";
    status.textContent = "";
    let result;
    if (button.classList.contains("js-remove")) {
      const url = row.querySelector("h3").textContent;
      if (!window.confirm(`Remove the webhook to ${url}? Its deliveries go with it.`)) return;
      result = await api("DELETE", `/api/webhooks/${id}`);
      if (result.ok) {
        const list = row.parentElement;
        row.remove();
        if (!list.querySelector(".webhook")) list.append(make("li", { className: "empty", text: "No webhooks yet." }));
        return;
      }
    } else if (button.classList.contains("js-rotate")) {
      if (!window.confirm("Rotate the secret? The old one stops verifying at once.")) return;
      result = await api("POST", `/api/webhooks/${id}/rotate-secret`);
      if (result.ok) { showSecret(result.data.secret); return; }
    } else if (button.classList.contains("js-test")) {
      result = await api("POST", `/api/webhooks/${id}/test`);
      if (result.ok) { status.textContent = "A test event is on its way; reload to see its attempts."; return; }
    } else if (button.classList.contains("js-enable")) {
      result = await api("PATCH", `/api/webhooks/${id}`, { enabled: true });
      if (result.ok) { window.location.reload(); return; }
    } else {
      return;
    }
    error.textContent = errorsOf(result)[0].message;
  });
})();
