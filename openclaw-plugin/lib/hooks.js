// Lifecycle, policy and leak-scan hooks.
//
// Which OpenClaw 2026.9.6 hook does what:
//   before_dispatch    scan of every inbound channel/chat message before OpenClaw
//                      queues it: in queue mode `steer` a message that arrives during a
//                      run is added to that run, and no run-start hook sees it (hit or
//                      unscanned: claimed and answered with a one-line warning)
//   before_agent_run   scan of the prompt right before the model reads it (gate: hit
//                      or unscanned blocks the run; OpenClaw keeps only our message)
//   before_tool_call   admin-password scan of every tool call's params (hit: blocked);
//                      exec policy for pcexec (deny: blocked; approval: requireApproval)
//   before_agent_reply every agent run's start -> /lifecycle/message-start (heartbeat
//                      flagged from ctx.trigger); "reject" answers the busy reply
//                      without a model call; the prompt is scanned first (runtimes
//                      without before_agent_run)
//   agent_end          -> /lifecycle/message-end for runs the daemon admitted
//   message_received   scan of inbound channel messages (observe only: locks early)
//   message_sending, reply_payload_sending
//                      scan of outbound messages and replies (hit: rewritten;
//                      unscanned: held, i.e. cancelled)
//   tool-result middleware
//                      scan of other plugins' and core tools' results before the model
//                      sees them (hit: rewritten; unscanned: withheld); after_tool_call
//                      (observe only) when the middleware is unavailable
//   tool_result_persist, before_message_write
//                      scan of what goes into the transcript (hit: rewritten;
//                      unscanned: withheld); a daemon that timed out is not asked
//                      again for SYNC_COOL_DOWN_MS, so writes do not each block
//   gateway_start/stop the notification loop (deliver, then acknowledge)
//
// Unscanned means the daemon did not answer in time; with `leakScan: "fail-open"`
// unscanned texts pass instead (see leak.js).

import { leakScannerFor, withholdValue } from "./leak.js";
import { pcexecDecision, infraFor, decisionKey, approvalDescription } from "./policy.js";
import { sharedState, remember, TOOL_NAMES, workflowKey } from "./state.js";
import { startNotifier, stopNotifier } from "./notify.js";

function registerResultMiddleware(api, scanner, logger) {
  if (typeof api.registerAgentToolResultMiddleware !== "function") return false;
  try {
    api.registerAgentToolResultMiddleware(async (event, ctx) => {
      if (TOOL_NAMES.includes(event?.toolName) || !event?.result) return undefined; // scanned in execute()
      const original = { content: event.result.content, details: event.result.details };
      const scanned = await scanner.scrubValue(original, `openclaw:tool-result:${event.toolName}:${ctx?.agentId ?? "?"}`);
      if (scanner.withhold(scanned)) return { result: { ...event.result, ...withholdValue(original) } };
      return scanned.leak ? { result: { ...event.result, ...scanned.value } } : undefined;
    }, { runtimes: ["openclaw"] });
    return true;
  } catch (err) {
    logger?.warn?.(`paddedcell: tool-result middleware unavailable (${err?.message ?? err}); other tools' results are scanned after the fact`);
    return false;
  }
}

/**
 * A transcript message with the admin password masked in its content and its
 * details (OpenClaw persists a tool result's bounded details with it), or undefined.
 */
function scrubTranscriptMessage(scanner, message, source) {
  if (!message || (message.content === undefined && message.details === undefined)) return undefined;
  const value = message.details === undefined ? { content: message.content } : { content: message.content, details: message.details };
  const scanned = scanner.scrubValueSync(value, source);
  if (scanner.withhold(scanned)) return { message: { ...message, ...withholdValue(value) } };
  return scanned.leak ? { message: { ...message, ...scanned.value } } : undefined;
}

function runKey(ctx) {
  return ctx?.runId || `${ctx?.agentId ?? "main"}\0${ctx?.sessionKey ?? ""}`;
}

const LEAK_REPLY =
  "PaddedCell: this message contained the PaddedCell admin password, so it was not passed to the model. " +
  "The vault is now locked; an operator must run `pass_mgr admin init` again with a new password.";
const UNSCANNED_REPLY =
  "PaddedCell: this message was not passed to the model because the admin-password leak scan did not answer in time; send it again shortly.";

/** The text of an inbound message as the before_dispatch event carries it. */
function inboundText(event) {
  const parts = [event?.content, event?.body].filter((t) => typeof t === "string" && t);
  return parts.length === 2 && parts[0] === parts[1] ? parts[0] : parts.join("\n");
}

