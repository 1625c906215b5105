// An agent's page: its settings saved with PATCH /api/agents/:id, its removal with DELETE.
"use strict";

(function () {
  const { api, errorsOf, showErrors } = window.garden;
  const form = document.getElementById("agent-settings");
  const saved = document.getElementById("agent-saved");

  const checked = (name) =>
    [...form.querySelectorAll(`input[name="${name}"]:checked`)].map((input) => input.value);

  // Approval only makes sense for a tool the agent has: ticking it gives the tool too.
  form.addEventListener("change", (event) => {
    const input = event.target;
    if (input.name === "approval_tools" && input.checked) {
      const tool = form.querySelector(`input[name="enabled_tools"][value="${input.value}"]`);
      if (tool) tool.checked = true;
    }
    if (input.name === "enabled_tools" && !input.checked) {
      const approval = form.querySelector(`input[name="approval_tools"][value="${input.value}"]`);
      if (approval) approval.checked = false;
      // An MCP tool's policy goes with the tool (the server drops it too).
      const policy = form.querySelector(`select[name="tool_approvals"][data-tool="${input.value}"]`);
      if (policy) policy.value = "annotations";
    }
    // Choosing how an MCP tool is approved gives the tool.
    if (input.name === "tool_approvals" && input.value !== "annotations") {
      const tool = form.querySelector(`input[name="enabled_tools"][value="${input.dataset.tool}"]`);
      if (tool) tool.checked = true;
    }
    saved.textContent = "";
  });

  // Each enabled MCP tool's policy; one by its annotations (the default) is left out.
  function policies() {
    const enabled = new Set(checked("enabled_tools"));
    const found = {};
    for (const select of form.querySelectorAll('select[name="tool_approvals"]')) {
      if (enabled.has(select.dataset.tool) && select.value !== "annotations") {
        found[select.dataset.tool] = select.value;
      }
    }
    return found;
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const submit = form.querySelector("[type=submit]");
    const body = {
      name: form.elements.name.value.trim(),
      colour: form.elements.colour.value,
      instructions: form.elements.instructions.value,
      enabled_tools: checked("enabled_tools"),
      approval_tools: checked("approval_tools"),
      tool_approvals: policies(),
      delegation_allowlist: checked("delegation_allowlist"),
    };
    const account = form.elements.model_account.value;
    if (account) body.model_account = Number(account);
    submit.disabled = true;
    saved.textContent = "Saving…";
    const result = await api("PATCH", form.dataset.url, body);
    submit.disabled = false;
    showErrors(form, result.ok ? [] : errorsOf(result));
    if (!result.ok) {
      saved.textContent = "Not saved: see the highlighted field.";
      // The field may be far above the button: go to it.
      const invalid = form.querySelector("[aria-invalid=true]") || form.querySelector(".field-error:not(:empty)");
      if (invalid) { invalid.scrollIntoView({ block: "center" }); if (invalid.focus) invalid.focus(); }
      return;
    }
    // Its own room, and its groups when it has any: where the change shows next.
    saved.textContent = Number(form.dataset.groups) > 0
      ? "Saved. Its next reply uses it, in its own room and in its groups."
      : "Saved. Its next reply uses it.";
    document.querySelectorAll(".js-agent-name").forEach((node) => { node.textContent = result.data.name; });
    document.title = `${result.data.name} | ${document.title.split(" | ").pop()}`;
  });

  const remove = document.getElementById("agent-remove");
  if (!remove) return;
  remove.addEventListener("submit", async (event) => {
    event.preventDefault();
    const name = form.elements.name.value.trim();
    if (!window.confirm(`Remove ${name}? It stops working and leaves your agents.`)) return;
    const result = await api("DELETE", remove.dataset.url);
    if (result.ok) {
      window.location.assign(remove.dataset.next);
      return;
    }
    showErrors(remove, errorsOf(result));
  });
})();
