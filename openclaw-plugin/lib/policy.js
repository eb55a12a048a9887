// The host's exec policy, applied to pcexec so it is no way around exec approvals.
//
// We mirror OpenClaw 2026.9.6's own layering for gateway-host exec
// (src/agents/exec-defaults.ts + bash-tools.exec-host-gateway.ts):
//   1. base: the host approvals store (`openclaw approvals`, exec_approvals_config)
//      for this agent — defaults, agents["*"], agents[<id>] — over security=full, ask=off;
//   2. layer `tools.exec` (mode, or legacy security/ask), then the agent's own
//      `agents.entries.<id>.tools.exec` / `agents.list[i].tools.exec`;
//   3. the approvals store can only tighten: security = min, ask = max.
// Then for one command: security=deny blocks; allowlist checks every segment
// against the agent's allowlist and safe bins with OpenClaw's own analyser;
// ask=always, or an allowlist miss with ask=on-miss, needs an approval.
// The decision functions below are pure; the OpenClaw helpers come in as `infra`.

import { sharedState } from "./state.js";

const SECURITY_RANK = { deny: 0, allowlist: 1, full: 2 };
const ASK_RANK = { off: 0, "on-miss": 1, always: 2 };

const MODES = {
  deny: { security: "deny", ask: "off" },
  allowlist: { security: "allowlist", ask: "off" },
  ask: { security: "allowlist", ask: "on-miss" },
  auto: { security: "allowlist", ask: "on-miss" },
  full: { security: "full", ask: "off" },
};

export function minSecurity(a, b) {
  return SECURITY_RANK[a] <= SECURITY_RANK[b] ? a : b;
}

export function maxAsk(a, b) {
  return ASK_RANK[a] >= ASK_RANK[b] ? a : b;
}

function norm(value, table) {
  const v = typeof value === "string" ? value.trim().toLowerCase() : undefined;
  return v && Object.hasOwn(table, v) ? v : undefined;
}

/** One `tools.exec`-shaped layer over a `{security, ask}` base (applyExecPolicyLayer). */
export function applyLayer(base, layer) {
  if (!layer || typeof layer !== "object") return base;
  const mode = norm(layer.mode, MODES);
  if (mode) return { ...MODES[mode], mode };
  const security = norm(layer.security, SECURITY_RANK);
  const ask = norm(layer.ask, ASK_RANK);
  if (security || ask) return { security: security ?? base.security, ask: ask ?? base.ask };
  return base;
}

/** The agent's own `tools.exec`, from `agents.entries.<id>` or `agents.list[]`. */
export function agentExecConfig(cfg, agentId) {
  const agents = cfg?.agents;
  if (!agents || !agentId) return undefined;
  const entries = agents.entries;
  if (entries && typeof entries === "object" && !Array.isArray(entries) && entries[agentId]) {
    return entries[agentId]?.tools?.exec;
  }
  if (Array.isArray(agents.list)) {
    return agents.list.find((e) => e && e.id === agentId)?.tools?.exec;
  }
  return undefined;
}

/**
 * Effective `{security, ask, askFallback, allowlist, source}` for an agent.
 * `approvals` is the resolved host-approvals agent entry (or undefined when the
 * store could not be read: then only the config applies).
 */
export function effectivePolicy(cfg, agentId, approvals) {
  const hostBase = {
    security: norm(approvals?.security, SECURITY_RANK) ?? "full",
    ask: norm(approvals?.ask, ASK_RANK) ?? "off",
  };
  const layered = applyLayer(applyLayer(hostBase, cfg?.tools?.exec), agentExecConfig(cfg, agentId));
  const security = approvals ? minSecurity(layered.security, hostBase.security) : layered.security;
  const ask = approvals ? maxAsk(layered.ask, hostBase.ask) : layered.ask;
  const askFallback = minSecurity(security, norm(approvals?.askFallback, SECURITY_RANK) ?? "deny");
  return { security, ask, askFallback, mode: layered.mode };
}

/**
 * What to do with one pcexec command: `{action: "run"|"block"|"ask", reason}`.
 * `allowlistEval` is OpenClaw's `evaluateShellAllowlist` answer (analysisOk,
 * allowlistSatisfied), needed only for security=allowlist.
 */
export function decide(policy, allowlistEval, requestedAsk) {
  if (policy.security === "deny") {
    return { action: "block", reason: "exec denied: host=gateway security=deny (tools.exec.mode or the exec approvals policy denies shell commands for this agent)" };
  }
  const ask = maxAsk(policy.ask, norm(requestedAsk, ASK_RANK) ?? "off");
  if (ask === "always") return { action: "ask", reason: "exec approvals: ask=always" };
  if (policy.security === "full") return { action: "run", reason: "security=full" };
  const satisfied = Boolean(allowlistEval?.analysisOk && allowlistEval?.allowlistSatisfied);
  if (satisfied) return { action: "run", reason: "allowlist match" };
  const why = allowlistEval?.analysisOk === false
    ? "the command cannot be analysed for the allowlist (for example $(...), backticks or redirections)"
    : "the command is not on this agent's exec allowlist";
  if (ask === "on-miss") return { action: "ask", reason: `allowlist miss: ${why}` };
  return { action: "block", reason: `exec denied: allowlist miss: ${why} (security=allowlist, ask=off)` };
}

