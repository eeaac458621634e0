// One thread: its conversation, state tree and timeline, the composer that streams a run
// over AG-UI, the pending approval (approve, edit, reject) or a tool's question (a form built
// from its schema: answer, decline, cancel), edit and branch of a message.

import { ApiError, api } from "./api.js";
import { clear, h, uid } from "./dom.js";
import { buildForm } from "./elicit.js";
import { isEditable, jsonText, messageText, renderConversation, renderJsonTree, renderTimeline } from "./render.js";
import { LiveRun } from "./live.js";
import { loadThreads, markCurrent } from "./threads.js";
import { clearError, showError, withAuth } from "./ui.js";

// draft: the last answer sent to a question ({interruptId, content}), shown again if refused.
const view = { id: null, data: null, interrupt: null, running: false, draft: null };

function randomId() {
  if (globalThis.crypto && crypto.randomUUID) return crypto.randomUUID();
  return `${Date.now().toString(16)}-${Math.random().toString(16).slice(2)}`;
}

export function newThreadId() {
  const stamp = new Date().toISOString().replace(/[-:]/g, "").replace("T", "-").slice(0, 15);
  return `thread-${stamp}-${Math.random().toString(16).slice(2, 6)}`;
}

/**
 * The thread's pending approval or question (the stored truth: `data.pending`), completed
 * with what the run's AG-UI interrupt said; a thread with nothing pending shows neither.
 */
function pendingOf(data, interrupt) {
  const p = data && data.pending;
  if (!p) return null;
  if (interrupt && interrupt.toolCallId && p.tool_call_id && interrupt.toolCallId !== p.tool_call_id) interrupt = null;
  const meta = (interrupt && interrupt.metadata) || {};
  const tool = (p && (p.tool || p.name)) || meta.tool;
  const args = (p && (p.args || p.arguments)) || meta.args || {};
  const allowed = (p && (p.allowed_decisions || p.allowedDecisions)) || meta.allowedDecisions;
  return {
    tool,
    args,
    callId: (p && (p.tool_call_id || p.call_id || p.toolCallId || p.id)) || (interrupt && interrupt.toolCallId),
    key: (p && p.key) || tool,
    interruptId: (p && (p.interrupt_id || p.interruptId)) || (interrupt && interrupt.id) || null,
    allowed: Array.isArray(allowed) && allowed.length ? allowed : ["approve", "edit", "reject"],
    message: (p && p.message) || (interrupt && interrupt.message) || (p && p.reason) || null,
    outcomeUnknown: Boolean(p && p.outcome_unknown),
    asks: p.kind === "elicitation" || Boolean(interrupt && interrupt.reason === "elicitation"),
    schema: p.schema || meta.requestedSchema || { type: "object", properties: {} },
  };
}

export async function openThread(id) {
  view.id = id;
  view.interrupt = null;
  markCurrent(id);
  const main = clear(document.getElementById("main"));
  main.append(h("p", { class: "muted", "aria-live": "polite" }, `Loading ${id}...`));
  await reloadThread({ focus: true });
}

export async function reloadThread({ focus = false } = {}) {
  const id = view.id;
  let data;
  try {
    data = await withAuth(() => api.getThread(id));
  } catch (err) {
    if (err instanceof ApiError && err.code === "CHECKPOINT_MISSING") {
      data = null; // a new thread: its first run creates it
    } else {
      renderFailure(id, err);
      return;
    }
  }
  if (id !== view.id) return;
  view.data = data;
  render(focus);
}

function renderFailure(id, err) {
  showError(err);
  const main = clear(document.getElementById("main"));
  main.append(
    h(
      "section",
      { class: "thread-failure" },
      h("h2", { tabindex: "-1" }, `Thread ${id}`),
      h("p", {}, "This thread could not be loaded: ", h("strong", {}, err.code || "ERROR"), ` ${err.message}`),
      h("button", { type: "button", onclick: () => openThread(id) }, "Try again"),
    ),
  );
}

