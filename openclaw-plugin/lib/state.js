// Process-wide plugin state. OpenClaw calls register() several times per
// gateway process (twice at start, again on every config reload), each time
// with a fresh `api`; the state that must survive those calls lives here,
// keyed by the settings it depends on, so registering twice changes nothing.

import { DaemonClient } from "./daemon.js";
import { SyncCaller } from "./sync-call.js";

const KEY = Symbol.for("paddedcell.openclaw.state");

export function sharedState() {
  if (!globalThis[KEY]) {
    globalThis[KEY] = {
      clients: new Map(),       // settings JSON -> {client, sync}
      decisions: new Map(),     // decisionKey(ctx, toolCallId) -> {action, command} from before_tool_call
      runs: new Map(),          // run key -> {agentId, sessionKey} of runs the daemon admitted
      workflows: new Map(),     // "agentId\0sessionKey" -> workflow name opened there
      notifier: null,           // {controller, promise} of the notification loop
      infra: undefined,         // OpenClaw exec-approvals helpers (null when unavailable)
    };
  }
  return globalThis[KEY];
}

export function clientsFor(config, logger) {
  const state = sharedState();
  const key = JSON.stringify(config ?? {});
  let entry = state.clients.get(key);
  if (!entry) {
    const client = new DaemonClient(config ?? {}, logger);
    entry = { client, sync: new SyncCaller(client.socketPath) };
    state.clients.set(key, entry);
  }
  return entry;
}

/**
 * Wait `ms`; true when the time passed, false as soon as `signal` aborts. The
 * abort listener is removed either way (long polling loops reuse one signal).
 */
export function sleep(ms, signal) {
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onAbort = () => { clearTimeout(timer); resolve(false); };
    const timer = setTimeout(() => { signal?.removeEventListener("abort", onAbort); resolve(true); }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Bounded maps: drop the oldest entries past `max`. */
export function remember(map, key, value, max = 1000) {
  map.delete(key);
  map.set(key, value);
  while (map.size > max) map.delete(map.keys().next().value);
}

export const TOOL_NAMES = ["pcexec", "pcprocess", "safe_restart", "focus_workflow"];

/** Key of the workflow a session opened (message-start says it belongs to it). */
export function workflowKey(agentId, sessionKey) {
  return `${agentId}\0${sessionKey ?? ""}`;
}
