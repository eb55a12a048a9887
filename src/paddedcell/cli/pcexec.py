"""``pcexec``: OpenClaw's ``exec`` with secrets resolved and masked.

Plain mode runs in this process (no daemon) and streams redacted stdout and
stderr live to our own, then exits with the command's code: 128+N after
signal N, 124 after a timeout, 3 when a secret could not be resolved (nothing
ran), 2 when the command was refused (nothing ran). ``--background``,
``--yield-ms`` and ``--request`` hand the session to the daemon (started on
demand), because the command must outlive this process.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
from typing import Any

import click

from .. import config
from ..session.protocol import Refusal, answer_within, process_answer_within

EXIT_REFUSED = 2


def _parse_env(pairs: tuple[str, ...]) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{pair!r} is not NAME=VALUE", param_hint="--env")
        env[name] = value
    return env


def _identity(agent_id: str | None, workspace: str | None, session_key: str | None) -> dict[str, str]:
    found = {"agentId": agent_id or os.environ.get("AGENT_ID"),
             "agentWorkspace": workspace or os.environ.get("AGENT_WORKSPACE"),
             "sessionKey": session_key or os.environ.get("OPENCLAW_SESSION_KEY")}
    return {k: v for k, v in found.items() if v}


def _fail(message: str, as_json: bool, code: int = EXIT_REFUSED) -> None:
    if as_json:
        click.echo(json.dumps({"error": message}, ensure_ascii=False))
    else:
        click.echo(f"pcexec: {message}", err=True)
    sys.exit(code)


def _run_foreground(body: dict[str, Any], as_json: bool) -> int:
    """Run in this process: no daemon, live redacted output, the command's exit code.

    No cyclic garbage collection while it starts: importing Trio and the supervisor
    makes tens of thousands of objects that live as long as the process, and the
    collector traversed them ~60 times (58 young and 5 middle collections, 13-26 ms of a
    ~150 ms start). :func:`_supervise` freezes them (later collections skip them, the
    pump's among them) and turns it back on before the command starts."""
    gc.disable()
    settings = config.load()
    probing = str(settings["supervisor.sandbox"]).lower() in ("auto", "namespaces")
    if probing:
        # The namespace sandbox's availability probe (a forked child, ~15-40 ms, mostly
        # in the kernel) runs while this process imports Trio and the supervisor; the
        # spawn collects it (sandbox.available), else the finally below does.
        from ..supervisor import sandbox

        sandbox.start_probe()
    try:
        return _supervise(body, as_json, settings)
    finally:
        if probing:
            sandbox.finish_probe()


def _import_trio():
    """Trio, imported without the ``ldconfig -p`` it runs at import: to name its worker
    threads it looks up ``ctypes.util.find_library("pthread")`` (trio/_core/_thread_cache.py),
    a fork and exec of ldconfig on Linux (2-11 ms and ~13 ms of CPU of every start
    here). Under glibc the answer is known without it: the soname libpthread.so.0
    (since glibc 2.34 a stub whose symbols are libc's). Elsewhere the lookup runs."""
    import ctypes.util

    try:
        glibc = (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (ValueError, OSError):  # not a name this platform knows (macOS)
        glibc = False
    if "trio" in sys.modules or not glibc:
        import trio
        return trio
    find_library = ctypes.util.find_library
    ctypes.util.find_library = lambda name: ("libpthread.so.0" if name == "pthread"
                                             else find_library(name))
    try:
        import trio
    finally:
        ctypes.util.find_library = find_library
    return trio


def _supervise(body: dict[str, Any], as_json: bool, settings) -> int:
    trio = _import_trio()

    from ..audit import AuditLog
    from ..execspec.request import RequestError, parse_exec_request
    from ..execspec.results import failure_reason
    from ..supervisor import Supervisor, become_subreaper
    from ..supervisor.service import ExecRefused, ExecService

    try:
        request = parse_exec_request(body, settings)
    except RequestError as exc:
        _fail(str(exc), as_json)
    settings.home.mkdir(mode=0o700, parents=True, exist_ok=True)
    _borrow_guard(settings)
    become_subreaper()

    outcome: dict[str, Any] = {}

    def live(stream: str, data: bytes) -> None:
        out = sys.stderr.buffer if stream == "stderr" else sys.stdout.buffer
        try:
            out.write(data)
            out.flush()
        except BrokenPipeError:
            # Our reader is gone (`pcexec CMD | head`): end the command as a shell's
            # SIGPIPE ends a writer, and exit quietly with 128 + SIGPIPE.
            _to_devnull(out)
            if "stopped" not in outcome:
                outcome["stopped"] = signal.SIGPIPE
                outcome["scope"].cancel()

    async def stop_on_signal(scope: trio.CancelScope) -> None:
        # Cancelling ends the session's whole tree (TERM, grace, KILL) before we exit.
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
            async for signum in signals:
                outcome["stopped"] = signum
                scope.cancel()
                return

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            outcome["scope"] = nursery.cancel_scope
            nursery.start_soon(stop_on_signal, nursery.cancel_scope)
            supervisor = Supervisor(settings, nursery, audit=AuditLog.for_settings(settings),
                                    forward=forward_to_daemon(settings),
                                    store_changed=tell_daemon_store_changed(settings))
            nursery.start_soon(supervisor.maintain)
            service = ExecService(supervisor)
            try:
                result, session = await service.exec(
                    request, wait_ms=None, on_output=None if as_json else live,
                    stdin_fd=None if request.pty else sys.stdin.fileno(), cwd=os.getcwd())
            except ExecRefused as exc:
                outcome["refused"] = exc.message
            else:
                outcome["result"] = result
                outcome["signal"] = (session.outcome.signal_number
                                     if session is not None and session.outcome else None)
            nursery.cancel_scope.cancel()

    gc.freeze()  # what start-up made lives as long as we do: never traversed again
    gc.enable()
    try:
        trio.run(main)
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    except Exception as exc:
        if os.environ.get("PADDEDCELL_DEBUG"):
            raise
        # No message text: an internal error must not echo command output.
        click.echo(f"pcexec: internal error ({type(exc).__name__}); rerun with "
                   "PADDEDCELL_DEBUG=1 to see the traceback", err=True)
        return 1
    if "stopped" in outcome:
        return 128 + outcome["stopped"]
    if "refused" in outcome:
        _fail(outcome["refused"], as_json)
    result = outcome["result"]
    if as_json:
        click.echo(json.dumps(result.to_json(), ensure_ascii=False))
    else:
        details = result.details
        if result.status == "failed":
            # The output was already streamed: say only why it failed.
            reason = (failure_reason(details["failureKind"], exit_signal=details.get("exitSignal"),
                                     timeout_seconds=request.timeout_seconds)
                      if details.get("aggregated") else result.text)
            click.echo(f"pcexec: {reason}", err=True)
    return result.exit_code


def _borrow_guard(settings) -> None:
    """The admin-password guard lives in the daemon's memory (vault/guard.py): a foreground
    run borrows its filter (hits confirmed by the admin KDF here) when a daemon runs and
    holds one; else it loads the filter's runtime file on tmpfs when there is one
    (vault/guard_runtime.py); else this run's output is not scanned for the admin password,
    as in a daemon still waiting for a human (``pass_mgr admin status`` says which)."""
    if not (os.path.lexists(settings.home / "vault" / "admin.json")
            and os.path.exists(settings.home / "run" / settings["daemon.socket_name"])):
        return
    from ..daemon.client import DaemonClient, DaemonError
    from ..vault import VaultError, borrow_guard

    try:
        with DaemonClient(settings, timeout=10.0) as client:
            answer = client.call("GET", "/vault/guard/filter")
        if isinstance(answer.get("filter"), dict):
            borrow_guard(answer["filter"], settings)
    except (DaemonError, OSError, VaultError, ValueError, KeyError, TypeError):
        pass  # no guard to borrow: as a waiting daemon (admin status says so)


def forward_to_daemon(settings):
    """The foreground supervisor's forwarder: its sessions' daemon requests (a nested
    ``pcexec --background``, ``safe-restart``) go to the daemon's socket, in a worker
    thread; an error answer is a Refusal with the daemon's status."""
    import trio

    def call(method: str, path: str, body: Any) -> dict[str, Any]:
        from ..daemon.client import ensure_daemon

        timeout = (answer_within(body, settings) if path == "/exec" else
                   process_answer_within(body) if path == "/process" else 60.0)
        client = ensure_daemon(settings)  # started on demand: DaemonError is a Refusal
        try:
            return client.call(method, path, body, timeout=timeout)
        finally:
            client.close()

    async def forward(method: str, path: str, body: Any) -> dict[str, Any]:
        return await trio.to_thread.run_sync(call, method, path, body)

    return forward


def tell_daemon_store_changed(settings):
    """The foreground supervisor's word to a running daemon (none is started) that one of
    its sessions set, generated or rotated a value: ``POST /vault/changed`` names the
    store, never a value, and answers once the daemon's sessions mask it. A daemon that
    cannot be told (none, a refusal: this pcexec runs inside one of its sessions) finds
    the change by its store scan (supervisor.scan_interval_seconds)."""
    import trio

    def call(agent_id: str, workspace: str) -> None:
        from ..daemon.client import DaemonClient, DaemonError

        if not (settings.home / "run" / settings["daemon.socket_name"]).exists():
            return
        try:
            with DaemonClient(settings, timeout=10.0) as client:
                client.call("POST", "/vault/changed", {"agentId": agent_id,
                                                      "agentWorkspace": workspace})
        except (DaemonError, OSError):
            pass

    async def tell(agent_id: str, workspace: str) -> None:
        await trio.to_thread.run_sync(call, agent_id, workspace)

    return tell


def _run_daemon(body: dict[str, Any], as_json: bool, raw_request: bool) -> int:
    """Hand the request to the daemon (started on demand); print its answer."""
    from ..daemon.client import DaemonError, ensure_daemon
    from ..execspec.results import ToolResult

    settings = config.load()
    if not body.get("agentId"):
        _fail("background and yielded runs belong to an agent: set AGENT_ID "
              "(and AGENT_WORKSPACE) or pass --agent-id", as_json or raw_request)
    try:
        client = ensure_daemon(settings)
        # The client's default 60 s is shorter than a two-minute yield.
        result = client.call("POST", "/exec", body, timeout=answer_within(body, settings))
    except DaemonError as exc:
        _fail(exc.message, as_json or raw_request, exc.exit_code)
    if as_json or raw_request:
        click.echo(json.dumps(result, ensure_ascii=False))
    else:
        click.echo(ToolResult.from_json(result, "exec").text)
    return ToolResult.from_json(result, "exec").exit_code


def _run_in_session(body: dict[str, Any], as_json: bool, raw_request: bool) -> int:
    """Inside an agent session: the session's channel forwards the request to the daemon
    for the session's agent only (another agent's ``agentId``: exit 5, docs/design.md §1)."""
    from ..execspec.results import ToolResult
    from ..session.client import request

    settings = config.load()
    if not body.get("background") and "yieldMs" not in body:
        body["awaitResults"] = True  # a plain run waits for the end, as outside
    body.setdefault("workdir", os.getcwd())
    try:
        answer = request("exec", timeout=answer_within(body, settings), body=body)
    except Refusal as exc:
        _fail(exc.message, as_json or raw_request, exc.exit_code)
    result = answer["result"]
    if as_json or raw_request:
        click.echo(json.dumps(result, ensure_ascii=False))
    else:
        click.echo(ToolResult.from_json(result, "exec").text)
    return ToolResult.from_json(result, "exec").exit_code


@click.command(context_settings={"help_option_names": ["-h", "--help"],
                                 "ignore_unknown_options": False})
@click.option("--workdir", type=click.Path(file_okay=False), help="Run in this directory.")
@click.option("--env", "env_pairs", multiple=True, metavar="NAME=VALUE",
              help="Extra environment (repeatable); PATH and loader variables are refused.")
@click.option("--timeout-seconds", type=float, help="Kill after this long (0 = never; default 1800).")
@click.option("--pty/--no-pty", default=False, help="Run under a pseudo-terminal.")
@click.option("--yield-ms", type=int, help="Answer 'running' after this long (runs in the daemon).")
@click.option("--background", is_flag=True, help="Start in the daemon and return at once.")
@click.option("--json", "as_json", is_flag=True, help="Print the exec result JSON instead of the output.")
@click.option("--request", "request_file", type=click.File("r"), metavar="FILE|-",
              help="Read an exec request JSON (docs/design.md §4.1); print the exec result JSON.")
@click.option("--agent-id", help="Agent identity (default: $AGENT_ID).")
@click.option("--agent-workspace", help="Agent workspace (default: $AGENT_WORKSPACE).")
@click.option("--session-key", help="OpenClaw session key (default: $OPENCLAW_SESSION_KEY).")
@click.argument("command", nargs=-1, required=False)
def cli(workdir, env_pairs, timeout_seconds, pty, yield_ms, background, as_json, request_file,
        agent_id, agent_workspace, session_key, command) -> None:
    """Run COMMAND like OpenClaw's exec; `$(pass_mgr get KEY)` works, its value never shows.

    Plain runs stream redacted stdout/stderr live and need no daemon; --background,
    --yield-ms and --request hand the session to the daemon (see `paddedcell process`).

    \b
    Exit codes: the command's own; 128+N after signal N; 124 after the timeout;
    3 when a secret could not be resolved and 2 when the command was refused
    (in both cases nothing ran).
    """
    from ..session.client import in_session

    inside = in_session()
    # Inside a session, identity is the session's: the environment is informational
    # and only an explicit claim is sent (for the supervisor to refuse if it differs).
    identity = ({k: v for k, v in (("agentId", agent_id), ("agentWorkspace", agent_workspace),
                                   ("sessionKey", session_key)) if v}
                if inside else _identity(agent_id, agent_workspace, session_key))
    if request_file is not None:
        if command:
            _fail("give either --request or a COMMAND, not both", True)
        try:
            body = json.load(request_file)
        except ValueError as exc:
            _fail(f"--request is not valid JSON: {exc}", True)
        if not isinstance(body, dict):
            _fail("--request must hold a JSON object (an exec request)", True)
        for key, value in identity.items():
            body.setdefault(key, value)
        body.pop("stream", None)  # one result JSON out; streaming is the plugin's
        sys.exit(_run_in_session(body, True, True) if inside else _run_daemon(body, True, True))
    if not command:
        raise click.UsageError("give a COMMAND (or --request FILE)")
    body: dict[str, Any] = {"command": command[0] if len(command) == 1 else " ".join(command)}
    if workdir:
        body["workdir"] = os.path.abspath(workdir)
    if env_pairs:
        body["env"] = _parse_env(env_pairs)
    if timeout_seconds is not None:
        body["timeoutSeconds"] = timeout_seconds
    if pty:
        body["pty"] = True
    body.update(identity)
    if inside:
        if background:
            body["background"] = True
        if yield_ms is not None:
            body["yieldMs"] = yield_ms
        sys.exit(_run_in_session(body, as_json, False))
    if background or yield_ms is not None:
        if background:
            body["background"] = True
        if yield_ms is not None:
            body["yieldMs"] = yield_ms
        body.setdefault("workdir", os.getcwd())
        sys.exit(_run_daemon(body, as_json, False))
    _exit_now(_run_foreground(body, as_json))


def _to_devnull(stream) -> None:
    """Point a closed pipe's file descriptor at /dev/null: what is still buffered for it,
    and the interpreter's last flush, then go nowhere instead of raising again."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, stream.fileno())
    finally:
        os.close(null)


def _exit_now(code: int) -> None:
    """Exit without the interpreter's teardown: freeing every loaded module's objects
    (Trio, attrs, the supervisor) costs a foreground run tens of milliseconds after
    the command is done. What that teardown would still do for us is done here: the
    standard streams are flushed (the audit log writes each record at once)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120  # as the interpreter exits when it cannot flush them
    os._exit(code)


def main() -> None:
    # A bad setting is one line and exit 2, as in every CLI (config.exit_on_bad_settings).
    config.exit_on_bad_settings("pcexec", lambda: cli(prog_name="pcexec"))


if __name__ == "__main__":
    main()
