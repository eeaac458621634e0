// The memory view (#/memories/<namespace>): a namespace's records of the server's memory
// bank, listed in the order they were recorded or searched by relevance, each with a
// Forget button that asks first. Shown only when GET api/info says the server has a bank.

import { ApiError, api } from "./api.js";
import { clear, formatTime, h } from "./dom.js";
import { markCurrent } from "./threads.js";
import { clearError, showError, withAuth } from "./ui.js";

const PAGE = 50;
const view = { namespace: "", query: "", includePast: false, records: [], next: null, searched: false };

/** The hash route of a namespace: each part encoded, joined with "/". */
function routeOf(namespace) {
  const parts = namespace.split("/").map((part) => encodeURIComponent(part));
  return namespace ? `#/memories/${parts.join("/")}` : "#/memories";
}

export async function openMemories(namespace, hasBank) {
  markCurrent(null);
  const main = clear(document.getElementById("main"));
  const heading = h("h2", { id: "memories-title", tabindex: "-1" }, "Memories");
  if (!hasBank) {
    main.append(
      h(
        "section",
        { class: "memories", id: "memories" },
        heading,
        h("p", { id: "no-bank" }, "This server has no memory bank (serve it with --bank URL, or create_app(bank=...))."),
      ),
    );
    heading.focus();
    return;
  }
  view.namespace = namespace;
  view.query = "";
  view.records = [];
  view.next = null;
  view.searched = false;
  main.append(
    h(
      "section",
      { class: "memories", id: "memories", "aria-labelledby": "memories-title" },
      heading,
      renderForm(),
      h("p", { id: "memory-status", class: "muted status-line", role: "status" }),
      h("ul", { id: "memory-list", class: "memory-list", "aria-label": "Memory records" }),
      h("div", { class: "pager", id: "memory-pager" }),
    ),
  );
  heading.focus();
  if (namespace) await load();
  else setStatus("Enter a namespace, like user-42 or user-42/trips, to see its records.");
}

function renderForm() {
  const namespaceInput = h("input", {
    id: "memory-namespace",
    name: "namespace",
    autocomplete: "off",
    placeholder: "user-42/trips",
    required: true,
    "aria-describedby": "memory-namespace-help",
  });
  namespaceInput.value = view.namespace;
  const queryInput = h("input", { id: "memory-query", name: "q", type: "search", autocomplete: "off", placeholder: "words or a question" });
  const past = h("input", { id: "memory-past", name: "include_past", type: "checkbox" });
  past.checked = view.includePast;
  const form = h(
    "form",
    { id: "memory-form", class: "memory-form", role: "search" },
    h("label", { for: "memory-namespace" }, "Namespace"),
    namespaceInput,
    h("p", { id: "memory-namespace-help", class: "muted hint" }, "Its parts separated by /; records of namespaces under it are included."),
    h("label", { for: "memory-query" }, "Search memories"),
    h("div", { class: "row" }, queryInput, h("button", { type: "submit" }, "Search")),
    h("div", { class: "row check" }, past, h("label", { for: "memory-past" }, "Search past records too")),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    view.namespace = namespaceInput.value.trim();
    view.query = queryInput.value.trim();
    view.includePast = past.checked;
    if (!view.namespace) {
      namespaceInput.setAttribute("aria-invalid", "true");
      setStatus("Enter a namespace first.");
      namespaceInput.focus();
      return;
    }
    namespaceInput.removeAttribute("aria-invalid");
    // The namespace goes in the address (a link to it can be shared); replaceState fires no
    // hashchange, so the view stays as it is and loads here.
    if (location.hash !== routeOf(view.namespace)) history.replaceState(null, "", routeOf(view.namespace));
    view.records = [];
    view.next = null;
    load();
  });
  return form;
}

function setStatus(text) {
  const status = document.getElementById("memory-status");
  if (status) status.textContent = text;
}

