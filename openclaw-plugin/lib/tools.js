// The agent tools: pcexec, pcprocess, safe_restart, focus_workflow.
// Each is a factory so it binds the caller's agentId, sessionKey and workspace
// from OpenClaw's tool context; the model cannot choose another identity.

import path from "node:path";
import { DaemonError } from "./daemon.js";
import { pcexecDecision, infraFor, decisionKey } from "./policy.js";
import {
  EXEC_PARAMETERS, PROCESS_PARAMETERS, SAFE_RESTART_PARAMETERS, WORKFLOW_PARAMETERS,
  PCEXEC_DESCRIPTION, PCPROCESS_DESCRIPTION,
} from "./schemas.js";
import { sharedState, remember, workflowKey, sleep } from "./state.js";
import { leakScannerFor } from "./leak.js";

function text(textValue, details = {}) {
  return { content: [{ type: "text", text: textValue }], details };
}

function identity(ctx) {
  const agentId = ctx?.agentId || "main";
  const sessionKey = ctx?.sessionKey || null;
  return { agentId, sessionKey, workspace: ctx?.workspaceDir || null };
}

function configFor(api, ctx) {
  return ctx?.getRuntimeConfig?.() ?? ctx?.runtimeConfig ?? ctx?.config ?? api.runtime?.config?.current?.() ?? api.config ?? {};
}

/**
 * The policy decision for a pcexec call, made once per tool call id: by the
 * before_tool_call hook when it runs (it can ask for approval), else here.
 */
async function admitPcexec(deps, ctx, toolCallId, params) {
  const state = sharedState();
  const key = decisionKey(ctx, toolCallId);
  const earlier = key ? state.decisions.get(key) : undefined;
  if (key) state.decisions.delete(key);
  // The hook's decision holds only for the very command it judged.
  if (earlier && earlier.command === String(params.command ?? "")) return earlier;
  const { agentId } = identity(ctx);
  const decision = await pcexecDecision({ cfg: configFor(deps.api, ctx), agentId, params, infra: await infraFor(deps.logger) });
  if (decision.action === "ask") {
    // Only the before_tool_call hook can open an approval; without it, fail closed.
    return { action: "block", reason: `${decision.reason}; approval is required but the PaddedCell approval hook did not run` };
  }
  return decision;
}

export function registerTools(deps) {
  const { api, client, logger } = deps;

  api.registerTool((ctx) => ({
    name: "pcexec",
    label: "pcexec",
    description: PCEXEC_DESCRIPTION,
    parameters: EXEC_PARAMETERS,
    async execute(toolCallId, params, signal, onUpdate) {
      if (!params || typeof params.command !== "string" || !params.command.trim()) {
        throw new Error("Provide a command to start.");
      }
      const decision = await admitPcexec(deps, ctx, toolCallId, params);
      if (decision.action === "block") {
        return text(decision.reason, { status: "blocked", reason: decision.reason });
      }
      const who = identity(ctx);
      const body = { ...params, agentId: who.agentId, sessionKey: who.sessionKey, agentWorkspace: who.workspace, stream: true };
      let result;
      try {
        const last = await client.stream("/exec", body, (line) => {
          // The daemon sends OpenClaw's own exec partial result (exec_update); relay it as is.
          const partial = line?.update;
          if (onUpdate && partial && Array.isArray(partial.content)) onUpdate(partial);
        }, { signal });
        result = last && "result" in last ? last.result : last;
      } catch (err) {
        if (err instanceof DaemonError) throw new Error(err.message);
        throw err;
      }
      if (!result || !Array.isArray(result.content)) {
        throw new Error("the paddedcell daemon ended the exec stream without a result; see PADDEDCELL_HOME/daemon.log");
      }
      return scrubResult(deps, result, `openclaw:tool-result:pcexec:${who.agentId}`);
    },
  }), { name: "pcexec" });

  api.registerTool((ctx) => ({
    name: "pcprocess",
    label: "pcprocess",
    description: PCPROCESS_DESCRIPTION,
    parameters: PROCESS_PARAMETERS,
    async execute(_toolCallId, params) {
      const who = identity(ctx);
      try {
        // sessionKey scopes the sessions to this conversation, as OpenClaw's process tool does.
        const result = await client.call("POST", "/process", { ...params, agentId: who.agentId, sessionKey: who.sessionKey },
          { timeoutMs: 45_000 });
        return scrubResult(deps, result, `openclaw:tool-result:pcprocess:${who.agentId}`);
      } catch (err) {
        if (err instanceof DaemonError) throw new Error(err.message);
        throw err;
      }
    },
  }), { name: "pcprocess" });

  api.registerTool((ctx) => ({
    name: "safe_restart",
    label: "safe_restart",
    description:
      "Restart the OpenClaw gateway safely, as the LAST step of your plan: first write what to do after the restart to a file. " +
      "Waits until every agent is idle or frozen, then schedules the restart and returns; after it you receive " +
      "'restart 结束了，我们继续' in this session. rollback: script that undoes your change if the gateway does not come back; log: log path.",
    parameters: SAFE_RESTART_PARAMETERS,
    async execute(_toolCallId, params, signal) {
      const who = identity(ctx);
      return safeRestart(deps, who, params ?? {}, signal);
    },
  }), { name: "safe_restart" });

  api.registerTool((ctx) => ({
    name: "focus_workflow",
    label: "focus_workflow",
    description:
      "Open or close a focus workflow for yourself. While open, messages from other sessions get a busy reply " +
      "instead of interrupting you; close it when the workflow is done.",
    parameters: WORKFLOW_PARAMETERS,
    async execute(_toolCallId, params) {
      const who = identity(ctx);
      const workflow = String(params?.workflow ?? "").trim();
      if (!workflow) throw new Error("focus_workflow needs a workflow name, e.g. {\"action\": \"open\", \"workflow\": \"release-1.4\"}");
      const action = params?.action === "close" ? "close" : "open";
      try {
        const answer = await client.call("POST", `/workflow/${action}`, { agentId: who.agentId, workflow, sessionKey: who.sessionKey });
        const workflows = sharedState().workflows;
        if (action === "open") remember(workflows, workflowKey(who.agentId, who.sessionKey), workflow);
        else workflows.delete(workflowKey(who.agentId, who.sessionKey));
        return text(`Workflow ${workflow} ${action === "open" ? "opened" : "closed"}; state: ${answer.state ?? "unknown"}.`,
          { status: "completed", workflow, action, state: answer.state ?? null });
      } catch (err) {
        if (err instanceof DaemonError) throw new Error(err.message);
        throw err;
      }
    },
  }), { name: "focus_workflow" });

  logger?.debug?.("paddedcell: tools registered");
}

