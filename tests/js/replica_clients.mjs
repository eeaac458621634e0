// Conversations through the official clients, for the replica test (tests/server/test_replicas.py).
//
// Not a node --test file: the Python test runs it, once per client, while it kills and freezes
// replicas behind the proxy. Each conversation: "hello", then "publish <thread>" (an approval),
// then the approval. A client retries only on a coded error meant for retrying, or after a lost
// answer once it has looked at what landed (never sending a turn twice); a call whose outcome is
// unknown (its replica died in it) is settled by a rejection, never run again.
//
// Env: FA_SERVER_URL, FA_CLIENT ("agui" or "a2a"), FA_THREADS (comma-separated thread ids),
// FA_CONCURRENCY. Prints one JSON line per conversation: {"thread", "outcome", "retries"}, where
// outcome is "completed", "unknown-settled" or "error:<CODE>".
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { ClientFactory } from "@a2a-js/sdk/client";
import { HttpAgent } from "@ag-ui/client";
import { BASE, TASK_STATE, dataParts, sendRequest, textParts, userMessage } from "./helpers.mjs";

// @ag-ui/client 1.0.0 rethrows a broken stream's error from the cancel of its reader, where
// nothing can catch it (runAgent has rejected already): noted, not fatal to the other runs.
process.on("unhandledRejection", (error) => {
  process.stderr.write(`unhandled rejection (ignored): ${error?.message ?? error}\n`);
});

/** Codes a client may meet while a replica dies, and retry (CHECKPOINT_CONFLICT: the run's
 * replica lost its thread, a frozen one say, and wrote nothing). */
const RETRYABLE = new Set([
  "THREAD_BUSY",
  "SHUTTING_DOWN",
  "BACKEND_UNAVAILABLE",
  "LOCK_TIMEOUT",
  "CHECKPOINT_CONFLICT",
]);
const ATTEMPTS = 60;
const PAUSE_MS = 250;

/** A coded error that ends a conversation. */
class Coded extends Error {
  constructor(code, message) {
    super(`${code}: ${message}`);
    this.code = code;
  }
}

/** A wall-clock time to match with the replicas' logs (UTC, to the millisecond). */
function clock(at) {
  return new Date(at).toISOString().slice(11, 23);
}

/** What a call that threw got: its error's name, message and cause, shortened. */
function failure(error) {
  const cause = error?.cause ? ` (cause: ${error.cause?.code ?? error.cause?.message ?? error.cause})` : "";
  return `${error?.name ?? "Error"}: ${error?.message ?? error}${cause}`.slice(0, 300);
}

/** GAVE_UP saying which request ran out of retries, how often, when, and what it last got. */
function gaveUp(step, started, attempts, last) {
  return new Coded("GAVE_UP", `${step}: ${attempts} attempts ${clock(started)}-${clock(Date.now())} UTC, last: ${last}`);
}

// -- AG-UI ---------------------------------------------------------------------------------

/** One runAgent: "ok", a RUN_ERROR's code, or "LOST" (the stream broke: look before resending).
 * What it got, in words, goes to stats.last. */
async function aguiRun(agent, params, stats) {
  let code;
  let message = "";
  const subscriber = {
    onRunErrorEvent: ({ event }) => {
      code = event.code ?? "RUN_ERROR";
      message = event.message ?? "";
    },
  };
  try {
    await agent.runAgent({ runId: randomUUID(), ...params }, subscriber);
  } catch (error) {
    stats.last = code ? `${code}: ${message}` : `LOST: ${failure(error)}`;
    return code ?? "LOST";
  }
  stats.last = code ? `${code}: ${message}` : "ok";
  return code ?? "ok";
}

/** Run until it lands: a turn is resent as it was (the server takes a message id once). */
async function aguiUntil(agent, params, stats, step) {
  const started = Date.now();
  for (let i = 0; i < ATTEMPTS; i += 1) {
    const got = await aguiRun(agent, params, stats);
    if (got === "ok") return;
    if (got !== "LOST" && !RETRYABLE.has(got)) throw new Coded(got, `ag-ui run error (${step}): ${stats.last}`);
    stats.retries += 1;
    await sleep(PAUSE_MS);
  }
  throw gaveUp(`ag-ui run (${step})`, started, ATTEMPTS, stats.last);
}

