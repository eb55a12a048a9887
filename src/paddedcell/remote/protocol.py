"""OpenClaw's gateway protocol for an operator client: frames, the signed connect,
what every connect error means, and the pure pieces of chat. No I/O here.

Checked against OpenClaw 2026.9.6 (``dist/``: ``connect-error-details``,
``device-auth``, ``client-info``, ``ConnectParamsSchema``) and a real gateway:

- Frames are JSON text: request ``{type:"req", id, method, params}``, response
  ``{type:"res", id, ok, payload | error:{code, message, details?, retryable?,
  retryAfterMs?}}``, event ``{type:"event", event, payload, seq?}``. Responses
  may come out of order; events carry a per-connection ``seq``.
- The gateway opens with ``connect.challenge {nonce, ts}``. The client signs
  ``v3|deviceId|client.id|client.mode|role|scopes,csv|signedAt|token|nonce|platform|deviceFamily``
  (``v2`` is the same without the last two fields; the server tries v3, then v2)
  with ``signedAt`` = the challenge's ``ts``. Gateways from before the challenge
  take ``v1`` (no nonce); 2026.9.6 refuses a connect without a nonce.
- ``client.id``/``client.mode`` come from a closed set and every object is closed
  (``additionalProperties: false``): we send ``cli``/``cli`` and nothing extra.
- 2026.9.6 wants protocol 4 of operator clients; we offer 3..4.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .errors import ChoiceError, RemoteError

# urllib.parse and uuid are imported where they are used: `remote list` needs neither,
# and they are a tenth of its start-up.

PROTOCOL_MIN = 3
PROTOCOL_MAX = 4
CLIENT_ID = "cli"
CLIENT_MODE = "cli"
CLIENT_PLATFORM = "linux"
DISPLAY_NAME = "PaddedCell"
ROLE = "operator"

READ, WRITE, APPROVALS = "operator.read", "operator.write", "operator.approvals"
#: What a device asks for when it pairs: everything the commands below use, so one
#: approval covers them all; each command then connects with only its own subset, which
#: the device token serves (OpenClaw reuses a token whose scopes cover the ones asked for).
PAIRING_SCOPES = (READ, WRITE, APPROVALS)


class Access(NamedTuple):
    """What one command connects with: its operator scopes and declared capabilities."""

    scopes: tuple[str, ...]
    caps: tuple[str, ...]


#: Each command asks for only what it needs, so a session of `test` or `status` cannot
#: send messages or answer approvals. `chat` answers the approvals its own turn raises;
#: the watcher needs nothing but approvals (OpenClaw sends approval events to
#: operator.approvals alone). Approval requests reach only clients that declare an
#: approvals capability (``canDeliverApprovals``): the seed's client never did.
COMMAND_ACCESS: dict[str, Access] = {
    "test": Access((READ,), ()),
    "status": Access((READ,), ()),
    "pair": Access(PAIRING_SCOPES, ()),
    "chat": Access((READ, WRITE, APPROVALS), ("tool-events", "approvals")),
    "approvals": Access((APPROVALS,), ("approvals",)),
}


def connect_access(command: str, *, paired: bool) -> Access:
    """The scopes and caps of ``command``'s connect. Before the device holds a token (not
    paired yet, or its token was refused) every command asks for the pairing set, so the
    one request an operator approves covers every command, never a narrower grant that a
    later command would have to re-pair to widen."""
    access = COMMAND_ACCESS[command]
    return access if paired else access._replace(scopes=PAIRING_SCOPES)


class ProtocolError(Exception):
    """The gateway sent something that is not a frame of this protocol."""


# -- URLs ------------------------------------------------------------------------------

def normalize_url(text: str) -> str:
    """The WebSocket URL to dial: trimmed, a bare ``host:port`` becomes ``ws://host:port``,
    and only ``ws:``/``wss:`` pass (an ``http:`` or ``file:`` URL must not turn the
    client into a way to reach other services: SSRF)."""
    from urllib.parse import urlsplit

    url = (text or "").strip()
    if not url:
        raise RemoteError("URL is empty; give ws://HOST:PORT or wss://HOST[:PORT]")
    if "://" not in url:
        scheme = url.split(":", 1)[0].lower()
        if ":" in url and scheme in ("http", "https", "file", "ftp", "javascript", "data", "gopher"):
            raise RemoteError(f"Unsupported protocol: {scheme}:")
        url = "ws://" + url
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise RemoteError(f"Invalid URL: {url}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("ws", "wss"):
        raise RemoteError(f"Unsupported protocol: {scheme}:")
    if not parts.hostname:
        raise RemoteError(f"Invalid URL: {url}")
    del port
    return url


# -- frames ----------------------------------------------------------------------------

@dataclass(frozen=True)
class GatewayError:
    code: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    retryable: bool = False
    retry_after_ms: int | None = None

    @property
    def detail_code(self) -> str | None:
        code = self.details.get("code")
        return code.strip() if isinstance(code, str) and code.strip() else None


@dataclass(frozen=True)
class Event:
    event: str
    payload: Any
    seq: int | None = None


@dataclass(frozen=True)
class Response:
    id: str
    ok: bool
    payload: Any = None
    error: GatewayError | None = None


def request_frame(method: str, params: dict[str, Any] | None = None,
                  request_id: str | None = None) -> tuple[str, str]:
    """(id, JSON text) of a request."""
    import uuid

    request_id = request_id or str(uuid.uuid4())
    frame: dict[str, Any] = {"type": "req", "id": request_id, "method": method}
    if params is not None:
        frame["params"] = params
    return request_id, json.dumps(frame, separators=(",", ":"), ensure_ascii=False)


def _error(raw: Any) -> GatewayError:
    if not isinstance(raw, dict):
        return GatewayError("UNKNOWN", str(raw)[:200])
    details = raw.get("details") if isinstance(raw.get("details"), dict) else {}
    retry_after = raw.get("retryAfterMs")
    return GatewayError(str(raw.get("code") or "UNKNOWN"), str(raw.get("message") or ""), details,
                        bool(raw.get("retryable")),
                        retry_after if isinstance(retry_after, int) and not isinstance(retry_after, bool)
                        else None)


def parse_frame(text: str | bytes) -> Event | Response | None:
    """An event or a response; None for a frame type this client does not use.
    Anything that is not a JSON object with a known shape is a :class:`ProtocolError`."""
    try:
        frame = json.loads(text)
    except (ValueError, RecursionError):
        raise ProtocolError("the gateway sent a frame that is not JSON") from None
    if not isinstance(frame, dict):
        raise ProtocolError("the gateway sent a frame that is not a JSON object")
    kind = frame.get("type")
    if kind == "event":
        name = frame.get("event")
        if not isinstance(name, str):
            raise ProtocolError("the gateway sent an event without a name")
        seq = frame.get("seq")
        return Event(name, frame.get("payload"),
                     seq if isinstance(seq, int) and not isinstance(seq, bool) else None)
    if kind == "res":
        request_id = frame.get("id")
        if not isinstance(request_id, str):
            raise ProtocolError("the gateway sent a response without an id")
        ok = frame.get("ok") is True
        return Response(request_id, ok, frame.get("payload"), None if ok else _error(frame.get("error")))
    if isinstance(kind, str):
        return None
    raise ProtocolError("the gateway sent a frame without a type")


class SeqTracker:
    """Per-connection event order: drop duplicates and late (out-of-order) events,
    report gaps. The gateway does not replay missed events, so a gap is reported,
    not repaired (the seed's known limit; the chat falls back to ``chat.history``)."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last: int | None = None

    def see(self, seq: int | None) -> tuple[bool, int]:
        """(deliver?, missed count). Events without a seq are always delivered."""
        if seq is None:
            return True, 0
        if self.last is not None and seq <= self.last:
            return False, 0
        missed = 0 if self.last is None else seq - self.last - 1
        self.last = seq
        return True, missed

    def reset(self) -> None:
        self.last = None


# -- the signed connect ----------------------------------------------------------------

def _normalize_metadata(value: str | None) -> str:
    """``normalizeDeviceMetadataForAuth``: trimmed, ASCII A-Z lowered (nothing else)."""
    text = (value or "").strip()
    return re.sub(r"[A-Z]", lambda m: m.group(0).lower(), text)


def signature_payload(version: str, *, device_id: str, scopes: tuple[str, ...] | list[str],
                      signed_at_ms: int, token: str | None, nonce: str | None,
                      client_id: str = CLIENT_ID, client_mode: str = CLIENT_MODE, role: str = ROLE,
                      platform: str | None = CLIENT_PLATFORM, device_family: str | None = None) -> str:
    """The exact text a device signs (``buildDeviceAuthPayload[V3]``)."""
    base = [device_id, client_id, client_mode, role, ",".join(scopes), str(signed_at_ms), token or ""]
    if version == "v1":
        return "|".join(["v1", *base])
    if not nonce:
        raise ValueError(f"a {version} signature needs the challenge nonce")
    if version == "v2":
        return "|".join(["v2", *base, nonce])
    if version == "v3":
        return "|".join(["v3", *base, nonce, _normalize_metadata(platform),
                         _normalize_metadata(device_family)])
    raise ValueError(f"unknown signature version {version!r}")


def connect_params(identity: Any, *, scopes: tuple[str, ...], caps: tuple[str, ...],
                   token: str | None, password: str | None, nonce: str | None, signed_at_ms: int,
                   version: str, client_version: str) -> dict[str, Any]:
    """The ``connect`` request's params. ``token`` is what goes in ``auth.token`` (the
    shared gateway token, else the stored device token) and exactly what is signed."""
    payload = signature_payload(version, device_id=identity.device_id, scopes=scopes,
                                signed_at_ms=signed_at_ms, token=token, nonce=nonce)
    device: dict[str, Any] = {"id": identity.device_id, "publicKey": identity.public_key,
                              "signature": identity.sign(payload), "signedAt": signed_at_ms}
    if nonce:
        device["nonce"] = nonce
    auth: dict[str, str] = {}
    if token:
        auth["token"] = token
    if password:
        auth["password"] = password
    params: dict[str, Any] = {
        "minProtocol": PROTOCOL_MIN, "maxProtocol": PROTOCOL_MAX,
        "client": {"id": CLIENT_ID, "displayName": DISPLAY_NAME, "version": client_version,
                   "platform": CLIENT_PLATFORM, "mode": CLIENT_MODE},
        "role": ROLE, "scopes": list(scopes), "caps": list(caps),
        "locale": "en-US", "userAgent": f"paddedcell/{client_version}", "device": device,
    }
    if auth:
        params["auth"] = auth
    return params


# -- what a connect error means --------------------------------------------------------

#: Every ``error.details.code`` of OpenClaw 2026.9.6 (``ConnectErrorDetailCodes``), as
#: one line that says what to do. ``{name}`` is the remote's name.
CONNECT_ERROR_HINTS: dict[str, str] = {
    "AUTH_REQUIRED": "the gateway requires authentication; set it with: paddedcell remote edit {name} --auth token",
    "AUTH_UNAUTHORIZED": "the gateway refused these credentials; check them with: paddedcell remote edit {name} --auth token",
    "AUTH_TOKEN_MISSING": "the gateway needs its token; set it with: paddedcell remote edit {name} --auth token",
    "AUTH_TOKEN_MISMATCH": "the gateway refused the token (wrong shared token, or a device token that was revoked or rotated); set the shared token with: paddedcell remote edit {name} --auth token, then pair again: paddedcell remote pair {name}",
    "AUTH_TOKEN_NOT_CONFIGURED": "the gateway has token auth on but no token configured; on the gateway host set gateway.auth.token",
    "AUTH_PASSWORD_MISSING": "the gateway needs its password; set it with: paddedcell remote edit {name} --auth password",
    "AUTH_PASSWORD_MISMATCH": "the gateway refused the password; set it again with: paddedcell remote edit {name} --auth password",
    "AUTH_PASSWORD_NOT_CONFIGURED": "the gateway has password auth on but no password configured; on the gateway host set gateway.auth.password",
    "AUTH_BOOTSTRAP_TOKEN_INVALID": "the gateway refused the bootstrap token; ask for a new setup code on the gateway host",
    "AUTH_DEVICE_TOKEN_MISMATCH": "the gateway no longer accepts this device's token (revoked or rotated); pair again: paddedcell remote pair {name}",
    "AUTH_SCOPE_MISMATCH": "this device's approval does not cover the scopes asked for; pair again to approve them: paddedcell remote pair {name}",
    "AUTH_RATE_LIMITED": "the gateway is rate-limiting failed logins from this address; wait a minute, then retry",
    "AUTH_TAILSCALE_IDENTITY_MISSING": "the gateway expects a Tailscale identity; connect through Tailscale Serve",
    "AUTH_TAILSCALE_PROXY_MISSING": "the gateway expects to be reached through Tailscale Serve; use its Serve URL",
    "AUTH_TAILSCALE_WHOIS_FAILED": "the gateway could not look up your Tailscale identity; check tailscaled on the gateway host, then retry",
    "AUTH_TAILSCALE_IDENTITY_MISMATCH": "your Tailscale identity is not the one the gateway allows; ask its operator",
    "AUTH_IDENTITY_HEADER_REQUIRED": "the gateway sits behind a trusted proxy that did not pass an identity; reach it through that proxy",
    "AUTH_VERIFIED_USER_REQUIRED": "the gateway wants a verified user identity; sign in through its proxy first",
    "AUTHENTICATED_PROFILE_UNAVAILABLE": "the gateway could not load your profile; retry, or ask its operator",
    "CONTROL_UI_BUILD_MISMATCH": "the gateway refused the client build; update PaddedCell",
    "CONTROL_UI_ORIGIN_NOT_ALLOWED": "the gateway refused this origin; add it to gateway.controlUi.allowedOrigins on the gateway host",
    "PROTOCOL_MISMATCH": "the gateway speaks a protocol this client does not (we offer 3-4); update PaddedCell or the gateway",
    "CONTROL_UI_DEVICE_IDENTITY_REQUIRED": "the gateway requires a device identity; pair: paddedcell remote pair {name}",
    "DEVICE_IDENTITY_REQUIRED": "the gateway requires a device identity; pair: paddedcell remote pair {name}",
    "DEVICE_AUTH_INVALID": "the gateway refused this device's proof; pair again: paddedcell remote pair {name}",
    "DEVICE_AUTH_DEVICE_ID_MISMATCH": "the device id does not match its key (a damaged remote.db?); re-create the remote: paddedcell remote remove {name}, then add it again",
    "DEVICE_AUTH_SIGNATURE_EXPIRED": "the gateway found the signature too old or too new; fix the clock on this host or the gateway host (more than 2 minutes apart), then retry",
    "DEVICE_AUTH_NONCE_REQUIRED": "the gateway wants its challenge signed, and none arrived in time; retry (raise remote.challenge_wait_seconds on a slow link)",
    "DEVICE_AUTH_NONCE_MISMATCH": "the signed challenge was stale; retry",
    "DEVICE_AUTH_SIGNATURE_INVALID": "the gateway did not accept this device's signature; update PaddedCell or the gateway, then retry",
    "DEVICE_AUTH_PUBLIC_KEY_INVALID": "the gateway did not accept this device's public key; re-create the remote: paddedcell remote remove {name}, then add it again",
    "PAIRING_REQUIRED": "this device waits for approval; on the gateway host run: openclaw devices approve {request_id}",
    "CLIENT_VERSION_MISMATCH": "the gateway does not accept this client version; update PaddedCell or the gateway",
}


@dataclass(frozen=True)
class ConnectFailure:
    """Why a connect did not reach ``hello-ok``: ``kind`` is ``pending`` (waits for
    pairing approval) or ``error``; ``message`` is the operator's one line."""

    kind: str
    message: str
    code: str | None = None
    request_id: str | None = None
    retry_after_ms: int | None = None
    retryable: bool = False


def pairing_request_id(error: GatewayError) -> str | None:
    value = error.details.get("requestId")
    if isinstance(value, str) and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}", value):
        return value
    return None


