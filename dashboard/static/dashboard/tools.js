// The Tools page: add an MCP server (POST /api/mcp-servers: its tools are listed first, so a
// refusal is named and nothing is kept), Test one (POST …/refresh: its tools listed again) and
// remove one (DELETE). Refusals are shown by their code and message.
"use strict";

(function () {
  const { api, errorsOf, showErrors } = window.garden;

  // A service's refusal is named (EGRESS_REFUSED, MCP_NOT_MCP…): the name goes first, as the
  // docs and the operator know it; a field's plain validation message stays as it is.
  const named = (errors) => errors.map((error) => (/^[A-Z][A-Z0-9_]+$/.test(error.code || "")
    ? { ...error, message: `${error.code}: ${error.message}` } : error));

  // "Name: value" a line, or the line that is not.
  function headersOf(text) {
    const headers = {};
    const lines = text.split("\n");
    for (let i = 0; i < lines.length; i += 1) {
      const line = lines[i].trim();
      if (!line) continue;
      const colon = line.indexOf(":");
      if (colon < 1) return { error: `Line ${i + 1} is not "Name: value".` };
      headers[line.slice(0, colon).trim()] = line.slice(colon + 1).trim();
    }
    return { headers };
  }

  const create = document.getElementById("mcp-form");
  const adding = document.getElementById("mcp-adding");
  create.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = { name: create.elements.name.value.trim(), url: create.elements.url.value.trim() };
    const token = create.elements.bearer_token.value.trim();
    if (token) body.bearer_token = token;
    const { headers, error } = headersOf(create.elements.headers.value);
    if (error) {
      showErrors(create, [{ field: "headers", code: "invalid", message: error }]);
      adding.textContent = "Not added: see the highlighted field.";
      return;
    }
    if (Object.keys(headers).length) body.headers = headers;
    const submit = create.querySelector("[type=submit]");
    submit.disabled = true;
    adding.textContent = "Listing its tools…";
    const result = await api("POST", "/api/mcp-servers", body);
    submit.disabled = false;
    if (result.ok) {
      window.location.reload();
      return;
    }
    showErrors(create, named(errorsOf(result)));
    adding.textContent = "Not added: see the highlighted field.";
  });

  document.querySelectorAll(".mcp-server[data-id]").forEach((row) => {
    const url = `/api/mcp-servers/${row.dataset.id}`;
    const result = row.querySelector(".test-result");
    const rowError = row.querySelector(".js-row-error");

    const test = row.querySelector(".js-test");
    test.addEventListener("click", async () => {
      test.disabled = true;
      result.className = "test-result";
      result.textContent = "Testing…";
      const answer = await api("POST", `${url}/refresh`);
      test.disabled = false;
      if (!answer.ok) {
        // The tools listed before stay.
        const [refusal] = named(errorsOf(answer));
        result.className = "test-result test-result--failed";
        result.textContent = refusal.message;
        return;
      }
      const count = answer.data.tools.length;
      result.className = "test-result test-result--ok";
      result.textContent = `Works: it lists ${count} tool${count === 1 ? "" : "s"}.`;
      // The list again, as the page's template shows it.
      let page;
      try { page = await fetch(row.dataset.toolsUrl, { credentials: "same-origin" }); } catch (err) { return; }
      if (page.ok) row.querySelector(".js-tools").innerHTML = await page.text(); // escaped by the template
    });

    row.querySelector(".js-delete").addEventListener("click", async () => {
      const name = row.dataset.name;
      if (!window.confirm(`Remove the MCP server ${name}? Its tools leave every agent that has them.`)) return;
      const answer = await api("DELETE", url);
      if (answer.ok) {
        window.location.reload();
        return;
      }
      rowError.textContent = named(errorsOf(answer))[0].message;
    });
  });
})();
