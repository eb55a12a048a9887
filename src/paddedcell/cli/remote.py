"""``paddedcell remote``: the operator's client for remote OpenClaw gateways.

A thin edge over :mod:`paddedcell.remote`: it reads secrets from a prompt or stdin
(never argv), renders the library's events and maps errors to exit codes. Three
ways to print: a terminal gets rich tables, spinners and colours; without one,
plain lines, one event per line; ``--json`` gives NDJSON (one object per line).
Everything a gateway sends passes through a redactor of the operator's own
secrets (every configured remote's tokens and passwords) before it is printed.

Exit codes: 0 ok; 1 error; 2 usage; 3 the remote waits for pairing approval
(``exits.NOT_READY``); 130 cancelled with Ctrl-C.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from typing import Any

import click

from .. import config, exits

EXIT_CANCELLED = 130
_COLOURS = {"connected": "green", "pending": "dark_orange", "error": "red"}
_DECISION_WORDS = {"o": "allow-once", "once": "allow-once", "y": "allow-once", "yes": "allow-once",
                   "allow": "allow-once", "allow-once": "allow-once",
                   "a": "allow-always", "always": "allow-always", "allow-always": "allow-always",
                   "r": "deny", "reject": "deny", "n": "deny", "no": "deny", "deny": "deny"}


class Output:
    """Where events go: a terminal (rich), plain lines, or NDJSON, all redacted."""

    def __init__(self, json_mode: bool, settings: Any, secrets: list[str]):
        from ..redactor import new_filter  # the redactor's one factory (redactor.* settings)

        self.json = json_mode
        self.tty = not json_mode and sys.stdout.isatty()
        self._filter = new_filter(secrets, settings)  # a template: fresh() per use
        self._stream = self._filter.fresh()
        self._midline = False
        self.console = None
        if self.tty:
            from rich.console import Console
            self.console = Console(highlight=False)
        self.status = None

    # -- redaction -------------------------------------------------------------------

    def clean(self, text: str) -> str:
        """One whole line or record, redacted."""
        if not text:
            return text
        one = self._filter.fresh()
        return (one.feed(text.encode("utf-8")) + one.flush()).decode("utf-8", errors="replace")

    def clean_stream(self, text: str) -> str:
        """Streamed reply text: a secret split across deltas is held until it is whole."""
        return self._stream.feed(text.encode("utf-8")).decode("utf-8", errors="replace")

    def end_stream(self) -> str:
        rest = self._stream.flush().decode("utf-8", errors="replace")
        self._stream = self._filter.fresh()
        return rest

    # -- writing ---------------------------------------------------------------------

    def record(self, kind: str, fields: dict[str, Any]) -> None:
        """One NDJSON line, the whole line redacted (every string field in it)."""
        import json

        line = json.dumps({"event": kind, **fields}, ensure_ascii=False, separators=(",", ":"))
        click.echo(self.clean(line))

    def line(self, text: str, style: str | None = None) -> None:
        text = self.clean(text)
        if self._midline:
            self._write("\n")
        if self.console is not None:
            from rich.text import Text
            self.console.print(Text(text, style=style or ""))
        else:
            click.echo(text)

    def _write(self, text: str) -> None:
        if not text:
            return
        sys.stdout.write(text)
        sys.stdout.flush()
        self._midline = not text.endswith("\n")

    def reply(self, text: str) -> None:
        """Streamed reply text: as it comes on a terminal; one ``reply`` line per delta without."""
        import json

        out = self.clean_stream(text)
        if self.json:
            if out:
                self.record("delta", {"text": out})
        elif self.tty:
            self._write(out)
        elif out:
            click.echo("reply " + json.dumps(out, ensure_ascii=False))

    def finish_reply(self) -> None:
        import json

        rest = self.end_stream()
        if self.json:
            if rest:
                self.record("delta", {"text": rest})
        elif self.tty:
            self._write(rest)
            if self._midline:
                self._write("\n")
        elif rest:
            click.echo("reply " + json.dumps(rest, ensure_ascii=False))

    def fail(self, message: str, code: int = exits.ERROR) -> None:
        message = self.clean(message)
        if self.json:
            self.record("error", {"message": message})
        else:
            if self._midline:
                self._write("\n")
            click.echo(f"paddedcell remote: {message}", err=True)
        sys.exit(code)


def _settings():
    # A ConfigError passes through: one line and exit 2 (config.exit_on_bad_settings).
    return config.load()


def _store(settings):
    from ..remote.store import RemoteStore

    with _one_line_errors():
        return RemoteStore(settings.home_text, lock_timeout=float(settings["vault.lock_timeout_seconds"]))


def _read_secret(kind: str) -> str:
    """The token or password from a hidden prompt, or one line of piped stdin."""
    if sys.stdin.isatty():
        value = click.prompt(f"Gateway {kind}", hide_input=True, default="", show_default=False)
    else:
        value = sys.stdin.readline().rstrip("\r\n")
    if not value:
        raise click.UsageError(f"no {kind} given: type it at the prompt or pipe it on stdin")
    return value


def _output(json_mode: bool, store, settings) -> Output:
    try:
        secrets = store.all_secret_values()
    except Exception as exc:  # a damaged box: say so, but never print unredacted
        raise click.ClickException(str(exc)) from None
    return Output(json_mode, settings, secrets)


def _session(name: str | None, json_mode: bool):
    """(settings, store, output, remote) for a command about one remote (or none)."""
    from ..remote.errors import RemoteError

    settings = _settings()
    store = _store(settings)
    out = _output(json_mode, store, settings)
    if name is None:
        return settings, store, out, None
    try:
        return settings, store, out, store.get(name)
    except RemoteError as exc:
        out.fail(str(exc))


def _run(out: Output, coro_fn, *args, cancelled: str = "cancelled"):
    """trio.run with the library's errors as one line and the exit codes above."""
    import trio

    from ..remote.connection import ConnectRefused, single_error
    from ..remote.errors import ChoiceError, RemoteError

    try:
        try:
            return trio.run(coro_fn, *args)
        except BaseExceptionGroup as group:  # a nursery of the command: its one real error
            inner = single_error(group)
            if inner is group and group.subgroup(KeyboardInterrupt) is not None:
                raise KeyboardInterrupt from None
            raise inner from None
    except KeyboardInterrupt:
        if out.status is not None:
            out.status.stop()
        out.fail(cancelled, EXIT_CANCELLED)
    except ConnectRefused as exc:
        if out.status is not None:
            out.status.stop()
        out.fail(str(exc), exits.NOT_READY if exc.failure.kind == "pending" else exits.ERROR)
    except ChoiceError as exc:
        if out.status is not None:
            out.status.stop()
        out.fail(str(exc), exits.USAGE)
    except RemoteError as exc:
        if out.status is not None:
            out.status.stop()
        out.fail(str(exc))


