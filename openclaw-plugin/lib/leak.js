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
// a user message already flagged at run start) masks it without asking again; texts
// that scanned clean are remembered for CLEAN_TTL_MS, so the transcript hooks do not
// ask again about a text a gate just scanned.
//
// Fail closed (the default, `leakScan: true`): a text the daemon did not answer about
// comes back `unscanned`, and the caller withholds it (`scanner.withhold(result)`): the
// prompt is answered with a warning, the tool call blocked, the outbound text held.
// `leakScan: "fail-open"` lets unscanned texts pass (availability over the check).
// A synchronous check that timed out opens a breaker for SYNC_COOL_DOWN_MS: the
// transcript hooks then answer `unscanned` at once instead of blocking the gateway's
// thread for the whole timeout on every write while the daemon hangs.

import crypto from "node:crypto";

export const MASK = "######";
const MAX_REMEMBERED = 512;
const CLEAN_TTL_MS = 60_000;
/** Masked copies shorter than this are not remembered (too likely to recur by chance). */
const MIN_MASKED_MEMO = 16;
export const SYNC_TIMEOUT_MS = 1000;
export const SYNC_COOL_DOWN_MS = 15_000;
/** What stands in for a text that could not be scanned, where it cannot simply be dropped. */
export const WITHHELD = "[withheld by PaddedCell: the admin-password leak scan did not answer in time]";

/** "off" | "fail-closed" | "fail-open" from the plugin's `leakScan` setting. */
export function leakScanMode(config) {
  const value = config?.leakScan;
  if (value === false || value === "off") return "off";
  if (value === "fail-open") return "fail-open";
  return "fail-closed";
}

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
   * @param {boolean} [opts.failOpen] unscanned texts pass (withhold() is always false)
   * @param {() => number} [opts.now] clock, for tests
   */
  constructor({ check, checkSync, minLength = 4, failOpen = false, now = Date.now }) {
    this.check = check;
    this.checkSync = checkSync;
    this.minLength = minLength;
    this.failOpen = failOpen;
    this.now = now;
    this.hits = new Map(); // sha256(text) -> { masked, spans }
    this.clean = new Map(); // sha256(text) -> time it scanned clean
    this.masked = new Set(); // masked copies this scanner produced (no secret left in them)
  }

  /** Remember a masked copy, so a later hook that is handed it knows it held the password. */
  _rememberMasked(text) {
    if (typeof text !== "string" || text.length < MIN_MASKED_MEMO || text === MASK) return;
    this.masked.delete(text);
    this.masked.add(text);
    if (this.masked.size > MAX_REMEMBERED) this.masked.delete(this.masked.values().next().value);
  }

  /**
   * True when `text` is, or (with `within`) contains, a masked copy this scanner made.
   * OpenClaw 2026.9.6 persists a chat message (before_message_write masks it) before
   * dispatching it, and hands the dispatch hooks the masked copy.
   */
  wasMasked(text, { within = false } = {}) {
    if (typeof text !== "string" || text.length < MIN_MASKED_MEMO) return false;
    if (this.masked.has(text)) return true;
    if (!within) return false;
    for (const masked of this.masked) if (text.includes(masked)) return true;
    return false;
  }

  /** True when the caller must not let this result's text through: a hit, or unscanned and failing closed. */
  withhold(result) {
    return Boolean(result?.unscanned && !this.failOpen);
  }

  /** Turn the daemon's answer about `text` into a remembered hit, or null for a miss. */
  _hit(text, answer) {
    if (answer !== true && answer?.leak !== true) {
      const key = digest(text);
      this.clean.delete(key);
      this.clean.set(key, this.now());
      if (this.clean.size > MAX_REMEMBERED) this.clean.delete(this.clean.keys().next().value);
      return null;
    }
    const spans = validSpans(answer?.spans, text.length);
    const masked = typeof answer?.redacted === "string" ? answer.redacted : MASK;
    const hit = { masked, spans };
    this._rememberMasked(masked);
    this.hits.set(digest(text), hit);
    if (this.hits.size > MAX_REMEMBERED) this.hits.delete(this.hits.keys().next().value);
    return hit;
  }

  /** A remembered hit, CLEAN for a text that scanned clean lately, or undefined. */
  _known(text) {
    const key = digest(text);
    const hit = this.hits.get(key);
    if (hit) return hit;
    const at = this.clean.get(key);
    if (at !== undefined && this.now() - at < CLEAN_TTL_MS) return CLEAN;
    return undefined;
  }

  /** The outcome for `text` given a remembered verdict or the daemon's answer (null: none). */
  _outcome(text, known, answer) {
    if (known !== undefined) return known === CLEAN ? null : known;
    if (answer === null || answer === undefined) return UNSCANNED;
    return this._hit(text, answer);
  }

  /** `{leak, text, unscanned?}`: the text with every hit replaced by the mask. */
  async scrub(text, source) {
    if (typeof text !== "string" || text.length < this.minLength) return { leak: false, text };
    const known = this._known(text);
    const hit = this._outcome(text, known, known === undefined ? await this.check(text, source) : undefined);
    return this._textResult(text, hit);
  }

  /** Same as scrub, blocking (for the synchronous transcript hooks). */
  scrubSync(text, source) {
    if (typeof text !== "string" || text.length < this.minLength || !this.checkSync) return { leak: false, text };
    const known = this._known(text);
    const hit = this._outcome(text, known, known === undefined ? this.checkSync(text, source) : undefined);
    return this._textResult(text, hit);
  }

  /** Scrub every content string inside a JSON-like value, in one call; `{leak, value, unscanned?}` (a copy when changed). */
  async scrubValue(value, source) {
    const strings = collectStrings(value);
    const joined = strings.join("\n");
    if (joined.length < this.minLength) return { leak: false, value };
    const known = this._known(joined);
    const hit = this._outcome(joined, known, known === undefined ? await this.check(joined, source) : undefined);
    return this._valueResult(value, strings, hit);
  }

  scrubValueSync(value, source) {
    const strings = collectStrings(value);
    const joined = strings.join("\n");
    if (joined.length < this.minLength || !this.checkSync) return { leak: false, value };
    const known = this._known(joined);
    const hit = this._outcome(joined, known, known === undefined ? this.checkSync(joined, source) : undefined);
    return this._valueResult(value, strings, hit);
  }

  _textResult(text, hit) {
    if (hit === UNSCANNED) return { leak: false, text, unscanned: true };
    return hit ? { leak: true, text: hit.masked } : { leak: false, text };
  }

  _valueResult(value, strings, hit) {
    if (hit === UNSCANNED) return { leak: false, value, unscanned: true };
    if (!hit) return { leak: false, value };
    const maskedStrings = maskJoined(strings, hit.spans);
    maskedStrings.forEach((m, i) => { if (m !== strings[i]) this._rememberMasked(m); });
    return { leak: true, value: replaceStrings(value, maskedStrings) };
  }
}

