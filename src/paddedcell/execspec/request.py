"""The exec request and the process action: parsed and checked like OpenClaw's.

OpenClaw 2026.9.6 validates ``exec`` arguments with the TypeBox schema in
``dist/bash-tools.schemas-*.mjs`` (``src/agents/bash-tools.schemas.ts``) and a
few run-time guards in ``dist/bash-tools-*.mjs`` (``bash-tools.exec-run.ts``,
``bash-tools.exec-request-preparation.ts``). We accept the same fields with the
same defaults and clamps, and give every refusal as one line that says what to
do. Fields that only make sense inside OpenClaw are accepted when we can honour
them and refused clearly when we cannot:

- ``host``: ``auto``/``gateway`` run here; ``sandbox`` runs here under the
  sandbox profile when one is configured (``supervisor.sandbox``), else it is
  refused like OpenClaw refuses it without a sandbox runtime; ``node`` is
  refused (PaddedCell runs commands on its own host only).
- ``ask``: ``off`` is accepted; ``on-miss``/``always`` are refused (there is no
  approval flow in PaddedCell, and silently running would weaken the ask).
- ``elevated: true`` is refused (commands run as the agent's own user).
- ``node`` only goes with ``host=node``, so it is refused.
- ``title`` is kept as a label (≤ 120 characters, as OpenClaw's schema).
- ``awaitResults: true`` means "never auto-background"; with ``background``
  it is refused, as in OpenClaw's newest code.

Unknown fields are refused with the list of allowed ones (old names get the new
name: ``timeout`` -> ``timeoutSeconds``, ``cwd`` -> ``workdir``). OpenClaw 2026.9.6
itself refuses only ``timeout`` and silently ignores other unknown fields; we
refuse them because an ignored ``cwd`` runs the command in the wrong directory.
Likewise a wrongly typed value (``yieldMs: "10"``) or a negative
``timeoutSeconds`` is refused here, where OpenClaw coerces or ignores it.

The environment guard is OpenClaw's host policy
(``dist/host-env-security-*.mjs``: ``host-env-security-policy.json`` and
``sanitizeHostEnvOverridesWithDiagnostics``) with its exact messages, plus the
variables that carry PaddedCell's own identity (``AGENT_ID``,
``AGENT_WORKSPACE``, ``AGENT``, ``PADDEDCELL_*``, ``OPENCLAW_SHELL``): letting a
request override them would let one agent read another agent's secrets.

Pure: no I/O.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from .commands import IDENTITY_VARIABLES

#: Linux's limit on one argument string (32 pages, include/uapi/linux/binfmts.h):
#: ``$SHELL -c COMMAND`` with a longer COMMAND fails with E2BIG.
MAX_ARG_STRLEN = 32 * 4096

__all__ = [
    "EXEC_FIELDS",
    "PROCESS_ACTIONS",
    "PROCESS_FIELDS",
    "ExecRequest",
    "ProcessAction",
    "RequestError",
    "check_env",
    "forbidden_env_keys",
    "parse_exec_request",
    "parse_process_action",
]


class RequestError(ValueError):
    """A request PaddedCell refuses; ``str()`` says what to do, in one line
    unless ``multiline`` (a text copied from OpenClaw that has several)."""

    def __init__(self, message: str, *, multiline: bool = False):
        super().__init__(message)
        self.message = message
        self.multiline = multiline


# ---------------------------------------------------------------- environment guard
# Copied from OpenClaw 2026.9.6 ``host-env-security-policy.json``
# (blockedEverywhereKeys, blockedOverrideOnlyKeys, blockedPrefixes,
# blockedOverridePrefixes). A request's ``env`` may set none of these.
_BLOCKED_EVERYWHERE_KEYS = frozenset(
    """
    NODE_OPTIONS NODE_PATH NODE_REDIRECT_WARNINGS NODE_REPL_EXTERNAL_MODULE
    NODE_REPL_HISTORY NODE_V8_COVERAGE PYTHONHOME PYTHONPATH PERL5LIB PERL5OPT RUBYLIB
    RUBYOPT BASHOPTS BASH_ENV ENV KSH_ENV BROWSER GIT_ALLOW_PROTOCOL GIT_EDITOR
    GIT_EXTERNAL_DIFF GIT_DIR GIT_WORK_TREE GIT_COMMON_DIR GIT_EXEC_PATH GIT_INDEX_FILE
    GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES GIT_NAMESPACE
    GIT_PROTOCOL_FROM_USER GIT_SEQUENCE_EDITOR GIT_TEMPLATE_DIR GIT_SSL_NO_VERIFY
    GIT_SSL_CAINFO GIT_SSL_CAPATH CC CPP CXX CXXCPP CARGO_BUILD_RUSTC
    CARGO_BUILD_RUSTC_WRAPPER CARGO_BUILD_RUSTC_WORKSPACE_WRAPPER CARGO_BUILD_RUSTDOC
    RUSTC RUSTC_WRAPPER RUSTC_WORKSPACE_WRAPPER RUSTDOC CMAKE_C_COMPILER
    CMAKE_CXX_COMPILER SHELL SHELLOPTS PS4 GCONV_PATH IFS SSLKEYLOGFILE JAVA_OPTS
    JAVA_TOOL_OPTIONS _JAVA_OPTIONS JDK_JAVA_OPTIONS PYTHONBREAKPOINT
    DOTNET_STARTUP_HOOKS DOTNET_ADDITIONAL_DEPS FPATH GLIBC_TUNABLES MAVEN_OPTS MAKE
    MAKEFLAGS MFLAGS SBT_OPTS GRADLE_OPTS ANT_OPTS HGRCPATH HGEDITOR HGMERGE EXINIT
    VIMINIT MYVIMRC GVIMINIT LUA_INIT LUA_INIT_5_1 LUA_INIT_5_2 LUA_INIT_5_3
    LUA_INIT_5_4 EMACSLOADPATH RUBYSHELL GIT_HOOK_PATH SVN_EDITOR SVN_SSH BZR_EDITOR
    BZR_SSH BZR_PLUGIN_PATH SUDO_ASKPASS JULIA_EDITOR CONFIG_SITE CONFIG_SHELL
    CMAKE_TOOLCHAIN_FILE CATALINA_OPTS CORECLR_PROFILER HELM_PLUGINS PACKER_PLUGIN_PATH
    VAGRANT_VAGRANTFILE ERL_AFLAGS ERL_FLAGS ERL_ZFLAGS ELIXIR_ERL_OPTIONS R_ENVIRON
    R_PROFILE R_ENVIRON_USER R_PROFILE_USER TCLLIBPATH HOSTALIASES
    """.split()
)
_BLOCKED_OVERRIDE_ONLY_KEYS = frozenset(
    """
    HOME GRADLE_USER_HOME ZDOTDIR GIT_DIR GIT_WORK_TREE GIT_COMMON_DIR GIT_INDEX_FILE
    GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES GIT_NAMESPACE GIT_SSH_COMMAND
    GIT_SSH GIT_PROXY_COMMAND GIT_ASKPASS GIT_SSL_NO_VERIFY GIT_SSL_CAINFO
    GIT_SSL_CAPATH SSH_ASKPASS LESSOPEN LESSCLOSE PAGER MANPAGER GIT_PAGER EDITOR VISUAL
    FCEDIT SUDO_EDITOR PROMPT_COMMAND HISTFILE PERL5DB PERL5DBCMD OPENSSL_CONF
    OPENSSL_ENGINES PYTHONSTARTUP WGETRC CURL_HOME CLASSPATH CFLAGS CGO_CFLAGS
    CGO_LDFLAGS GOFLAGS MAKEFLAGS MFLAGS CORECLR_PROFILER_PATH PHPRC PHP_INI_SCAN_DIR
    DENO_DIR BUN_CONFIG_REGISTRY YARN_RC_FILENAME HTTP_PROXY HTTPS_PROXY ALL_PROXY
    NO_PROXY NODE_TLS_REJECT_UNAUTHORIZED NODE_EXTRA_CA_CERTS SSL_CERT_FILE SSL_CERT_DIR
    REQUESTS_CA_BUNDLE CURL_CA_BUNDLE DOCKER_HOST DOCKER_TLS_VERIFY DOCKER_CERT_PATH
    PIP_INDEX_URL PIP_PYPI_URL PIP_EXTRA_INDEX_URL PIP_CONFIG_FILE PIP_FIND_LINKS
    PIP_TRUSTED_HOST UV_INDEX UV_INDEX_URL UV_PYTHON UV_EXTRA_INDEX_URL UV_DEFAULT_INDEX
    DOCKER_CONTEXT LIBRARY_PATH LDFLAGS CPATH C_INCLUDE_PATH CPLUS_INCLUDE_PATH
    OBJC_INCLUDE_PATH GOPROXY GONOSUMCHECK GONOSUMDB GONOPROXY GOPRIVATE GOENV GOPATH
    HGRCPATH PYTHONUSERBASE RUSTC_WRAPPER RUSTFLAGS RUSTUP_DIST_ROOT RUSTUP_DIST_SERVER
    RUSTUP_HOME RUSTUP_TOOLCHAIN RUSTUP_UPDATE_ROOT CARGO_HOME VIRTUAL_ENV LUA_PATH
    LUA_CPATH GEM_HOME GEM_PATH BUNDLE_GEMFILE COMPOSER_HOME CONDA_DEFAULT_ENV
    CONDA_PREFIX CARGO_BUILD_RUSTC_WRAPPER XDG_CACHE_HOME XDG_CONFIG_DIRS
    XDG_CONFIG_HOME XDG_DATA_DIRS XDG_DATA_HOME XDG_RUNTIME_DIR XDG_STATE_HOME
    AWS_CONFIG_FILE KUBECONFIG GOOGLE_APPLICATION_CREDENTIALS
    AWS_SHARED_CREDENTIALS_FILE AWS_WEB_IDENTITY_TOKEN_FILE AZURE_AUTH_LOCATION
    HELM_HOME ANSIBLE_CONFIG ANSIBLE_LIBRARY ANSIBLE_CALLBACK_PLUGINS
    ANSIBLE_COLLECTIONS_PATH ANSIBLE_CONNECTION_PLUGINS ANSIBLE_FILTER_PLUGINS
    ANSIBLE_INVENTORY_PLUGINS ANSIBLE_LOOKUP_PLUGINS ANSIBLE_MODULE_UTILS
    ANSIBLE_REMOTE_TEMP ANSIBLE_ROLES_PATH ANSIBLE_STRATEGY_PLUGINS R_LIBS_USER
    TF_CLI_CONFIG_FILE TF_PLUGIN_CACHE_DIR AMQP_URL AWS_ACCESS_KEY_ID
    AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_CREDENTIALS_RELATIVE_URI
    AWS_SECRET_ACCESS_KEY AWS_SECURITY_TOKEN AWS_SESSION_TOKEN AZURE_CLIENT_ID
    AZURE_CLIENT_SECRET DATABASE_URL GH_TOKEN GITHUB_TOKEN GITLAB_TOKEN MONGODB_URI
    NODE_AUTH_TOKEN NPM_TOKEN REDIS_URL SSH_AUTH_SOCK SYSTEMROOT WINDIR
    """.split()
)
_BLOCKED_PREFIXES = ("DYLD_", "LD_", "BASH_FUNC_")
_BLOCKED_OVERRIDE_PREFIXES = ("GIT_CONFIG_", "NPM_CONFIG_", "CARGO_REGISTRIES_", "TF_VAR_")

_CARGO_TARGET_EXECUTABLE = re.compile(r"^CARGO_TARGET_[A-Z0-9_]+_(?:LINKER|RUNNER)$")
_PORTABLE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_WINDOWS_COMPAT_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_()]*$")
#: PaddedCell's own identity and state: the supervisor sets these itself.
_PADDEDCELL_KEYS = IDENTITY_VARIABLES
_PADDEDCELL_PREFIXES = ("PADDEDCELL_",)
_NO_PAGER_KEYS = frozenset({"PAGER", "GIT_PAGER"})


def _is_forbidden(upper: str, value: str) -> bool:
    if upper == "PATH":
        return True
    if upper in _NO_PAGER_KEYS and value in ("", "cat"):
        return False  # OpenClaw lets a request turn pagers off
    if upper in _BLOCKED_EVERYWHERE_KEYS or upper in _BLOCKED_OVERRIDE_ONLY_KEYS:
        return True
    if upper in _PADDEDCELL_KEYS or upper.startswith(_PADDEDCELL_PREFIXES):
        return True
    if _CARGO_TARGET_EXECUTABLE.match(upper):
        return True
    return upper.startswith(_BLOCKED_PREFIXES) or upper.startswith(_BLOCKED_OVERRIDE_PREFIXES)


def forbidden_env_keys(env: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """(blocked keys upper-cased, invalid non-portable keys), each sorted and unique."""
    blocked: set[str] = set()
    invalid: set[str] = set()
    for raw_key, value in env.items():
        key = raw_key.strip()
        if not key or not (_PORTABLE_KEY.match(key) or _WINDOWS_COMPAT_KEY.match(key)):
            invalid.add(key or raw_key)
            continue
        upper = key.upper()
        if _is_forbidden(upper, value):
            blocked.add(upper)
    return sorted(blocked), sorted(invalid)


def check_env(env: Mapping[str, str]) -> None:
    """Refuse ``PATH`` and loader/injection overrides with OpenClaw's messages.

    A request's ``env`` is a set of literal overrides on top of the daemon's
    environment; OpenClaw refuses (not filters) the dangerous ones on host
    exec, and so do we.
    """
    blocked, invalid = forbidden_env_keys(env)
    if not blocked and not invalid:
        return
    path_blocked = "PATH" in blocked
    if path_blocked and len(blocked) == 1 and not invalid:
        raise RequestError("Security Violation: Custom 'PATH' variable is forbidden during host execution.")
    if len(blocked) == 1 and not invalid:
        raise RequestError(
            f"Security Violation: Environment variable '{blocked[0]}' is forbidden during host execution."
        )
    details = []
    if blocked:
        details.append(f"blocked override keys: {', '.join(blocked)}")
    if invalid:
        details.append(f"invalid non-portable override keys: {', '.join(invalid)}")
    suffix = "; ".join(details)
    if path_blocked:
        raise RequestError(
            f"Security Violation: Custom 'PATH' variable is forbidden during host execution ({suffix})."
        )
    raise RequestError(f"Security Violation: {suffix}.")


# ---------------------------------------------------------------- exec request

#: OpenClaw's exec schema fields (plus ``awaitResults`` from its newest docs).
OPENCLAW_EXEC_FIELDS = (
    "title", "command", "workdir", "env", "yieldMs", "background", "timeoutSeconds",
    "pty", "elevated", "host", "ask", "node", "awaitResults",
)  # fmt: skip
#: Identity fields the OpenClaw plugin (or pcexec) adds, and the daemon's stream flag.
IDENTITY_FIELDS = ("agentId", "sessionKey", "agentWorkspace")
EXEC_FIELDS = OPENCLAW_EXEC_FIELDS + IDENTITY_FIELDS + ("stream",)

EXEC_HOST_VALUES = ("auto", "sandbox", "gateway", "node")
#: OpenClaw's refusal of ``host=sandbox`` without a sandbox runtime, word for word.
HOST_SANDBOX_UNAVAILABLE = (
    "exec host=sandbox requires a sandbox runtime for this session.\n"
    'Enable sandbox mode (`agents.defaults.sandbox.mode="non-main"` or `"all"`) '
    "or use host=auto/gateway/node."
)
TITLE_MAX_CHARS = 120


@dataclass(frozen=True, slots=True)
class ExecRequest:
    """One validated exec request.

    ``yield_ms`` is already clamped, and is 0 when ``background`` is set (the
    call returns at once). ``timeout_seconds`` 0 means no timeout. Identity
    fields are None when absent; the daemon decides whether it needs them.
    """

    command: str
    workdir: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    yield_ms: int = 10_000
    background: bool = False
    timeout_seconds: float = 1800
    pty: bool = False
    title: str | None = None
    agent_id: str | None = None
    session_key: str | None = None
    agent_workspace: str | None = None
    host: str = "gateway"
    await_results: bool = False
    stream: bool = False

    @property
    def sandboxed(self) -> bool:
        return self.host == "sandbox"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if _is_number(value):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _optional(body: Mapping[str, Any], key: str, what: str, valid: Callable[[Any], bool],
              expected: str) -> Any:
    """``body[key]``, None when absent or null; RequestError when ``valid`` refuses it."""
    value = body.get(key)
    if value is None:
        return None
    if not valid(value):
        raise RequestError(f'{what} parameter "{key}" must be {expected}, not {_type_name(value)}')
    return value


def _opt_str(body: Mapping[str, Any], key: str, what: str = "exec") -> str | None:
    return _optional(body, key, what, lambda v: isinstance(v, str), "a string")


def _opt_bool(body: Mapping[str, Any], key: str, what: str = "exec") -> bool | None:
    return _optional(body, key, what, lambda v: isinstance(v, bool), "true or false")


def _opt_number(body: Mapping[str, Any], key: str, what: str = "exec") -> float | None:
    return _optional(body, key, what, lambda v: _is_number(v) and not math.isnan(v), "a number")


def _js_typeof(value: Any) -> str:
    """JavaScript's ``typeof`` (OpenClaw's words for a wrong type)."""
    if isinstance(value, bool):
        return "boolean"
    if _is_number(value):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object"


def _setting(settings: Any, name: str, default: Any) -> Any:
    if settings is None:
        return default
    try:
        return settings[name]
    except KeyError:
        return default


def _clamp(value: float | None, default: int, low: int, high: int) -> int:
    """OpenClaw's ``clampWithDefault`` (then floored to whole milliseconds)."""
    if value is None:
        return default
    return int(min(max(value, low), high))