def is_pairing_required(error: GatewayError) -> bool:
    """The seed's test (``recommendedNextStep == wait_then_retry`` or /pairing.required/i)
    plus the detail code itself."""
    return (error.detail_code == "PAIRING_REQUIRED"
            or error.details.get("recommendedNextStep") == "wait_then_retry"
            or re.search(r"pairing.required", error.message, re.IGNORECASE) is not None)


def explain_connect_error(error: GatewayError, name: str) -> ConnectFailure:
    if is_pairing_required(error):
        request_id = pairing_request_id(error)
        reason = error.details.get("reason")
        why = {"scope-upgrade": "more scopes", "role-upgrade": "a higher role",
               "metadata-upgrade": "changed device details"}.get(reason if isinstance(reason, str) else "")
        head = f"this device waits for approval ({why})" if why else "this device waits for approval"
        if request_id:
            message = f"{head}; on the gateway host run: openclaw devices approve {request_id}"
        else:
            message = f"{head}; on the gateway host run: openclaw devices list, then openclaw devices approve <requestId>"
        return ConnectFailure("pending", message, "PAIRING_REQUIRED", request_id)
    code = error.detail_code
    if code == "AUTH_RATE_LIMITED" or (code is None and error.code == "UNAVAILABLE"):
        wait = f" (retry in {error.retry_after_ms / 1000:.0f} s)" if error.retry_after_ms else ""
        hint = CONNECT_ERROR_HINTS["AUTH_RATE_LIMITED"] if code else \
            "the gateway is starting or busy; retry in a moment"
        return ConnectFailure("error", hint + wait, code or error.code,
                              retry_after_ms=error.retry_after_ms, retryable=True)
    hint = CONNECT_ERROR_HINTS.get(code or "")
    if hint is None:
        text = error.message or error.code
        return ConnectFailure("error", f"the gateway refused the connection: {text} ({code or error.code})",
                              code or error.code)
    return ConnectFailure("error", hint.format(name=name, request_id="<requestId>"), code)


