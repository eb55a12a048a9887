// The exec policy layering and decisions, with OpenClaw's own allowlist analyser
// when the installed OpenClaw is importable (it is under `make test`).
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

import { applyLayer, effectivePolicy, decide, agentExecConfig, commandForAllowlist, pcexecDecision } from "../lib/policy.js";

test("tools.exec.mode maps to OpenClaw's security/ask pairs", () => {
  const base = { security: "full", ask: "off" };
  assert.deepEqual(applyLayer(base, { mode: "deny" }), { security: "deny", ask: "off", mode: "deny" });
  assert.deepEqual(applyLayer(base, { mode: "ask" }), { security: "allowlist", ask: "on-miss", mode: "ask" });
  assert.deepEqual(applyLayer(base, { security: "allowlist" }), { security: "allowlist", ask: "off" });
  assert.deepEqual(applyLayer(base, { mode: "bogus" }), base);
  assert.deepEqual(applyLayer(base, undefined), base);
});

test("the agent's own tools.exec wins over the global one; the approvals store only tightens", () => {
  const cfg = { tools: { exec: { mode: "full" } }, agents: { entries: { ops: { tools: { exec: { mode: "deny" } } } } } };
  assert.equal(effectivePolicy(cfg, "ops").security, "deny");
  assert.equal(effectivePolicy(cfg, "main").security, "full");
  const listCfg = { agents: { list: [{ id: "ops", tools: { exec: { mode: "allowlist" } } }] } };
  assert.deepEqual(agentExecConfig(listCfg, "ops"), { mode: "allowlist" });
  // The store says allowlist + always: config "full" cannot loosen it.
  const tightened = effectivePolicy({ tools: { exec: { mode: "full" } } }, "main",
    { security: "allowlist", ask: "always", askFallback: "full" });
  assert.deepEqual([tightened.security, tightened.ask, tightened.askFallback], ["allowlist", "always", "allowlist"]);
  // No config at all on a gateway host: full, like native exec.
  assert.equal(effectivePolicy({}, "main").security, "full");
});

test("decisions: deny blocks, full runs, allowlist hit runs, miss asks or blocks, always asks", () => {
  assert.equal(decide({ security: "deny", ask: "off" }).action, "block");
  assert.equal(decide({ security: "full", ask: "off" }).action, "run");
  assert.equal(decide({ security: "full", ask: "always" }).action, "ask");
  assert.equal(decide({ security: "full", ask: "off" }, undefined, "always").action, "ask", "the call may only ask for more");
  const hit = { analysisOk: true, allowlistSatisfied: true };
  const miss = { analysisOk: true, allowlistSatisfied: false };
  assert.equal(decide({ security: "allowlist", ask: "off" }, hit).action, "run");
  assert.equal(decide({ security: "allowlist", ask: "on-miss" }, miss).action, "ask");
  assert.equal(decide({ security: "allowlist", ask: "off" }, miss).action, "block");
  assert.equal(decide({ security: "allowlist", ask: "off" }, { analysisOk: false }).action, "block");
});

test("literal $(pass_mgr get KEY) is judged as a plain word, other expansions are not", () => {
  assert.equal(commandForAllowlist('mysql -p"$(pass_mgr get db)" -e "select 1"'), 'mysql -p"PADDEDCELL_SECRET" -e "select 1"');
  assert.equal(commandForAllowlist("echo $(pass_mgr get --version 2 api.token)"), "echo PADDEDCELL_SECRET");
  assert.equal(commandForAllowlist("echo $(cat /etc/passwd)"), "echo $(cat /etc/passwd)");
  assert.equal(commandForAllowlist('echo $(pass_mgr get "$K")'), 'echo $(pass_mgr get "$K")');
});

async function openclawInfra() {
  const entry = process.env.PATH.split(":").map((dir) => path.join(dir, "openclaw")).find((p) => fs.existsSync(p));
  if (!entry) return null;
  const root = path.dirname(fs.realpathSync(entry));
  const file = path.join(root, "dist", "plugin-sdk", "infra-runtime.js");
  return fs.existsSync(file) ? import(pathToFileURL(file).href) : null;
}

test("with OpenClaw's analyser: allowlisted binaries run, others ask, $() of pass_mgr is fine", async (t) => {
  const infra = await openclawInfra();
  if (!infra) return t.skip("openclaw is not on PATH (make test puts it there)");
  const home = fs.mkdtempSync(path.join(os.tmpdir(), "pc-policy-"));
  const saved = process.env.HOME;
  process.env.HOME = home; // OpenClaw reads its approvals store from $HOME/.openclaw
  try {
    const file = infra.loadExecApprovals();
    file.agents = { main: { allowlist: [{ pattern: "echo" }] } };
    infra.saveExecApprovals(file);
    const cfg = { tools: { exec: { mode: "ask" } } };
    const run = await pcexecDecision({ cfg, agentId: "main", params: { command: "echo $(pass_mgr get db)" }, infra });
    assert.equal(run.action, "run", run.reason);
    const ask = await pcexecDecision({ cfg, agentId: "main", params: { command: "rm -rf /tmp/x" }, infra });
    assert.equal(ask.action, "ask");
    const sub = await pcexecDecision({ cfg, agentId: "main", params: { command: "echo $(id)" }, infra });
    assert.equal(sub.action, "ask");
    const other = await pcexecDecision({ cfg: { tools: { exec: { mode: "allowlist" } } }, agentId: "ops", params: { command: "echo hi" }, infra });
    assert.equal(other.action, "block", "ops has no allowlist entries");
  } finally {
    process.env.HOME = saved;
    fs.rmSync(home, { recursive: true, force: true });
  }
});

test("the approval description fits OpenClaw's 512 characters, the command cut with an ellipsis", async () => {
  const { approvalDescription, APPROVAL_DESCRIPTION_MAX } = await import("../lib/policy.js");
  const reason = "tools.exec: security=allowlist ask=on-miss: not on the allowlist";
  const long = `touch /tmp/x; : ${"y".repeat(10_000)}`;
  const text = approvalDescription(reason, "asker", long);
  assert.equal(APPROVAL_DESCRIPTION_MAX, 512);
  assert.equal(text.length, 512);
  assert.ok(text.startsWith(`${reason}\nAgent: asker\nCommand: touch /tmp/x; : y`));
  assert.ok(text.endsWith("y…"));
  // A short command is shown whole; a surrogate pair is never cut in two.
  assert.equal(approvalDescription(reason, "a", "ls"), `${reason}\nAgent: a\nCommand: ls`);
  for (let n = 0; n < 4; n++) {
    const emoji = approvalDescription("r", "a", "x".repeat(n) + "😀".repeat(400));
    assert.ok(emoji.length <= 512);
    assert.ok(!/[\ud800-\udbff]…$/.test(emoji), emoji.slice(-3));
  }
  // Even a reason longer than the limit leaves a description OpenClaw accepts.
  assert.ok(approvalDescription("r".repeat(2000), "a", "ls").length <= 512);
});
