// @a2a-js/sdk against the server: a streamed run with an interrupt, then the decision.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ClientFactory } from "@a2a-js/sdk/client";
import { BASE, TASK_STATE, dataParts, drain, sendRequest, textParts, userMessage } from "./helpers.mjs";

test("a2a: a plain turn completes (blocking sendMessage)", async () => {
  const client = await new ClientFactory().createFromUrl(BASE);
  const result = await client.sendMessage(sendRequest(userMessage({ text: "hello" })));
  const task = result.$case === "task" ? result.value : result.payload?.value ?? result;
  const got = await client.getTask({ tenant: "", id: task.id, historyLength: undefined });
  assert.equal(got.status.state, TASK_STATE.COMPLETED);
  assert.deepEqual(textParts(got.status.message), ["echo: hello"]);
});

test("a2a: interrupt with an approval data part, approved on the same task", async () => {
  const client = await new ClientFactory().createFromUrl(BASE);
  const first = await drain(client.sendMessageStream(sendRequest(userMessage({ text: "publish FromJS" }))));
  assert.ok(first.count > 1, "a stream of several responses");
  assert.equal(first.status.state, TASK_STATE.INPUT_REQUIRED);
  const [request] = dataParts(first.status.message);
  assert.equal(request.type, "tool_approval_request");
  assert.equal(request.tool, "publish");
  assert.deepEqual(request.args, { title: "FromJS", copies: 3 });
  const decision = userMessage({
    data: { decision: "approve", toolCallId: request.toolCallId },
    taskId: first.taskId,
    contextId: first.contextId,
  });
  const second = await drain(client.sendMessageStream(sendRequest(decision)));
  assert.equal(second.taskId, first.taskId);
  assert.equal(second.status.state, TASK_STATE.COMPLETED);
  assert.deepEqual(textParts(second.status.message), ["done: published 'FromJS' x3"]);
});

test("a2a: a tool's question is an elicitation data part, answered on the same task", async () => {
  const client = await new ClientFactory().createFromUrl(BASE);
  const first = await drain(client.sendMessageStream(sendRequest(userMessage({ text: "book Bergen" }))));
  assert.equal(first.status.state, TASK_STATE.INPUT_REQUIRED);
  const [question] = dataParts(first.status.message);
  assert.equal(question.type, "elicitation");
  assert.equal(question.message, "How should I book Bergen?");
  assert.deepEqual(question.schema.required, ["nights", "meal"]);
  const answer = userMessage({
    data: { action: "accept", content: { nights: 2, meal: "none" }, interruptId: question.interruptId },
    taskId: first.taskId,
    contextId: first.contextId,
  });
  const second = await drain(client.sendMessageStream(sendRequest(answer)));
  assert.equal(second.taskId, first.taskId);
  assert.equal(second.status.state, TASK_STATE.COMPLETED);
  assert.deepEqual(textParts(second.status.message), ['done: booked Bergen: {"meal": "none", "nights": 2}']);
});