def explain_close(code: int | None, reason: str | None) -> str:
    """A closed socket, in words (1008 policy, 1012 restart, 4000 tick timeout, 4001 revoked)."""
    reason = (reason or "").strip()
    known = {1000: "closed by the gateway", 1001: "the gateway is going away",
             1006: "the connection dropped", 1008: "the gateway refused the connection",
             1011: "the gateway hit an internal error", 1012: "the gateway is restarting",
             4000: "no tick from the gateway in twice its tick interval",
             4001: "the gateway revoked this device's token"}
    text = known.get(code or 0, "the connection closed")
    if code == 4001 and reason:
        reason = f"{reason} (the gateway revoked this device's token; pair again)"
    return f"Connection closed ({code}): {reason or text}" if code else f"Connection closed: {reason or text}"


# -- chat ------------------------------------------------------------------------------

_READ_WORDS = frozenset("read view list search grep glob find get fetch".split())
_EDIT_WORDS = frozenset("write edit create delete patch update insert remove".split())
_EXEC_WORDS = frozenset("exec run bash shell terminal".split())


def name_words(name: str) -> list[str]:
    """``readFile`` → read, file; ``web_fetch`` → web, fetch; ``Breadcrumb`` → breadcrumb."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", name or "")
    return [word for word in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if word]


def tool_kind(name: str) -> str:
    """read / edit / execute / other, by whole word of the tool's name (the seed matched
    substrings, so ``Breadcrumb`` was a read and ``thread_summary`` too)."""
    words = name_words(name)
    for kind, vocabulary in (("execute", _EXEC_WORDS), ("edit", _EDIT_WORDS), ("read", _READ_WORDS)):
        if any(word in vocabulary for word in words):
            return kind
    return "other"


def tool_phase(phase: str | None, is_error: bool = False) -> str:
    """Gateway phases start/update/partialResult → running; result → completed or failed."""
    if phase in ("result", "end", "done", "completed"):
        return "failed" if is_error else "completed"
    if phase in ("error", "failed"):
        return "failed"
    return "running"


def message_text(message: Any) -> str:
    """The text of a chat message (``content`` a string or a list of ``{type:text, text}``)."""
    if isinstance(message, str):
        return message
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content
                       if isinstance(part, dict) and part.get("type") in (None, "text")
                       and isinstance(part.get("text"), str))
    text = message.get("text")
    return text if isinstance(text, str) else ""


class ReplyText:
    """Turns the gateway's cumulative reply text into increments: a delta carries the
    whole text so far, so what is new is the part past what was shown. When the text
    is rewritten (it no longer starts with what was shown), the gateway's own
    ``deltaText`` is used if present, else the whole new text is shown again."""

    __slots__ = ("shown",)

    def __init__(self) -> None:
        self.shown = ""

    def feed(self, cumulative: str, delta_text: str | None = None) -> str:
        if cumulative.startswith(self.shown):
            new = cumulative[len(self.shown):]
            self.shown = cumulative
            return new
        if delta_text and not self.shown.endswith(delta_text):
            self.shown += delta_text
            return delta_text
        if cumulative and cumulative != self.shown and not self.shown.startswith(cumulative):
            self.shown = cumulative
            return "\n" + cumulative
        return ""


def attachment_prefix(paths: list[str]) -> str:
    """The seed's ``@path`` references: ``@"a b.txt"`` when a path has whitespace."""
    refs = []
    for path in paths:
        if any(ch.isspace() for ch in path):
            refs.append('@"' + path.replace('"', '\\"') + '"')
        else:
            refs.append("@" + path)
    return " ".join(refs)


