// Regenerates tests/test_execspec_openclaw_vectors.json from an installed OpenClaw.
//
//   OPENCLAW_DIST=$HOME/.cache/paddedcell-openclaw/g/lib/node_modules/openclaw/dist \
//     node tests/test_execspec_openclaw_vectors.mjs > tests/test_execspec_openclaw_vectors.json
//
// (Node >= 24 for OpenClaw 2026.9.6.) The vectors are OpenClaw's own answers:
// its real process tool (createProcessTool) driven over fake sessions in its
// real registry, its exec outcome/result builders and pty-keys encoder (their
// source text taken from dist/ and evaluated as is, since the bundle does not
// export them), and its host env guard. test_execspec_openclaw.py compares
// PaddedCell's builders with them field by field; no Node is needed there.

import fs from "node:fs";
import path from "node:path";

const DIST = process.env.OPENCLAW_DIST;
if (!DIST) throw new Error("set OPENCLAW_DIST to openclaw/dist");
const files = fs.readdirSync(DIST);
const find = (prefix) => {
  const hit = files.find((f) => f.startsWith(prefix) && f.endsWith(".mjs"));
  if (!hit) throw new Error(`no ${prefix}*.mjs in ${DIST}`);
  return path.join(DIST, hit);
};
// The tool bundle is the big bash-tools-*.mjs (the small one re-exports it).
const toolBundle = files
  .filter((f) => /^bash-tools-[^.]+\.mjs$/.test(f))
  .map((f) => path.join(DIST, f))
  .sort((a, b) => fs.statSync(b).size - fs.statSync(a).size)[0];
const runtimeFile = find("bash-tools.exec-runtime-");
const registryFile = files
  .filter((f) => f.startsWith("bash-process-registry-"))
  .map((f) => path.join(DIST, f))
  .find((f) => fs.readFileSync(f, "utf8").includes("function sliceLogLines"));

const FIXED_NOW = 1_800_000_000_000;
Date.now = () => FIXED_NOW;

const tools = await import(toolBundle);
const reg = await import(registryFile);
const out = await import(find("bash-tools.exec-output-"));
const envsec = await import(find("host-env-security-"));
const pkg = JSON.parse(fs.readFileSync(path.join(DIST, "..", "package.json"), "utf8"));

const toolSrc = fs.readFileSync(toolBundle, "utf8");
const runtimeSrc = fs.readFileSync(runtimeFile, "utf8");
const between = (src, start, end) => {
  const a = src.indexOf(start);
  const b = src.indexOf(end, a + start.length);
  if (a < 0 || b < 0) throw new Error(`cannot find ${start}`);
  return src.slice(a, b);
};
const exportsOf = (src, names) => new Function(
  "normalizeLowercaseStringOrEmpty", "appendExecTimeoutRetryGuidance", "renderExecOutputText",
  "EXEC_RETENTION_CAP_NOTE", "textResult", "failedTextResult", "Buffer",
  `${src}\nreturn { ${names.join(", ")} };`,
)(
  (v) => (typeof v === "string" ? v.trim().toLowerCase() : ""),
  out.r, out.a, out.n,
  (text, details) => ({ content: [{ type: "text", text }], details }),
  (text, details) => ({ content: [{ type: "text", text }], details }),
  Buffer,
);

const ptyKeys = exportsOf(
  between(toolSrc, "//#region src/agents/pty-keys.ts", "//#endregion"),
  ["encodeKeySequence", "encodePaste", "hasCursorModeSensitiveKeys"],
);
const outcome = exportsOf(
  between(runtimeSrc, "function joinExecFailureOutput", "/** Converts spawn/runtime errors"),
  ["buildExecExitOutcome", "formatExecFailureReason"],
);
const fg = exportsOf(
  between(toolSrc, "function buildExecForegroundResult", "function resolveExecReviewerDefaults"),
  ["buildExecForegroundResult"],
);

