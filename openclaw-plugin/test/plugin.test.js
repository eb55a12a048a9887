// register() against a recording stand-in for OpenClaw's api, with a real daemon.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";

import plugin from "../index.js";
import { startNotifier, stopNotifier } from "../lib/notify.js";
import { sharedState } from "../lib/state.js";
import { DaemonClient } from "../lib/daemon.js";
import { startDaemon, fakeApi, SECRET, ADMIN_PASSWORD } from "./helpers.js";

let d;
before(async () => { d = await startDaemon(); });
after(async () => { await d?.stop(); });

function ctxFor(session, extra = {}) {
  return { agentId: "main", sessionKey: `agent:main:${session}`, workspaceDir: d.workspace, ...extra };
}

test("register() declares the four tools and its hooks, and can run twice", () => {
  const api = fakeApi(d.config);
  plugin.register(api);
  plugin.register(api);
  assert.deepEqual([...api.tools.keys()].sort(), ["focus_workflow", "pcexec", "pcprocess", "safe_restart"]);
  const manifest = JSON.parse(fs.readFileSync(new URL("../openclaw.plugin.json", import.meta.url)));
  assert.deepEqual([...manifest.contracts.tools].sort(), [...api.tools.keys()].sort());
  for (const hook of ["before_tool_call", "before_agent_reply", "agent_end", "message_sending",
    "tool_result_persist", "before_message_write", "gateway_start", "gateway_stop"]) {
    assert.ok(api.hooks.has(hook), hook);
  }
  assert.equal(sharedState().notifier, null, "register() starts nothing");
});