@contextmanager
def _one_line_errors():
    """The library's errors as click's one-line error (exit 1)."""
    from ..remote.errors import RemoteError

    try:
        yield
    except RemoteError as exc:
        raise click.ClickException(str(exc)) from None


@click.group()
def remote() -> None:
    """Remote OpenClaw gateways: configure, pair, chat, approve (docs/remote.md)."""


# -- 01-04: list, add, edit, remove ---------------------------------------------------

@remote.command("list")
@click.option("--json", "json_mode", is_flag=True, help="One JSON object per remote (NDJSON).")
def list_command(json_mode: bool) -> None:
    """The configured remotes and their last known state."""
    settings = _settings()
    store = _store(settings)
    remotes = store.list()
    if json_mode:
        import json

        if remotes:
            click.echo("\n".join(json.dumps(item.as_json(), ensure_ascii=False) for item in remotes))
        return
    if not remotes:
        click.echo("No remote gateways yet; add one with: paddedcell remote add NAME URL")
        return
    if not sys.stdout.isatty():
        click.echo("\n".join(f"{item.name}\t{'' if item.status == 'unknown' else item.status}\t"
                             f"{item.protocol}\t{item.url}" for item in remotes))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table("Name", "Status", "Protocol", "URL", box=None, header_style="bold")
    for item in remotes:
        status = Text(item.status, style=_COLOURS[item.status]) if item.status in _COLOURS else Text("")
        table.add_row(item.name, status, item.protocol, item.url)
    Console(highlight=False).print(table)