def parse_exec_request(body: Mapping[str, Any], settings: Any = None) -> ExecRequest:
    """Validate an exec request body (OpenClaw's exec arguments + identity fields).

    ``settings`` is a :class:`paddedcell.config.Settings` (None: built-in
    defaults); it supplies ``supervisor.default_yield_ms``, ``min_yield_ms``,
    ``max_yield_ms``, ``default_timeout_seconds`` and ``sandbox``.
    """
    if not isinstance(body, Mapping):
        raise RequestError(f"exec request must be a JSON object, not {_type_name(body)}")
    # Unknown fields are ignored, as OpenClaw's exec ignores them; only "timeout"
    # is refused, with OpenClaw's words (``assertSupportedExecParams``).
    if "timeout" in body:
        raise RequestError('exec parameter "timeout" is unsupported; use "timeoutSeconds" instead')

    command = body.get("command")
    if command is None or command == "":
        raise RequestError("Provide a command to start.")
    if not isinstance(command, str):
        raise RequestError(f'exec parameter "command" must be a string, not {_type_name(command)}')
    if "\x00" in command:
        raise RequestError("exec command contains a NUL byte; remove it")

    workdir = _opt_str(body, "workdir")
    if workdir is not None:
        if workdir == "":
            workdir = None  # "Omit/empty string: default"
        elif "\x00" in workdir:
            raise RequestError('exec parameter "workdir" contains a NUL byte')
        # A blank or missing directory is a failed *result* (nothing ran), as in
        # OpenClaw: see ``supervisor.service.resolve_workdir``.

    raw_env = body.get("env")
    env: dict[str, str] = {}
    if raw_env is not None:
        if not isinstance(raw_env, Mapping):
            raise RequestError(f'exec parameter "env" must be an object of strings, not {_type_name(raw_env)}')
        for key, value in raw_env.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise RequestError(
                    f'exec parameter "env" must map names to strings; "{key}" is {_type_name(value)}'
                )
            if "\x00" in key or "\x00" in value or "=" in key:
                raise RequestError(f'exec parameter "env" entry "{key}" is not a valid variable')
            env[key] = value
        check_env(env)
        # OpenClaw applies an override under its trimmed name.
        env = {key.strip(): value for key, value in env.items()}

    default_yield = int(_setting(settings, "supervisor.default_yield_ms", 10_000))
    min_yield = int(_setting(settings, "supervisor.min_yield_ms", 10))
    max_yield = int(_setting(settings, "supervisor.max_yield_ms", 120_000))
    background = bool(_opt_bool(body, "background"))
    # OpenClaw clamps the configured default too (``clampWithDefault`` in exec-run).
    default_yield = _clamp(default_yield, default_yield, min_yield, max_yield)
    yield_ms = _clamp(_opt_number(body, "yieldMs"), default_yield, min_yield, max_yield)

    await_results = bool(_opt_bool(body, "awaitResults"))
    if await_results and background:
        raise RequestError("awaitResults cannot be combined with background=true; drop one of them")
    if background:
        yield_ms = 0

    timeout = _opt_number(body, "timeoutSeconds")
    if timeout is None:
        timeout = _setting(settings, "supervisor.default_timeout_seconds", 1800)
    elif timeout < 0 or math.isinf(timeout):
        raise RequestError('exec parameter "timeoutSeconds" must be 0 (no timeout) or a positive number of seconds')
    if float(timeout).is_integer():
        timeout = int(timeout)

    pty = bool(_opt_bool(body, "pty"))

    title = _opt_str(body, "title")
    if title is not None and len(title) > TITLE_MAX_CHARS:
        raise RequestError(f'exec parameter "title" is longer than {TITLE_MAX_CHARS} characters; shorten it')

    if _opt_bool(body, "elevated"):
        # OpenClaw's words when tools.elevated is not enabled (pcexec never elevates).
        session_key = body.get("sessionKey")
        context = (f"Context: session={session_key.strip()}\n"
                   if isinstance(session_key, str) and session_key.strip() else "")
        raise RequestError(
            "elevated is not available right now (runtime=direct).\n"
            "Failing gates: enabled (tools.elevated.enabled / agents.entries.*.tools.elevated.enabled)\n"
            f"{context}"
            "Fix-it keys:\n"
            "- tools.elevated.enabled\n"
            "- tools.elevated.allowFrom.<provider>\n"
            "- agents.entries.*.tools.elevated.enabled\n"
            "- agents.entries.*.tools.elevated.allowFrom.<provider>",
            multiline=True,
        )

    host_raw = body.get("host")
    host = "gateway"
    if host_raw is not None:
        if not isinstance(host_raw, str):
            raise RequestError(
                f"Invalid exec host value type {_js_typeof(host_raw)}. Allowed values: {', '.join(EXEC_HOST_VALUES)}."
            )
        normalized = host_raw.strip().lower()
        if normalized and normalized not in EXEC_HOST_VALUES:
            raise RequestError(f'Invalid exec host "{host_raw}". Allowed values: {", ".join(EXEC_HOST_VALUES)}.')
        if normalized == "node":
            raise RequestError(
                "exec host not allowed (requested node; pcexec runs commands on this host only; "
                "omit host or use host=auto/gateway)."
            )
        if normalized == "sandbox":
            if str(_setting(settings, "supervisor.sandbox", "none")) == "none":
                raise RequestError(HOST_SANDBOX_UNAVAILABLE, multiline=True)
            host = "sandbox"

    if _opt_str(body, "node") is not None:
        raise RequestError('exec parameter "node" needs host=node, which pcexec does not support; drop it')

    ask = _opt_str(body, "ask")
    if ask is not None:
        normalized_ask = ask.strip().lower()
        if normalized_ask not in ("", "off", "on-miss", "always"):
            raise RequestError(f'Invalid exec ask "{ask}". Allowed values: off, on-miss, always.')
        if normalized_ask in ("on-miss", "always"):
            raise RequestError(
                f"pcexec has no approval flow, so ask={normalized_ask} cannot be honoured; "
                "drop ask or use OpenClaw's exec for commands that need approval"
            )

    identity = {key: _opt_str(body, key) for key in IDENTITY_FIELDS}
    stream = bool(_opt_bool(body, "stream"))

    return ExecRequest(
        command=command,
        workdir=workdir,
        env=env,
        yield_ms=yield_ms,
        background=background,
        timeout_seconds=timeout,
        pty=pty,
        title=title,
        agent_id=identity["agentId"],
        session_key=identity["sessionKey"],
        agent_workspace=identity["agentWorkspace"],
        host=host,
        await_results=await_results,
        stream=stream,
    )