/** Admin-password scan of a tool result we produced, before the model sees it. */
async function scrubResult(deps, result, source) {
  const scanner = leakScannerFor(deps);
  if (!scanner) return result;
  const { leak, value } = await scanner.scrubValue({ content: result.content, details: result.details }, source);
  return leak ? { ...result, ...value } : result;
}

/** A path the agent gave, made absolute against its workspace. */
function absoluteIn(workspace, value) {
  const raw = String(value ?? "").trim();
  if (!raw) return raw;
  if (path.isAbsolute(raw)) return raw;
  return path.resolve(workspace || process.cwd(), raw);
}

/**
 * Poll /query-restart as the safe-restart CLI does (every interval until OK).
 * The restart job itself runs inside the daemon (`job` in the body), because
 * the restart it asks for stops this gateway and with it this tool call.
 */
async function safeRestart(deps, who, params, signal) {
  const { client, config } = deps;
  const intervalMs = Math.max(100, Number(config.restartPollSeconds ?? 5) * 1000);
  const maxWaitMs = Math.max(intervalMs, Number(config.restartMaxWaitSeconds ?? 1800) * 1000);
  const job = { rollback: absoluteIn(who.workspace, params.rollback), log: absoluteIn(who.workspace, params.log) };
  if (!job.rollback || !job.log) {
    throw new Error("safe_restart needs rollback (a script that undoes your change) and log (a log file path), " +
      "e.g. {\"rollback\": \"rollback.sh\", \"log\": \"restart.log\"} relative to your workspace");
  }
  for (const key of ["delaySeconds", "recoverTimeoutSeconds", "restartCmd", "statusCmd"]) {
    if (config.restartJob?.[key] !== undefined) job[key] = config.restartJob[key];
  }
  const body = { requesterAgentId: who.agentId, requesterSessionKey: who.sessionKey, job };
  const deadline = Date.now() + maxWaitMs;
  let polls = 0;
  for (;;) {
    let answer;
    try {
      answer = await client.call("POST", "/query-restart", body, { signal });
    } catch (err) {
      if (err instanceof DaemonError) throw new Error(err.message);
      throw err;
    }
    polls += 1;
    const result = answer.result;
    if (result === "OK") {
      return text(
        `Restart scheduled (job ${answer.jobId ?? "?"}): every other agent is frozen and the restart runs in the ` +
        `background; its log is ${job.log}. End your turn now. When the gateway is back this session receives ` +
        "'restart 结束了，我们继续'; then continue from the notes you wrote.",
        { status: "completed", result, polls, jobId: answer.jobId ?? null, log: job.log });
    }
    if (result === "ALREADY_SCHEDULED") {
      return text("Another restart is already scheduled; do not call safe_restart again. You will be told when it is over.",
        { status: "completed", result, polls });
    }
    if (result !== "NOT_READY") throw new Error(`unexpected answer from /query-restart: ${JSON.stringify(answer)}`);
    if (Date.now() + intervalMs > deadline) {
      return text(`Not every agent became idle within ${Math.round(maxWaitMs / 1000)} s; the restart was not scheduled. Try again later.`,
        { status: "failed", result, polls, blocking: answer.blocking ?? [] });
    }
    if (!(await sleep(intervalMs, signal))) throw Object.assign(new Error("aborted"), { name: "AbortError" });
  }
}