/** OpenClaw's own helpers from `openclaw/plugin-sdk/infra-runtime`, or null. */
export async function loadInfra(logger) {
  const candidates = ["openclaw/plugin-sdk/infra-runtime"];
  const entry = process.argv[1];
  if (entry) {
    try {
      const fs = await import("node:fs");
      const path = await import("node:path");
      const { pathToFileURL } = await import("node:url");
      const root = path.dirname(fs.realpathSync(entry));
      const file = path.join(root, "dist", "plugin-sdk", "infra-runtime.js");
      if (fs.existsSync(file)) candidates.push(pathToFileURL(file).href);
    } catch { /* fall through */ }
  }
  for (const spec of candidates) {
    try {
      const mod = await import(spec);
      if (typeof mod.loadExecApprovals === "function" && typeof mod.evaluateShellAllowlistWithAuthorization === "function") return mod;
    } catch { /* try the next */ }
  }
  logger?.warn?.("paddedcell: OpenClaw's exec-approvals helpers are not importable; pcexec applies tools.exec only and treats security=allowlist as needing approval");
  return null;
}

/** `$(pass_mgr get KEY)` with a literal key: resolved by the daemon, not a shell expansion to judge. */
const PASS_MGR_GET = /\$\(\s*pass_mgr\s+get\s+(?:--version\s+\d+\s+)?[A-Za-z0-9_.@:+-]+\s*\)/g;

/**
 * The command the allowlist sees: each literal `$(pass_mgr get KEY)` becomes the
 * word `PADDEDCELL_SECRET`, so `mysql -p"$(pass_mgr get db)"` is judged as
 * `mysql -p"PADDEDCELL_SECRET"` (the allowlist then needs `mysql`, not `$()`).
 */
export function commandForAllowlist(command) {
  return String(command ?? "").replace(PASS_MGR_GET, "PADDEDCELL_SECRET");
}

/**
 * Key of a before_tool_call decision that pcexec's execute() looks up: the agent, its
 * session and the tool call id, since a model picks its own tool call ids ("call_1")
 * and two sessions may use the same one at once. Null without a tool call id.
 */
export function decisionKey(ctx, toolCallId) {
  if (toolCallId === undefined || toolCallId === null || toolCallId === "") return null;
  return JSON.stringify([ctx?.agentId || "main", ctx?.sessionKey ?? "", String(toolCallId)]);
}

/** The full decision for one pcexec call. */
export async function pcexecDecision({ cfg, agentId, params, infra, env = process.env }) {
  let approvalsAgent;
  let allowlist = [];
  if (infra) {
    try {
      const resolved = infra.resolveExecApprovalsFromFile({
        file: infra.loadExecApprovals(), agentId, overrides: { security: "full", ask: "off" },
      });
      approvalsAgent = resolved.agent;
      allowlist = resolved.allowlist ?? [];
    } catch {
      approvalsAgent = undefined;
    }
  }
  const policy = effectivePolicy(cfg, agentId, approvalsAgent);
  let allowlistEval;
  if (policy.security === "allowlist" && infra) {
    try {
      const execCfg = { ...(cfg?.tools?.exec ?? {}), ...(agentExecConfig(cfg, agentId) ?? {}) };
      const safeBins = infra.resolveSafeBins ? infra.resolveSafeBins(execCfg.safeBins) : undefined;
      // The POSIX analyser (the plain evaluateShellAllowlist is Windows-only in 2026.9.6).
      allowlistEval = await infra.evaluateShellAllowlistWithAuthorization({
        command: commandForAllowlist(params.command),
        allowlist,
        safeBins,
        cwd: params.workdir || undefined,
        env,
        platform: process.platform,
      });
    } catch {
      allowlistEval = { analysisOk: false, allowlistSatisfied: false };
    }
  }
  return { ...decide(policy, allowlistEval, params.ask), policy };
}

/** OpenClaw's helpers, loaded once per process (null when unavailable). */
export async function infraFor(logger) {
  const state = sharedState();
  if (state.infra === undefined) state.infra = await loadInfra(logger);
  return state.infra;
}

/** OpenClaw 2026.9.6 rejects a plugin approval whose description is longer than this
 * (its approval request schema), and then never asks: the call is not run. */
export const APPROVAL_DESCRIPTION_MAX = 512;

/**
 * The approval text for a pcexec call: the reason, the agent and as much of the command
 * as fits in {@link APPROVAL_DESCRIPTION_MAX} characters (UTF-16 units, a surrogate pair
 * never cut), the rest replaced by "…". A long command is still asked about.
 */
export function approvalDescription(reason, agentId, command, max = APPROVAL_DESCRIPTION_MAX) {
  const fit = (text, room) => {
    if (text.length <= room) return text;
    let end = Math.max(0, room - 1);
    const code = text.charCodeAt(end - 1);
    if (end > 0 && code >= 0xd800 && code <= 0xdbff) end -= 1; // keep a pair whole
    return `${text.slice(0, end)}…`;
  };
  const head = fit(`${reason}\nAgent: ${agentId}\nCommand: `, max - 1);
  return head + fit(String(command), max - head.length);
}

