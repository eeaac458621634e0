// A branch next to its parent: the shared opening, then what each holds after the fork.

import { api } from "./api.js";
import { clear, h } from "./dom.js";
import { renderConversation } from "./render.js";
import { markCurrent } from "./threads.js";
import { showError, withAuth } from "./ui.js";

function same(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** {common, parentTail, branchTail, edited}: messages compared by id, then by content. */
export function diffThreads(parentMessages, branchMessages) {
  let common = 0;
  const limit = Math.min(parentMessages.length, branchMessages.length);
  while (common < limit && same(parentMessages[common], branchMessages[common])) common += 1;
  const parentTail = parentMessages.slice(common);
  const branchTail = branchMessages.slice(common);
  const parentIds = new Set(parentTail.map((m) => m.id));
  const edited = new Set(branchTail.filter((m) => parentIds.has(m.id)).map((m) => m.id));
  return { common, parentTail, branchTail, edited };
}

function column(title, id, messages, edited) {
  const list = h("ol", { class: "conversation", "aria-label": title });
  const items = renderConversation(messages, null);
  for (const item of items) {
    if (edited.has(item.dataset.messageId)) {
      item.classList.add("diff-edited");
      item.querySelector(".msg-head > span").append(h("span", { class: "badge badge-kind" }, "edited"));
    }
  }
  list.append(...items);
  if (items.length === 0) list.append(h("li", { class: "muted" }, "Nothing after the fork."));
  return h("section", { id, "aria-label": title }, h("h3", {}, title), list);
}

export async function openCompare(id) {
  markCurrent(id);
  const main = clear(document.getElementById("main"));
  main.append(h("p", { class: "muted" }, `Loading ${id} and its parent...`));
  let branch;
  let parent;
  let parentId;
  try {
    branch = await withAuth(() => api.getThread(id));
    parentId = branch.parent ? branch.parent.thread_id || branch.parent : null;
    if (!parentId) throw Object.assign(new Error(`thread ${id} is not a branch of another thread`), { code: "NOT_A_BRANCH" });
    parent = await withAuth(() => api.getThread(parentId));
  } catch (err) {
    showError(err);
    clear(main).append(
      h("h2", { tabindex: "-1" }, `Compare ${id}`),
      h("p", {}, h("strong", {}, err.code || "ERROR"), ` ${err.message}`),
      h("p", {}, h("a", { href: `#/t/${encodeURIComponent(id)}` }, "Back to the thread")),
    );
    return;
  }
  const diff = diffThreads(parent.messages || [], branch.messages || []);
  const heading = h("h2", { tabindex: "-1", id: "compare-title" }, `Compare ${id} with ${parentId}`);
  clear(main).append(
    h(
      "div",
      { class: "thread-head" },
      h("div", {}, heading, h("p", { id: "compare-summary" },
        `${diff.common} messages in common; the parent has ${diff.parentTail.length} after the fork, ` +
          `the branch ${diff.branchTail.length}` + (diff.edited.size ? ` (${diff.edited.size} edited)` : "") + ".")),
      h(
        "p",
        {},
        h("a", { href: `#/t/${encodeURIComponent(id)}` }, "Open branch"),
        " ",
        h("a", { href: `#/t/${encodeURIComponent(parentId)}` }, "Open parent"),
      ),
    ),
    h(
      "div",
      { class: "compare" },
      column(`Parent ${parentId}`, "compare-parent", diff.parentTail, new Set()),
      column(`Branch ${id}`, "compare-branch", diff.branchTail, diff.edited),
    ),
  );
  heading.focus();
}