const CLEAN = Symbol("clean");
const UNSCANNED = Symbol("unscanned");

/** A copy of `value` with every content string replaced by `text` (structure kept). */
export function withholdValue(value, text = WITHHELD) {
  const strings = collectStrings(value);
  return replaceStrings(value, strings.map((s) => (s.length ? text : s)));
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
  const mode = leakScanMode(config);
  if (mode === "off") return null;
  let scanner = scanners.get(client);
  if (scanner && scanner.failOpen === (mode === "fail-open")) return scanner;
  let warned = false;
  let syncClosedUntil = 0; // the breaker: no blocking sync calls before this time
  const warn = (err) => {
    if (warned) return;
    warned = true;
    logger?.warn?.(`paddedcell: admin-password leak scan unavailable: ${err}; ` +
      (mode === "fail-open" ? "texts pass unscanned (leakScan: fail-open)" : "unscanned texts are withheld"));
  };
  scanner = new LeakScanner({
    failOpen: mode === "fail-open",
    check: async (text, source) => {
      try {
        const answer = await client.call("POST", "/vault/check-leak", { text, source },
          { timeoutMs: Number(config.leakScanTimeoutMs ?? 10_000) });
        warned = false;
        syncClosedUntil = 0;
        return answer;
      } catch (err) {
        warn(err?.message ?? err);
        return null;
      }
    },
    checkSync: (text, source) => {
      if (Date.now() < syncClosedUntil) return null;
      const reply = sync.call("POST", "/vault/check-leak", { text, source }, SYNC_TIMEOUT_MS);
      if (reply.error || reply.status >= 400) {
        if (reply.error) syncClosedUntil = Date.now() + SYNC_COOL_DOWN_MS;
        warn(reply.error ?? reply.answer?.error ?? `HTTP ${reply.status}`);
        return null;
      }
      return reply.answer ?? null;
    },
  });
  scanners.set(client, scanner);
  return scanner;
}
