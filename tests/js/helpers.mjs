// Shared helpers of the JS client tests; the server URL comes from FA_SERVER_URL.
import { randomUUID } from "node:crypto";

export const BASE = process.env.FA_SERVER_URL ?? "http://127.0.0.1:8765";

export const TASK_STATE = {
  COMPLETED: 3,
  INPUT_REQUIRED: 6,
};

/** A user message for @a2a-js/sdk (text or data part). */
export function userMessage({ text, data, taskId = "", contextId = "" }) {
  const content = text !== undefined ? { $case: "text", value: text } : { $case: "data", value: data };
  return {
    messageId: randomUUID(),
    contextId,
    taskId,
    role: 1, // ROLE_USER
    parts: [{ content, metadata: undefined, filename: "", mediaType: "" }],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

/** The request of sendMessage / sendMessageStream. */
export function sendRequest(message) {
  return { tenant: "", message, configuration: undefined, metadata: undefined };
}

/** The data parts of a message. */
export function dataParts(message) {
  return (message?.parts ?? []).filter((p) => p.content?.$case === "data").map((p) => p.content.value);
}

/** The text parts of a message. */
export function textParts(message) {
  return (message?.parts ?? []).filter((p) => p.content?.$case === "text").map((p) => p.content.value);
}

/** Drain a sendMessageStream; the last task state seen and the task/context ids. */
export async function drain(stream) {
  let taskId = "";
  let contextId = "";
  let status;
  let count = 0;
  for await (const response of stream) {
    count += 1;
    const payload = response.payload;
    if (payload?.$case === "task") {
      taskId = payload.value.id;
      contextId = payload.value.contextId;
      status = payload.value.status;
    } else if (payload?.$case === "statusUpdate") {
      taskId = payload.value.taskId;
      contextId = payload.value.contextId;
      status = payload.value.status;
    }
  }
  return { taskId, contextId, status, count };
}

/** fetch JSON from the server's JSON API. */
export async function api(path, init = {}) {
  const response = await fetch(`${BASE}${path}`, {
    ...init,
    headers: { "Content-Type": "application/json", Accept: "application/json", ...(init.headers ?? {}) },
  });
  return { status: response.status, body: await response.json() };
}