@remote.command("add")
@click.argument("name")
@click.argument("url")
@click.option("--auth", "auth_type", type=click.Choice(["none", "token", "password"]), default="none",
              show_default=True, help="How the gateway authenticates; the secret is read from a "
                                      "prompt or stdin, never from the command line.")
@click.option("--allow-insecure", is_flag=True, help="Do not verify the gateway's TLS certificate (wss:).")
@click.option("--description", help="A note shown by list --json.")
def add_command(name: str, url: str, auth_type: str, allow_insecure: bool, description: str | None) -> None:
    """Add a remote gateway (a new Ed25519 device identity is made for it)."""
    settings = _settings()
    store = _store(settings)
    secret = _read_secret(auth_type) if auth_type != "none" else None
    with _one_line_errors():
        item = store.add(name, url, auth_type=auth_type, secret=secret, allow_insecure=allow_insecure,
                         description=description)
    click.echo(f"added {item.name} ({item.url}), device {item.device_id[:16]}…; "
               f"next: paddedcell remote pair {item.name}")


@remote.command("edit")
@click.argument("name")
@click.option("--name", "new_name", help="Rename it.")
@click.option("--url", help="A new gateway URL.")
@click.option("--auth", "auth_type", type=click.Choice(["none", "token", "password"]),
              help="A new auth kind (the secret is read from a prompt or stdin).")
@click.option("--secret", "new_secret", is_flag=True, help="Replace the token or password (prompt/stdin).")
@click.option("--allow-insecure/--verify-tls", default=None, help="TLS verification for wss:.")
@click.option("--description")
def edit_command(name: str, new_name: str | None, url: str | None, auth_type: str | None,
                 new_secret: bool, allow_insecure: bool | None, description: str | None) -> None:
    """Change a remote; a new URL or credentials reset its state until the next connect."""
    settings = _settings()
    store = _store(settings)
    with _one_line_errors():
        current = store.get(name)
        kind = auth_type or current.auth_type
        secret = _read_secret(kind) if (auth_type not in (None, "none") or new_secret) and kind != "none" else None
        item = store.edit(name, new_name=new_name, url=url, auth_type=auth_type, secret=secret,
                          allow_insecure=allow_insecure, description=description)
    click.echo(f"updated {item.name} ({item.url})")


@remote.command("remove")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def remove_command(name: str, yes: bool) -> None:
    """Remove a remote and every secret kept for it."""
    settings = _settings()
    store = _store(settings)
    with _one_line_errors():
        store.get(name)
        if not yes:
            if not sys.stdin.isatty():
                raise click.UsageError(f"removing {name} needs confirmation: add --yes")
            click.confirm(f"Remove the remote gateway 「{name}」 and its device identity?", abort=True)
        store.remove(name)
    click.echo(f"removed {name}")


# -- 05 / 06: test ----------------------------------------------------------------------

@remote.command("test")
@click.argument("target")
@click.option("--allow-insecure", is_flag=True, help="For a URL: do not verify TLS.")
@click.option("--json", "json_mode", is_flag=True, help="NDJSON.")
def test_command(target: str, allow_insecure: bool, json_mode: bool) -> None:
    """Test a configured remote (full handshake) or a bare URL (socket + challenge only)."""
    from ..remote.client import RemoteClient
    from ..remote.connection import probe_url

    settings = _settings()
    store = _store(settings)
    out = _output(json_mode, store, settings)
    item = store.find(target.strip())
    if item is None:
        async def probe():
            return await probe_url(target, settings=settings, allow_insecure=allow_insecure)
        result = _run(out, probe)
        if json_mode:
            out.record("test", {"state": "reachable", **result})
        else:
            what = "an OpenClaw gateway (challenge received)" if result["challenge"] else \
                "a WebSocket server (no challenge: an older gateway?)"
            out.line(f"ok: {result['url']} is {what}")
        return
    client = RemoteClient(store, item, settings, _printer(out))

    async def handshake():
        return await client.handshake("test")
    result = _run(out, handshake)
    if json_mode:
        out.record("test", result)
    else:
        out.line(f"ok: {item.name} connected (gateway {result['serverVersion']}, protocol "
                 f"{result['protocol']}, device token {result['deviceToken']})", "green")


# -- 07: pair ---------------------------------------------------------------------------