async function load() {
  const namespace = view.namespace;
  const searching = Boolean(view.query);
  setStatus(searching ? "Searching..." : "Loading records...");
  let body;
  try {
    if (searching) {
      const params = { namespace, q: view.query, k: PAGE };
      if (view.includePast) params.include_past = "true";
      body = await withAuth(() => api.memories(params));
    } else {
      const params = { namespace, limit: PAGE };
      if (view.next) params.after = view.next;
      body = await withAuth(() => api.memories(params));
    }
  } catch (err) {
    setStatus(`The records could not be loaded (${err.code || "ERROR"}).`);
    showError(err);
    return;
  }
  if (namespace !== view.namespace) return; // another namespace was asked for meanwhile
  clearError();
  view.searched = searching;
  if (searching) {
    view.records = body.hits.map((hit) => ({ ...hit.record, score: hit.score }));
    view.next = null;
  } else {
    view.records = view.records.concat(body.records);
    view.next = body.next_after || null;
  }
  renderList();
}

function renderList() {
  const list = clear(document.getElementById("memory-list"));
  for (const record of view.records) list.append(renderRecord(record));
  const count = view.records.length === 1 ? "1 record" : `${view.records.length} records`;
  setStatus(
    view.searched
      ? `${count} matching "${view.query}" in ${view.namespace}`
      : `${count} in ${view.namespace}${view.next ? " (more below)" : ""}`,
  );
  const pager = clear(document.getElementById("memory-pager"));
  if (view.next) pager.append(h("button", { type: "button", class: "secondary", id: "memory-more", onclick: () => load() }, "Show more"));
}

function renderRecord(record) {
  const past = Boolean(record.valid_to);
  const validity = past
    ? `valid ${formatTime(record.valid_from)} to ${formatTime(record.valid_to)}`
    : `valid since ${formatTime(record.valid_from)}`;
  const where = record.namespace.join("/");
  const item = h(
    "li",
    { class: past ? "memory memory-past" : "memory", "data-record-id": record.id },
    h(
      "div",
      { class: "memory-body" },
      h("p", { class: "memory-text" }, record.text),
      h(
        "p",
        { class: "memory-meta muted" },
        h("span", { class: "badge badge-kind", "data-kind": record.kind }, record.kind),
        past ? h("span", { class: "badge badge-past" }, "past") : null,
        record.key ? [" key ", h("code", { class: "memory-key" }, record.key)] : null,
        ` \u00b7 ${validity} \u00b7 revision ${record.revision}`,
        where !== view.namespace ? ` \u00b7 in ${where}` : null,
        typeof record.score === "number" ? ` \u00b7 score ${record.score.toFixed(3)}` : null,
      ),
    ),
    h(
      "div",
      { class: "memory-actions" },
      h(
        "button",
        {
          type: "button",
          class: "secondary",
          "aria-label": `Forget: ${record.text.slice(0, 60)}`,
          onclick: (e) => confirmForget(record, e.currentTarget),
        },
        "Forget",
      ),
    ),
    h("div", { class: "forget-confirm" }),
  );
  return item;
}

function confirmForget(record, button) {
  const item = button.closest("li");
  const box = clear(item.querySelector(".forget-confirm"));
  const questionId = `forget-question-${record.id}`;
  const keep = h("button", { type: "button", class: "secondary", onclick: () => { clear(box); button.focus(); } }, "Keep it");
  box.append(
    h(
      "div",
      { class: "banner banner-warn", role: "group", "aria-labelledby": questionId },
      h("p", { id: questionId }, "Forget this record and all its revisions? Its text is removed from the bank for good."),
      h(
        "div",
        { class: "row" },
        keep,
        h("button", { type: "button", class: "danger", onclick: () => forget(record) }, "Forget for good"),
      ),
    ),
  );
  keep.focus();
}

async function forget(record) {
  try {
    await withAuth(() => api.forgetMemory(record.id));
  } catch (err) {
    if (!(err instanceof ApiError && err.code === "MEMORY_NOT_FOUND")) {
      showError(err);
      return;
    }
  }
  clearError();
  view.records = view.records.filter((r) => r.id !== record.id);
  renderList();
  setStatus(`Forgotten. ${document.getElementById("memory-status").textContent}`);
  document.getElementById("memories-title").focus();
}