const vectors = { openclaw: pkg.version, now: FIXED_NOW };

// ---------------------------------------------------------------- pty keys
const keyCases = [
  { keys: ["Enter"] }, { keys: ["C-c"] }, { keys: ["^D"] }, { keys: ["^?"] }, { keys: ["C-?"] },
  { keys: ["Up", "Up", "Enter"] }, { keys: ["Up"], mode: "application" }, { keys: ["Home", "End"], mode: "application" },
  { keys: ["PageUp", "pgdn", "ppage", "npage"] }, { keys: ["S-Up"] }, { keys: ["C-Left"] }, { keys: ["M-Right"] },
  { keys: ["C-M-S-Delete"] }, { keys: ["S-Tab"] }, { keys: ["BTab"] }, { keys: ["M-x"] }, { keys: ["C-a", "M-b", "S-c"] },
  { keys: ["C-M-a"] }, { keys: ["F1", "F4", "F5", "F12"] }, { keys: ["kp7", "kpenter", "kp."] }, { keys: ["Escape", "Esc"] },
  { keys: ["Space", "Tab", "BSpace", "Backspace"] }, { keys: ["M-Enter"] }, { keys: ["C-Enter"] }, { keys: ["ls"] },
  { keys: ["C-foo"] }, { keys: ["  Enter  ", ""] }, { keys: ["x-y"] }, { keys: ["C-1"] }, { keys: ["é"] },
  { keys: ["Insert", "ic", "Del", "dc"] }, { keys: ["S-a"] }, { keys: ["C-["] }, { keys: ["C-Up"], mode: "application" },
  { hex: ["1b", "0x5b", "41"] }, { hex: ["zz", "100", "0x", "ff"] }, { hex: [" 0A "] },
  { literal: "hello" }, { literal: "héllo", hex: ["0d"], keys: ["Enter"] }, { literal: "" },
];
vectors.keys = keyCases.map((c) => {
  const { data, warnings } = ptyKeys.encodeKeySequence({ keys: c.keys, hex: c.hex, literal: c.literal }, c.mode);
  return { ...c, bytes: data.toString("hex"), warnings, sensitive: ptyKeys.hasCursorModeSensitiveKeys({ keys: c.keys }) };
});
vectors.paste = [["hi", true], ["hi", false], ["", true], ["", false], ["a\nb", true]].map(([text, bracketed]) => ({
  text, bracketed, bytes: Buffer.from(ptyKeys.encodePaste(text, bracketed)).toString("hex"),
}));

// Seeded random requests over the whole token space (a small LCG: reproducible).
let seed = 20261130;
const rand = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return Math.floor(seed / 65536) % n; };
const pick = (xs) => xs[rand(xs.length)];
const names = ["Enter", "Return", "Tab", "Escape", "Esc", "Space", "BSpace", "Backspace", "Up", "Down", "Left",
  "Right", "Home", "End", "PageUp", "PgUp", "PPage", "PageDown", "PgDn", "NPage", "Insert", "IC", "Delete", "Del",
  "DC", "BTab", "F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8", "F9", "F10", "F11", "F12", "KP/", "KP*", "KP-",
  "KP+", "KP0", "KP1", "KP5", "KP9", "KP.", "KPEnter", "a", "Z", "1", "?", "[", "\\", "]", "^", "_", "@", "é", "😀",
  "foo", "", " ", "-", "--", "C-", "x-y"];
