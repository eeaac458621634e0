// Rendering of stored data: messages as a conversation, JSON values as a tree, the timeline.

import { formatTime, h } from "./dom.js";

const KIND_LABELS = {
  compaction: "compacted history",
  summary: "summary",
  grounding: "graph grounding",
  interrupted: "interrupted call",
  rejected: "rejected call",
  tool_error: "tool error",
};

/** The text of a message's content (a string, or its text blocks joined). */
export function messageText(message) {
  const content = message.content;
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((block) => block && block.type === "text")
    .map((block) => block.text)
    .join("");
}

function reasoningOf(message) {
  if (!Array.isArray(message.content)) return [];
  return message.content.filter((block) => block && block.type === "reasoning").map((block) => block.text);
}

function kindOf(message) {
  const kind = message.metadata && message.metadata.kind;
  return typeof kind === "string" ? kind : null;
}

export function kindBadge(kind) {
  if (!kind) return null;
  const cls = kind === "tool_error" ? "badge badge-error" : "badge badge-kind";
  return h("span", { class: cls, "data-kind": kind }, KIND_LABELS[kind] || kind);
}

export function jsonText(value) {
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

/** Whether the console offers Edit for this message (the server refuses tool-call turns). */
export function isEditable(message) {
  return (message.role === "user" || message.role === "assistant") && !(message.tool_calls || []).length;
}

function renderCall(call, result) {
  const box = h(
    "div",
    { class: "call", "data-call-id": call.id },
    h("div", {}, h("span", { class: "muted" }, "Tool call "), h("span", { class: "call-name" }, call.name)),
    h("div", { class: "muted" }, "Arguments"),
    h("pre", { class: "call-args" }, jsonText(call.args || {})),
  );
  const edited = result && result.metadata ? result.metadata.edited_args : undefined;
  if (edited !== undefined) {
    box.append(
      h("div", { class: "muted" }, "Ran with edited arguments ", h("span", { class: "badge badge-kind" }, "edited")),
      h("pre", { class: "call-edited-args" }, jsonText(edited)),
    );
  }
  if (result) {
    box.append(
      h("div", { class: "muted" }, "Result ", kindBadge(kindOf(result))),
      h("pre", { class: "call-result" }, messageText(result)),
    );
  } else {
    box.append(h("div", { class: "muted call-result-missing" }, "No result yet"));
  }
  return box;
}

/**
 * The conversation as list items. Tool results are shown under the call they answer;
 * `actions(message)` returns the buttons of a message (or null).
 */
export function renderConversation(messages, actions) {
  const results = new Map();
  for (const message of messages) {
    if (message.role === "tool" && message.tool_call_id) results.set(message.tool_call_id, message);
  }
  const calls = new Set();
  for (const message of messages) for (const call of message.tool_calls || []) calls.add(call.id);
  const items = [];
  for (const message of messages) {
    if (message.role === "tool" && calls.has(message.tool_call_id)) continue;
    items.push(renderMessage(message, results, actions ? actions(message) : null));
  }
  return items;
}

export function renderMessage(message, results = new Map(), actionNodes = null) {
  const kind = kindOf(message);
  const framework = kind && kind !== "tool_error";
  const classes = ["msg", `msg-${message.role}`];
  if (framework) classes.push("msg-framework");
  const roleLabel = message.role === "tool" ? `tool result${message.name ? ` (${message.name})` : ""}` : message.role;
  const item = h(
    "li",
    { class: classes.join(" "), "data-message-id": message.id, "data-role": message.role },
    h(
      "div",
      { class: "msg-head" },
      h("span", {}, h("span", { class: "msg-role" }, roleLabel), kindBadge(kind)),
      actionNodes ? h("span", { class: "msg-actions" }, actionNodes) : null,
    ),
  );
  for (const text of reasoningOf(message)) {
    item.append(
      h("details", { class: "reasoning" }, h("summary", {}, "Reasoning"), h("div", { class: "msg-text" }, text)),
    );
  }
  const text = messageText(message);
  if (text) item.append(h("div", { class: "msg-text" }, text));
  for (const call of message.tool_calls || []) item.append(renderCall(call, results.get(call.id)));
  return item;
}

/** A JSON value as a nested, foldable tree (details/summary: keyboard accessible as is). */
export function renderJsonTree(value, label = "state") {
  const root = h("ul", { class: "json-tree" });
  root.append(treeNode(label, value, 0));
  return root;
}

function treeNode(key, value, depth) {
  const keyNode = key === null ? null : h("span", { class: "json-key" }, `${key}: `);
  if (value !== null && typeof value === "object") {
    const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v]) : Object.entries(value);
    const summary = Array.isArray(value) ? `[${entries.length} items]` : `{${entries.length} keys}`;
    const children = h("ul", {}, entries.map(([k, v]) => treeNode(k, v, depth + 1)));
    return h(
      "li",
      {},
      h("details", { open: depth < 3 }, h("summary", {}, keyNode, h("span", { class: "muted" }, summary)), children),
    );
  }
  let cls = "json-literal";
  if (typeof value === "string") cls = "json-string";
  else if (typeof value === "number") cls = "json-number";
  return h("li", {}, keyNode, h("span", { class: cls }, JSON.stringify(value)));
}

export function renderTimeline(entries) {
  if (!entries || entries.length === 0) return h("p", { class: "muted" }, "No entries yet.");
  return h(
    "ol",
    { class: "timeline" },
    entries.map((entry) =>
      h(
        "li",
        { "data-kind": entry.kind },
        h("strong", {}, `#${entry.rev} ${entry.kind}`),
        entry.label ? ` ${entry.label}` : "",
        h("span", { class: "muted" }, ` ${formatTime(entry.at)}`),
      ),
    ),
  );
}
