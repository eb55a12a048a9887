// The locating logic of the leak scanner, with a stand-in for the daemon's answer.
import { test } from "node:test";
import assert from "node:assert/strict";

import { LeakScanner, MASK } from "../lib/leak.js";

const PW = "Tr0ub4dor&3";

function scanner({ keepsAnswering = true } = {}) {
  const asked = [];
  let locked = false;
  const answer = (text) => {
    asked.push(text);
    if (locked && !keepsAnswering) return false;
    const hit = text.includes(PW);
    if (hit) locked = true;
    return hit;
  };
  return { s: new LeakScanner({ check: async (t) => answer(t), checkSync: answer }), asked };
}

test("a hit is narrowed to the whitespace-delimited words that hold it; whitespace is kept", async () => {
  const { s } = scanner();
  const text = `line one\nthe pw is ${PW}, ok\n  and again:${PW}`;
  const { leak, text: out } = await s.scrub(text, "t");
  assert.equal(leak, true);
  assert.equal(out, `line one\nthe pw is ${MASK} ok\n  and ${MASK}`);
  assert.ok(!out.includes(PW));
  assert.deepEqual(s.scrubSync(text, "t"), { leak: true, text: out }, "remembered");
});

test("when the vault stops answering after the first hit, the whole text is masked", async () => {
  const { s } = scanner({ keepsAnswering: false });
  assert.deepEqual(await s.scrub(`a b c ${PW} d`, "t"), { leak: true, text: MASK });
});

test("a password with spaces inside is masked with the words around it, never left whole", async () => {
  const pw2 = "correct horse battery";
  const asked = [];
  const s = new LeakScanner({ check: async (t) => { asked.push(t); return t.includes(pw2); } });
  const { text } = await s.scrub(`one two ${pw2} three four`, "t");
  assert.ok(!text.includes(pw2) && !text.includes("horse"), text);
  assert.ok(text.startsWith("one two") || text.startsWith(MASK), text);
});

test("structured values: only content strings are scanned and masked, structure is kept", async () => {
  const { s } = scanner({ keepsAnswering: false });
  const message = { role: "toolResult", toolCallId: "c1", content: [{ type: "text", text: `pw ${PW}` }] };
  const { leak, value } = await s.scrubValue(message, "t");
  assert.equal(leak, true);
  assert.deepEqual(value, { role: "toolResult", toolCallId: "c1", content: [{ type: "text", text: MASK }] });
  const clean = await scanner().s.scrubValue({ content: [{ type: "text", text: "fine" }] }, "t");
  assert.equal(clean.leak, false);
});

test("short or non-string input is never sent", async () => {
  const { s, asked } = scanner();
  assert.deepEqual(await s.scrub("ab", "t"), { leak: false, text: "ab" });
  assert.deepEqual(await s.scrub(undefined, "t"), { leak: false, text: undefined });
  assert.deepEqual(asked, []);
});