const randomToken = () => {
  const r = rand(10);
  if (r === 0) return "^" + pick(["a", "Z", "?", "[", "1", "^", "é", ""]);
  const mods = ["", "C-", "M-", "S-", "c-", "m-", "s-", "C-M-", "M-S-", "C-S-", "C-M-S-", "X-"];
  return pick(mods) + pick(names);
};
vectors.keysRandom = [];
for (let i = 0; i < 600; i++) {
  const request = { keys: Array.from({ length: 1 + rand(4) }, randomToken) };
  if (rand(4) === 0) request.hex = Array.from({ length: 1 + rand(3) }, () => pick(["00", "1b", "0x7f", "FF", "g1", "0x", "123", " 9 "]));
  if (rand(5) === 0) request.literal = pick(["q", "ab\n", "ü", ""]);
  const mode = pick([undefined, "normal", "application"]);
  const { data, warnings } = ptyKeys.encodeKeySequence(request, mode);
  vectors.keysRandom.push({ ...request, mode: mode ?? null, bytes: data.toString("hex"), warnings });
}

// ---------------------------------------------------------------- helpers
const lines = (n, prefix = "line") => Array.from({ length: n }, (_, i) => `${prefix} ${i + 1}`).join("\n") + "\n";
vectors.sliceLogLines = [];
for (const text of ["", "a", "a\n", "a\nb\nc\n", "a\r\nb\r\nc", lines(250), "x\n\ny\n"]) {
  for (const [offset, limit] of [[undefined, undefined], [0, undefined], [1, undefined], [undefined, 2], [1, 1], [5, 3], [-3, 2], [2.7, 1.9], [0, 0]]) {
    const r = reg.A(text, offset, limit);
    vectors.sliceLogLines.push({ text, offset: offset ?? null, limit: limit ?? null, ...r });
  }
}
vectors.deriveSessionName = [
  "npm run build", "ls -la /tmp", "python3 -m http.server 8000", "'quoted cmd' arg", "echo \"a b\" c",
  "   ", "", "-x", "git -C repo status", "curl -s " + "https://example.com/".repeat(8),
].map((command) => ({ command, name: reg.D(command) ?? null }));
const fmt = await import(find("format-duration-"));
vectors.formatDurationCompact = [0, -5, 0.4, 1, 499.5, 999, 999.6, 1000, 1499, 1500, 59_999, 60_000, 125_000,
  3_599_999, 3_600_000, 5_400_000, 86_400_000, 90_061_000, 1e9].map((ms) => ({ ms, text: fmt.t(ms) ?? null }));

