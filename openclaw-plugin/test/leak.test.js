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

test("an unanswered check is a miss, and the text is kept", async () => {
  const { s } = scanner(() => null);
  assert.deepEqual(await s.scrub(`a ${PW}`, "t"), { leak: false, text: `a ${PW}` });
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
