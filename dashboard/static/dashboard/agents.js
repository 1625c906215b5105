// The agents page's small create form, posting to /api/agents, then opening the new agent.
"use strict";

(function () {
  const { api, errorsOf, showErrors } = window.garden;
  const form = document.getElementById("agent-form");
  if (!form) return;

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const submit = form.querySelector("[type=submit]");
    submit.disabled = true;
    const result = await api("POST", "/api/agents", {
      name: form.elements.name.value.trim(),
      handle: form.elements.handle.value.trim().replace(/^@/, "").toLowerCase(),
      colour: form.elements.colour.value,
    });
    submit.disabled = false;
    if (result.ok) {
      // Straight to its settings: instructions, tools and a model are what it needs next.
      window.location.assign(`${window.location.pathname}${result.data.id}/`);
      return;
    }
    showErrors(form, errorsOf(result));
  });
})();
