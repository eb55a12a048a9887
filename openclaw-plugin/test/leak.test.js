// The leak scanner with a stand-in for the daemon's answer: one call per text, the
// daemon's `redacted` text for strings, its `spans` for structured values.
import { test } from "node:test";
import assert from "node:assert/strict";

import { LeakScanner, MASK } from "../lib/leak.js";

const PW = "Tr0ub4dor&3";

/** What `POST /vault/check-leak` answers: every run of `pw` in UTF-16 offsets, and the redacted text. */
function daemonAnswer(text, pw = PW) {
  const spans = [];
  for (let at = text.indexOf(pw); at !== -1; at = text.indexOf(pw, at + 1)) {
    const last = spans[spans.length - 1];
    if (last && at < last[1]) last[1] = at + pw.length;
    else spans.push([at, at + pw.length]);
  }
  if (!spans.length) return { leak: false };
  let redacted = "";
  let pos = 0;
  for (const [a, b] of spans) { redacted += text.slice(pos, a) + MASK; pos = b; }
  return { leak: true, redacted: redacted + text.slice(pos), spans };
}

function scanner(answer = daemonAnswer) {
  const asked = [];
  const ask = (text, source) => { asked.push({ text, source }); return answer(text); };
  return { s: new LeakScanner({ check: async (t, src) => ask(t, src), checkSync: ask }), asked };
}

test("a string hit is replaced by the daemon's redacted text after one call, then remembered", async () => {
  const { s, asked } = scanner();
  const text = `line one\nthe pw is ${PW}, ok\n  and again:${PW}${PW}`;
  const { leak, text: out } = await s.scrub(text, "t");
  assert.equal(leak, true);
  assert.equal(out, `line one\nthe pw is ${MASK}, ok\n  and again:${MASK}${MASK}`);
  assert.deepEqual(asked.map((a) => a.source), ["t"], "one call, no ':locate' follow-ups");
  assert.deepEqual(s.scrubSync(text, "t"), { leak: true, text: out }, "remembered");
  assert.equal(asked.length, 1);
});

test("a password with spaces, or next to non-ASCII and astral text, is masked exactly", async () => {
  const pw2 = "correct horse battery";
  const { s, asked } = scanner((t) => daemonAnswer(t, pw2));
  assert.equal((await s.scrub(`one two ${pw2} three four`, "t")).text, `one two ${MASK} three four`);
  assert.equal((await s.scrub(`😀é«${pw2}»😀`, "t")).text, `😀é«${MASK}»😀`);
  assert.equal(asked.length, 2);
});

test("an answer without `redacted` (an older daemon) masks the whole text", async () => {
  for (const answer of [() => ({ leak: true }), () => true, (t) => ({ ...daemonAnswer(t), redacted: undefined })]) {
    const { s } = scanner(answer);
    assert.deepEqual(await s.scrub(`a b c ${PW} d`, "t"), { leak: true, text: MASK });
    assert.deepEqual(s.scrubSync(`e f ${PW} g`, "t"), { leak: true, text: MASK });
  }
});

test("an unanswered check is unscanned: withheld by default, passed only when failing open", async () => {
  const { s } = scanner(() => null);
  const result = await s.scrub(`a ${PW}`, "t");
  assert.deepEqual(result, { leak: false, text: `a ${PW}`, unscanned: true });
  assert.equal(s.withhold(result), true);
  assert.equal(s.withhold(s.scrubSync(`b ${PW}`, "t")), true);
  assert.equal(s.withhold(await s.scrubValue({ content: [`c ${PW}`] }, "t")), true);
  const open = new LeakScanner({ check: async () => null, checkSync: () => null, failOpen: true });
  assert.equal(open.withhold(await open.scrub(`a ${PW}`, "t")), false);
});

test("a text that scanned clean is not sent again while it is fresh", async () => {
  let clock = 0;
  const asked = [];
  const s = new LeakScanner({ check: async (t) => { asked.push(t); return { leak: false }; },
    checkSync: (t) => { asked.push(t); return { leak: false }; }, now: () => clock });
  await s.scrub("hello there", "t");
  assert.deepEqual(s.scrubSync("hello there", "t"), { leak: false, text: "hello there" });
  assert.equal(asked.length, 1);
  clock = 61_000;
  s.scrubSync("hello there", "t");
  assert.equal(asked.length, 2, "asked again once stale");
});