async function aguiConversation(threadId, stats) {
  const agent = new HttpAgent({ url: `${BASE}/agui`, threadId });
  agent.messages = [{ id: randomUUID(), role: "user", content: "hello" }];
  await aguiUntil(agent, {}, stats, "hello");
  if (agent.messages.at(-1)?.content !== "echo: hello") throw new Coded("WRONG_ANSWER", "hello");
  agent.messages = [...agent.messages, { id: randomUUID(), role: "user", content: `publish ${threadId}` }];
  await aguiUntil(agent, {}, stats, "publish");
  const started = Date.now();
  let rounds = 0;
  for (; rounds < ATTEMPTS; rounds += 1) {
    if (agent.pendingInterrupts.length === 0) break;
    const [interrupt] = agent.pendingInterrupts;
    const unknown = interrupt.metadata?.outcomeUnknown === true;
    const payload = unknown ? { approved: false, reason: "outcome unknown: not run twice" } : { approved: true };
    const got = await aguiRun(agent, { resume: [{ interruptId: interrupt.id, status: "resolved", payload }] }, stats);
    if (got === "ok") {
      if (unknown) return "unknown-settled";
      continue;
    }
    if (got !== "LOST" && !RETRYABLE.has(got)) throw new Coded(got, `ag-ui resume: ${stats.last}`);
    stats.retries += 1;
    await sleep(PAUSE_MS);
    // Catch up: a run with no new message and no resume shows the thread as it stands (the
    // client refuses such a run while it holds interrupts, so it lets go of the stale one).
    agent.pendingInterrupts = [];
    await aguiUntil(agent, {}, stats, "catch up");
  }
  if (agent.pendingInterrupts.length > 0) {
    const [interrupt] = agent.pendingInterrupts;
    throw gaveUp("ag-ui resume", started, rounds, `${stats.last}; still pending ${interrupt.id}`);
  }
  const last = agent.messages.at(-1)?.content;
  if (last !== `done: published ${threadId}`) {
    // Caught up after a lost answer to a rejection of an unknown call: settled, not run.
    if (typeof last === "string" && last.startsWith("done: ") && last.includes("reject")) return "unknown-settled";
    throw new Coded("WRONG_ANSWER", `publish: ${JSON.stringify(last)}`);
  }
  return "completed";
}

// -- A2A -----------------------------------------------------------------------------------

const FINAL = new Set([TASK_STATE.COMPLETED, 4 /* FAILED */, 5 /* CANCELED */, 7 /* REJECTED */]);
const OPEN = new Set([TASK_STATE.INPUT_REQUIRED, ...FINAL]);

/** The error of a failed task's status (its {"error": {"code", "message"}} data part). */
function taskError(status) {
  const [data] = dataParts(status?.message).filter((d) => d.error);
  return { code: data?.error?.code ?? "FAILED", message: data?.error?.message ?? "" };
}

/** A task's status once no run works on it any more (a lost stream: the run may go on). */
async function settledTask(client, taskId, stats) {
  const started = Date.now();
  let last = "";
  for (let i = 0; i < ATTEMPTS; i += 1) {
    try {
      const task = await client.getTask({ tenant: "", id: taskId, historyLength: undefined });
      if (OPEN.has(task.status.state)) return task;
      last = `state ${task.status.state}: ${JSON.stringify(task.status)}`.slice(0, 300);
    } catch (error) {
      last = failure(error); // the replica asked died under the request: ask again
    }
    stats.retries += 1;
    await sleep(PAUSE_MS);
  }
  throw gaveUp(`getTask ${taskId}`, started, ATTEMPTS, last);
}

/** The task a lost message started, if it started one (found by the message's id). */
async function taskOf(client, contextId, messageId) {
  const started = Date.now();
  let last = "";
  for (let i = 0; i < ATTEMPTS; i += 1) {
    try {
      const listed = await client.listTasks({
        tenant: "",
        contextId,
        status: 0,
        pageSize: 100,
        pageToken: "",
        historyLength: 50,
        statusTimestampAfter: undefined,
        includeArtifacts: false,
      });
      return listed.tasks.find((t) => t.history.some((m) => m.messageId === messageId)) ?? null;
    } catch (error) {
      last = failure(error);
      await sleep(PAUSE_MS);
    }
  }
  throw gaveUp(`listTasks of ${contextId}`, started, ATTEMPTS, last);
}

