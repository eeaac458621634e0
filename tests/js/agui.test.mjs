// @ag-ui/client against the server: the client verifies event order and schema itself.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import { HttpAgent } from "@ag-ui/client";
import { BASE } from "./helpers.mjs";

test("ag-ui: a text run, then an interrupt resumed with an approval", async () => {
  const agent = new HttpAgent({ url: `${BASE}/agui`, threadId: `js-agui-${randomUUID()}` });
  agent.messages = [{ id: randomUUID(), role: "user", content: "hello" }];
  await agent.runAgent({ runId: randomUUID() });
  assert.equal(agent.messages.at(-1).content, "echo: hello");

  agent.messages = [...agent.messages, { id: randomUUID(), role: "user", content: "publish AG" }];
  await agent.runAgent({ runId: randomUUID() });
  assert.equal(agent.pendingInterrupts.length, 1);
  const [interrupt] = agent.pendingInterrupts;
  assert.equal(interrupt.reason, "tool_call");
  assert.deepEqual(interrupt.metadata.args, { title: "AG", copies: 3 });

  const resume = [{ interruptId: interrupt.id, status: "resolved", payload: { approved: true } }];
  await agent.runAgent({ runId: randomUUID(), resume });
  assert.equal(agent.pendingInterrupts.length, 0);
  const tool = agent.messages.find((m) => m.role === "tool");
  assert.equal(tool.toolCallId, interrupt.toolCallId);
  assert.equal(tool.content, "published 'AG' x3");
  assert.equal(agent.messages.at(-1).content, "done: published 'AG' x3");
});

test("ag-ui: a tool's question is an interrupt of reason elicitation, resumed with the answer", async () => {
  const agent = new HttpAgent({ url: `${BASE}/agui`, threadId: `js-agui-${randomUUID()}` });
  agent.messages = [{ id: randomUUID(), role: "user", content: "book Rome" }];
  await agent.runAgent({ runId: randomUUID() });
  assert.equal(agent.pendingInterrupts.length, 1);
  const [interrupt] = agent.pendingInterrupts;
  assert.equal(interrupt.reason, "elicitation");
  assert.equal(interrupt.message, "How should I book Rome?");
  assert.deepEqual(interrupt.responseSchema.properties.action.enum, ["accept", "decline", "cancel"]);
  assert.deepEqual(interrupt.metadata.requestedSchema.required, ["nights", "meal"]);

  const payload = { action: "accept", content: { nights: 4, meal: "half board", pets: true } };
  await agent.runAgent({ runId: randomUUID(), resume: [{ interruptId: interrupt.id, status: "resolved", payload }] });
  assert.equal(agent.pendingInterrupts.length, 0);
  const tool = agent.messages.find((m) => m.role === "tool");
  assert.equal(tool.toolCallId, interrupt.toolCallId);
  assert.equal(tool.content, 'booked Rome: {"meal": "half board", "nights": 4, "pets": true}');
});

test("ag-ui: a new prompt while an interrupt is open is a RUN_ERROR with its code", async () => {
  const threadId = `js-agui-${randomUUID()}`;
  const agent = new HttpAgent({ url: `${BASE}/agui`, threadId });
  agent.messages = [{ id: randomUUID(), role: "user", content: "publish Busy" }];
  await agent.runAgent({ runId: randomUUID() });
  assert.equal(agent.pendingInterrupts.length, 1);
  // @ag-ui/client refuses this itself; the server must refuse it too, for any other client.
  const body = {
    threadId,
    runId: randomUUID(),
    messages: [{ id: randomUUID(), role: "user", content: "other" }],
    state: {},
    tools: [],
    context: [],
    forwardedProps: {},
  };
  const response = await fetch(`${BASE}/agui`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
    body: JSON.stringify(body),
  });
  const events = (await response.text())
    .split("\n\n")
    .filter((block) => block.startsWith("data: "))
    .map((block) => JSON.parse(block.slice(6)));
  assert.deepEqual(events.map((e) => e.type), ["RUN_STARTED", "RUN_ERROR"]);
  assert.equal(events[1].code, "APPROVAL_PENDING");
});
