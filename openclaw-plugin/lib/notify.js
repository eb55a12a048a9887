// Restart notifications: the daemon queues "restart 结束了，我们继续" (and the
// failure text) for the sessions that were working before a restart. From
// gateway_start until gateway_stop the plugin long-polls
// `GET /notifications?wait=S`, delivers each notification to its session as a
// new agent turn, and acknowledges only the ids it delivered; an undelivered
// notification stays queued for the next gateway.

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

/** One loop per gateway process; a later gateway_start (new registry) replaces it. */
export function startNotifier(deps) {
  const state = sharedState();
  stopNotifier();
  const controller = new AbortController();
  deps.signal?.addEventListener?.("abort", () => controller.abort(), { once: true });
  const promise = loop(deps, controller.signal).catch((err) => {
    deps.logger?.warn?.(`paddedcell: notification loop stopped: ${err?.message ?? err}`);
  });
  state.notifier = { controller, promise };
}

export function stopNotifier() {
  const state = sharedState();
  if (state.notifier) {
    state.notifier.controller.abort();
    state.notifier = null;
  }
}