function render(focus) {
  const data = view.data;
  const id = view.id;
  // What the user was typing for this thread outlives the re-render (a reload, a late answer).
  const typed = document.getElementById("composer-input");
  const draft = typed && typed.dataset.thread === id ? typed.value : "";
  const main = clear(document.getElementById("main"));
  const parent = data && data.parent ? data.parent.thread_id || data.parent : null;
  const heading = h("h2", { id: "thread-title", tabindex: "-1" }, `Thread ${id}`);
  const pending = pendingOf(data, view.interrupt);
  main.append(
    h(
      "div",
      { class: "thread-head" },
      h(
        "div",
        {},
        heading,
        pending ? h("span", { class: "badge badge-wait" }, pending.asks ? "Waiting for an answer" : "Waiting for approval") : null,
        data && data.running ? h("span", { class: "badge badge-kind", id: "running-badge" }, "Run in progress") : null,
        parent
          ? h(
              "p",
              { class: "muted" },
              "Branch of ",
              h("a", { href: `#/t/${encodeURIComponent(parent)}` }, parent),
              " ",
              h("a", { href: `#/compare/${encodeURIComponent(id)}`, id: "compare-link" }, "Compare with parent"),
            )
          : null,
        data ? null : h("p", { class: "muted" }, "New thread: send the first message to start it."),
      ),
      h(
        "div",
        { class: "row" },
        h("button", { type: "button", class: "secondary", id: "reload-thread", onclick: () => reloadThread() }, "Reload"),
        data
          ? h("button", { type: "button", class: "secondary", id: "delete-thread", onclick: (e) => confirmDelete(e.currentTarget) }, "Delete")
          : null,
      ),
    ),
    h("div", { id: "delete-confirm" }),
  );
  const messages = (data && data.messages) || [];
  const conversation = h("ol", { class: "conversation", id: "conversation", "aria-label": "Messages" });
  conversation.append(...renderConversation(messages, messageActions));
  if (messages.length === 0) conversation.append(h("li", { class: "muted", id: "empty-note" }, "No messages yet."));
  const column = h("div", { class: "thread-main" }, conversation, h("div", { id: "run-notice" }));
  const busy = Boolean(data && data.running) && !view.running;
  if (pending) column.append(pending.asks ? renderQuestion(pending) : renderApproval(pending));
  const waiting = pending ? `Answer the ${pending.asks ? "question" : "approval"} above first` : null;
  const composer = renderComposer(waiting || (busy ? "A run of this thread is in progress" : null));
  const area = composer.querySelector("textarea");
  area.dataset.thread = id;
  area.value = draft;
  column.append(composer);
  const side = h(
    "div",
    { class: "side" },
    h(
      "details",
      { open: true, id: "state-panel" },
      h("summary", {}, "State"),
      h("div", { id: "state-tree" }, renderJsonTree((data && data.state) || {})),
    ),
    h(
      "details",
      { open: true, id: "timeline-panel" },
      h("summary", {}, "Timeline"),
      renderTimeline((data && data.timeline) || []),
    ),
  );
  main.append(h("div", { class: "thread-body" }, column, side));
  if (focus) heading.focus();
  if (busy) watchRun(id);
}

let watching = null;

/** While another client's run holds the thread, look again every 1.5 s until it ends. */
function watchRun(id) {
  if (watching) clearTimeout(watching);
  watching = setTimeout(() => {
    watching = null;
    if (view.id === id && !view.running) reloadThread();
  }, 1500);
}

function confirmDelete(button) {
  const id = view.id;
  const box = clear(document.getElementById("delete-confirm"));
  const keep = h("button", { type: "button", class: "secondary", onclick: () => { clear(box); button.focus(); } }, "Keep it");
  box.append(
    h(
      "div",
      { class: "banner banner-warn", role: "group", "aria-labelledby": "delete-question" },
      h("p", { id: "delete-question" }, `Delete thread ${id}, its messages, state and timeline? This cannot be undone.`),
      h(
        "div",
        { class: "row" },
        keep,
        h(
          "button",
          {
            type: "button",
            class: "danger",
            onclick: async () => {
              try {
                await withAuth(() => api.deleteThread(id));
                clearError();
                location.hash = "#/";
                loadThreads();
              } catch (err) {
                showError(err);
              }
            },
          },
          "Delete for good",
        ),
      ),
    ),
  );
  keep.focus();
}

