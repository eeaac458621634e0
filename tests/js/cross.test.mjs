// One conversation: started over A2A, continued over AG-UI, inspected and approved over /api.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import { ClientFactory } from "@a2a-js/sdk/client";
import { HttpAgent } from "@ag-ui/client";
import { BASE, TASK_STATE, api, drain, sendRequest, userMessage } from "./helpers.mjs";

test("cross: A2A, then AG-UI, then the JSON API on one thread", async () => {
  const a2a = await new ClientFactory().createFromUrl(BASE);
  const started = await drain(a2a.sendMessageStream(sendRequest(userMessage({ text: "hi" }))));
  assert.equal(started.status.state, TASK_STATE.COMPLETED);
  const threadId = started.contextId;

  const agent = new HttpAgent({ url: `${BASE}/agui`, threadId });
  agent.messages = [{ id: randomUUID(), role: "user", content: "publish Cross" }];
  await agent.runAgent({ runId: randomUUID() });
  assert.equal(agent.pendingInterrupts.length, 1);
  // The snapshot brings the A2A turn to this client (it keeps its own order for what it had).
  assert.deepEqual(
    agent.messages.filter((m) => m.role === "user").map((m) => m.content).sort(),
    ["hi", "publish Cross"],
  );

  const thread = await api(`/api/threads/${threadId}`);
  assert.equal(thread.status, 200);
  assert.equal(thread.body.pending.tool, "publish");
  const done = await api(`/api/threads/${threadId}/resume`, {
    method: "POST",
    body: JSON.stringify({ decisions: { [thread.body.pending.tool_call_id]: "approve" } }),
  });
  assert.equal(done.body.status, "completed");
  assert.equal(done.body.text, "done: published 'Cross' x3");
  const after = await api(`/api/threads/${threadId}`);
  assert.equal(after.body.pending, null);
  assert.deepEqual(after.body.timeline.map((e) => e.kind), ["run", "run", "resume"]);
});
