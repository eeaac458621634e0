// The console's only door to the server: the JSON API under api/ (threads, memories, the
// server's info) and AG-UI at agui, both relative to the page, so the console works
// wherever the app is mounted.
// Every call carries the token kept in this tab's session storage; errors become
// ApiError with the server's code and message (or a NETWORK / BAD_RESPONSE code).

const TOKEN_KEY = "framework-agents.console.token";

export class ApiError extends Error {
  constructor(code, message, status = 0) {
    super(message);
    this.code = code;
    this.status = status;
  }
}

export function getToken() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(token) {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function headers(extra = {}) {
  const out = { Accept: "application/json", ...extra };
  const token = getToken();
  if (token) out.Authorization = `Bearer ${token}`;
  return out;
}

async function errorFrom(response) {
  let code = `HTTP_${response.status}`;
  let message = response.statusText || "request failed";
  try {
    const body = await response.json();
    if (body && body.error) {
      code = body.error.code || code;
      message = body.error.message || message;
    }
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(code, message, response.status);
}

async function send(method, path, body, accept) {
  const init = { method, headers: headers(accept ? { Accept: accept } : {}) };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  try {
    return await fetch(path, init);
  } catch (err) {
    throw new ApiError("NETWORK", `the server cannot be reached (${err.message})`);
  }
}

/** A JSON API call: the parsed body, or an ApiError. */
export async function request(method, path, body) {
  const response = await send(method, path, body);
  if (!response.ok) throw await errorFrom(response);
  if (response.status === 204) return null;
  const text = await response.text();
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    throw new ApiError("BAD_RESPONSE", `the server answered ${path} with something that is not JSON`);
  }
}

/**
 * POST a body and read the answer as server-sent events, calling onEvent(parsed) for each.
 * Resolves with {ended: true} once the stream closes; throws ApiError for an error status
 * (before any event) and for a connection lost mid-stream (code CONNECTION_LOST). A JSON
 * (non-SSE) answer is handed to onEvent once as {type: "JSON_ANSWER", body}.
 */
export async function postStream(path, body, onEvent, signal) {
  const init = {
    method: "POST",
    headers: headers({ Accept: "text/event-stream", "Content-Type": "application/json" }),
    body: JSON.stringify(body),
    signal,
  };
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    throw new ApiError("NETWORK", `the server cannot be reached (${err.message})`);
  }
  if (!response.ok) throw await errorFrom(response);
  const type = response.headers.get("Content-Type") || "";
  if (!type.includes("text/event-stream")) {
    const text = await response.text();
    onEvent({ type: "JSON_ANSWER", body: text ? JSON.parse(text) : null });
    return { ended: true };
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    let chunk;
    try {
      chunk = await reader.read();
    } catch (err) {
      throw new ApiError("CONNECTION_LOST", `the connection dropped during the run (${err.message})`);
    }
    if (chunk.done) break;
    buffer += decoder.decode(chunk.value, { stream: true }).replace(/\r\n?/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const event = parseBlock(block);
      if (event !== null) onEvent(event);
    }
  }
  const rest = parseBlock(buffer + decoder.decode());
  if (rest !== null) onEvent(rest);
  return { ended: true };
}

/** One SSE block: the JSON of its data lines, or null for comments and keep-alives. */
export function parseBlock(block) {
  const data = [];
  let name = null;
  for (const line of block.split("\n")) {
    if (line.startsWith("data:")) data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
    else if (line.startsWith("event:")) name = line.slice(6).trim();
  }
  if (data.length === 0) return null;
  const text = data.join("\n");
  try {
    const value = JSON.parse(text);
    if (name && value && typeof value === "object" && !value.type) value.type = name;
    return value;
  } catch {
    return { type: "UNPARSED", data: text, event: name };
  }
}

export const api = {
  listThreads: (params) => request("GET", `api/threads?${new URLSearchParams(params)}`),
  getThread: (id) => request("GET", `api/threads/${encodeURIComponent(id)}`),
  deleteThread: (id) => request("DELETE", `api/threads/${encodeURIComponent(id)}`),
  editMessage: (id, messageId, content) =>
    request("PATCH", `api/threads/${encodeURIComponent(id)}/messages/${encodeURIComponent(messageId)}`, {
      content,
    }),
  branch: (id, messageId, label) =>
    request("POST", `api/threads/${encodeURIComponent(id)}/branches`, { message_id: messageId, label }),
  resume: (id, decisions, onEvent) =>
    postStream(`api/threads/${encodeURIComponent(id)}/resume`, { decisions }, onEvent),
  agui: (input, onEvent, signal) => postStream("agui", input, onEvent, signal),
  info: () => request("GET", "api/info"),
  memories: (params) => request("GET", `api/memories?${new URLSearchParams(params)}`),
  forgetMemory: (id) => request("DELETE", `api/memories/${encodeURIComponent(id)}`),
};