function messageActions(message) {
  const buttons = [];
  if (!view.data) return null;
  // Accessible names say which message: screen readers list many "Edit" buttons otherwise.
  const which = `message ${view.data.messages.indexOf(message) + 1}, ${message.role}`;
  if (isEditable(message)) {
    buttons.push(
      h(
        "button",
        { type: "button", class: "link", "aria-label": `Edit ${which}`, onclick: (e) => startEdit(message, e.currentTarget) },
        "Edit",
      ),
    );
  }
  buttons.push(
    h(
      "button",
      {
        type: "button",
        class: "link",
        "aria-label": `Branch from here: ${which}`,
        onclick: (e) => branchFrom(message, e.currentTarget),
      },
      "Branch from here",
    ),
  );
  return buttons;
}

function startEdit(message, button) {
  const item = button.closest("li");
  if (item.querySelector("form.edit-form")) return;
  const fieldId = uid("edit");
  const area = h("textarea", { id: fieldId, name: "content" });
  area.value = messageText(message);
  const text = item.querySelector(":scope > .msg-text");
  const form = h(
    "form",
    { class: "edit-form" },
    h("label", { for: fieldId }, "Edit message"),
    area,
    h(
      "div",
      { class: "row end" },
      h("button", { type: "button", class: "secondary", onclick: () => cancel() }, "Cancel"),
      h("button", { type: "submit" }, "Save"),
    ),
  );
  const cancel = () => {
    form.remove();
    if (text) text.hidden = false;
    button.focus();
  };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    for (const b of form.querySelectorAll("button")) b.disabled = true;
    try {
      const data = await withAuth(() => api.editMessage(view.id, message.id, area.value));
      clearError();
      if (data && data.messages) {
        view.data = data;
        render(false);
      } else {
        await reloadThread();
      }
      const again = document.querySelector(`[data-message-id="${CSS.escape(message.id)}"] button`);
      if (again) again.focus();
    } catch (err) {
      showError(err);
      for (const b of form.querySelectorAll("button")) b.disabled = false;
    }
  });
  if (text) text.hidden = true;
  item.append(form);
  area.focus();
}

async function branchFrom(message, button) {
  button.disabled = true;
  try {
    const answer = await withAuth(() => api.branch(view.id, message.id, `from ${view.id}`));
    clearError();
    const target = answer.thread_id || answer.id;
    loadThreads();
    location.hash = `#/t/${encodeURIComponent(target)}`;
  } catch (err) {
    button.disabled = false;
    showError(err);
  }
}

function renderApproval(pending) {
  const argsId = uid("args");
  const errId = uid("args-error");
  const reasonId = uid("reason");
  const allowed = new Set(pending.allowed);
  const area = h("textarea", { id: argsId, class: "code", "aria-describedby": errId, spellcheck: "false" });
  area.value = jsonText(pending.args);
  const error = h("p", { id: errId, class: "field-error", hidden: true });
  const reason = h("input", { id: reasonId, type: "text", autocomplete: "off" });
  const section = h(
    "section",
    { class: "approval", id: "approval", "aria-labelledby": "approval-title" },
    h("h3", { id: "approval-title" }, `Approval needed: ${pending.tool}`),
    h("p", {}, pending.message || `The agent wants to run ${pending.tool} with these arguments.`),
    pending.outcomeUnknown
      ? h(
          "p",
          { class: "field-error", id: "outcome-unknown" },
          "This call was approved and started, but the process running it stopped before its result was saved: " +
            "it may or may not have run. It runs again only if you approve it again.",
        )
      : null,
    h("label", { for: argsId }, "Arguments (JSON, editable)"),
    area,
    error,
    h(
      "div",
      { class: "row" },
      allowed.has("approve")
        ? h("button", { type: "button", id: "approve", onclick: () => decide({ kind: "approve" }) }, "Approve")
        : null,
      allowed.has("edit")
        ? h("button", { type: "button", id: "approve-edited", class: "secondary", onclick: sendEdited }, "Approve edited arguments")
        : null,
    ),
    allowed.has("reject")
      ? h(
          "div",
          {},
          h("label", { for: reasonId }, "Reason for rejecting"),
          h(
            "div",
            { class: "row" },
            reason,
            h(
              "button",
              { type: "button", id: "reject", class: "danger", onclick: () => decide({ kind: "reject", reason: reason.value.trim() }) },
              "Reject",
            ),
          ),
        )
      : null,
  );
  function sendEdited() {
    let args;
    try {
      args = JSON.parse(area.value);
      if (args === null || typeof args !== "object" || Array.isArray(args)) throw new Error("the arguments must be a JSON object");
    } catch (err) {
      error.textContent = `Invalid arguments: ${err.message}`;
      error.hidden = false;
      area.setAttribute("aria-invalid", "true");
      area.focus();
      return;
    }
    error.hidden = true;
    area.removeAttribute("aria-invalid");
    decide({ kind: "edit", args });
  }
  async function decide(decision) {
    for (const b of section.querySelectorAll("button")) b.disabled = true;
    await sendDecision(pending, decision);
  }
  return section;
}