test("structured values: one call on the joined strings; only the hit is masked, structure kept", async () => {
  const { s, asked } = scanner();
  const message = {
    role: "toolResult", toolCallId: "c1",
    content: [{ type: "text", text: "nothing" }, { type: "text", text: `pw 😀 ${PW} and ${PW}!` }],
    details: { path: "notes.md", nested: [`x${PW}`] },
  };
  const { leak, value } = await s.scrubValue(message, "t");
  assert.equal(leak, true);
  assert.deepEqual(value, {
    role: "toolResult", toolCallId: "c1",
    content: [{ type: "text", text: "nothing" }, { type: "text", text: `pw 😀 ${MASK} and ${MASK}!` }],
    details: { path: "notes.md", nested: [`x${MASK}`] },
  });
  assert.equal(asked.length, 1);
  assert.deepEqual(s.scrubValueSync(message, "t"), { leak: true, value }, "remembered");
  assert.equal(asked.length, 1);
  const clean = await s.scrubValue({ content: [{ type: "text", text: "fine" }] }, "t");
  assert.equal(clean.leak, false);
});

test("a run across two strings masks its part of each", async () => {
  // Joined: "abcdef\nghijk"; the run [3, 10) covers "def", the separator and "ghi".
  const { s } = scanner(() => ({ leak: true, redacted: `abc${MASK}jk`, spans: [[3, 10]] }));
  const { value } = await s.scrubValue({ content: ["abcdef", "ghijk"], type: "x" }, "t");
  assert.deepEqual(value, { content: [`abc${MASK}`, `${MASK}jk`], type: "x" });
});

test("a value hit without usable spans masks every content string, never structure", async () => {
  const bad = [undefined, [], [[5, 2]], [[0, 999]], [[4, 8], [2, 6]], [["0", 3]]];
  for (const spans of bad) {
    const { s } = scanner(() => ({ leak: true, spans }));
    const message = { role: "toolResult", toolCallId: "c1", content: [{ type: "text", text: `pw ${PW}` }, { type: "text", text: "" }] };
    const { leak, value } = await s.scrubValue(message, "t");
    assert.equal(leak, true);
    assert.deepEqual(value, { role: "toolResult", toolCallId: "c1", content: [{ type: "text", text: MASK }, { type: "text", text: "" }] },
      JSON.stringify(spans));
  }
});

test("a string flagged once is masked in a later transcript write without asking", async () => {
  const { s, asked } = scanner();
  const text = `my pw is ${PW} ok`;
  await s.scrub(text, "inbound");
  const { value } = s.scrubValueSync([{ type: "text", text }], "transcript");
  assert.deepEqual(value, [{ type: "text", text: `my pw is ${MASK} ok` }]);
  assert.equal(asked.length, 1);
});

test("short or non-string input is never sent", async () => {
  const { s, asked } = scanner();
  assert.deepEqual(await s.scrub("ab", "t"), { leak: false, text: "ab" });
  assert.deepEqual(await s.scrub(undefined, "t"), { leak: false, text: undefined });
  assert.deepEqual(await s.scrubValue({ type: "text", text: "ab" }, "t"), { leak: false, value: { type: "text", text: "ab" } });
  assert.deepEqual(asked, []);
});

// -- the hooks, against a stand-in daemon -------------------------------------------

import { registerHooks } from "../lib/hooks.js";
import { decisionKey } from "../lib/policy.js";
import { sharedState } from "../lib/state.js";

/** A daemon stand-in: `answer(text)` for /vault/check-leak (null: no answer in time). */
function hookRig(answer, config = {}) {
  const handlers = new Map();
  const calls = [];
  const api = {
    pluginConfig: config, config: { tools: { exec: { mode: "full" } } }, logger: { warn() {}, debug() {} },
    on(name, handler) { handlers.set(name, handler); },
  };
  const client = {
    async call(method, path, body) {
      calls.push({ path, body, sync: false });
      if (path !== "/vault/check-leak") return { action: "proceed" };
      const a = answer(body.text);
      if (a === null) throw new Error("timed out");
      return a;
    },
  };
  const sync = {
    call(method, path, body) {
      calls.push({ path, body, sync: true });
      const a = answer(body.text);
      return a === null ? { error: "no answer within 1000 ms" } : { status: 200, answer: a };
    },
  };
  registerHooks({ api, client, sync, config, logger: api.logger });
  return { hook: (name) => handlers.get(name), calls, handlers };
}

const ctx = { agentId: "main", sessionKey: "agent:main:s1", runId: "r1" };