@remote.command("pair")
@click.argument("name")
@click.option("--json", "json_mode", is_flag=True, help="NDJSON.")
def pair_command(name: str, json_mode: bool) -> None:
    """Connect and wait (5:00) for the gateway's operator to approve this device."""
    from ..remote.client import RemoteClient
    from ..remote.protocol import countdown

    settings, store, out, item = _session(name, json_mode)

    def emit(kind: str, fields: dict[str, Any]) -> None:
        if kind == "pending":
            text = (f"waiting for approval {countdown(fields['remaining'])}; on the gateway host run: "
                    f"{fields['command']}")
            if out.tty:
                if out.status is None:
                    from rich.status import Status
                    out.status = Status(out.clean(text), console=out.console)
                    out.status.start()
                else:
                    out.status.update(out.clean(text))
            elif fields["polled"]:
                if json_mode:
                    out.record("pending", {**fields, "remaining": round(fields["remaining"])})
                else:
                    out.line(f"pending {countdown(fields['remaining'])} {fields['command']}")
        elif kind == "poll-error":
            if json_mode:
                out.record(kind, fields)
            else:
                out.line(f"poll failed: {fields['message']} (still waiting)", "red")
        elif kind == "state" and json_mode:
            out.record(kind, fields)

    client = RemoteClient(store, item, settings, emit)

    async def pair():
        """The pairing wait, ended by Ctrl-C through a signal receiver: a cancel is
        level-triggered, so no handler on the way (a dial's error group, a poll's
        ``except``) can turn the interrupt into one more poll."""
        import signal

        import trio

        result = None
        with trio.open_signal_receiver(signal.SIGINT) as interrupts:
            async with trio.open_nursery() as nursery:
                async def wait_for_approval() -> None:
                    nonlocal result
                    result = await client.pair()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(wait_for_approval)
                async for _ in interrupts:
                    nursery.cancel_scope.cancel()
                    break
        if result is None:
            raise KeyboardInterrupt
        return result
    try:
        result = _run(out, pair, cancelled=f"cancelled; {name} stays pending (run paddedcell remote pair "
                                           f"{name} again once the request is approved)")
    finally:
        if out.status is not None:
            out.status.stop()
            out.status = None
    if json_mode:
        out.record("paired", result)
    else:
        out.line(f"paired: {name} connected (gateway {result['serverVersion']}); the device token is "
                 f"stored sealed", "green")


# -- 08-11: chat and approvals ----------------------------------------------------------

class Decider:
    """Approval decisions from stdin. On a terminal: one prompt at a time (a lock),
    each answered by the next line; without one: lines ``ID DECISION`` (an id prefix
    is enough), so a script or a second program can answer several at once."""

    def __init__(self, out: Output, interactive: bool):
        import trio

        self.out = out
        self.interactive = interactive
        self.lock = trio.Lock()
        self.waiting: dict[str, Any] = {}
        self.early: list[tuple[str, str]] = []
        self._send, self._lines = trio.open_memory_channel[str](64)

    def start_reader(self, nursery) -> None:
        import trio

        token = trio.lowlevel.current_trio_token()
        send = self._send

        def pump() -> None:
            for raw in sys.stdin:
                try:
                    token.run_sync_soon(send.send_nowait, raw.strip())
                except (trio.RunFinishedError, trio.WouldBlock):
                    return
        threading.Thread(target=pump, name="remote-stdin", daemon=True).start()
        if not self.interactive:
            nursery.start_soon(self._dispatch)

    async def _dispatch(self) -> None:
        async for line in self._lines:
            parts = line.split()
            if len(parts) == 2 and parts[1].lower() in _DECISION_WORDS:
                self.early.append((parts[0], _DECISION_WORDS[parts[1].lower()]))
                self._match()

    def _match(self) -> None:
        """Pair decision lines with waiting requests (a line may come before its request)."""
        for prefix, decision in list(self.early):
            matches = [key for key in self.waiting if key.startswith(prefix)]
            if len(matches) == 1:
                self.early.remove((prefix, decision))
                self.waiting.pop(matches[0]).send_nowait(decision)

    async def decide(self, approval) -> str:
        import trio

        if not self.interactive:
            send, receive = trio.open_memory_channel[str](1)
            self.waiting[approval.id] = send
            self._match()
            try:
                return await receive.receive()
            finally:
                self.waiting.pop(approval.id, None)
        async with self.lock:
            keys = {"allow-once": "[o]nce", "allow-always": "[a]lways", "deny": "[r]eject"}
            choices = " / ".join(keys[d] for d in approval.allowed)
            self.out.line(f"? allow {approval.type} {approval.text!r}  {choices}: ", "bold yellow")
            while True:
                answer = _DECISION_WORDS.get((await self._lines.receive()).lower())
                if answer in approval.allowed:
                    return answer
                self.out.line(f"  answer one of: {choices}")