function renderQuestion(pending) {
  const draft = view.draft && view.draft.interruptId === pending.interruptId ? view.draft.content : {};
  const form = buildForm(pending.schema, draft);
  const section = h(
    "form",
    { class: "approval elicitation", id: "elicitation", "aria-labelledby": "elicitation-title", novalidate: true },
    h("h3", { id: "elicitation-title" }, `Question from ${pending.tool}`),
    h("p", { id: "elicitation-message", class: "question" }, pending.message || `The tool ${pending.tool} asks for input.`),
    form.elements,
    h(
      "div",
      { class: "row" },
      h("button", { type: "submit", id: "elicit-answer" }, "Answer"),
      h("button", { type: "button", id: "elicit-decline", class: "secondary", onclick: () => settle({ action: "decline" }) }, "Decline"),
      h("button", { type: "button", id: "elicit-cancel", class: "secondary", onclick: () => settle({ action: "cancel" }) }, "Cancel"),
    ),
  );
  section.addEventListener("submit", (event) => {
    event.preventDefault();
    const got = form.read();
    if (got.invalid) {
      if (got.invalid.control) got.invalid.control.focus();
      return;
    }
    view.draft = { interruptId: pending.interruptId, content: got.content };
    settle({ action: "accept", content: got.content });
  });
  async function settle(answer) {
    for (const el of section.querySelectorAll("button, input, select")) el.disabled = true;
    await sendAnswer(pending, answer);
  }
  return section;
}

/** A tool's question answered: over AG-UI when the interrupt is known, else the JSON API. */
async function sendAnswer(pending, answer) {
  if (pending.interruptId) {
    const entry =
      answer.action === "cancel"
        ? { interruptId: pending.interruptId, status: "cancelled" }
        : { interruptId: pending.interruptId, status: "resolved", payload: answer };
    await runAgui({ resume: [entry] }, null);
    return;
  }
  const value = answer.action === "accept" ? { answer: answer.content } : { [answer.action]: true };
  await runStream((onEvent) => api.resume(view.id, { [pending.key]: value }, onEvent), null);
}

async function sendDecision(pending, decision) {
  if (pending.interruptId) {
    let payload = { approved: true };
    if (decision.kind === "edit") payload = { approved: true, editedArgs: decision.args };
    if (decision.kind === "reject") payload = decision.reason ? { approved: false, reason: decision.reason } : { approved: false };
    await runAgui({ resume: [{ interruptId: pending.interruptId, status: "resolved", payload }] }, null);
    return;
  }
  let value = "approve";
  if (decision.kind === "edit") value = { edit: decision.args };
  if (decision.kind === "reject") value = { reject: decision.reason || "Rejected in the console." };
  await runStream((onEvent) => api.resume(view.id, { [pending.key]: value }, onEvent), null);
}

