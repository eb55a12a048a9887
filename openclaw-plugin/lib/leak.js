// Admin-password leak scan through the daemon (`POST /vault/check-leak`);
// `leakScannerFor` builds the one scanner per daemon that the hooks and tools share.
//
// The plugin never knows the admin password. One call per text: on a hit the daemon
// locks the vault, logs one CRITICAL line, and answers where the password is —
// `redacted` (the text with each hit run replaced by ######) and `spans` (the same
// runs as [start, end) UTF-16 offsets, i.e. JavaScript string indices). A string is
// replaced by `redacted`; a structured value is scanned as its content strings
// joined by "\n", and `spans` says which part of which string to mask (a run across
// two strings masks its part of each). When the answer lacks them (an older daemon),
// the whole text, or every content string, becomes the mask. Hits are remembered by
// hash so a later hook that sees the same text (for example the transcript write of
// a user message already flagged at run start) masks it without asking again.

import crypto from "node:crypto";

export const MASK = "######";
const MAX_REMEMBERED = 512;

function digest(text) {
  return crypto.createHash("sha256").update(text, "utf8").digest("hex");
}

/** The answer's spans when they are sorted, disjoint runs inside `text`; otherwise null. */
function validSpans(spans, length) {
  if (!Array.isArray(spans) || spans.length === 0) return null;
  let last = 0;
  for (const span of spans) {
    if (!Array.isArray(span) || span.length !== 2) return null;
    const [start, end] = span;
    if (!Number.isInteger(start) || !Number.isInteger(end) || start < last || end <= start || end > length) return null;
    last = end;
  }
  return spans;
}

/** `text` with each run of `spans` (sorted, disjoint) replaced by the mask. */
function maskSpans(text, spans) {
  let out = "";
  let pos = 0;
  for (const [start, end] of spans) {
    out += text.slice(pos, start) + MASK;
    pos = end;
  }
  return out + text.slice(pos);
}

/**
 * Each of `strings` masked where a span of their "\n"-join falls on it; `null`
 * spans mask every non-empty string whole.
 */
function maskJoined(strings, spans) {
  if (!spans) return strings.map((s) => (s.length ? MASK : s));
  let offset = 0;
  return strings.map((s) => {
    const from = offset;
    const to = offset + s.length;
    offset = to + 1; // the "\n" between strings
    const local = [];
    for (const [start, end] of spans) {
      const a = Math.max(start, from);
      const b = Math.min(end, to);
      if (a < b) local.push([a - from, b - from]);
    }
    return local.length ? maskSpans(s, local) : s;
  });
}

export class LeakScanner {
  /**
   * @param {object} opts
   * @param {(text: string, source: string) => Promise<object|boolean|null>} opts.check async
   *   daemon check: its answer `{leak, redacted?, spans?}`, or null when it could not ask
   * @param {(text: string, source: string) => object|boolean|null} [opts.checkSync] blocking check
   * @param {number} [opts.minLength] texts shorter than this are not sent
   */
  constructor({ check, checkSync, minLength = 4 }) {
    this.check = check;
    this.checkSync = checkSync;
    this.minLength = minLength;
    this.hits = new Map(); // sha256(text) -> { masked, spans }
  }

  /** Turn the daemon's answer about `text` into a remembered hit, or null for a miss. */
  _hit(text, answer) {
    if (answer !== true && answer?.leak !== true) return null;
    const spans = validSpans(answer?.spans, text.length);
    const masked = typeof answer?.redacted === "string" ? answer.redacted : MASK;
    const hit = { masked, spans };
    this.hits.set(digest(text), hit);
    if (this.hits.size > MAX_REMEMBERED) this.hits.delete(this.hits.keys().next().value);
    return hit;
  }

  _known(text) {
    return this.hits.get(digest(text));
  }