// ---------------------------------------------------------------- exec results
const exits = [
  { exitCode: 0, exitSignal: null, reason: "exit", aggregated: "hello\n" },
  { exitCode: 0, exitSignal: null, reason: "exit", aggregated: "" },
  { exitCode: 3, exitSignal: null, reason: "exit", aggregated: "bad\n" },
  { exitCode: 1, exitSignal: null, reason: "exit", aggregated: "" },
  { exitCode: 127, exitSignal: null, reason: "exit", aggregated: "bash: nope: command not found\n" },
  { exitCode: 126, exitSignal: null, reason: "exit", aggregated: "" },
  { exitCode: null, exitSignal: "SIGKILL", reason: "overall-timeout", timedOut: true, aggregated: "partial", timeoutSec: 5, cont: true },
  { exitCode: null, exitSignal: "SIGKILL", reason: "overall-timeout", timedOut: true, aggregated: "", timeoutSec: 5, cont: false },
  { exitCode: null, exitSignal: "SIGTERM", reason: "overall-timeout", timedOut: true, aggregated: "x", timeoutSec: 0.5, cont: true },
  { exitCode: null, exitSignal: "SIGTERM", reason: "signal", aggregated: "bye" },
  { exitCode: null, exitSignal: 9, reason: "signal", aggregated: "" },
  { exitCode: null, exitSignal: null, reason: "signal", aggregated: "" },
  { exitCode: 0, exitSignal: null, reason: "exit", aggregated: "tail only", dropped: true },
  { exitCode: 2, exitSignal: null, reason: "exit", aggregated: "warned", warningText: "Warning: one\nWarning: two" },
];
vectors.exec = exits.map((e) => {
  const o = outcome.buildExecExitOutcome({
    exit: { exitCode: e.exitCode, exitSignal: e.exitSignal, reason: e.reason, timedOut: e.timedOut ?? false, noOutputTimedOut: false },
    // runExecProcess hands buildExecExitOutcome ``session.aggregated.trim()``.
    durationMs: 1234, aggregated: e.aggregated.trim(), timeoutSec: e.timeoutSec, processContinuationAvailable: e.cont ?? false,
  });
  const result = fg.buildExecForegroundResult({ outcome: o, cwd: "/work", warningText: e.warningText, aggregateOutputDropped: e.dropped ?? false });
  return { input: { ...e, durationMs: 1234, cwd: "/work" }, result: JSON.parse(JSON.stringify(result)) };
});
// The real exec tool, running real commands (durations, pids and session ids vary).
const realNow = Date.now;
{
  const os = await import("node:os");
  const home = fs.mkdtempSync(path.join(os.tmpdir(), "oc-vectors-"));
  const workdir = fs.mkdtempSync(path.join(os.tmpdir(), "oc-work-"));
  process.env.HOME = home;
  process.env.OPENCLAW_STATE_DIR = path.join(home, ".openclaw");
  const execTool = tools.r({ host: "gateway", security: "full", ask: "off", cwd: workdir });
  const live = [
    { args: { command: "echo hi" }, raw: "hi\n" },
    { args: { command: "printf '\\n\\n  x  \\n\\n'" }, raw: "\n\n  x  \n\n" },
    { args: { command: "printf 'a\\nb'; exit 3" }, raw: "a\nb" },
    { args: { command: "exit 1" }, raw: "" },
    { args: { command: "true" }, raw: "" },
    { args: { command: "nosuchcmd_paddedcell_xyz" } },
    { args: { command: "sleep 5", timeoutSeconds: 1 }, raw: "" },
    { args: { command: "kill -TERM $$" }, raw: "" },
    { args: { command: "sleep 2; echo done", yieldMs: 10 } },
    { args: { command: "sleep 2", background: true } },
  ];
  vectors.execLive = [];
  for (const c of live) {
    const result = JSON.parse(JSON.stringify(await execTool.execute("call", c.args)));
    vectors.execLive.push({ ...c, cwd: workdir, result });
    if (result.details.status === "running") reg.o(result.details.sessionId);  // keep list clean
  }
  const errors = [
    { command: "echo", env: { LD_PRELOAD: "x" } }, { command: "echo", env: { PATH: "/x" } },
    { command: "echo", env: { PATH: "/x", LD_X: "1" } }, { command: "echo", host: "nope" },
    { command: "" }, { command: "echo", timeout: 3 },
  ];
  vectors.execErrors = [];
  for (const args of errors) {
    try {
      await execTool.execute("call", args);
      vectors.execErrors.push({ args, error: null });
    } catch (error) {
      vectors.execErrors.push({ args, error: String(error.message) });
    }
  }
  const missing = path.join(workdir, "missing");
  vectors.workdirMissing = { workdir: missing, result: JSON.parse(JSON.stringify(await execTool.execute("call", { command: "true", workdir: missing }))) };
}
Date.now = realNow;
Date.now = () => FIXED_NOW;
vectors.followUp = between(toolSrc, 'const BACKGROUND_EXEC_FOLLOW_UP = "', '";').slice('const BACKGROUND_EXEC_FOLLOW_UP = "'.length);
vectors.noOutputPlaceholder = out.t;