# ---------------------------------------------------------------- process action

PROCESS_ACTIONS = (
    "list", "poll", "log", "write", "send-keys", "submit", "paste", "kill", "clear", "remove",
)  # fmt: skip
PROCESS_FIELDS = (
    "action", "sessionId", "data", "keys", "hex", "literal", "text", "bracketed", "eof",
    "offset", "limit", "timeout", "agentId", "sessionKey",
)  # fmt: skip
#: ``MAX_POLL_WAIT_MS`` in ``bash-tools.process.ts``.
MAX_POLL_WAIT_MS = 30_000


@dataclass(frozen=True, slots=True)
class ProcessAction:
    """One validated process action. ``timeout_ms`` is clamped to 0–30000."""

    action: str
    session_id: str | None = None
    data: str | None = None
    eof: bool = False
    keys: tuple[str, ...] | None = None
    hex: tuple[str, ...] | None = None  # noqa: A003 - OpenClaw's name
    literal: str | None = None
    text: str | None = None
    bracketed: bool = True
    offset: int | None = None
    limit: int | None = None
    timeout_ms: int = 0
    agent_id: str | None = None
    session_key: str | None = None


def _poll_wait_ms(value: Any) -> int:
    """``resolvePollWaitMs``: numbers and integer strings, clamped; else 0."""
    if _is_number(value) and math.isfinite(value):
        return max(0, min(MAX_POLL_WAIT_MS, math.floor(value)))
    if isinstance(value, str) and re.fullmatch(r"[+-]?\d+", value.strip()):
        return max(0, min(MAX_POLL_WAIT_MS, int(value.strip())))
    return 0