def _printer(out: Output):
    """The library's events, rendered: a terminal, plain lines, or NDJSON."""
    from ..remote.protocol import countdown

    def emit(kind: str, fields: dict[str, Any]) -> None:
        if kind == "delta":
            out.reply(fields["text"])
            return
        if out.json:
            out.record(kind, fields)
            return
        if kind == "state":
            if fields["state"] != "connected" or not out.tty:
                style = {"reconnecting": "dark_orange", "error": "red", "pending": "dark_orange"}.get(fields["state"])
                out.line(f"state {fields['state']}: {fields['detail']}", style)
        elif kind == "session":
            out.line(f"session {fields['key']} ({fields['how']})", "dim")
        elif kind == "thinking":
            out.line(f"thinking: {fields['text']}", "dim")
        elif kind == "tool":
            summary = f": {fields['summary']}" if fields.get("summary") else ""
            style = {"failed": "red", "completed": "green"}.get(fields["phase"], "cyan")
            out.line(f"tool {fields['phase']} {fields['kind']} {fields['name']}{summary}", style)
        elif kind == "approval":
            out.line(f"approval {fields['id']} {fields['type']}: {fields['text']} "
                     f"(allowed: {', '.join(fields['allowed'])}; auto-reject in "
                     f"{countdown(fields['expiresIn'])})", "bold yellow")
        elif kind == "approval-decided":
            extra = f" ({fields['error']})" if fields.get("error") else ""
            out.line(f"approval {fields['id']} {fields['decision']} by {fields['by']}{extra}",
                     "green" if fields["decision"] != "deny" else "red")
        elif kind == "approval-resolved":
            out.line(f"approval {fields['id']} resolved: {fields['decision']}", "dim")
        elif kind == "gap":
            out.line(f"warning: {fields['missed']} gateway event(s) not delivered (sequence gap)", "dim")
        elif kind == "poll-error":
            out.line(f"poll failed: {fields['message']}", "red")
    return emit


@remote.command("chat")
@click.argument("name")
@click.option("--session", "session_key", help="Session key to resume or create (default: the last one used).")
@click.option("--agent", "agent", help="The gateway agent to talk to (default: the gateway's default agent).")
@click.option("-m", "--message", help="The message (default: read from stdin).")
@click.option("-a", "--attach", "attachments", multiple=True, help="A file to reference as @path (repeatable).")
@click.option("--json", "json_mode", is_flag=True, help="NDJSON events.")
def chat_command(name: str, session_key: str | None, agent: str | None, message: str | None,
                 attachments: tuple[str, ...], json_mode: bool) -> None:
    """Send one message and stream the reply, tool calls and approval requests.

    Approvals are answered on the terminal, or without one by lines 'ID DECISION' on
    stdin (decisions: allow-once, allow-always, deny); unanswered ones are rejected
    after remote.approval_timeout_seconds."""
    import trio

    from ..remote.client import RemoteClient

    if message is None:
        if sys.stdin.isatty():
            raise click.UsageError("give the message with -m TEXT (or pipe it on stdin)")
        message = sys.stdin.read().strip()
    if not message:
        raise click.UsageError("the message is empty")
    settings, store, out, item = _session(name, json_mode)
    client = RemoteClient(store, item, settings, _printer(out))
    interactive = out.tty and sys.stdin.isatty()

    async def chat():
        decider = Decider(out, interactive)
        async with trio.open_nursery() as nursery:
            decider.start_reader(nursery)
            try:
                return await client.chat(message, session=session_key, agent=agent, attachments=list(attachments),
                                         decide=decider.decide)
            finally:
                nursery.cancel_scope.cancel()
    result = _run(out, chat)
    out.finish_reply()
    if out.json:
        out.record("final", {"state": result["state"], "runId": result["runId"],
                             "sessionKey": result["sessionKey"]})
    elif not out.tty:
        click.echo(f"final {result['state']}")
    elif result["state"] != "final":
        out.line(f"({result['state']})", "dark_orange")