// ---------------------------------------------------------------- env guard
// Every name of OpenClaw's host env policy, as given and lower-cased, one at a time.
const policySrc = fs.readFileSync(find("host-env-security-"), "utf8");
const policy = new Function(`${between(policySrc, "var host_env_security_policy_default = ", "//#endregion")}; return host_env_security_policy_default;`)();
const everyName = new Set(["PATH", "TERM", "LANG", "FOO", "PAGER", "GIT_PAGER"]);
for (const list of Object.values(policy)) for (const name of list) {
  everyName.add(name); everyName.add(name.toLowerCase()); everyName.add(`${name}X`);
}
vectors.envEveryName = [...everyName].map((name) => {
  const r = envsec.t({ overrides: { [name]: "value" }, blockPathOverrides: true });
  return { name, blocked: r.rejectedOverrideBlockedKeys.length > 0, invalid: r.rejectedOverrideInvalidKeys.length > 0 };
});
vectors.env = [
  { PATH: "/x" }, { LD_PRELOAD: "x" }, { ld_library_path: "x" }, { DYLD_INSERT_LIBRARIES: "x" },
  { NODE_OPTIONS: "--require x" }, { PYTHONPATH: "x" }, { BASH_ENV: "x" }, { BASH_FUNC_x: "x" },
  { HOME: "/tmp" }, { GIT_CONFIG_GLOBAL: "x" }, { CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER: "x" },
  { PAGER: "cat" }, { PAGER: "" }, { PAGER: "less" }, { GIT_PAGER: "cat" }, { FOO: "1", BAR: "2" },
  { "BAD-KEY": "1" }, { " ": "1" }, { "A()": "1" }, { PATH: "/x", LD_PRELOAD: "y" }, { LD_PRELOAD: "y", NODE_OPTIONS: "z" },
  { PATH: "/x", "BAD KEY": "1" }, { GITHUB_TOKEN: "x" }, { TERM: "xterm" }, { LANG: "C" }, { SHELL: "/bin/sh" },
].map((env) => {
  const r = envsec.t({ overrides: env, blockPathOverrides: true });
  const blocked = r.rejectedOverrideBlockedKeys, invalid = r.rejectedOverrideInvalidKeys;
  // The message logic of bash-tools.exec-request-preparation.ts, verbatim:
  let error = null;
  if (blocked.length > 0 || invalid.length > 0) {
    const pathBlocked = blocked.includes("PATH");
    if (pathBlocked && blocked.length === 1 && invalid.length === 0) error = "Security Violation: Custom 'PATH' variable is forbidden during host execution.";
    else if (blocked.length === 1 && invalid.length === 0) error = `Security Violation: Environment variable '${blocked[0]}' is forbidden during host execution.`;
    else {
      const details = [];
      if (blocked.length > 0) details.push(`blocked override keys: ${blocked.join(", ")}`);
      if (invalid.length > 0) details.push(`invalid non-portable override keys: ${invalid.join(", ")}`);
      const suffix = details.join("; ");
      error = pathBlocked ? `Security Violation: Custom 'PATH' variable is forbidden during host execution (${suffix}).` : `Security Violation: ${suffix}.`;
    }
  }
  return { env, blocked, invalid, error };
});

// ---------------------------------------------------------------- process tool
const processTool = tools.t({});
const run = async (args) => JSON.parse(JSON.stringify(await processTool.execute("call", args)));
class FakeStdin {
  constructor() { this.destroyed = false; this.writable = true; this.chunks = []; }
  write(data, cb) { this.chunks.push(Buffer.from(data)); cb?.(); return true; }
  end() { this.writable = false; this.writableEnded = true; }
}
let counter = 0;
function makeSession(spec) {
  const id = spec.id ?? `sess-${++counter}`;
  const stdin = new FakeStdin();
  const s = {
    id, command: spec.command, scopeKey: undefined, sessionKey: undefined, cleanupMs: 1_800_000,
    startedAt: spec.startedAt, cwd: spec.cwd, pid: spec.pid, maxOutputChars: spec.maxOutputChars ?? 200_000,
    pendingMaxOutputChars: 30_000, totalOutputChars: 0, pendingOutput: [], pendingStdoutChars: 0,
    pendingStderrChars: 0, pendingOutputDropped: false, aggregated: "", tail: "", exited: false,
    truncated: false, backgrounded: false, stdin: spec.stdinWritable === false ? undefined : stdin,
    processActivity: { lastOutputAtMs: spec.lastOutputAt ?? spec.startedAt, resultSettled: false },
    cursorKeyMode: spec.cursorKeyMode ?? "normal", notifyOnExit: false,
  };
  reg.n(s);
  reg.g(s);
  for (const chunk of spec.outputs ?? []) reg.r(s, "stdout", chunk);
  // As the exec runtime ends every session: markExited with its noOutputTimedOut, always a
  // boolean there (left out, the vectors lacked a key native poll/log/list details carry).
  if (spec.exit) reg._(s, spec.exit.exitCode, spec.exit.exitSignal, spec.exit.status, spec.exit.reason,
    spec.exit.noOutputTimedOut ?? false);
  return { s, stdin };
}