def with_attachments(message: str, paths: list[str]) -> str:
    prefix = attachment_prefix(paths)
    return f"{prefix} {message}" if prefix else message


def countdown(remaining_seconds: float) -> str:
    """M:SS, never negative (the pairing wait's clock)."""
    whole = max(0, int(remaining_seconds + 0.999))
    return f"{whole // 60}:{whole % 60:02d}"


# -- which agent a chat talks to (OpenClaw 2026.9.6 dist/agent-via-gateway: the CLI's own
# remote rule, loadRemoteGatewayRoster + resolveImplicitCliAgentId; dist/session-key:
# toAgentStoreSessionKey) --------------------------------------------------------------

_AGENT_KEY = re.compile(r"agent:([^:]+):(.+)", re.IGNORECASE)


class AgentRoster(NamedTuple):
    """A gateway's ``agents.list`` answer, reduced to what picking an agent needs."""

    ids: tuple[str, ...]
    #: The agent an unqualified chat goes to; None when the gateway names none.
    default: str | None
    main_key: str
    #: ``selectionRequired``: the gateway refuses a chat that names no agent.
    required: bool = False


def agent_roster(answer: Any) -> AgentRoster | None:
    """``{agents:[{id, kind?}], defaultId, mainKey, ownership?, selectionRequired?}``;
    system agents are not choices; ``ownership: explicit`` means no implicit default."""
    if not isinstance(answer, dict) or not isinstance(answer.get("agents"), list):
        return None
    ids = tuple(dict.fromkeys(
        a["id"].strip().lower() for a in answer["agents"]
        if isinstance(a, dict) and isinstance(a.get("id"), str) and a["id"].strip()
        and a.get("kind") != "system"))
    required = answer.get("selectionRequired")
    if not isinstance(required, bool):
        required = answer.get("ownership") == "explicit"
    default = answer.get("defaultId")
    default = default.strip().lower() if isinstance(default, str) and default.strip() and not required else None
    main_key = answer.get("mainKey")
    return AgentRoster(ids, default, main_key.strip() if isinstance(main_key, str) and main_key.strip() else "main",
                       required)


