// The threads list: search, paging (the server's cursors), and which threads wait for an approval.

import { api } from "./api.js";
import { clear, formatTime, h } from "./dom.js";
import { showError, withAuth } from "./ui.js";

const PAGE = 20;
const $ = (id) => document.getElementById(id);

const list = { query: "", cursors: [null], page: 0, next: null, current: null, rows: [] };

function rowId(row) {
  return row.thread_id || row.id;
}

export async function loadThreads() {
  const status = $("threads-status");
  status.textContent = "Loading threads...";
  const params = { limit: PAGE };
  if (list.query) params.q = list.query;
  const cursor = list.cursors[list.page];
  if (cursor) params.cursor = cursor;
  let body;
  try {
    body = await withAuth(() => api.listThreads(params));
  } catch (err) {
    status.textContent = "Threads could not be loaded.";
    showError(err);
    return;
  }
  const raw = Array.isArray(body) ? body : (body && body.threads) || [];
  list.rows = raw.map((row) => (typeof row === "string" ? { thread_id: row } : row));
  list.next = (body && body.next_cursor) || null;
  renderList();
}

function renderList() {
  const ul = clear($("thread-list"));
  for (const row of list.rows) {
    const id = rowId(row);
    const waiting = Boolean(row.pending);
    const when = row.saved_at || row.updated_at;
    const link = h(
      "a",
      { href: `#/t/${encodeURIComponent(id)}`, "data-thread-id": id, "aria-current": id === list.current ? "page" : null },
      h("span", { class: "thread-id" }, id),
      waiting
        ? h(
            "span",
            { class: "badge badge-wait", "data-waiting": "true" },
            row.pending_kind === "elicitation" ? "Waiting for an answer" : "Waiting for approval",
          )
        : null,
      row.parent ? h("span", { class: "badge badge-branch" }, "branch") : null,
      row.title ? h("span", { class: "thread-preview" }, row.title) : null,
      h(
        "span",
        { class: "thread-preview" },
        typeof row.message_count === "number" ? `${row.message_count} ${row.message_count === 1 ? "message" : "messages"}` : "",
        when ? ` \u00b7 ${formatTime(when)}` : "",
      ),
    );
    ul.append(h("li", {}, link));
  }
  $("page-info").textContent = `Page ${list.page + 1}`;
  $("page-prev").disabled = list.page === 0;
  $("page-next").disabled = !list.next;
  const count = list.rows.length === 1 ? "1 thread" : `${list.rows.length} threads`;
  const shown = list.next || list.page > 0 ? `${count} on this page` : count;
  $("threads-status").textContent = list.query ? `${shown} matching "${list.query}"` : shown;
}

export function markCurrent(id) {
  list.current = id;
  for (const link of $("thread-list").querySelectorAll("a")) {
    if (link.dataset.threadId === id) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

export function installThreadList() {
  $("search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    list.query = $("search-input").value.trim();
    list.cursors = [null];
    list.page = 0;
    loadThreads();
  });
  $("page-prev").addEventListener("click", () => {
    list.page = Math.max(0, list.page - 1);
    loadThreads();
  });
  $("page-next").addEventListener("click", () => {
    if (!list.next) return;
    list.cursors[list.page + 1] = list.next;
    list.page += 1;
    loadThreads();
  });
}
