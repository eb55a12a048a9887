// The abortable sleep used by the notification loop and safe_restart polling.
import { test } from "node:test";
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { sleep } from "../lib/state.js";

test("sleep leaves no abort listener behind, however often it is called with one signal", async () => {
  const controller = new AbortController();
  for (let i = 0; i < 20; i++) assert.equal(await sleep(1, controller.signal), true);
  assert.equal(getEventListeners(controller.signal, "abort").length, 0);
});

test("sleep ends early, answering false, when its signal aborts", async () => {
  const controller = new AbortController();
  const pending = sleep(60_000, controller.signal);
  controller.abort();
  assert.equal(await pending, false);
  assert.equal(await sleep(60_000, controller.signal), false, "an aborted signal does not wait");
});
