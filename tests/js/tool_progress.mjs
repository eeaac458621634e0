// @ag-ui/client sees a running call's progress as CUSTOM events "tool_progress".
// Run by tests/server/test_tool_progress_serving.py (`node --test tool_progress.mjs`) against a
// server whose agent calls `upload`, a tool that reports three steps; not a *.test.mjs file,
// since the other JS tests run against an agent without that tool.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import { HttpAgent } from "@ag-ui/client";
import { BASE } from "./helpers.mjs";

test("ag-ui: tool_progress custom events between the call and its result", async () => {
  const agent = new HttpAgent({ url: `${BASE}/agui`, threadId: `js-progress-${randomUUID()}` });
  agent.messages = [{ id: randomUUID(), role: "user", content: "upload report" }];
  const seen = [];
  await agent.runAgent(
    { runId: randomUUID() },
    {
      onToolCallEndEvent: ({ event }) => {
        seen.push(["end", event.toolCallId]);
      },
      onCustomEvent: ({ event }) => {
        seen.push([event.name, event.value]);
      },
      onToolCallResultEvent: ({ event }) => {
        seen.push(["result", event.toolCallId]);
      },
    },
  );
  const [[, callId]] = seen;
  assert.deepEqual(seen, [
    ["end", callId],
    ["tool_progress", { toolCallId: callId, tool: "upload", progress: 1, total: 3, message: "step 1" }],
    ["tool_progress", { toolCallId: callId, tool: "upload", progress: 2, total: 3, message: "step 2" }],
    ["tool_progress", { toolCallId: callId, tool: "upload", progress: 3, total: null, message: null }],
    ["result", callId],
  ]);
  assert.equal(agent.messages.at(-1).content, "done: uploaded report");
});
