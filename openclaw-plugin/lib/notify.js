// Restart notifications: the daemon queues "restart 结束了，我们继续" (and the
// failure text) for the sessions that were working before a restart. From
// gateway_start until gateway_stop the plugin long-polls
// `GET /notifications?wait=S`, delivers each notification to its session as a
// new agent turn, and acknowledges only the ids it delivered; an undelivered
// notification stays queued for the next gateway.
//
// Exec exit events: a backgrounded pcexec session that ends is announced to the
// session that started it as OpenClaw's own exec announces it (notify-on-exit:
// a system event plus a heartbeat wake), from `GET /exec/events?wait=S`.

import { sharedState, sleep } from "./state.js";

const RETRY_MS = 5000;

export function notificationRunId(id) {
  return `paddedcell-notification-${id}`;
}

/** Deliver one notification into its session; resolves true when accepted. */
export async function deliver(api, note, logger) {
  const runtime = api.runtime;
  // A notice for the agent itself (no session) goes to its main session.
  const sessionKey = note.sessionKey || (note.agentId ? `agent:${note.agentId}:main` : null);
  if (!sessionKey || typeof note.text !== "string") return false;
  try {
    if (runtime?.subagent?.run) {
      // The idempotency key becomes the run id: the lifecycle hook recognises the
      // run as a notification delivery by it.
      await runtime.subagent.run({
        sessionKey, message: note.text, deliver: false, idempotencyKey: notificationRunId(note.id),
      });
      return true;
    }
  } catch (err) {
    logger?.warn?.(`paddedcell: notification ${note.id} not delivered to ${sessionKey} via subagent.run: ${err?.message ?? err}`);
  }
  return false;
}

async function loop(deps, signal) {
  const { client, config, api, logger } = deps;
  const waitSeconds = Math.max(1, Number(config.notificationsWaitSeconds ?? 25));
  while (!signal.aborted) {
    let notes;
    try {
      const answer = await client.call("GET", `/notifications?wait=${waitSeconds}`, undefined,
        { timeoutMs: (waitSeconds + 10) * 1000, signal });
      notes = Array.isArray(answer.notifications) ? answer.notifications : [];
    } catch (err) {
      if (signal.aborted) return;
      logger?.debug?.(`paddedcell: notifications unavailable: ${err?.message ?? err}`);
      await sleep(RETRY_MS, signal);
      continue;
    }
    const delivered = [];
    for (const note of notes) {
      if (signal.aborted) break;
      if (await deliver(api, note, logger)) delivered.push(note.id);
    }
    if (delivered.length) {
      try {
        await client.call("POST", "/notifications/ack", { ids: delivered }, { timeoutMs: 10_000 });
      } catch (err) {
        logger?.warn?.(`paddedcell: could not acknowledge notifications ${delivered.join(", ")}: ${err?.message ?? err}`);
      }
    }
    if (notes.length > delivered.length) await sleep(RETRY_MS, signal);
  }
}

/**
 * A background pcexec session ended: tell its OpenClaw session the way OpenClaw's
 * own exec does (maybeNotifyOnExit): the daemon's text as a system event for that
 * session (contextKey `exec:<id>`), then a heartbeat wake with OpenClaw's options.
 */
export function deliverExitEvent(api, event, logger) {
  const system = api.runtime?.system;
  if (!system?.enqueueSystemEvent || typeof event?.text !== "string" || !event.sessionKey) return false;
  try {
    const options = { sessionKey: event.sessionKey, contextKey: event.contextKey };
    if (event.agentId) options.agentId = event.agentId;
    system.enqueueSystemEvent(event.text, options);
    if (!/:subagent:/.test(event.sessionKey)) {
      const wake = { source: "exec-event", intent: "event", reason: "exec-event", coalesceMs: 0, sessionKey: event.sessionKey };
      if (event.agentId) wake.agentId = event.agentId;
      (system.requestHeartbeat ?? system.requestHeartbeatNow)?.(wake);
    }
    return true;
  } catch (err) {
    logger?.warn?.(`paddedcell: exit event ${event.id} not delivered to ${event.sessionKey}: ${err?.message ?? err}`);
    return false;
  }
}

async function exitEventLoop(deps, signal) {
  const { client, config, api, logger } = deps;
  const waitSeconds = Math.max(1, Math.min(60, Number(config.notificationsWaitSeconds ?? 25)));
  while (!signal.aborted) {
    let events;
    try {
      const answer = await client.call("GET", `/exec/events?wait=${waitSeconds}`, undefined,
        { timeoutMs: (waitSeconds + 10) * 1000, signal });
      events = Array.isArray(answer.events) ? answer.events : [];
    } catch (err) {
      if (signal.aborted) return;
      logger?.debug?.(`paddedcell: exec exit events unavailable: ${err?.message ?? err}`);
      await sleep(RETRY_MS, signal);
      continue;
    }
    const delivered = events.filter((event) => deliverExitEvent(api, event, logger)).map((event) => event.id);
    if (delivered.length) {
      try {
        await client.call("POST", "/exec/events/ack", { ids: delivered }, { timeoutMs: 10_000 });
      } catch (err) {
        logger?.warn?.(`paddedcell: could not acknowledge exit events ${delivered.join(", ")}: ${err?.message ?? err}`);
      }
    }
    if (events.length > delivered.length) await sleep(RETRY_MS, signal);
  }
}

/** One loop per gateway process; a later gateway_start (new registry) replaces it. */
export function startNotifier(deps) {
  const state = sharedState();
  stopNotifier();
  const controller = new AbortController();
  deps.signal?.addEventListener?.("abort", () => controller.abort(), { once: true });
  const stopped = (what) => (err) => deps.logger?.warn?.(`paddedcell: ${what} loop stopped: ${err?.message ?? err}`);
  const promise = Promise.all([
    loop(deps, controller.signal).catch(stopped("notification")),
    exitEventLoop(deps, controller.signal).catch(stopped("exec exit event")),
  ]);
  state.notifier = { controller, promise };
}

export function stopNotifier() {
  const state = sharedState();
  if (state.notifier) {
    state.notifier.controller.abort();
    state.notifier = null;
  }
}