function renderComposer(blockedReason) {
  const blocked = Boolean(blockedReason);
  const form = h(
    "form",
    { class: "composer", id: "composer" },
    h("label", { for: "composer-input" }, "Message"),
    h("textarea", {
      id: "composer-input",
      name: "prompt",
      placeholder: blockedReason || "Ask the agent (Ctrl+Enter sends)",
      disabled: blocked,
    }),
    h(
      "div",
      { class: "row end" },
      h("span", { id: "run-status", class: "muted status-line", role: "status" }),
      h("button", { type: "submit", id: "send", disabled: blocked }, "Send"),
    ),
  );
  const area = form.querySelector("textarea");
  area.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const prompt = area.value.trim();
    if (!prompt || view.running) return;
    sendPrompt(prompt);
  });
  return form;
}

async function sendPrompt(prompt) {
  const userMessage = { id: randomId(), role: "user", content: prompt };
  const run = { messages: [userMessage] };
  document.getElementById("composer-input").value = "";
  await runAgui(run, userMessage);
}

/** Run the thread over AG-UI: an input with `run`'s messages (or resume entries), streamed. */
async function runAgui(run, userMessage) {
  const input = {
    threadId: view.id,
    runId: randomId(),
    messages: [],
    state: {},
    tools: [],
    context: [],
    forwardedProps: {},
    ...run,
  };
  await runStream((onEvent) => api.agui(input, onEvent), userMessage);
}

/** Drive one streamed run: show what arrives, then reload, or keep it if the link dropped. */
async function runStream(start, userMessage) {
  clearError();
  view.running = true;
  const id = view.id;
  const live = new LiveRun(document.getElementById("conversation"), (state) => {
    const tree = document.getElementById("state-tree");
    if (tree) clear(tree).append(renderJsonTree(state));
  });
  if (userMessage) live.addUser(userMessage);
  setRunning(true, "Running...");
  let failure = null;
  try {
    await withAuth(() => start((event) => live.handle(event)));
  } catch (err) {
    failure = err;
  }
  view.running = false;
  if (id !== view.id) return;
  if (failure && !(failure instanceof ApiError && failure.code === "CONNECTION_LOST")) {
    // Refused before the run began: show why, and give the prompt back to the composer.
    setRunning(false, "");
    showError(failure);
    await reloadThread();
    const composer = document.getElementById("composer-input");
    if (composer && userMessage) composer.value = userMessage.content;
    return;
  }
  loadThreads();
  if (failure || !live.finished) {
    setRunning(false, "Connection lost");
    showLost(failure);
    return;
  }
  if (live.error) showError(new ApiError(live.error.code || "RUN_ERROR", live.error.message || "the run failed"));
  view.interrupt = live.interrupt;
  await reloadThread();
  const status = document.getElementById("run-status");
  const asked = live.interrupt && live.interrupt.reason === "elicitation";
  const waitingFor = asked ? "Waiting for your answer" : "Waiting for your approval";
  if (status) status.textContent = live.error ? "The run failed" : live.interrupt ? waitingFor : "Answer complete";
  const composer = document.getElementById("composer-input");
  const stored = ((view.data && view.data.messages) || []).some((m) => userMessage && m.id === userMessage.id);
  if (live.error && userMessage && !stored && composer) composer.value = userMessage.content; // not kept: offer it again
  const approve = document.getElementById("approve") || document.querySelector("#elicitation input, #elicitation select, #elicit-answer");
  if (approve) approve.focus();
  else if (composer) composer.focus();
}

function setRunning(running, text) {
  const status = document.getElementById("run-status");
  if (status) status.textContent = text;
  const controls = "#composer textarea, #composer button, #approval button, #elicitation button, #elicitation input, #elicitation select";
  for (const el of document.querySelectorAll(controls)) el.disabled = running;
}

function showLost(failure) {
  const notice = clear(document.getElementById("run-notice"));
  const detail = failure ? ` (${failure.message})` : "";
  const reload = h("button", { type: "button", id: "reload-after-loss", onclick: () => reloadThread({ focus: true }) }, "Reload thread");
  notice.append(
    h(
      "div",
      { class: "banner banner-warn", role: "alert", id: "connection-lost" },
      h("p", {}, `The connection was lost during the run${detail}. What arrived is shown above; the run may have gone on on the server.`),
      reload,
    ),
  );
  reload.focus();
}