def key_agent(session_key: str | None) -> str | None:
    """The agent of an ``agent:<id>:<rest>`` key; None for an unqualified key."""
    found = _AGENT_KEY.fullmatch((session_key or "").strip())
    return found.group(1).lower() if found else None


def choose_agent(roster: AgentRoster | None, requested: str | None, *, remote: str) -> str | None:
    """The agent to talk to: ``requested`` if the gateway has it, else its default. A
    gateway that did not list its agents (None), or names no default and does not
    require a choice, gets ``requested`` as it is, or None (the gateway then scopes an
    unqualified key itself). Only a gateway that requires a choice is refused."""
    wanted = requested.strip().lower() if requested and requested.strip() else None
    if roster is None:
        return wanted
    choices = ", ".join(roster.ids) or "none listed"
    if wanted is not None:
        if roster.ids and wanted not in roster.ids:
            raise ChoiceError(f"{remote} has no agent {requested!r}; pass --agent with one of: {choices}")
        return wanted
    if roster.default is None:
        if not roster.required:
            return None
        raise ChoiceError(f"{remote} has several agents and no default one; "
                          f"pass --agent with one of: {choices}")
    return roster.default


def agent_session_key(key: str, agent: str | None, main_key: str = "main") -> str:
    """``key`` in ``agent``'s store: ``agent:<agent>:<key>`` (``main`` is the agent's main
    session); a key already naming an agent, or ``global``/``unknown``, is kept."""
    raw = key.strip()
    if agent is None or key_agent(raw) is not None or raw.lower() in ("global", "unknown"):
        return raw
    if raw.lower() == "main":
        return f"agent:{agent}:{main_key}"
    return f"agent:{agent}:{raw}"
