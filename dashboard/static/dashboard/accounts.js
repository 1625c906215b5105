// The model accounts page: add (POST), edit (PATCH; an empty key keeps the stored one), delete,
// and Test, which makes one tiny call and shows the named result.
"use strict";

(function () {
  const { api, errorsOf, showErrors } = window.garden;

  // The form's fields as the API takes them, or null after showing why the script is not JSON.
  function fields(form) {
    const body = {};
    if (form.dataset.provider === "scripted") {
      body.name = form.elements.name.value.trim();
      body.model = form.elements.model.value.trim() || "scripted";
      if (form.elements.provider) body.provider = "scripted";
      try {
        body.options = JSON.parse(form.elements.options.value || "{}");
      } catch (err) {
        showErrors(form, [{ field: "options", code: "invalid", message: `The script is not JSON: ${err.message}` }]);
        return null;
      }
      return body;
    }
    for (const name of ["name", "model", "base_url", "credential", "provider"]) {
      if (form.elements[name]) body[name] = form.elements[name].value.trim();
    }
    const key = form.elements.api_key.value.trim();
    if (key) body.api_key = key;
    return body;
  }

  const create = document.getElementById("account-form");
  // The fields shown follow the provider: a base URL and key, or a script.
  create.elements.provider.addEventListener("change", () => {
    create.dataset.provider = create.elements.provider.value;
  });
  create.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = fields(create);
    if (!body) return;
    const submit = create.querySelector("[type=submit]");
    submit.disabled = true;
    const result = await api("POST", "/api/model-accounts", body);
    submit.disabled = false;
    if (result.ok) {
      window.location.reload();
      return;
    }
    showErrors(create, errorsOf(result));
  });

  // What a save said that the reload would otherwise lose (a key dropped by a base URL change).
  const NOTICE = "garden.account-notice";
  function takeNotice() {
    try {
      const notice = JSON.parse(window.sessionStorage.getItem(NOTICE) || "null");
      window.sessionStorage.removeItem(NOTICE);
      return notice;
    } catch (err) {
      return null;
    }
  }
  const notice = takeNotice();

  document.querySelectorAll(".account").forEach((row) => {
    const url = `/api/model-accounts/${row.dataset.id}`;
    const result = row.querySelector(".test-result");
    const rowError = row.querySelector(".js-row-error");
    if (notice && notice.id === row.dataset.id) {
      result.className = "test-result test-result--failed js-key-cleared";
      result.textContent = notice.text;
    }
    const test = row.querySelector(".js-test");
    test.addEventListener("click", async () => {
      test.disabled = true;
      result.className = "test-result";
      result.textContent = "Testing…";
      const answer = await api("POST", `${url}/test`);
      test.disabled = false;
      if (!answer.ok) {
        result.className = "test-result test-result--failed";
        result.textContent = errorsOf(answer)[0].message;
        return;
      }
      const { ok, code, message } = answer.data;
      result.className = `test-result test-result--${ok ? "ok" : "failed"}`;
      result.textContent = ok ? `Works. ${message}` : `${code}: ${message}`;
    });

    const edit = row.querySelector(".js-edit");
    const form = row.querySelector(".js-edit-form");
    if (edit && form) {
      edit.addEventListener("click", () => {
        form.hidden = !form.hidden;
        edit.setAttribute("aria-expanded", String(!form.hidden));
        if (!form.hidden) form.elements.name.focus();
      });
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        const body = fields(form);
        if (!body) return;
        const answer = await api("PATCH", url, body);
        if (answer.ok) {
          if (answer.data.api_key_cleared) {
            window.sessionStorage.setItem(NOTICE, JSON.stringify({
              id: row.dataset.id,
              text: "API_KEY_CLEARED: the base URL changed, so the stored key was removed " +
                "(a key is never sent to a new address). Paste the key for the new address.",
            }));
          }
          window.location.reload();
          return;
        }
        showErrors(form, errorsOf(answer));
      });
    }

    row.querySelector(".js-delete").addEventListener("click", async () => {
      const name = row.querySelector("h3").textContent;
      if (!window.confirm(`Delete the model account ${name}?`)) return;
      const answer = await api("DELETE", url);
      if (answer.ok) {
        row.remove();
        return;
      }
      rowError.textContent = errorsOf(answer)[0].message;
    });
  });
})();
