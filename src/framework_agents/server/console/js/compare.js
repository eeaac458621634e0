// A branch next to its parent: the shared opening, then what each holds after the fork.

import { ApiError, api } from "./api.js";
import { clear, h } from "./dom.js";
import { renderConversation } from "./render.js";
import { markCurrent } from "./threads.js";
import { showError, withAuth } from "./ui.js";

function sameContent(a, b) {
  return JSON.stringify([a.role, a.content, a.tool_calls || []]) === JSON.stringify([b.role, b.content, b.tool_calls || []]);
}

/** One message in both threads: the same id (a branch copies them), or the same content. */
function sameMessage(a, b) {
  return a.id === b.id || sameContent(a, b);
}

/**
 * {common, edited, parentTail, branchTail}: the shared opening (messages that are the same
 * message in both, in order), the pairs of it whose content the branch changed, and what
 * each thread holds after it.
 */
export function diffThreads(parentMessages, branchMessages) {
  let common = 0;
  const limit = Math.min(parentMessages.length, branchMessages.length);
  while (common < limit && sameMessage(parentMessages[common], branchMessages[common])) common += 1;
  const edited = [];
  for (let i = 0; i < common; i += 1) {
    if (!sameContent(parentMessages[i], branchMessages[i])) edited.push({ before: parentMessages[i], after: branchMessages[i] });
  }
  return { common, edited, parentTail: parentMessages.slice(common), branchTail: branchMessages.slice(common) };
}

function column(title, id, messages) {
  const list = h("ol", { class: "conversation", "aria-label": title });
  const items = renderConversation(messages, null);
  list.append(...items);
  if (items.length === 0) list.append(h("li", { class: "muted" }, "Nothing after the fork."));
  return h("section", { id, "aria-label": title }, h("h3", {}, title), list);
}

/** The edited pairs' section, as a list to spread (empty without edits: DOM append prints null). */
function editedSection(edited) {
  if (edited.length === 0) return [];
  const rows = edited.map(({ before, after }) =>
    h(
      "div",
      { class: "compare", "data-message-id": after.id },
      h("div", {}, h("h4", {}, "In the parent"), h("ol", { class: "conversation" }, renderConversation([before], null))),
      h(
        "div",
        {},
        h("h4", {}, "Edited in the branch"),
        h("ol", { class: "conversation diff-edited" }, renderConversation([after], null)),
      ),
    ),
  );
  return [h("section", { id: "compare-edited", "aria-label": "Edited messages" }, h("h3", {}, "Edited messages"), rows)];
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
    if (!parentId) throw new ApiError("NOT_A_BRANCH", `thread ${id} is not a branch of another thread`);
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
      h(
        "div",
        {},
        heading,
        h(
          "p",
          { id: "compare-summary" },
          `${diff.common} messages in common` +
            (diff.edited.length ? ` (${diff.edited.length} edited in the branch)` : "") +
            `; after the fork the parent has ${diff.parentTail.length}, the branch ${diff.branchTail.length}.`,
        ),
      ),
      h(
        "p",
        { class: "links" },
        h("a", { href: `#/t/${encodeURIComponent(id)}` }, "Open branch"),
        h("a", { href: `#/t/${encodeURIComponent(parentId)}` }, "Open parent"),
      ),
    ),
    ...editedSection(diff.edited),
    h(
      "div",
      { class: "compare" },
      column(`Parent ${parentId} after the fork`, "compare-parent", diff.parentTail),
      column(`Branch ${id} after the fork`, "compare-branch", diff.branchTail),
    ),
  );
  heading.focus();
}