  /** `{leak, text}`: the text with every hit replaced by the mask. */
  async scrub(text, source) {
    if (typeof text !== "string" || text.length < this.minLength) return { leak: false, text };
    const hit = this._known(text) ?? this._hit(text, await this.check(text, source));
    return hit ? { leak: true, text: hit.masked } : { leak: false, text };
  }

  /** Same as scrub, blocking (for the synchronous transcript hooks). */
  scrubSync(text, source) {
    if (typeof text !== "string" || text.length < this.minLength || !this.checkSync) return { leak: false, text };
    const hit = this._known(text) ?? this._hit(text, this.checkSync(text, source));
    return hit ? { leak: true, text: hit.masked } : { leak: false, text };
  }

  /** Scrub every content string inside a JSON-like value, in one call; `{leak, value}` (a copy when changed). */
  async scrubValue(value, source) {
    const strings = collectStrings(value);
    const joined = strings.join("\n");
    if (joined.length < this.minLength) return { leak: false, value };
    const hit = this._known(joined) ?? this._hit(joined, await this.check(joined, source));
    return hit ? { leak: true, value: replaceStrings(value, maskJoined(strings, hit.spans)) } : { leak: false, value };
  }

  scrubValueSync(value, source) {
    const strings = collectStrings(value);
    const joined = strings.join("\n");
    if (joined.length < this.minLength || !this.checkSync) return { leak: false, value };
    const hit = this._known(joined) ?? this._hit(joined, this.checkSync(joined, source));
    return hit ? { leak: true, value: replaceStrings(value, maskJoined(strings, hit.spans)) } : { leak: false, value };
  }
}

/** Keys that hold message structure, not content: never scanned, never masked. */
const STRUCTURAL = new Set(["type", "role", "id", "toolCallId", "toolName", "status", "api", "provider", "model"]);

export function collectStrings(value, out = [], depth = 0) {
  if (depth > 20) return out;
  if (typeof value === "string") out.push(value);
  else if (Array.isArray(value)) for (const v of value) collectStrings(v, out, depth + 1);
  else if (value && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) if (!STRUCTURAL.has(k)) collectStrings(v, out, depth + 1);
  }
  return out;
}

/** A copy of `value` with its content strings, in collectStrings order, replaced by `strings`. */
function replaceStrings(value, strings) {
  let next = 0;
  const walk = (v, depth) => {
    if (depth > 20) return v;
    if (typeof v === "string") return strings[next++];
    if (Array.isArray(v)) return v.map((item) => walk(item, depth + 1));
    if (v && typeof v === "object") {
      const out = {};
      for (const [k, item] of Object.entries(v)) out[k] = STRUCTURAL.has(k) ? item : walk(item, depth + 1);
      return out;
    }
    return v;
  };
  return walk(value, 0);
}

const scanners = new WeakMap(); // client -> LeakScanner

/** The scanner for this daemon, or null when the plugin config turns scanning off. */
export function leakScannerFor({ client, sync, config, logger }) {
  if (config.leakScan === false) return null;
  let scanner = scanners.get(client);
  if (scanner) return scanner;
  let warned = false;
  const warn = (err) => {
    if (warned) return;
    warned = true;
    logger?.warn?.(`paddedcell: admin-password leak scan unavailable: ${err}`);
  };
  scanner = new LeakScanner({
    check: async (text, source) => {
      try {
        const answer = await client.call("POST", "/vault/check-leak", { text, source }, { timeoutMs: 10_000 });
        warned = false;
        return answer;
      } catch (err) {
        warn(err?.message ?? err);
        return null;
      }
    },
    checkSync: (text, source) => {
      const reply = sync.call("POST", "/vault/check-leak", { text, source }, 2000);
      if (reply.error || reply.status >= 400) {
        warn(reply.error ?? reply.answer?.error ?? `HTTP ${reply.status}`);
        return null;
      }
      return reply.answer ?? null;
    },
  });
  scanners.set(client, scanner);
  return scanner;
}