def _opt_str_list(body: Mapping[str, Any], key: str) -> tuple[str, ...] | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise RequestError(f'process parameter "{key}" must be an array of strings')
    return tuple(value)


def _opt_line_number(body: Mapping[str, Any], key: str) -> int | None:
    value = _opt_number(body, key, "process")
    if value is None:
        return None
    if not math.isfinite(value):
        raise RequestError(f'process parameter "{key}" must be a finite number of lines')
    return max(0, math.floor(value))


def parse_process_action(body: Mapping[str, Any]) -> ProcessAction:
    """Validate a process action body (OpenClaw's process arguments + ``agentId``)."""
    if not isinstance(body, Mapping):
        raise RequestError(f"process request must be a JSON object, not {_type_name(body)}")
    action = body.get("action")
    if action not in PROCESS_ACTIONS:
        raise RequestError(f"Invalid process action. Expected one of: {', '.join(PROCESS_ACTIONS)}")
    # Unknown fields are ignored, as OpenClaw's process tool ignores them.
    session_id = _opt_str(body, "sessionId", "process")
    if action != "list" and not session_id:
        raise RequestError("sessionId is required for this action.")
    bracketed = _opt_bool(body, "bracketed", "process")
    return ProcessAction(
        action=action,
        session_id=session_id or None,
        data=_opt_str(body, "data", "process"),
        eof=bool(_opt_bool(body, "eof", "process")),
        keys=_opt_str_list(body, "keys"),
        hex=_opt_str_list(body, "hex"),
        literal=_opt_str(body, "literal", "process"),
        text=_opt_str(body, "text", "process"),
        bracketed=bracketed is not False,
        offset=_opt_line_number(body, "offset"),
        limit=_opt_line_number(body, "limit"),
        timeout_ms=_poll_wait_ms(body.get("timeout")),
        agent_id=_opt_str(body, "agentId", "process"),
        session_key=_opt_str(body, "sessionKey", "process"),
    )
