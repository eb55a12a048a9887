// A blocking daemon call for OpenClaw's synchronous hooks.
//
// `tool_result_persist` and `before_message_write` must return their rewrite
// synchronously (a returned promise is ignored), yet the leak check lives in the
// daemon. A worker thread makes the HTTP request while the gateway thread waits
// on an Atomics flag; the round trip over the Unix socket is about a
// millisecond, and the wait is bounded. Options weighed: spawnSync of a client
// process (tens of ms per message), or skipping those hooks (the transcript
// would keep a leaked admin password). So we block briefly on a worker.

import { Worker, MessageChannel, receiveMessageOnPort } from "node:worker_threads";

const WORKER_SOURCE = `
const { parentPort } = require("node:worker_threads");
const http = require("node:http");
parentPort.on("message", ({ flag, port, socketPath, method, path, body, timeoutMs }) => {
  const done = (answer) => {
    port.postMessage(answer);
    port.close();
    Atomics.store(flag, 0, 1);
    Atomics.notify(flag, 0);
  };
  const payload = body === undefined ? null : Buffer.from(JSON.stringify(body));
  const headers = payload ? { "content-type": "application/json", "content-length": String(payload.length) } : {};
  const req = http.request({ socketPath, method, path, headers, agent: false, timeout: timeoutMs });
  req.on("timeout", () => req.destroy(new Error("timed out")));
  req.on("error", (err) => done({ error: err.message, code: err.code || null }));
  req.on("response", (res) => {
    const chunks = [];
    res.on("data", (c) => chunks.push(c));
    res.on("end", () => done({ status: res.statusCode, body: Buffer.concat(chunks).toString("utf8") }));
    res.on("error", (err) => done({ error: err.message, code: null }));
  });
  if (payload) req.write(payload);
  req.end();
});
`;

export class SyncCaller {
  constructor(socketPath) {
    this.socketPath = socketPath;
    this.worker = null;
  }

  _ensureWorker() {
    if (this.worker) return this.worker;
    this.worker = new Worker(WORKER_SOURCE, { eval: true });
    this.worker.unref();
    this.worker.on("error", () => { this.worker = null; });
    this.worker.on("exit", () => { this.worker = null; });
    return this.worker;
  }

  /**
   * `{status, answer}` on an HTTP answer, or `{error}` when the daemon could
   * not be reached in time. Never throws.
   */
  call(method, path, body, timeoutMs = 2000) {
    const flag = new Int32Array(new SharedArrayBuffer(4));
    const { port1, port2 } = new MessageChannel();
    try {
      this._ensureWorker().postMessage(
        { flag, port: port2, socketPath: this.socketPath, method, path, body, timeoutMs }, [port2]);
      const waited = Atomics.wait(flag, 0, 0, timeoutMs + 1000);
      const reply = receiveMessageOnPort(port1)?.message;
      if (waited === "timed-out" || !reply) return { error: `no answer within ${timeoutMs} ms` };
      if (reply.error) return { error: reply.error, code: reply.code };
      let answer = {};
      try { answer = reply.body ? JSON.parse(reply.body) : {}; } catch { return { error: "non-JSON answer" }; }
      return { status: reply.status, answer };
    } finally {
      port1.close();
    }
  }

  close() {
    this.worker?.terminate();
    this.worker = null;
  }
}