export function registerHooks(deps) {
  const { api, client, logger } = deps;
  const scanner = leakScannerFor(deps);
  const state = sharedState();

  // Policy and params scan for every tool call; highest priority so a leak is
  // stopped before any other plugin sees the params.
  api.on("before_tool_call", async (event, ctx) => {
    if (scanner) {
      const scanned = await scanner.scrubValue(event.params ?? {}, `openclaw:tool-params:${event.toolName}:${ctx?.agentId ?? "?"}`);
      if (scanned.leak) {
        return {
          block: true,
          blockReason: `${event.toolName} was not run: its parameters contained the PaddedCell admin password. ` +
            "The vault is now locked; never put the admin password into a tool call.",
        };
      }
      if (scanner.withhold(scanned)) {
        return {
          block: true,
          blockReason: `${event.toolName} was not run: the PaddedCell admin-password leak scan did not answer in time; try again shortly.`,
        };
      }
    }
    if (event.toolName !== "pcexec") return undefined;
    const cfg = api.runtime?.config?.current?.() ?? api.config ?? {};
    const decision = await pcexecDecision({
      cfg, agentId: ctx?.agentId || "main", params: event.params ?? {}, infra: await infraFor(logger),
    });
    const id = decisionKey(ctx, event.toolCallId ?? ctx?.toolCallId);
    const command = String(event.params?.command ?? "");
    if (id) state.decisions.delete(id);
    if (decision.action === "block") return { block: true, blockReason: decision.reason };
    if (decision.action === "run") {
      if (id) remember(state.decisions, id, { ...decision, command });
      return undefined;
    }
    return {
      requireApproval: {
        title: "pcexec: run a shell command",
        description: approvalDescription(decision.reason, ctx?.agentId ?? "main", command),
        severity: "warning",
        timeoutMs: Number(deps.config.approvalTimeoutMs ?? 120_000),
        allowedDecisions: ["allow-once", "deny"],
        onResolution: (outcome) => {
          if (!id) return;
          remember(state.decisions, id, outcome === "allow-once" || outcome === "allow-always"
            ? { action: "run", reason: `approved (${outcome})`, command }
            : { action: "block", reason: `exec approval ${outcome}: the command was not run`, command });
        },
      },
    };
  }, { priority: 1000 });

  if (scanner) {
    // Where OpenClaw first sees a channel or chat message, before it queues, steers or
    // runs it: the one place that also sees messages steered into a running turn.
    api.on("before_dispatch", async (event, ctx) => {
      // A chat message is persisted (and masked by before_message_write) before dispatch.
      if ([event?.content, event?.body].some((t) => scanner.wasMasked(t))) return { handled: true, text: LEAK_REPLY };
      const scanned = await scanner.scrub(inboundText(event), `openclaw:inbound:${ctx?.sessionKey ?? event?.sessionKey ?? ctx?.channelId ?? "?"}`);
      if (scanned.leak) return { handled: true, text: LEAK_REPLY };
      if (scanner.withhold(scanned)) return { handled: true, text: UNSCANNED_REPLY };
      return undefined;
    }, { priority: 1000 });

    // The prompt as the model will read it, on every run of the embedded and CLI runners
    // (also runs no channel dispatched: `openclaw agent`, cron, notifications).
    api.on("before_agent_run", async (event, ctx) => {
      if (typeof event?.prompt !== "string") return undefined;
      if (scanner.wasMasked(event.prompt, { within: true })) {
        return { outcome: "block", reason: "paddedcell: admin password in the prompt", message: LEAK_REPLY };
      }
      const scanned = await scanner.scrub(event.prompt, `openclaw:inbound:${ctx?.sessionKey ?? "?"}`);
      if (scanned.leak) return { outcome: "block", reason: "paddedcell: admin password in the prompt", message: LEAK_REPLY };
      if (scanner.withhold(scanned)) return { outcome: "block", reason: "paddedcell: leak scan unavailable", message: UNSCANNED_REPLY };
      return undefined;
    }, { priority: 1000 });
  }

  // Start of every agent run (user, heartbeat, cron, restart notification).
  api.on("before_agent_reply", async (event, ctx) => {
    if (scanner && typeof event?.cleanedBody === "string") {
      const scanned = await scanner.scrub(event.cleanedBody, `openclaw:inbound:${ctx?.sessionKey ?? "?"}`);
      if (scanned.leak) return { handled: true, reply: { text: LEAK_REPLY }, reason: "paddedcell: admin password in message" };
      if (scanner.withhold(scanned)) return { handled: true, reply: { text: UNSCANNED_REPLY }, reason: "paddedcell: leak scan unavailable" };
    }
    const agentId = ctx?.agentId || "main";
    const sessionKey = ctx?.sessionKey;
    if (!sessionKey) return undefined;
    const body = { agentId, sessionKey, heartbeat: ctx?.trigger === "heartbeat" };
    const workflow = state.workflows.get(workflowKey(agentId, sessionKey));
    if (workflow) body.workflow = workflow;
    // A run we started to deliver a restart notification (see notify.js) is
    // admitted even while the agent is frozen.
    const notice = /^paddedcell-notification-(\d+)$/.exec(ctx?.runId ?? "");
    if (notice) body.notificationId = Number(notice[1]);
    let answer;
    try {
      answer = await client.call("POST", "/lifecycle/message-start", body, { timeoutMs: 10_000 });
    } catch (err) {
      // Availability over coordination: without the daemon the run goes ahead.
      logger?.warn?.(`paddedcell: message-start not recorded (${err?.message ?? err}); the run proceeds`);
      return undefined;
    }
    if (answer.action === "reject") {
      return { handled: true, reply: { text: answer.reply || "在忙，无法应答" }, reason: "paddedcell: agent busy" };
    }
    remember(state.runs, runKey(ctx), { agentId, sessionKey, heartbeat: body.heartbeat });
    return undefined;
  }, { priority: 1000 });

  api.on("agent_end", async (_event, ctx) => {
    const key = runKey(ctx);
    const run = state.runs.get(key);
    if (!run) return;
    state.runs.delete(key);
    try {
      await client.call("POST", "/lifecycle/message-end", run, { timeoutMs: 10_000 });
    } catch (err) {
      logger?.warn?.(`paddedcell: message-end not recorded for ${run.sessionKey}: ${err?.message ?? err}`);
    }
  });

  if (scanner) {
    api.on("message_received", async (event, ctx) => {
      await scanner.scrub(event?.content, `openclaw:inbound:${ctx?.sessionKey ?? ctx?.channelId ?? "?"}`);
    });

    api.on("message_sending", async (event, ctx) => {
      const scanned = await scanner.scrub(event?.content, `openclaw:outbound:${ctx?.sessionKey ?? event?.to ?? "?"}`);
      if (scanner.withhold(scanned)) return { cancel: true, cancelReason: "paddedcell: admin-password leak scan unavailable" };
      return scanned.leak ? { content: scanned.text } : undefined;
    });

    // The normalized reply (also what an `openclaw agent` caller gets back).
    api.on("reply_payload_sending", async (event) => {
      const payload = event?.payload;
      if (!payload || typeof payload.text !== "string") return undefined;
      const scanned = await scanner.scrub(payload.text, `openclaw:outbound:${event.sessionKey ?? event.channel ?? "?"}`);
      if (scanner.withhold(scanned)) return { cancel: true };
      return scanned.leak ? { payload: { ...payload, text: scanned.text } } : undefined;
    });

    // Other tools' results, before the model sees them: the tool-result middleware
    // (an installed plugin may use it when enabled and declared in
    // contracts.agentToolResultMiddleware). Without it, after_tool_call can only
    // observe: the vault still locks, and the transcript copy is rewritten below.
    if (!registerResultMiddleware(api, scanner, logger)) {
      api.on("after_tool_call", async (event, ctx) => {
        if (TOOL_NAMES.includes(event?.toolName)) return; // already scanned in execute()
        if (event?.result !== undefined) {
          await scanner.scrubValue(event.result, `openclaw:tool-result:${event.toolName}:${ctx?.agentId ?? "?"}`);
        }
      });
    }

    // Synchronous by OpenClaw's contract: a promise would be ignored.
    api.on("tool_result_persist", (event) =>
      scrubTranscriptMessage(scanner, event?.message, `openclaw:transcript:${event?.toolName ?? "tool"}`));

    api.on("before_message_write", (event) =>
      scrubTranscriptMessage(scanner, event?.message, `openclaw:transcript:${event?.message?.role ?? "message"}`));
  }

  api.on("gateway_start", async (_event, ctx) => {
    startNotifier({ ...deps, signal: ctx?.abortSignal });
  });

  api.on("gateway_stop", async () => {
    stopNotifier();
  });

}
