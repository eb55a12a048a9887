import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";

import { DaemonClient, DaemonError } from "../lib/daemon.js";
import { SyncCaller } from "../lib/sync-call.js";
import { LeakScanner, MASK } from "../lib/leak.js";
import { startDaemon, stopByPidfile, tempDir, daemonCommand, SECRET, ADMIN_PASSWORD } from "./helpers.js";

let d;
before(async () => { d = await startDaemon(); });
after(async () => { await d?.stop(); });

test("call answers JSON and turns daemon errors into one-line DaemonErrors", async () => {
  const client = new DaemonClient(d.config);
  assert.equal((await client.call("GET", "/healthz")).ok, true);
  await assert.rejects(client.call("POST", "/exec", { command: "true" }),
    (err) => err instanceof DaemonError && err.status === 400 && !err.message.includes("\n"));
});

test("streaming exec relays redacted tails, then the final result", async () => {
  const client = new DaemonClient(d.config);
  const lines = [];
  const last = await client.stream("/exec", {
    command: 'echo "db=$(pass_mgr get db)"; sleep 0.6; echo done',
    agentId: "main", sessionKey: "agent:main:t", agentWorkspace: d.workspace, stream: true,
  }, (line) => lines.push(line));
  const result = last.result;
  assert.equal(result.details.status, "completed");
  assert.match(result.content[0].text, /db=######/);
  assert.ok(!JSON.stringify(lines).includes(SECRET));
  // Each update is OpenClaw's exec partial result (content + details with the tail).
  assert.ok(lines.some((l) => l.update && typeof l.update.details?.tail === "string"
    && Array.isArray(l.update.content)), "at least one tail update");
});

test("starts the daemon when absent, once, with the configured command", async () => {
  const home = path.join(tempDir("pc-autostart-"), "home");
  const client = new DaemonClient({ paddedcellHome: home, daemonCommand: daemonCommand() });
  try {
    const [a, b] = await Promise.all([client.call("GET", "/healthz"), client.call("GET", "/healthz")]);
    assert.equal(a.ok && b.ok, true);
    assert.ok(fs.existsSync(path.join(home, "daemon.log")));
  } finally {
    await stopByPidfile(home);
  }
});

test("a missing daemon command gives an actionable error", async () => {
  const home = path.join(tempDir("pc-nostart-"), "home");
  const client = new DaemonClient({ paddedcellHome: home, daemonCommand: ["/nonexistent/paddedcell", "serve"] });
  await assert.rejects(client.call("GET", "/healthz"), /daemonCommand/);
  const off = new DaemonClient({ paddedcellHome: home, autoStart: false });
  await assert.rejects(off.call("GET", "/healthz"), /paddedcell serve/);
});

test("after a failed start, calls fail at once instead of starting the daemon again", async () => {
  const home = tempDir("pc-plugin-nostart-");
  const starts = path.join(home, "starts");
  const client = new DaemonClient({
    paddedcellHome: home, startTimeoutMs: 300, daemonCommand: ["sh", "-c", `echo start >> '${starts}'`],
  });
  await assert.rejects(client.call("GET", "/healthz"), /did not start/);
  await assert.rejects(client.call("GET", "/healthz"), /did not start/);
  assert.equal(fs.readFileSync(starts, "utf8"), "start\n", "the daemon command ran once");
});

test("the blocking caller reaches the daemon and never throws", () => {
  const sync = new SyncCaller(d.socketPath);
  try {
    const reply = sync.call("POST", "/vault/check-leak", { text: "nothing here", source: "unit" });
    assert.deepEqual(reply, { status: 200, answer: { leak: false } });
    const gone = new SyncCaller(path.join(d.root, "no.sock")).call("GET", "/healthz", undefined, 500);
    assert.ok(gone.error);
  } finally {
    sync.close();
  }
});

test("leak scan: one call and one CRITICAL line per hit, the password masked exactly", async () => {
  const client = new DaemonClient(d.config);
  const log = path.join(d.home, "security.log");
  const criticals = () => (fs.existsSync(log) ? fs.readFileSync(log, "utf8").split("\n").filter((l) => l.includes("CRITICAL")) : []);
  const asked = [];
  const check = async (text, source) => { asked.push(source); return client.call("POST", "/vault/check-leak", { text, source }); };
  const sync = new SyncCaller(d.socketPath);
  const checkSync = (text, source) => { asked.push(source); return sync.call("POST", "/vault/check-leak", { text, source }).answer; };
  const scanner = new LeakScanner({ check, checkSync });
  try {
    assert.deepEqual(await scanner.scrub("hello world", "unit"), { leak: false, text: "hello world" });
    assert.equal(criticals().length, 0);

    // UTF-16 around the hits: the daemon's offsets are JavaScript string indices.
    const text = `😀 login «${ADMIN_PASSWORD}» é ${ADMIN_PASSWORD}${ADMIN_PASSWORD}\nplease`;
    const { leak, text: out } = await scanner.scrub(text, "unit:string");
    assert.equal(leak, true);
    assert.equal(out, `😀 login «${MASK}» é ${MASK}${MASK}\nplease`);
    assert.deepEqual(asked, ["unit", "unit:string"]);
    assert.equal(criticals().length, 1);
    const status = d.passMgr(["admin", "status"]);
    assert.match(status.stdout + status.stderr, /locked/);

    // A structured value: one call on its joined strings; the locked vault still answers where.
    const value = { role: "toolResult", content: [{ type: "text", text: "ok" }, { type: "text", text: `pw: ${ADMIN_PASSWORD} 😀` }] };
    const scrubbed = scanner.scrubValueSync(value, "unit:value");
    assert.deepEqual(scrubbed, { leak: true, value: { role: "toolResult", content: [{ type: "text", text: "ok" }, { type: "text", text: `pw: ${MASK} 😀` }] } });
    assert.equal(asked.length, 3);
    assert.equal(criticals().length, 2);

    // Remembered: the same text is masked again without another call or log line.
    assert.deepEqual(await scanner.scrub(text, "unit:string"), { leak: true, text: out });
    assert.equal(asked.length, 3);
    const lines = criticals();
    assert.equal(lines.length, 2);
    assert.ok(!lines.some((l) => l.includes(ADMIN_PASSWORD) || l.includes("login") || l.includes(":locate")));
  } finally {
    sync.close();
  }
});
