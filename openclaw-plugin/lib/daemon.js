// The PaddedCell daemon client: HTTP/1.1 + JSON over the daemon's Unix socket
// (docs/design.md §4.4), and starting the daemon when it is absent.
//
// Plain node:http with `socketPath`: no dependency, and the same transport the
// Python CLIs use. Every call has a deadline; streaming calls (`/exec` with
// `"stream": true`) hand each NDJSON line to a callback as it arrives.

import http from "node:http";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { spawn } from "node:child_process";

export class DaemonError extends Error {
  /** One line for the agent; `status` is the HTTP status, or null when unreachable. */
  constructor(message, status = null) {
    super(message);
    this.name = "DaemonError";
    this.status = status;
  }
}

/** Variables that would give the shared daemon one agent's identity. */
const AGENT_ENV = ["AGENT", "AGENT_ID", "AGENT_WORKSPACE", "PADDEDCELL_AGENT", "OPENCLAW_SHELL"];

export function paddedcellHome(config = {}, env = process.env) {
  if (config.paddedcellHome) return expandHome(config.paddedcellHome);
  if (env.PADDEDCELL_HOME) return expandHome(env.PADDEDCELL_HOME);
  return path.join(os.homedir(), ".paddedcell");
}

export function socketPathFor(config = {}, env = process.env) {
  if (config.socketPath) return expandHome(config.socketPath);
  return path.join(paddedcellHome(config, env), "run", "paddedcell.sock");
}

function expandHome(p) {
  return p === "~" || p.startsWith("~/") ? path.join(os.homedir(), p.slice(1)) : p;
}

/** `["paddedcell", "serve"]` from a string or array setting. */
export function daemonCommand(config = {}) {
  const raw = config.daemonCommand ?? ["paddedcell", "serve"];
  const argv = Array.isArray(raw) ? raw.map(String) : String(raw).trim().split(/\s+/);
  if (argv.length === 0 || !argv[0]) throw new DaemonError("plugins.entries.paddedcell.config.daemonCommand is empty; set it to e.g. [\"paddedcell\", \"serve\"]");
  return argv;
}

/** One raw request; resolves `{status, body}` (body text) or, with onLine, streams lines. */
function rawRequest(socketPath, method, urlPath, body, { timeoutMs = 60_000, signal, onLine } = {}) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? null : Buffer.from(JSON.stringify(body), "utf8");
    const headers = { accept: "application/json" };
    if (payload) {
      headers["content-type"] = "application/json";
      headers["content-length"] = String(payload.length);
    }
    const req = http.request({ socketPath, method, path: urlPath, headers, agent: false });
    let settled = false;
    const finish = (fn, value) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      fn(value);
    };
    const timer = timeoutMs > 0 ? setTimeout(() => {
      req.destroy();
      finish(reject, new DaemonError(`the paddedcell daemon did not answer ${method} ${urlPath} within ${Math.round(timeoutMs / 1000)} s`));
    }, timeoutMs) : null;
    const onAbort = () => {
      req.destroy();
      finish(reject, Object.assign(new Error("aborted"), { name: "AbortError" }));
    };
    if (signal) {
      if (signal.aborted) return onAbort();
      signal.addEventListener("abort", onAbort, { once: true });
    }
    req.on("error", (err) => finish(reject, err));
    req.on("response", (res) => {
      const chunks = [];
      let pending = "";
      const streaming = onLine && res.statusCode < 400 && /ndjson/.test(res.headers["content-type"] || "");
      res.setEncoding("utf8");
      res.on("data", (chunk) => {
        if (!streaming) return chunks.push(chunk);
        pending += chunk;
        let nl;
        while ((nl = pending.indexOf("\n")) >= 0) {
          const line = pending.slice(0, nl).trim();
          pending = pending.slice(nl + 1);
          if (line) {
            try { onLine(JSON.parse(line)); } catch (err) { req.destroy(); return finish(reject, err); }
          }
        }
      });
      res.on("end", () => {
        if (streaming && pending.trim()) {
          try { onLine(JSON.parse(pending.trim())); } catch (err) { return finish(reject, err); }
        }
        finish(resolve, { status: res.statusCode, body: chunks.join(""), streamed: Boolean(streaming) });
      });
      res.on("error", (err) => finish(reject, err));
    });
    if (payload) req.write(payload);
    req.end();
  });
}

function parseAnswer(method, urlPath, { status, body }) {
  let answer = {};
  if (body) {
    try {
      answer = JSON.parse(body);
    } catch {
      throw new DaemonError(`the paddedcell daemon sent a non-JSON answer to ${method} ${urlPath} (HTTP ${status})`, status);
    }
  }
  if (status >= 400) {
    const message = answer && typeof answer.error === "string" ? answer.error : `HTTP ${status} from ${method} ${urlPath}`;
    throw new DaemonError(message, status);
  }
  return answer;
}

const UNREACHABLE = new Set(["ENOENT", "ECONNREFUSED", "ECONNRESET", "EPIPE"]);