test("before_dispatch claims a steered or queued message that holds the password", async () => {
  const { hook } = hookRig(daemonAnswer);
  assert.ok(hook("before_dispatch"), "registered");
  const hit = await hook("before_dispatch")({ content: `my pw ${PW}`, body: `my pw ${PW}` }, ctx);
  assert.equal(hit.handled, true);
  assert.match(hit.text, /admin password/);
  assert.ok(!hit.text.includes(PW));
  assert.equal(await hook("before_dispatch")({ content: "just a question" }, ctx), undefined);
});

test("every gate fails closed when the daemon does not answer", async () => {
  const { hook } = hookRig(() => null);
  const dispatch = await hook("before_dispatch")({ content: "anything at all" }, ctx);
  assert.equal(dispatch.handled, true);
  assert.match(dispatch.text, /did not answer in time/);
  const run = await hook("before_agent_run")({ prompt: "anything else" }, ctx);
  assert.equal(run.outcome, "block");
  assert.match(run.message, /did not answer in time/);
  const reply = await hook("before_agent_reply")({ cleanedBody: "a third text" }, ctx);
  assert.equal(reply.handled, true);
  const tool = await hook("before_tool_call")({ toolName: "read", params: { path: "/etc/hosts" } }, ctx);
  assert.equal(tool.block, true);
  assert.deepEqual(await hook("message_sending")({ content: "outbound text" }, ctx),
    { cancel: true, cancelReason: "paddedcell: admin-password leak scan unavailable" });
  assert.deepEqual(await hook("reply_payload_sending")({ payload: { text: "a reply" } }, ctx), { cancel: true });
  const written = hook("before_message_write")({ message: { role: "user", content: [{ type: "text", text: `pw ${PW}` }] } });
  assert.ok(!JSON.stringify(written).includes(PW));
});

test("leakScan fail-open lets unscanned texts through", async () => {
  const { hook } = hookRig(() => null, { leakScan: "fail-open" });
  assert.equal(await hook("before_dispatch")({ content: "anything at all" }, ctx), undefined);
  assert.equal(await hook("before_agent_run")({ prompt: "anything else" }, ctx), undefined);
  assert.equal(await hook("message_sending")({ content: "outbound text" }, ctx), undefined);
});

test("before_agent_run blocks a prompt that holds the password", async () => {
  const { hook } = hookRig(daemonAnswer);
  const run = await hook("before_agent_run")({ prompt: `context...\nthe pw is ${PW}` }, ctx);
  assert.equal(run.outcome, "block");
  assert.ok(!JSON.stringify(run).includes(PW));
  assert.equal(await hook("before_agent_run")({ prompt: "harmless" }, ctx), undefined);
});

test("a hung daemon blocks at most one transcript write, not each", async () => {
  const { hook, calls } = hookRig(() => null);
  for (let i = 0; i < 5; i++) {
    hook("before_message_write")({ message: { role: "assistant", content: [{ type: "text", text: `reply number ${i}` }] } });
  }
  assert.equal(calls.filter((c) => c.sync).length, 1, "the breaker stops asking after a timeout");
});

test("approval decisions are keyed by agent, session and tool call id", async () => {
  const a = decisionKey({ agentId: "main", sessionKey: "agent:main:a" }, "call_1");
  const b = decisionKey({ agentId: "main", sessionKey: "agent:main:b" }, "call_1");
  const c = decisionKey({ agentId: "other", sessionKey: "agent:main:a" }, "call_1");
  assert.notEqual(a, b);
  assert.notEqual(a, c);
  assert.equal(decisionKey({ agentId: "main" }, undefined), null);
  const { hook } = hookRig(() => ({ leak: false }));
  await hook("before_tool_call")({ toolName: "pcexec", toolCallId: "call_7", params: { command: "echo hi" } },
    { agentId: "main", sessionKey: "agent:main:a" });
  const decisions = sharedState().decisions;
  assert.ok(decisions.has(decisionKey({ agentId: "main", sessionKey: "agent:main:a" }, "call_7")));
  assert.ok(!decisions.has("call_7"));
});

test("a message the transcript hook masked is claimed when dispatch is handed the masked copy", async () => {
  const { hook } = hookRig(daemonAnswer);
  const message = { role: "user", content: `by the way, the admin password is ${PW}` };
  const written = hook("before_message_write")({ message });
  const masked = written.message.content;
  assert.ok(!masked.includes(PW));
  const claimed = await hook("before_dispatch")({ content: masked, body: masked }, ctx);
  assert.equal(claimed?.handled, true);
  const run = await hook("before_agent_run")({ prompt: `[Mon 2026-11-30 10:00 UTC] ${masked}` }, ctx);
  assert.equal(run?.outcome, "block");
  assert.equal(await hook("before_dispatch")({ content: "a different question, ######" }, ctx), undefined);
});