const scenarios = [];
async function scenario(name, spec, actions) {
  const { s, stdin } = makeSession(spec);
  const results = [];
  for (const args of actions) {
    const before = stdin.chunks.length;
    const result = await run({ sessionId: s.id, ...args });
    results.push({ args, result, written: Buffer.concat(stdin.chunks.slice(before)).toString("hex") });
  }
  scenarios.push({ name, spec: { ...spec, id: s.id }, results });
  reg.o(s.id);
}
const base = { command: "npm run dev", cwd: "/work/app", pid: 4242, startedAt: FIXED_NOW - 65_000 };
await scenario("running-fresh-output", { ...base, outputs: ["ready on :3000\n", "compiled\n"], lastOutputAt: FIXED_NOW - 2_000 }, [
  { action: "poll" }, { action: "poll" }, { action: "log" }, { action: "log", offset: 1 }, { action: "log", limit: 1 },
  { action: "write", data: "héllo\n" }, { action: "write", data: "bye", eof: true }, { action: "poll" },
]);
await scenario("running-input-wait", { ...base, command: "python3 -i", outputs: [">>> "], lastOutputAt: FIXED_NOW - 20_000 }, [
  { action: "poll" }, { action: "poll" }, { action: "log" }, { action: "submit" }, { action: "paste", text: "print(1)\n" },
  { action: "paste", text: "😀x", bracketed: false }, { action: "paste", text: "", bracketed: false },
  { action: "send-keys", keys: ["C-c"] }, { action: "send-keys", keys: ["Up"], hex: ["zz"], literal: "ab" },
  { action: "send-keys", keys: [] }, { action: "kill" },
]);
await scenario("running-no-output", { ...base, command: "sleep 100", outputs: [], lastOutputAt: FIXED_NOW - 1_000 }, [
  { action: "poll" }, { action: "log" }, { action: "clear" },
]);
await scenario("running-stdin-closed", { ...base, command: "cat", stdinWritable: false, outputs: ["x\n"] }, [
  { action: "write", data: "x" }, { action: "submit" }, { action: "poll" },
]);
await scenario("running-cursor-unknown", { ...base, command: "vim", cursorKeyMode: "unknown" }, [
  { action: "send-keys", keys: ["Up"] }, { action: "send-keys", keys: ["C-Up", "x"] },
]);
await scenario("running-remove", { ...base, command: "tail -f log" }, [{ action: "remove" }, { action: "poll" }]);
await scenario("finished-ok", { ...base, outputs: lines(250, "row"), exit: { exitCode: 0, exitSignal: null, status: "completed", reason: "exit" } }, [
  { action: "poll" }, { action: "poll" }, { action: "log" }, { action: "log", offset: 10, limit: 3 }, { action: "log", offset: 248 },
  { action: "log", limit: 0 }, { action: "write", data: "x" }, { action: "kill" },
]);
await scenario("finished-code", { ...base, command: "make test", outputs: ["FAIL\n"], exit: { exitCode: 2, exitSignal: null, status: "completed", reason: "exit" } }, [
  { action: "poll" }, { action: "log" },
]);
await scenario("finished-signal", { ...base, command: "yes", outputs: ["y\ny\n"], exit: { exitCode: null, exitSignal: "SIGTERM", status: "failed", reason: "signal" } }, [
  { action: "poll" }, { action: "log" },
]);
await scenario("finished-timeout", { ...base, command: "sleep 9999", outputs: [], exit: { exitCode: null, exitSignal: "SIGKILL", status: "failed", reason: "overall-timeout" } }, [
  { action: "poll" }, { action: "log" },
]);
await scenario("finished-clear", { ...base, outputs: ["done\n"], exit: { exitCode: 0, exitSignal: null, status: "completed", reason: "exit" } }, [
  { action: "clear" }, { action: "poll" },
]);
await scenario("finished-remove", { ...base, outputs: ["done\n"], exit: { exitCode: 0, exitSignal: null, status: "completed", reason: "exit" } }, [
  { action: "remove" }, { action: "remove" },
]);
await scenario("retention-cap", { ...base, maxOutputChars: 1000, outputs: ["a".repeat(600), "b".repeat(600)] }, [
  { action: "log", limit: 1 }, { action: "poll" },
]);
vectors.process = scenarios;