/** Send one message until it lands: the task's status then (open or final). */
async function a2aUntil(client, message, contextId, stats) {
  // Sent again under its own id: the server does not run a message of an id it holds twice.
  // A decision whose task failed goes again as a new task of the context (a failed task is
  // final); it names the interrupt it answers, so it cannot answer a newer one.
  const started = Date.now();
  const what = message.parts[0]?.content?.$case === "data" ? "decision" : "prompt";
  const messageId = message.messageId;
  let last = "";
  for (let i = 0; i < ATTEMPTS; i += 1, message = { ...message, taskId: "" }) {
    let taskId = "";
    let status;
    try {
      for await (const response of client.sendMessageStream(sendRequest(message))) {
        const payload = response.payload;
        if (payload?.$case === "task") {
          taskId = payload.value.id;
          status = payload.value.status;
        } else if (payload?.$case === "statusUpdate") {
          taskId = payload.value.taskId;
          status = payload.value.status;
        }
      }
    } catch (error) {
      status = undefined; // the stream broke: look at what landed before sending again
      last = failure(error);
    }
    if (status === undefined || !OPEN.has(status.state)) {
      // the task it answered (a decision), else the one it started, found by the message's id
      const known = taskId || message.taskId;
      const task = known ? { id: known } : await taskOf(client, contextId, message.messageId);
      if (task) {
        const settled = await settledTask(client, task.id, stats);
        status = settled.status;
        taskId = settled.id;
      }
    }
    if (status !== undefined && OPEN.has(status.state)) {
      if (status.state !== 4) return { taskId, status };
      const error = taskError(status);
      if (!RETRYABLE.has(error.code)) throw new Coded(error.code, `a2a task failed: ${error.message}`);
      last = `task ${taskId} failed: ${error.code}: ${error.message}`.slice(0, 300);
    }
    stats.retries += 1;
    await sleep(PAUSE_MS);
  }
  throw gaveUp(`send ${what} ${messageId}`, started, ATTEMPTS, last);
}

async function a2aConversation(client, threadId, stats) {
  const text = (value) => userMessage({ text: value, contextId: threadId });
  const hello = await a2aUntil(client, text("hello"), threadId, stats);
  if (hello.status.state !== TASK_STATE.COMPLETED || textParts(hello.status.message)[0] !== "echo: hello") {
    throw new Coded("WRONG_ANSWER", "hello");
  }
  let turn = await a2aUntil(client, text(`publish ${threadId}`), threadId, stats);
  let answered;
  let reread = false;
  const started = Date.now();
  let rounds = 0;
  for (; rounds < ATTEMPTS && turn.status.state === TASK_STATE.INPUT_REQUIRED; rounds += 1) {
    const [request] = dataParts(turn.status.message).filter((d) => d.type === "tool_approval_request");
    if (request === undefined) {
      // a status without the request (seen once with the Python client): read it again
      stats.retries += 1;
      await sleep(PAUSE_MS);
      const task = await settledTask(client, turn.taskId, stats);
      turn = { taskId: task.id, status: task.status };
      continue;
    }
    if (request.interruptId === answered && !reread) {
      // Still waiting (a run held the thread, THREAD_BUSY on the task): read the task again,
      // it shows what the thread waits for now; then answer that.
      stats.retries += 1;
      await sleep(PAUSE_MS);
      const task = await settledTask(client, turn.taskId, stats);
      turn = { taskId: task.id, status: task.status };
      reread = true;
      continue;
    }
    reread = false;
    answered = request.interruptId;
    const unknown = request.outcomeUnknown === true;
    const data = unknown
      ? { decision: "reject", toolCallId: request.toolCallId, interruptId: request.interruptId, reason: "outcome unknown" }
      : { decision: "approve", toolCallId: request.toolCallId, interruptId: request.interruptId };
    const taskId = turn.taskId;
    turn = await a2aUntil(client, userMessage({ data, taskId, contextId: threadId }), threadId, stats);
    if (unknown && turn.status.state === TASK_STATE.COMPLETED) return "unknown-settled";
  }
  if (turn.status.state !== TASK_STATE.COMPLETED) {
    const shows = `task ${turn.taskId} state ${turn.status.state}, answered ${answered}, shows ${JSON.stringify(turn.status.message?.parts)}`;
    throw gaveUp("a2a decisions", started, rounds, shows.slice(0, 400));
  }
  const [answer] = textParts(turn.status.message);
  if (answer !== `done: published ${threadId}`) throw new Coded("WRONG_ANSWER", `publish: ${answer}`);
  return "completed";
}

// -- main ----------------------------------------------------------------------------------

const kind = process.env.FA_CLIENT;
const threads = (process.env.FA_THREADS ?? "").split(",").filter(Boolean);
const concurrency = Number(process.env.FA_CONCURRENCY ?? "6");
const a2a = kind === "a2a" ? await new ClientFactory().createFromUrl(BASE) : null;
const queue = [...threads];

async function worker() {
  for (let threadId = queue.shift(); threadId !== undefined; threadId = queue.shift()) {
    const stats = { retries: 0 };
    let outcome;
    try {
      outcome = a2a ? await a2aConversation(a2a, threadId, stats) : await aguiConversation(threadId, stats);
    } catch (error) {
      outcome = error instanceof Coded ? `error:${error.code}` : `crash:${error?.stack ?? error}`;
      process.stderr.write(`${threadId}: ${error?.message ?? error}\n`);
    }
    process.stdout.write(`${JSON.stringify({ thread: threadId, outcome, retries: stats.retries })}\n`);
  }
}

await Promise.all(Array.from({ length: concurrency }, worker));