test("pcexec binds the caller's identity, streams tails and masks secrets", async () => {
  const api = fakeApi(d.config);
  plugin.register(api);
  const updates = [];
  const tool = api.tool("pcexec", ctxFor("exec"));
  const result = await tool.execute("call-1", { command: 'echo "x=$(pass_mgr get db)"; sleep 0.5; echo "$AGENT_ID"' },
    undefined, (u) => updates.push(u));
  assert.equal(result.details.status, "completed");
  assert.match(result.content[0].text, /x=######\nmain/);
  assert.ok(!JSON.stringify([result, updates]).includes(SECRET));
  assert.ok(updates.length > 0, "a run of 0.5 s streams at least one update");
  // OpenClaw's exec partial result, as the daemon built it.
  assert.ok(updates.every((u) => u.details.status === "running" && typeof u.content[0].text === "string"
    && typeof u.details.sessionId === "string" && u.content[0].text === (u.details.tail || "(no output)")));
});

test("pcexec: an unknown key runs nothing and says which key", async () => {
  const api = fakeApi(d.config);
  plugin.register(api);
  const marker = path.join(d.root, "ran");
  const result = await api.tool("pcexec", ctxFor("exec")).execute("call-2",
    { command: `touch ${marker}; echo $(pass_mgr get nope)` });
  assert.equal(fs.existsSync(marker), false);
  assert.match(result.content[0].text, /no secret named 'nope'/);
});

test("pcprocess sees only this agent's sessions", async () => {
  const api = fakeApi(d.config);
  plugin.register(api);
  const started = await api.tool("pcexec", ctxFor("p")).execute("call-3", { command: "sleep 5", background: true });
  const id = started.details.sessionId;
  assert.ok(id);
  const mine = await api.tool("pcprocess", ctxFor("p")).execute("call-4", { action: "list" });
  assert.match(mine.content[0].text, new RegExp(id));
  const other = await api.tool("pcprocess", { agentId: "other", sessionKey: "agent:other:x" }).execute("call-5", { action: "poll", sessionId: id });
  assert.equal(other.details.status, "failed");
  // Another conversation of the same agent does not see it either (OpenClaw's scopeKey).
  const elsewhere = await api.tool("pcprocess", ctxFor("p-other")).execute("call-5b", { action: "list" });
  assert.doesNotMatch(elsewhere.content[0].text, new RegExp(id));
  const poke = await api.tool("pcprocess", ctxFor("p-other")).execute("call-5c", { action: "kill", sessionId: id });
  assert.equal(poke.content[0].text, `No active session found for ${id}`);
  await api.tool("pcprocess", ctxFor("p")).execute("call-6", { action: "kill", sessionId: id });
});

test("a finished background pcexec wakes its session like OpenClaw's notify-on-exit", async () => {
  const api = fakeApi(d.config);
  plugin.register(api);
  const client = new DaemonClient(d.config);
  const started = await api.tool("pcexec", ctxFor("n")).execute("call-n", { command: "sleep 0.2; echo built", background: true });
  const id = started.details.sessionId;
  const events = [];
  const wakes = [];
  const runtime = { system: {
    enqueueSystemEvent: (text, options) => { events.push({ text, options }); return true; },
    requestHeartbeat: (options) => { wakes.push(options); },
  } };
  startNotifier({ api: { runtime }, client, config: { notificationsWaitSeconds: 1 }, logger: api.logger });
  let pending;
  try {
    const deadline = Date.now() + 20_000;
    while (events.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    // The loop acknowledges right after delivering: give that call time to land.
    do {
      pending = (await client.call("GET", "/exec/events")).events;
      if (pending.length) await new Promise((r) => setTimeout(r, 50));
    } while (pending.length && Date.now() < deadline);
  } finally {
    stopNotifier();
  }
  const sessionKey = ctxFor("n").sessionKey;
  assert.deepEqual(events, [{ text: `Exec completed (${id.slice(0, 8)}, code 0) :: built`,
    options: { sessionKey, contextKey: `exec:${id}`, agentId: "main" } }]);
  assert.deepEqual(wakes, [{ source: "exec-event", intent: "event", reason: "exec-event", coalesceMs: 0, sessionKey, agentId: "main" }]);
  assert.deepEqual(pending, [], "delivered events are acknowledged");
});

test("exec policy: deny blocks in the hook and in execute(); full runs", async () => {
  const denyApi = fakeApi(d.config, { tools: { exec: { mode: "deny" } } });
  plugin.register(denyApi);
  const hook = denyApi.hook("before_tool_call");
  const verdict = await hook({ toolName: "pcexec", params: { command: "true" }, toolCallId: "c-deny" }, ctxFor("pol"));
  assert.equal(verdict.block, true);
  assert.match(verdict.blockReason, /security=deny/);
  const direct = await denyApi.tool("pcexec", ctxFor("pol")).execute("c-deny-2", { command: "true" });
  assert.equal(direct.details.status, "blocked");

  const fullApi = fakeApi(d.config, { tools: { exec: { mode: "full" } } });
  plugin.register(fullApi);
  assert.equal(await fullApi.hook("before_tool_call")({ toolName: "pcexec", params: { command: "true" }, toolCallId: "c-full" }, ctxFor("pol")), undefined);
  assert.equal(await fullApi.hook("before_tool_call")({ toolName: "read", params: { path: "x" } }, ctxFor("pol")), undefined);
});

test("exec policy: an allowlist miss with ask=on-miss asks through the plugin approval flow", async () => {
  const api = fakeApi(d.config, { tools: { exec: { mode: "ask" } } });
  plugin.register(api);
  const verdict = await api.hook("before_tool_call")({ toolName: "pcexec", params: { command: "rm -rf /tmp/nothing-here" }, toolCallId: "c-ask" }, ctxFor("pol"));
  assert.ok(verdict.requireApproval, JSON.stringify(verdict));
  assert.deepEqual(verdict.requireApproval.allowedDecisions, ["allow-once", "deny"]);
  // Denied: execute() refuses; allowed once: it runs.
  verdict.requireApproval.onResolution("deny");
  const denied = await api.tool("pcexec", ctxFor("pol")).execute("c-ask", { command: "rm -rf /tmp/nothing-here" });
  assert.equal(denied.details.status, "blocked");
  assert.match(denied.content[0].text, /exec approval deny/);
  const again = await api.hook("before_tool_call")({ toolName: "pcexec", params: { command: "echo approved" }, toolCallId: "c-ask-2" }, ctxFor("pol"));
  again.requireApproval.onResolution("allow-once");
  const ran = await api.tool("pcexec", ctxFor("pol")).execute("c-ask-2", { command: "echo approved" });
  assert.match(ran.content[0].text, /approved/);
  // An approval is for the command that was judged, not for another under the same call id.
  const again2 = await api.hook("before_tool_call")({ toolName: "pcexec", params: { command: "echo one" }, toolCallId: "c-ask-3" }, ctxFor("pol"));
  again2.requireApproval.onResolution("allow-once");
  const swapped = await api.tool("pcexec", ctxFor("pol")).execute("c-ask-3", { command: "echo two" });
  assert.equal(swapped.details.status, "blocked");
});

test("tool params holding the admin password are blocked and lock the vault", async () => {
  const local = await startDaemon();
  try {
    const api = fakeApi(local.config);
    plugin.register(api);
    const verdict = await api.hook("before_tool_call")(
      { toolName: "write", params: { path: "notes.md", content: `pw: ${ADMIN_PASSWORD}` } }, ctxFor("leak"));
    assert.equal(verdict.block, true);
    assert.ok(!verdict.blockReason.includes(ADMIN_PASSWORD));
    const status = local.passMgr(["admin", "status"]);
    assert.match(status.stdout + status.stderr, /locked/);
    const log = path.join(local.home, "security.log");
    const criticals = () => fs.readFileSync(log, "utf8").split("\n").filter((l) => l.includes("CRITICAL")).length;
    assert.equal(criticals(), 1, "one CRITICAL line per hit");
    // The transcript hooks rewrite synchronously, just the password.
    const written = api.hooks.get("before_message_write")[0].handler({
      message: { role: "user", content: [{ type: "text", text: `my pw is ${ADMIN_PASSWORD} ok` }] },
    });
    assert.deepEqual(written?.message, { role: "user", content: [{ type: "text", text: "my pw is ###### ok" }] });
    // A tool result's details are persisted too (OpenClaw keeps bounded details in the transcript).
    const persisted = api.hooks.get("tool_result_persist")[0].handler({
      toolName: "exec",
      message: { role: "toolResult", toolName: "exec", content: [{ type: "text", text: "done" }],
        details: { status: "completed", aggregated: `pw=${ADMIN_PASSWORD}` } },
    });
    assert.equal(persisted?.message?.details?.aggregated, "pw=######");
    assert.equal(persisted.message.content[0].text, "done");
    assert.ok(!JSON.stringify(persisted).includes(ADMIN_PASSWORD));
    const sending = await api.hook("message_sending")({ to: "x", content: `pw ${ADMIN_PASSWORD}` }, {});
    assert.equal(sending.content, "pw ######");
    assert.equal(criticals(), 4);
  } finally {
    await local.stop();
  }
});

test("lifecycle: runs reach message-start/end; a focus workflow makes other sessions busy", async () => {
  const api = fakeApi(d.config);
  plugin.register(api);
  const start = api.hook("before_agent_reply");
  const end = api.hook("agent_end");
  const client = new DaemonClient(d.config);
  const agents = async () => (await client.call("GET", "/agents")).agents;

  assert.equal(await start({ cleanedBody: "hi" }, ctxFor("w1", { runId: "r1", trigger: "user" })), undefined);
  assert.equal((await agents()).find((a) => a.agentId === "main").state, "busy");
  await end({ success: true }, ctxFor("w1", { runId: "r1" }));
  assert.equal((await agents()).find((a) => a.agentId === "main").state, "idle");

  const flow = api.tool("focus_workflow", ctxFor("w1"));
  const opened = await flow.execute("c-w", { action: "open", workflow: "release" });
  assert.match(opened.content[0].text, /opened/);
  const foreign = await start({ cleanedBody: "are you there?" }, ctxFor("w2", { runId: "r2", trigger: "user" }));
  assert.equal(foreign.handled, true);
  assert.equal(foreign.reply.text, "在忙，无法应答");
  assert.equal(await start({ cleanedBody: "continue" }, ctxFor("w1", { runId: "r3", trigger: "user" })), undefined);
  await end({ success: true }, ctxFor("w1", { runId: "r3" }));
  // The rejected run never started, so its end is not reported.
  await end({ success: true }, ctxFor("w2", { runId: "r2" }));
  await flow.execute("c-w2", { action: "close", workflow: "release" });
  assert.equal((await agents()).find((a) => a.agentId === "main").state, "idle");
});

test("heartbeat runs are flagged and do not make the agent busy", async () => {
  const api = fakeApi(d.config);
  plugin.register(api);
  const client = new DaemonClient(d.config);
  await api.hook("before_agent_reply")({ cleanedBody: "HEARTBEAT" }, ctxFor("hb", { runId: "h1", trigger: "heartbeat" }));
  const main = (await client.call("GET", "/agents")).agents.find((a) => a.agentId === "main");
  assert.equal(main.state, "idle");
  await api.hook("agent_end")({ success: true }, ctxFor("hb", { runId: "h1" }));
});