// list: several sessions at once (newest first), running and finished.
const listed = [
  makeSession({ ...base, id: "list-a", startedAt: FIXED_NOW - 5_000, outputs: ["a\n"], lastOutputAt: FIXED_NOW - 1_000 }),
  makeSession({ ...base, id: "list-b", command: "python3 -i", startedAt: FIXED_NOW - 40_000, outputs: [">>> "], lastOutputAt: FIXED_NOW - 30_000 }),
  makeSession({ ...base, id: "list-c", command: "make", startedAt: FIXED_NOW - 100_000, outputs: ["ok\n"], exit: { exitCode: 0, exitSignal: null, status: "completed", reason: "exit" } }),
  makeSession({ ...base, id: "list-d", command: "sleep 9", startedAt: FIXED_NOW - 3_700_000, exit: { exitCode: null, exitSignal: "SIGKILL", status: "failed", reason: "overall-timeout" } }),
];
listed[2].s.endedAt = FIXED_NOW - 90_000;
listed[3].s.endedAt = FIXED_NOW - 100_000;
vectors.list = {
  specs: [
    { id: "list-a", startedAt: FIXED_NOW - 5_000, outputs: ["a\n"], lastOutputAt: FIXED_NOW - 1_000 },
    { id: "list-b", command: "python3 -i", startedAt: FIXED_NOW - 40_000, outputs: [">>> "], lastOutputAt: FIXED_NOW - 30_000 },
    { id: "list-c", command: "make", startedAt: FIXED_NOW - 100_000, endedAt: FIXED_NOW - 90_000, outputs: ["ok\n"], exit: { exitCode: 0, exitSignal: null, status: "completed", reason: "exit" } },
    { id: "list-d", command: "sleep 9", startedAt: FIXED_NOW - 3_700_000, endedAt: FIXED_NOW - 100_000, exit: { exitCode: null, exitSignal: "SIGKILL", status: "failed", reason: "overall-timeout" } },
  ].map((s) => ({ ...base, ...s })),
  result: await run({ action: "list" }),
};
for (const { s } of listed) reg.o(s.id);
vectors.listEmpty = await run({ action: "list" });
vectors.errors = {
  invalidAction: await run({ action: "frobnicate" }),
  missingSession: await run({ action: "poll" }),
  notFoundPoll: await run({ action: "poll", sessionId: "nope" }),
  notFoundLog: await run({ action: "log", sessionId: "nope" }),
  notFoundWrite: await run({ action: "write", sessionId: "nope", data: "x" }),
  notFoundKill: await run({ action: "kill", sessionId: "nope" }),
  notFoundClear: await run({ action: "clear", sessionId: "nope" }),
  notFoundRemove: await run({ action: "remove", sessionId: "nope" }),
};

process.stdout.write(JSON.stringify(vectors, null, 1) + "\n");
