// safe_restart polling and the notification loop, against a daemon whose restart
// job runs `true` (no gateway here): query-restart -> job -> notifications.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";

import plugin from "../index.js";
import { DaemonClient } from "../lib/daemon.js";
import { startNotifier, stopNotifier } from "../lib/notify.js";
import { startDaemon, fakeApi } from "./helpers.js";

let d;
before(async () => {
  d = await startDaemon({ extraEnv: {
    PADDEDCELL_RESTART_DELAY_SECONDS: "0",
    PADDEDCELL_RESTART_RESTART_CMD: "true",
    PADDEDCELL_RESTART_STATUS_CMD: "true",
  } });
});
after(async () => { stopNotifier(); await d?.stop(); });

async function waitFor(predicate, ms, what) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await predicate()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

test("safe_restart polls while another agent is busy, then schedules; notifications are delivered and acked", async () => {
  const api = fakeApi(d.config);
  plugin.register(api);
  const client = new DaemonClient(d.config);
  fs.writeFileSync(path.join(d.workspace, "rollback.sh"), "#!/bin/sh\n", { mode: 0o755 });

  // Agent "other" is busy in its session; main works in "work".
  const start = api.hook("before_agent_reply");
  const end = api.hook("agent_end");
  await start({ cleanedBody: "x" }, { agentId: "other", sessionKey: "agent:other:s", runId: "o1" });
  await start({ cleanedBody: "x" }, { agentId: "main", sessionKey: "agent:main:work", runId: "m1" });

  const tool = api.tool("safe_restart", { agentId: "main", sessionKey: "agent:main:work", workspaceDir: d.workspace });
  const pending = tool.execute("c-r", { rollback: "rollback.sh", log: "restart.log" });
  await new Promise((r) => setTimeout(r, 700)); // a few NOT_READY polls
  await end({ success: true }, { agentId: "other", sessionKey: "agent:other:s", runId: "o1" });
  const result = await pending;
  assert.equal(result.details.result, "OK", JSON.stringify(result));
  assert.ok(result.details.polls > 1, "it polled while other was busy");
  assert.equal(result.details.log, path.join(d.workspace, "restart.log"));
  await end({ success: true }, { agentId: "main", sessionKey: "agent:main:work", runId: "m1" });

  // The job runs `true`; the working session gets "restart 结束了，我们继续".
  await waitFor(async () => (await client.call("GET", "/notifications")).notifications.length > 0, 20_000, "a notification");
  const queued = (await client.call("GET", "/notifications")).notifications;
  assert.ok(queued.some((n) => n.sessionKey === "agent:main:work" && n.text === "restart 结束了，我们继续"), JSON.stringify(queued));

  // First delivery attempt fails: nothing is acknowledged; the next one succeeds.
  const runs = [];
  let fail = true;
  const runtime = { subagent: { run: async (params) => {
    if (fail) { fail = false; throw new Error("gateway busy"); }
    runs.push(params);
    return { runId: params.idempotencyKey };
  } } };
  startNotifier({ api: { runtime }, client, config: { notificationsWaitSeconds: 1 }, logger: api.logger });
  await waitFor(() => runs.length >= queued.length, 20_000, "deliveries");
  await waitFor(async () => (await client.call("GET", "/notifications")).notifications.length === 0, 10_000, "acks");
  stopNotifier();
  const delivered = runs.find((r) => r.sessionKey === "agent:main:work");
  assert.equal(delivered.message, "restart 结束了，我们继续");
  assert.equal(delivered.deliver, false);
  assert.match(delivered.idempotencyKey, /^paddedcell-notification-\d+$/);
  assert.ok(api.warnings.some((w) => w.includes("gateway busy")), "the failed delivery was logged");
});

test("safe_restart refuses without rollback and log, and reports ALREADY_SCHEDULED", async () => {
  const api = fakeApi({ ...d.config, restartJob: { delaySeconds: 60 } });
  plugin.register(api);
  const client = new DaemonClient(d.config);
  fs.writeFileSync(path.join(d.workspace, "rollback.sh"), "#!/bin/sh\n", { mode: 0o755 });
  const main = api.tool("safe_restart", { agentId: "main", sessionKey: "agent:main:x", workspaceDir: d.workspace });
  await assert.rejects(main.execute("c-none", {}), /rollback/);
  const first = await main.execute("c-1", { rollback: "rollback.sh", log: "restart2.log" });
  assert.equal(first.details.result, "OK");
  try {
    const other = api.tool("safe_restart", { agentId: "other", sessionKey: "agent:other:y", workspaceDir: d.workspace });
    const second = await other.execute("c-2", { rollback: "rollback.sh", log: "restart3.log" });
    assert.equal(second.details.result, "ALREADY_SCHEDULED");
    assert.match(second.content[0].text, /already scheduled/);
  } finally {
    await client.call("POST", "/restart-cancel", { requesterAgentId: "main", requesterSessionKey: "agent:main:x" });
  }
});
