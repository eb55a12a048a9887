// A real paddedcell daemon for the plugin's unit tests: the repository's
// .venv, a temporary PADDEDCELL_HOME, an initialised vault, stopped by PID.

import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
export const VENV_BIN = path.join(REPO, ".venv", "bin");
export const PYTHON = path.join(VENV_BIN, "python");
export const ADMIN_PASSWORD = "unit-Adm1n-pw-7Hq2";
export const SECRET = "unit-s3cret-Zk4Vw8";

const AGENT_VARS = ["AGENT", "AGENT_ID", "AGENT_WORKSPACE", "PADDEDCELL_AGENT", "OPENCLAW_SHELL"];

export function daemonEnv(home, extra = {}) {
  const env = { ...process.env, PADDEDCELL_HOME: home, PATH: `${VENV_BIN}:${process.env.PATH}`, ...extra };
  for (const name of AGENT_VARS) delete env[name];
  return env;
}

export function tempDir(prefix) {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

export function daemonCommand() {
  if (!fs.existsSync(PYTHON)) throw new Error(`no ${PYTHON}; run make venv first`);
  return [PYTHON, "-m", "paddedcell.cli.main", "serve"];
}

async function waitFor(predicate, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await predicate()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Start a daemon with a vault holding `db` for agent `main` in `workspace`. */
export async function startDaemon({ extraEnv = {}, secrets = { db: SECRET } } = {}) {
  const root = tempDir("pc-plugin-test-");
  const home = path.join(root, "home");
  const workspace = path.join(root, "workspace");
  fs.mkdirSync(home, { mode: 0o700 });
  fs.mkdirSync(workspace);
  const env = daemonEnv(home, extraEnv);
  const [cmd, ...args] = daemonCommand();
  const log = fs.openSync(path.join(home, "daemon.log"), "a");
  const child = spawn(cmd, args, { env, stdio: ["ignore", log, log], detached: true });
  fs.closeSync(log);
  const socketPath = path.join(home, "run", "paddedcell.sock");
  await waitFor(() => fs.existsSync(socketPath) || child.exitCode !== null, 20_000, "the daemon socket");
  if (child.exitCode !== null) throw new Error(fs.readFileSync(path.join(home, "daemon.log"), "utf8"));
  const passMgr = (argv, input) => spawnSync(path.join(VENV_BIN, "pass_mgr"), argv, { env, input, encoding: "utf8" });
  const init = passMgr(["admin", "init", "--password-stdin"], `${ADMIN_PASSWORD}\n`);
  if (init.status !== 0) throw new Error(`pass_mgr admin init: ${init.stderr}`);
  for (const [key, value] of Object.entries(secrets)) {
    const put = passMgr(["set", "main", workspace, key, value, ADMIN_PASSWORD]);
    if (put.status !== 0) throw new Error(`pass_mgr set: ${put.stderr}`);
  }
  return {
    root, home, workspace, socketPath, env, passMgr,
    config: { paddedcellHome: home, daemonCommand: daemonCommand(), restartPollSeconds: 0.2, notificationsWaitSeconds: 1 },
    async stop() {
      if (child.exitCode === null) {
        child.kill("SIGTERM");
        await new Promise((r) => { const t = setTimeout(r, 10_000); child.once("exit", () => { clearTimeout(t); r(); }); });
      }
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
}

/** Stop a daemon that the plugin started itself, by the PID in its pidfile. */
export async function stopByPidfile(home) {
  const pidFile = path.join(home, "run", "paddedcell.pid");
  const pid = Number(fs.readFileSync(pidFile, "utf8").trim());
  if (!pid) return;
  process.kill(pid, "SIGTERM");
  await waitFor(() => { try { process.kill(pid, 0); return false; } catch { return true; } }, 10_000, `pid ${pid} to exit`);
}

/** A stand-in for OpenClaw's plugin api that records registrations. */
export function fakeApi(pluginConfig, openclawConfig = { tools: { exec: { mode: "full" } } }) {
  const tools = new Map();
  const hooks = new Map();
  const warnings = [];
  return {
    id: "paddedcell",
    pluginConfig,
    config: openclawConfig,
    logger: { info() {}, debug() {}, warn: (m) => warnings.push(String(m)), error: (m) => warnings.push(String(m)) },
    runtime: { config: { current: () => openclawConfig } },
    registerTool(factory, opts) {
      tools.set(opts?.name ?? factory.name, factory);
    },
    on(name, handler, opts) {
      if (!hooks.has(name)) hooks.set(name, []);
      hooks.get(name).push({ handler, opts });
    },
    tools, hooks, warnings,
    tool(name, ctx) { return tools.get(name)(ctx); },
    hook(name) { return hooks.get(name)?.[0]?.handler; },
  };
}