/**
 * After a failed start, calls fail at once with that error for this long instead of
 * each waiting startTimeoutMs for another start (every message and tool call asks).
 */
const START_RETRY_MS = 30_000;

export class DaemonClient {
  /**
   * @param {object} config plugin config: socketPath, paddedcellHome, daemonCommand,
   *   autoStart (default true), startTimeoutMs, requestTimeoutMs
   * @param {object} [logger] `{info, warn}`
   */
  constructor(config = {}, logger = console, env = process.env) {
    this.config = config;
    this.logger = logger;
    this.env = env;
    this.socketPath = socketPathFor(config, env);
    this.home = paddedcellHome(config, env);
    this.requestTimeoutMs = config.requestTimeoutMs ?? 60_000;
    this.startTimeoutMs = config.startTimeoutMs ?? 15_000;
    this.autoStart = config.autoStart !== false;
    this._starting = null;
    this._failedStart = null; // {at, error} of the last failed start
  }

  /** JSON call; starts the daemon once when it is not reachable. */
  async call(method, urlPath, body, opts = {}) {
    const timeoutMs = opts.timeoutMs ?? this.requestTimeoutMs;
    return this._withStart(async () =>
      parseAnswer(method, urlPath, await rawRequest(this.socketPath, method, urlPath, body, { ...opts, timeoutMs })));
  }

  /**
   * Streaming call: `onLine(obj)` for each NDJSON line. Resolves the last line's
   * value when the daemon streamed, or the plain JSON answer when it did not.
   */
  async stream(urlPath, body, onLine, opts = {}) {
    const timeoutMs = opts.timeoutMs ?? 0;
    return this._withStart(async () => {
      let last;
      const res = await rawRequest(this.socketPath, "POST", urlPath, body, {
        ...opts, timeoutMs, onLine: (obj) => { last = obj; onLine(obj); },
      });
      if (!res.streamed) return parseAnswer("POST", urlPath, res);
      return last;
    });
  }

  async healthy() {
    try {
      const answer = parseAnswer("GET", "/healthz", await rawRequest(this.socketPath, "GET", "/healthz", undefined, { timeoutMs: 2000 }));
      return answer.ok === true;
    } catch {
      return false;
    }
  }

  async _withStart(fn) {
    try {
      return await fn();
    } catch (err) {
      if (!(err && UNREACHABLE.has(err.code))) {
        if (err instanceof DaemonError || err?.name === "AbortError") throw err;
        throw new DaemonError(`cannot reach the paddedcell daemon at ${this.socketPath}: ${err?.message ?? err}`);
      }
      if (!this.autoStart) {
        throw new DaemonError(`the paddedcell daemon is not running (no ${this.socketPath}); start it with: paddedcell serve`);
      }
      await this.ensureRunning();
      try {
        return await fn();
      } catch (again) {
        if (again instanceof DaemonError || again?.name === "AbortError") throw again;
        throw new DaemonError(`cannot reach the paddedcell daemon at ${this.socketPath}: ${again?.message ?? again}`);
      }
    }
  }

  /** Start the daemon detached when /healthz does not answer; one start at a time. */
  async ensureRunning() {
    if (await this.healthy()) return;
    const failed = this._failedStart;
    if (failed && Date.now() - failed.at < START_RETRY_MS) throw failed.error;
    if (!this._starting) {
      this._starting = this._start().then(
        () => { this._failedStart = null; },
        (error) => { this._failedStart = { at: Date.now(), error }; throw error; },
      ).finally(() => { this._starting = null; });
    }
    return this._starting;
  }

  async _start() {
    const argv = daemonCommand(this.config);
    fs.mkdirSync(this.home, { recursive: true, mode: 0o700 });
    const logPath = path.join(this.home, "daemon.log");
    const logFd = fs.openSync(logPath, "a", 0o600);
    const env = { ...this.env, PADDEDCELL_HOME: this.home };
    for (const name of AGENT_ENV) delete env[name];
    this.logger?.info?.(`paddedcell: starting the daemon: ${argv.join(" ")} (log ${logPath})`);
    await new Promise((resolve, reject) => {
      const child = spawn(argv[0], argv.slice(1), { detached: true, stdio: ["ignore", logFd, logFd], env });
      child.once("error", (err) => reject(new DaemonError(
        `cannot start the paddedcell daemon (${argv.join(" ")}): ${err.code === "ENOENT" ? "command not found; install paddedcell or set plugins.entries.paddedcell.config.daemonCommand" : err.message}`)));
      child.once("spawn", () => { child.unref(); resolve(); });
    }).finally(() => fs.closeSync(logFd));
    const deadline = Date.now() + this.startTimeoutMs;
    while (Date.now() < deadline) {
      if (await this.healthy()) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new DaemonError(`the paddedcell daemon did not start within ${Math.round(this.startTimeoutMs / 1000)} s; see ${logPath}`);
  }
}
