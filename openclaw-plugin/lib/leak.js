// Admin-password leak scan through the daemon (`POST /vault/check-leak`);
// `leakScannerFor` builds the one scanner per daemon that the hooks and tools share.
//
// The plugin never knows the admin password: the daemon answers only whether a
// text contains it (and on a hit locks the vault and logs CRITICAL). To rewrite
// just the leaked part we bisect the text on whitespace and ask again; when the
// hit cannot be narrowed (the vault may refuse further checks once locked, or the
// password spans a split), the whole text becomes the mask. Hits are remembered
// by hash so a later hook that sees the same text (for example the transcript
// write of a user message already flagged at run start) masks it without asking.

import crypto from "node:crypto";

export const MASK = "######";
const MAX_BISECT_TOKENS = 4096;
const MAX_REMEMBERED = 512;

function digest(text) {
  return crypto.createHash("sha256").update(text, "utf8").digest("hex");
}

export class LeakScanner {
  /**
   * @param {object} opts
   * @param {(text: string, source: string) => Promise<boolean|null>} opts.check async daemon check
   * @param {(text: string, source: string) => boolean|null} [opts.checkSync] blocking check
   * @param {number} [opts.minLength] texts shorter than this are not sent
   */
  constructor({ check, checkSync, minLength = 4 }) {
    this.check = check;
    this.checkSync = checkSync;
    this.minLength = minLength;
    this.hits = new Map(); // sha256(text) -> masked text
  }

  _remember(text, masked) {
    this.hits.set(digest(text), masked);
    if (this.hits.size > MAX_REMEMBERED) this.hits.delete(this.hits.keys().next().value);
  }

  known(text) {
    return this.hits.get(digest(text));
  }

  /** `{leak, text}`: the text with every located hit replaced by the mask. */
  async scrub(text, source) {
    if (typeof text !== "string" || text.length < this.minLength) return { leak: false, text };
    const remembered = this.known(text);
    if (remembered !== undefined) return { leak: true, text: remembered };
    if (!(await this.check(text, source))) return { leak: false, text };
    const masked = await locate(text, (t) => this.check(t, `${source}:locate`));
    this._remember(text, masked);
    return { leak: true, text: masked };
  }

  /** Same as scrub, blocking (for the synchronous transcript hooks). */
  scrubSync(text, source) {
    if (typeof text !== "string" || text.length < this.minLength || !this.checkSync) return { leak: false, text };
    const remembered = this.known(text);
    if (remembered !== undefined) return { leak: true, text: remembered };
    if (!this.checkSync(text, source)) return { leak: false, text };
    const masked = locateSync(text, (t) => this.checkSync(t, `${source}:locate`));
    this._remember(text, masked);
    return { leak: true, text: masked };
  }

  /** Scrub every string inside a JSON-like value; `{leak, value}` (a copy when changed). */
  async scrubValue(value, source) {
    const joined = collectStrings(value).join("\n");
    if (joined.length < this.minLength) return { leak: false, value };
    if (this.known(joined) === undefined && !(await this.check(joined, source))) return { leak: false, value };
    let found = false;
    const out = await mapStrings(value, async (s) => {
      const r = await this.scrub(s, source);
      if (r.leak) found = true;
      return r.text;
    });
    // The whole hit, but no single string holds it (or the vault stopped answering): mask all.
    return { leak: true, value: found ? out : await mapStrings(value, async (s) => (s.length ? MASK : s)) };
  }

  scrubValueSync(value, source) {
    const joined = collectStrings(value).join("\n");
    if (joined.length < this.minLength || !this.checkSync) return { leak: false, value };
    if (this.known(joined) === undefined && !this.checkSync(joined, source)) return { leak: false, value };
    let found = false;
    const out = mapStringsSync(value, (s) => {
      const r = this.scrubSync(s, source);
      if (r.leak) found = true;
      return r.text;
    });
    return { leak: true, value: found ? out : mapStringsSync(value, (s) => (s.length ? MASK : s)) };
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

async function mapStrings(value, fn, depth = 0) {
  if (depth > 20) return value;
  if (typeof value === "string") return fn(value);
  if (Array.isArray(value)) {
    const out = [];
    for (const v of value) out.push(await mapStrings(v, fn, depth + 1));
    return out;
  }
  if (value && typeof value === "object") {
    const out = {};
    for (const [k, v] of Object.entries(value)) out[k] = STRUCTURAL.has(k) ? v : await mapStrings(v, fn, depth + 1);
    return out;
  }
  return value;
}

function mapStringsSync(value, fn, depth = 0) {
  if (depth > 20) return value;
  if (typeof value === "string") return fn(value);
  if (Array.isArray(value)) return value.map((v) => mapStringsSync(v, fn, depth + 1));
  if (value && typeof value === "object") {
    const out = {};
    for (const [k, v] of Object.entries(value)) out[k] = STRUCTURAL.has(k) ? v : mapStringsSync(v, fn, depth + 1);
    return out;
  }
  return value;
}

/** Tokens and the whitespace between them, so joining them gives the text back. */
function tokens(text) {
  return text.split(/(\s+)/).filter((t) => t.length > 0);
}

/**
 * Mask the smallest whitespace-delimited runs of `text` that still hit.
 * Precondition: the whole text hit. A run that hits but whose halves both miss
 * straddles the split, so the whole run is masked.
 */
async function locate(text, check) {
  const parts = tokens(text);
  if (parts.length > MAX_BISECT_TOKENS) return MASK;
  const walk = async (lo, hi) => {
    if (hi - lo === 1) return /^\s+$/.test(parts[lo]) ? parts[lo] : MASK;
    const mid = (lo + hi) >> 1;
    const left = parts.slice(lo, mid).join("");
    const right = parts.slice(mid, hi).join("");
    const leftHit = left.trim() ? await check(left) : false;
    const rightHit = right.trim() ? await check(right) : false;
    if (!leftHit && !rightHit) return MASK;
    return (leftHit ? await walk(lo, mid) : left) + (rightHit ? await walk(mid, hi) : right);
  };
  return walk(0, parts.length);
}

function locateSync(text, check) {
  const parts = tokens(text);
  if (parts.length > MAX_BISECT_TOKENS) return MASK;
  const walk = (lo, hi) => {
    if (hi - lo === 1) return /^\s+$/.test(parts[lo]) ? parts[lo] : MASK;
    const mid = (lo + hi) >> 1;
    const left = parts.slice(lo, mid).join("");
    const right = parts.slice(mid, hi).join("");
    const leftHit = left.trim() ? check(left) : false;
    const rightHit = right.trim() ? check(right) : false;
    if (!leftHit && !rightHit) return MASK;
    return (leftHit ? walk(lo, mid) : left) + (rightHit ? walk(mid, hi) : right);
  };
  return walk(0, parts.length);
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
        return answer.leak === true;
      } catch (err) {
        warn(err?.message ?? err);
        return false;
      }
    },
    checkSync: (text, source) => {
      const reply = sync.call("POST", "/vault/check-leak", { text, source }, 2000);
      if (reply.error || reply.status >= 400) {
        warn(reply.error ?? reply.answer?.error ?? `HTTP ${reply.status}`);
        return false;
      }
      return reply.answer?.leak === true;
    },
  });
  scanners.set(client, scanner);
  return scanner;
}