@remote.command("approvals")
@click.argument("name")
@click.option("--json", "json_mode", is_flag=True, help="NDJSON events.")
@click.option("--max", "limit", type=int, default=0, help="Exit after deciding this many (0: run until Ctrl-C).")
def approvals_command(name: str, json_mode: bool, limit: int) -> None:
    """Watch a gateway's approval requests (exec and plugin, pcexec's too) and decide them."""
    import trio

    from ..remote.client import RemoteClient

    settings, store, out, item = _session(name, json_mode)
    printer = _printer(out)
    decided = trio.Event() if limit else None
    count = [0]

    def emit(kind: str, fields: dict[str, Any]) -> None:
        printer(kind, fields)
        if kind == "approval-decided" and decided is not None:
            count[0] += 1
            if count[0] >= limit:
                decided.set()

    client = RemoteClient(store, item, settings, emit)
    interactive = out.tty and sys.stdin.isatty()

    async def watch():
        decider = Decider(out, interactive)
        async with trio.open_nursery() as nursery:
            decider.start_reader(nursery)
            if decided is not None:
                async def stop_when_done():
                    await decided.wait()
                    nursery.cancel_scope.cancel()
                nursery.start_soon(stop_when_done)
            await client.watch_approvals(decider.decide)
            nursery.cancel_scope.cancel()
    if not json_mode:
        out.line(f"watching {name} for approval requests (Ctrl-C to stop)", "dim")
    _run(out, watch)


# -- beyond the seed: status ------------------------------------------------------------

@remote.command("status")
@click.argument("names", nargs=-1)
@click.option("--json", "json_mode", is_flag=True, help="NDJSON, one object per gateway.")
def status_command(names: tuple[str, ...], json_mode: bool) -> None:
    """Each gateway's health, version, agents and sessions with active runs, in one table."""
    import trio

    from ..remote.client import RemoteClient
    from ..remote.errors import RemoteError

    settings, store, out, _ = _session(None, json_mode)
    try:
        remotes = [store.get(n) for n in names] if names else store.list()
    except RemoteError as exc:
        out.fail(str(exc))
    rows: list[dict[str, Any]] = []

    async def one(item):
        client = RemoteClient(store, item, settings, lambda kind, fields: None)
        try:
            rows.append(await client.status())
        except RemoteError as exc:
            state = "pending" if getattr(getattr(exc, "failure", None), "kind", "") == "pending" else "error"
            rows.append({"name": item.name, "state": state, "error": str(exc)})

    async def all_of_them():
        async with trio.open_nursery() as nursery:
            for item in remotes:
                nursery.start_soon(one, item)
    _run(out, all_of_them)
    rows.sort(key=lambda row: row["name"])
    if json_mode:
        for row in rows:
            out.record("status", row)
        return
    if not out.tty:
        for row in rows:
            if "error" in row:
                out.line(f"{row['name']}\t{row['state']}\t{row['error']}")
            else:
                out.line(f"{row['name']}\t{row['state']}\t{row['health']}\t{row['version']}\t"
                         f"agents={','.join(a for a in row['agents'] if a)}\tsessions={row['sessions']}\t"
                         f"active={','.join(k for k in row['activeSessions'] if k) or '-'}")
        return
    from rich.table import Table
    from rich.text import Text

    table = Table("Name", "State", "Health", "Version", "Agents", "Sessions", "Active runs",
                  box=None, header_style="bold")
    for row in rows:
        state = Text(row["state"], style=_COLOURS.get(row["state"], ""))
        if "error" in row:
            table.add_row(row["name"], state, Text(out.clean(row["error"]), style="red"), "", "", "", "")
        else:
            table.add_row(row["name"], state, row["health"], out.clean(str(row["version"])),
                          out.clean(", ".join(a for a in row["agents"] if a)), str(row["sessions"]),
                          out.clean(", ".join(k for k in row["activeSessions"] if k) or "-"))
    out.console.print(table)
