// A run as it streams in: AG-UI events (and the JSON API's own run events) drawn into the
// conversation as they arrive, so a lost connection still shows everything that came.

import { h } from "./dom.js";
import { jsonText, kindBadge } from "./render.js";

export class LiveRun {
  constructor(list, onState) {
    this.list = list;
    this.onState = onState;
    this.messages = new Map();
    this.calls = new Map();
    this.started = false;
    this.finished = false;
    this.error = null;
    this.interrupt = null;
  }

  addUser(message) {
    const empty = this.list.querySelector("#empty-note");
    if (empty) empty.remove();
    this.list.append(
      h(
        "li",
        { class: "msg msg-user msg-live", "data-message-id": message.id, "data-role": "user" },
        h("div", { class: "msg-head" }, h("span", { class: "msg-role" }, "user")),
        h("div", { class: "msg-text" }, message.content),
      ),
    );
  }

  message(id, role = "assistant") {
    const key = id || "_anonymous";
    let entry = this.messages.get(key);
    if (!entry) {
      const item = h(
        "li",
        { class: `msg msg-${role} msg-live`, "data-message-id": key, "data-role": role, "aria-busy": "true" },
        h("div", { class: "msg-head" }, h("span", { class: "msg-role" }, role)),
      );
      entry = { item, text: null, reasoning: null };
      this.messages.set(key, entry);
      const empty = this.list.querySelector("#empty-note");
      if (empty) empty.remove();
      this.list.append(item);
    }
    return entry;
  }

  appendText(id, delta) {
    const entry = this.message(id);
    if (!entry.text) {
      entry.text = h("div", { class: "msg-text live-text" });
      entry.item.append(entry.text);
    }
    entry.text.textContent += delta;
  }

  appendReasoning(id, delta) {
    // AG-UI carries reasoning as its own message ("<id>.reasoning"): fold it into the answer's box.
    const entry = this.message(typeof id === "string" ? id.replace(/\.reasoning$/, "") : id);
    if (!entry.reasoning) {
      entry.reasoning = h("div", { class: "msg-text" });
      entry.item.append(h("details", { class: "reasoning" }, h("summary", {}, "Reasoning"), entry.reasoning));
    }
    entry.reasoning.textContent += delta;
  }

  call(id, name, parentId) {
    let entry = this.calls.get(id);
    if (!entry) {
      const owner = this.message(parentId || `call-${id}`);
      const args = h("pre", { class: "call-args" });
      const box = h(
        "div",
        { class: "call", "data-call-id": id },
        h("div", {}, h("span", { class: "muted" }, "Tool call "), h("span", { class: "call-name" }, name || "")),
        h("div", { class: "muted" }, "Arguments"),
        args,
      );
      owner.item.append(box);
      entry = { box, args, raw: "" };
      this.calls.set(id, entry);
    }
    return entry;
  }

  result(callId, content, kind) {
    const entry = this.calls.get(callId) || this.call(callId, "", null);
    entry.box.append(
      h("div", { class: "muted" }, "Result ", kindBadge(kind)),
      h("pre", { class: "call-result" }, typeof content === "string" ? content : jsonText(content)),
    );
  }

  finishMessages() {
    for (const entry of this.messages.values()) entry.item.removeAttribute("aria-busy");
  }

  /** One event of the stream. Unknown types are ignored (the protocol may add some). */
  handle(event) {
    if (!event || typeof event !== "object") return;
    this.started = true;
    const type = String(event.type || "");
    switch (type) {
      case "TEXT_MESSAGE_START":
        this.message(event.messageId, event.role || "assistant");
        break;
      case "TEXT_MESSAGE_CONTENT":
      case "TEXT_MESSAGE_CHUNK":
        if (event.delta) this.appendText(event.messageId, event.delta);
        break;
      case "REASONING_MESSAGE_CONTENT":
      case "REASONING_MESSAGE_CHUNK":
        if (event.delta) this.appendReasoning(event.messageId, event.delta);
        break;
      case "TOOL_CALL_START":
        this.call(event.toolCallId, event.toolCallName, event.parentMessageId);
        break;
      case "TOOL_CALL_CHUNK":
      case "TOOL_CALL_ARGS": {
        const entry = this.call(event.toolCallId, event.toolCallName, event.parentMessageId);
        entry.raw += event.delta || "";
        entry.args.textContent = entry.raw;
        break;
      }
      case "TOOL_CALL_END": {
        const entry = this.calls.get(event.toolCallId);
        if (entry) {
          try {
            entry.args.textContent = jsonText(JSON.parse(entry.raw || "{}"));
          } catch {
            // keep the raw text
          }
        }
        break;
      }
      case "TOOL_CALL_RESULT":
        this.result(event.toolCallId, event.content, null);
        break;
      case "STATE_SNAPSHOT":
        if (this.onState) this.onState(event.snapshot || {});
        break;
      case "RUN_FINISHED":
        this.finished = true;
        if (event.outcome && event.outcome.type === "interrupt") this.interrupt = (event.outcome.interrupts || [])[0] || null;
        this.finishMessages();
        break;
      case "RUN_ERROR":
        this.finished = true;
        this.error = { code: event.code, message: event.message };
        this.finishMessages();
        break;
      case "JSON_ANSWER":
        this.finished = true;
        break;
      default:
        this.handleNative(type, event);
    }
  }

  /** The JSON API's run stream (the agent's own event names), should a route answer with it. */
  handleNative(type, event) {
    switch (type) {
      case "text_delta":
        this.appendText(event.message_id, event.delta || "");
        break;
      case "reasoning_delta":
        this.appendReasoning(event.message_id, event.delta || "");
        break;
      case "tool_call":
        if (event.call) {
          const entry = this.call(event.call.id, event.call.name, event.message_id);
          entry.args.textContent = jsonText(event.call.args || {});
        }
        break;
      case "tool_result": {
        const message = event.message || {};
        const kind = message.metadata ? message.metadata.kind : null;
        this.result(event.call_id, message.content, kind);
        break;
      }
      case "interrupt":
      case "run_finished":
        this.finished = true;
        this.finishMessages();
        break;
      case "run_error":
        this.finished = true;
        this.error = { code: event.code || (event.error && event.error.code), message: event.message || (event.error && event.error.message) };
        this.finishMessages();
        break;
      default:
        break;
    }
  }
}
