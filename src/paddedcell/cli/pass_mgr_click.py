"""The click commands of ``pass_mgr`` (everything but the fast ``get`` path)."""

from __future__ import annotations

import os
import sys
import termios
from typing import Callable

import click

from .. import AGENT_CONTEXT_VARIABLES as AGENT_MARKERS
from .. import __version__
from .. import exits
from ..pass_mgr_grammar import OPS, UsageError
from .pass_mgr_get import (PROG, agent_env, fail, load_settings, os_error_line,
                       refuse_in_agent_context, require_ready, run_get)

ARGV_WARNING = ("warning: a password given on the command line is visible to other processes "
                "(ps, /proc/PID/cmdline); give - to type it at the terminal instead")


class TerminalError(Exception):
    pass


def read_tty(prompt: str) -> str:
    """One line from the controlling terminal with echo off; never from stdin.

    ``getpass`` falls back to reading a piped stdin when /dev/tty cannot be
    opened; a person at a terminal is the point here, so we fail instead.
    """
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        raise TerminalError("no terminal: this needs a person at a terminal (/dev/tty cannot be "
                            "opened); for automation use --password-stdin") from None
    try:
        old = termios.tcgetattr(fd)
        quiet = list(old)
        quiet[3] &= ~(termios.ECHO | termios.ECHONL)
        os.write(fd, prompt.encode())
        termios.tcsetattr(fd, termios.TCSAFLUSH, quiet)
        try:
            data = b""
            while not data.endswith(b"\n"):
                chunk = os.read(fd, 1024)
                if not chunk:
                    break
                data += chunk
        finally:
            termios.tcsetattr(fd, termios.TCSAFLUSH, old)
            os.write(fd, b"\n")
    finally:
        os.close(fd)
    if not data.endswith(b"\n"):
        raise TerminalError("aborted at the prompt (end of input)")
    return data[:-1].rstrip(b"\r").decode("utf-8", "replace")


def read_tty_twice(prompt: str, again: str) -> str:
    first = read_tty(prompt)
    if read_tty(again) != first:
        raise TerminalError("the two entries do not match; run the command again")
    return first


def _vault_call(fn: Callable, *args, **kwargs):
    """Run a vault operation; its errors become one stderr line and their exit code."""
    from ..vault.errors import VaultError

    try:
        return fn(*args, **kwargs)
    except VaultError as exc:
        fail(str(exc), exc.exit_code)
    except TerminalError as exc:
        fail(str(exc), exits.ERROR)
    except OSError as exc:
        fail(os_error_line(exc), exits.ERROR)


def _say(message: str) -> None:
    click.echo(f"{PROG}: {message}", err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name=PROG)
def cli() -> None:
    """PaddedCell's encrypted per-agent secret store.

    Agents: `pass_mgr get KEY` inside a pcexec command, `generate`, `rotate`,
    `unset`, `list`, `history` (AGENT_ID and AGENT_WORKSPACE come from the
    environment). Humans: `admin init`, `set`.
    """
    os.umask(0o077)


class _Number(click.ParamType):
    """An option's whole number as the grammar reads it (ASCII digits in its range; click's
    own INT would take '٣' through ``int``)."""

    name = "integer"

    def __init__(self, option):
        self.option = option

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        try:
            return self.option.value(str(value))
        except UsageError as exc:
            self.fail(str(exc), param, ctx)


def grammar(op_name: str) -> Callable:
    """KEY and the options of an agent command, from the one grammar's table
    (:data:`paddedcell.pass_mgr_grammar.OPS`): click reads what the channel, the fast
    get path and the command scanner read."""
    op = OPS[op_name]

    def decorate(command: Callable) -> Callable:
        for option in reversed(op.options.values()):
            if option.takes_value:
                command = click.option(option.name, option.dest, default=None, metavar="N",
                                       help=option.help, type=_Number(option))(command)
            else:
                command = click.option(option.name, option.dest, is_flag=True,
                                       help=option.help)(command)
        if op.key is not None:
            command = click.argument("key", required=op.key == "required")(command)
        return cli.command(op_name)(command)

    return decorate


@grammar("get")
def get(key: str, version: int | None) -> None:
    """Print KEY's value and a newline."""
    raise SystemExit(run_get(key, version))


def _refuse_print_to_agents() -> None:
    """``generate --print`` shows plaintext: not inside an agent session (docs/design.md §1).
    AGENT_ID and AGENT_WORKSPACE alone are how a human names the store."""
    marker = next((name for name in AGENT_MARKERS if name in os.environ
                   and name not in ("AGENT_ID", "AGENT_WORKSPACE")), None)
    from ..agent_session import inside_agent_session

    if marker or inside_agent_session():
        why = f"{marker} is set" if marker else "this is an agent session"
        fail(f"pass_mgr generate --print shows the value, which agents never see ({why}); "
             "generate without --print, and use $(pass_mgr get KEY) in commands", exits.FORBIDDEN)


def _agent_command() -> tuple[object, str, str]:
    settings = load_settings()
    require_ready(settings)
    agent_id, workspace = agent_env()
    return settings, agent_id, workspace


@grammar("generate")
def generate(key: str, length: int | None, no_symbols: bool, force: bool, show: bool) -> None:
    """Store a fresh random value under KEY without printing it.

    Values are letters, digits and - _ . : @ % + = (with --no-symbols: letters and
    digits), starting with a letter or digit: nothing a shell or printf %q quotes,
    and never the mask character #.
    """
    from ..vault.api import generate_secret

    if show:
        _refuse_print_to_agents()
    settings, agent_id, workspace = _agent_command()
    change = _vault_call(generate_secret, agent_id, workspace, key, length=length,
                         symbols=not no_symbols, force=force, settings=settings)
    _tell_daemon(settings, agent_id, workspace)
    if show:
        click.echo(change.value)
    _say(f"generated {key} (version {change.version}, {len(change.value)} characters)"
         + ("" if show else "; the value was not printed"))


@grammar("unset")
def unset(key: str) -> None:
    """Delete KEY and its history."""
    from ..vault.api import unset_secret

    settings, agent_id, workspace = _agent_command()
    _vault_call(unset_secret, agent_id, workspace, key, settings=settings)
    _say(f"removed {key}")


@grammar("rotate")
def rotate(key: str | None) -> None:
    """New random value for KEY; without KEY, re-encrypt the store under a new data key."""
    from ..vault.api import rotate_secret, rotate_store

    settings, agent_id, workspace = _agent_command()
    if key is None:
        _vault_call(rotate_store, agent_id, workspace, settings=settings)
        _say(f"re-encrypted the store of {agent_id} under a fresh data key")
    else:
        change = _vault_call(rotate_secret, agent_id, workspace, key, settings=settings)
        _tell_daemon(settings, agent_id, workspace)
        _say(f"rotated {key} to version {change.version}; the previous value stays in its "
             "history")


@grammar("list")
def list_() -> None:
    """Key names, one per line (no values); a bound key adds a tab and its hosts."""
    from ..egress.binding import list_line
    from ..vault.api import key_bindings, list_keys

    settings, agent_id, workspace = _agent_command()
    bound = _vault_call(key_bindings, agent_id, workspace, settings=settings)
    for key in _vault_call(list_keys, agent_id, workspace, settings=settings):
        click.echo(list_line(key, bound.get(key)))


@grammar("history")
def history(key: str) -> None:
    """KEY's kept versions, newest first, without values."""
    from ..vault.api import key_history

    settings, agent_id, workspace = _agent_command()
    versions = _vault_call(key_history, agent_id, workspace, key, settings=settings)
    for index, (version, created) in enumerate(versions):
        click.echo(f"{version}\t{created}" + ("\tcurrent" if index == 0 else ""))


def _binding_options(command: Callable) -> Callable:
    """--hosts, --inject and --allow-plain-http, shared by set and bind."""
    command = click.option("--allow-plain-http", is_flag=True,
                           help="Also send the value to its hosts over plain http://.")(command)
    command = click.option("--inject", type=click.Choice(["header", "basic", "body"]),
                           default="header", show_default=True,
                           help="Where the proxy puts the value: headers and URL; only "
                                "Authorization: Basic; or headers, URL and body.")(command)
    return click.option("--hosts", metavar="HOST[,HOST...]",
                        help="Bind the value to these hosts (api.github.com, *.example.com, "
                             "host:port).")(command)


def _binding(hosts: str | None, inject: str, allow_plain_http: bool):
    """The Binding the options describe (None without --hosts); a bad one exits 2."""
    if hosts is None:
        if inject != "header" or allow_plain_http:
            fail("--inject and --allow-plain-http need --hosts", exits.USAGE)
        return None
    from ..egress.binding import Binding, BindingError

    try:
        return Binding.parse(hosts, inject, allow_plain_http)
    except BindingError as exc:
        fail(str(exc), exits.USAGE)


@cli.command("bind")
@click.argument("agent_id")
@click.argument("agent_workspace")
@click.argument("key")
@click.argument("admin_passwd", default="-")
@_binding_options
@click.option("--unbind", is_flag=True, help="Remove KEY's binding (the value stays).")
def bind(agent_id: str, agent_workspace: str, key: str, admin_passwd: str, hosts: str | None,
         inject: str, allow_plain_http: bool, unbind: bool) -> None:
    """Human only: bind an existing KEY to the hosts its value may travel to.

    The admin password is asked at the terminal (or given, like set's). Inside a session
    with egress on, the agent then gets a placeholder for KEY, and the session's proxy
    puts the real value only into requests to these hosts (docs/design.md §6).
    """
    from ..vault.api import bind_secret

    refuse_in_agent_context("pass_mgr bind")
    if unbind == (hosts is not None):
        fail("give --hosts HOST[,HOST...] or --unbind", exits.USAGE)
    binding = None if unbind else _binding(hosts, inject, allow_plain_http)
    settings = load_settings()
    require_ready(settings)
    if admin_passwd != "-":
        _say(ARGV_WARNING)
    else:
        admin_passwd = _vault_call(read_tty, "Admin password: ")
    workspace = os.path.abspath(os.path.expanduser(agent_workspace))
    _vault_call(bind_secret, agent_id, workspace, key, binding, admin_passwd, settings=settings)
    _arm_daemon(settings, admin_passwd)
    _say(f"unbound {key} for {agent_id}" if binding is None
         else f"bound {key} for {agent_id} to {binding.describe()}")


@cli.command("set")
@click.argument("agent_id")
@click.argument("agent_workspace")
@click.argument("key")
@click.argument("passwd")
@click.argument("admin_passwd")
@click.option("--allow-short", is_flag=True,
              help="Store a value under vault.min_length (8) characters anyway.")
@_binding_options
def set_(agent_id: str, agent_workspace: str, key: str, passwd: str, admin_passwd: str,
         allow_short: bool, hosts: str | None, inject: str, allow_plain_http: bool) -> None:
    """Human only: set KEY for an agent. Give - for a password to type it at the terminal.

    Values under vault.min_length (8) characters are refused unless --allow-short.
    With --hosts the value is bound: inside a session with egress on, the agent gets a
    placeholder and the proxy sends the value to those hosts only (docs/design.md §6).
    """
    from ..vault.api import set_secret

    refuse_in_agent_context("pass_mgr set")
    binding = _binding(hosts, inject, allow_plain_http)
    settings = load_settings()
    require_ready(settings)
    if passwd != "-" or admin_passwd != "-":
        _say(ARGV_WARNING)
    if passwd == "-":
        passwd = _vault_call(read_tty_twice, f"Secret for {key}: ", f"Repeat secret for {key}: ")
    if admin_passwd == "-":
        admin_passwd = _vault_call(read_tty, "Admin password: ")
    workspace = os.path.abspath(os.path.expanduser(agent_workspace))
    change = _vault_call(set_secret, agent_id, workspace, key, passwd, admin_passwd,
                         settings=settings, allow_short=allow_short, binding=binding)
    _tell_daemon(settings, agent_id, workspace)
    _arm_daemon(settings, admin_passwd)
    _say(f"set {key} for {agent_id} (version {change.version})"
         + (f", bound to {binding.describe()}" if binding else ""))
    for line in _short_secret_notes(len(passwd), settings):
        _say(line)


def _tell_daemon(settings, agent_id: str, workspace: str) -> None:
    """A running daemon masks the new value in every live session that could print it
    before this command returns (``POST /vault/changed``: names the store, never a
    value). No daemon, or one that does not answer: its store check notices within
    supervisor.scan_interval_seconds."""
    if not os.path.exists(settings.home / "run" / settings["daemon.socket_name"]):
        return
    from ..daemon.client import DaemonClient, DaemonError

    try:
        with DaemonClient(settings, timeout=10.0) as client:
            client.call("POST", "/vault/changed", {"agentId": agent_id,
                                                  "agentWorkspace": workspace})
    except (DaemonError, OSError) as exc:
        _say(f"note: the daemon was not told of the new value ({exc}); its store check "
             "masks it in running sessions within a second or so")


def _daemon_running(settings) -> bool:
    return os.path.exists(settings.home / "run" / settings["daemon.socket_name"])


def _arm_daemon(settings, admin_password: str) -> bool:
    """A human just gave the admin password: a running daemon masks it in every session's
    output from now on (``POST /vault/guard``): it loads the runtime file this process
    wrote, or else checks the password itself (the admin KDF; vault/guard.py).
    False when no daemon runs or it refused."""
    if not _daemon_running(settings):
        return False
    from ..daemon.client import DaemonClient, DaemonError
    from ..vault.guard_runtime import stamp

    try:
        with DaemonClient(settings, timeout=120.0) as client:
            # This process just wrote the runtime file: the daemon loads it instead of
            # paying the admin KDF again (the password only when that file cannot serve).
            if stamp(settings.home_text) is None or client.call(
                    "POST", "/vault/guard", {"reload": True}).get("guard") != "armed":
                client.call("POST", "/vault/guard", {"password": admin_password})
    except (DaemonError, OSError) as exc:
        _say(f"note: the daemon's admin-password guard was not armed ({exc}); run: "
             "pass_mgr admin guard")
        return False
    return True


def guard_report(settings) -> tuple[bool, str]:
    """(whether the admin password is masked now and after a daemon restart, one line):
    the running daemon's admin-password guard, or the one a daemon that starts would have,
    and where it is kept between daemon starts (a runtime file on tmpfs) or that it is
    memory only here. What ``admin status`` and ``paddedcell doctor`` say."""
    from ..vault.admin import AdminPaths
    from ..vault.api import guard_state
    from ..vault.errors import VaultError
    from ..vault.guard import ARMED, WAITING_HINT, kept_where

    kept = kept_where(AdminPaths(settings.home_text))
    lasting = not kept.startswith("memory only")
    if not _daemon_running(settings):
        try:
            state = guard_state(settings)
        except (OSError, VaultError) as exc:
            return False, f"cannot read the vault ({exc})"
        if state == ARMED:
            return lasting, f"no daemon is running; one that starts masks the admin password ({kept})"
        return False, ("no daemon is running; one that starts waits for a human to authenticate "
                       f"(run: pass_mgr admin guard) before it masks the admin password ({kept})")
    from ..daemon.client import DaemonClient, DaemonError

    try:
        with DaemonClient(settings, timeout=10.0) as client:
            state = client.call("GET", "/vault/guard").get("guard")
    except (DaemonError, OSError) as exc:
        return False, f"the daemon did not say ({exc})"
    if state == ARMED:
        return lasting, f"on (the daemon masks the admin password in session output; {kept})"
    return False, f"{WAITING_HINT} ({kept})" if state == "waiting" else str(state)


def _guard_line(settings) -> str:
    return guard_report(settings)[1]


def _short_secret_notes(length: int, settings) -> list[str]:
    """What a human should know about a short value (said at set, never to the agent)."""
    from ..vault.settings import VaultSettings

    variants, fragments = VaultSettings.of(settings).variant_min_length, 16
    notes = []
    if length < variants:
        notes.append(f"warning: the value is {length} characters: output masks it as itself "
                     f"only; its base64, hex, URL and JSON forms are masked from {variants} "
                     "characters, and which lines get masked can confirm a guessed value")
    elif length < fragments:
        notes.append(f"note: the value is {length} characters: it and its encoded forms are "
                     f"masked; partial runs of it only from {fragments} characters")
    return notes


@cli.group()
def admin() -> None:
    """Admin password, status, leak check and recovery (humans only, but status)."""


def _stdin_lines(count: int) -> list[str]:
    lines = sys.stdin.read().splitlines()
    if len(lines) < count or not all(lines[:count]):
        fail(f"--password-stdin expects {count} non-empty line(s) on stdin", exits.USAGE)
    return lines[:count]


@admin.command("init")
@click.option("--password-stdin", is_flag=True,
              help="Read the new password from stdin (and the current one from the next line "
                   "when changing it), for automation.")
def admin_init(password_stdin: bool) -> None:
    """Set the admin password (asked twice at the terminal); after a leak, set a new one."""
    from ..vault.api import init_admin, vault_status

    refuse_in_agent_context("pass_mgr admin init")
    settings = load_settings()
    state = vault_status(settings)
    current = None
    asks_current = state in ("ready", "tampered")
    if password_stdin:
        lines = _stdin_lines(2 if asks_current else 1)
        password, current = lines[0], (lines[1] if asks_current else None)
    else:
        if asks_current:
            current = _vault_call(read_tty, "Current admin password: ")
        elif state == "locked":
            _say("the vault is locked after an admin password leak; choose a new password")
        password = _vault_call(read_tty_twice, "New admin password: ",
                               "Repeat new admin password: ")
    report = _vault_call(init_admin, password, settings, current_password=current)
    _arm_daemon(settings, password)
    for failure in report.failed:
        _say(f"warning: could not re-wrap {failure}")
    _say(f"initialized (was {report.previous_state}); {report.rewrapped} store(s) re-wrapped "
         "to the new admin key")


@admin.command("status")
def admin_status() -> None:
    """Print uninitialized, ready, locked or tampered (and say so on stderr when an admin init
    was interrupted: the next admin init or recover finishes or undoes it); for a human,
    then one line per bound key: bound, agent, key, hosts, store directory."""
    from ..vault.admin import AdminPaths
    from ..vault.api import vault_status

    settings = load_settings()
    state = _vault_call(vault_status, settings)
    click.echo(state)
    if os.path.lexists(AdminPaths(settings.home_text).admin_next_file):
        _say("an admin init was interrupted before it finished; run pass_mgr admin init again")
    if not _in_agent_context():  # other agents' bindings are not an agent's business
        if state in ("ready", "locked"):
            _say(f"admin-password guard: {_guard_line(settings)}")
        from ..egress.binding import describe_record
        from ..vault.api import all_bindings

        for agent_id, directory, bound in _vault_call(all_bindings, settings):
            for key, record in bound.items():
                click.echo(f"bound\t{agent_id}\t{key}\t{describe_record(record)}\t{directory}")


def _in_agent_context() -> bool:
    """An agent's marker variable or an agent session (AGENT_ID and AGENT_WORKSPACE alone
    are how a human names a store, as for generate --print)."""
    from ..agent_session import inside_agent_session

    return any(name in os.environ for name in AGENT_MARKERS
               if name not in ("AGENT_ID", "AGENT_WORKSPACE")) or inside_agent_session()


@admin.command("guard")
@click.option("--password-stdin", is_flag=True, help="Read the admin password from stdin.")
def admin_guard(password_stdin: bool) -> None:
    """Give the admin password so that daemons mask it in session output: the running one,
    and those that start later until reboot (a sealed runtime file on tmpfs)."""
    from ..vault.api import arm_guard

    refuse_in_agent_context("pass_mgr admin guard")
    settings = load_settings()
    password = (_stdin_lines(1)[0] if password_stdin
                else _vault_call(read_tty, "Admin password: "))
    unkept = _vault_call(arm_guard, password, settings)  # checked here first: exit 5 when wrong
    if _daemon_running(settings):
        if not _arm_daemon(settings, password):
            sys.exit(exits.ERROR)
    elif unkept:
        fail(f"no daemon is running, and nothing can keep the guard for one that starts "
             f"({unkept}): start it (paddedcell serve), then run this again", exits.NOT_READY)
    _say(f"admin-password guard: {_guard_line(settings)}")


@admin.command("check-leak")
@click.option("--source", default="pass_mgr admin check-leak", show_default=True,
              help="Where the text came from (logged on a hit).")
def admin_check_leak(source: str) -> None:
    """Scan stdin for the admin password (through the daemon, which holds the guard):
    exit 10 and lock the vault on a hit; exit 3 when nothing can check it."""
    refuse_in_agent_context("pass_mgr admin check-leak")
    from ..daemon.client import DaemonClient, DaemonError
    from ..vault.api import guard_state

    settings = load_settings()
    # Invalid UTF-8 becomes U+FFFD: the password is UTF-8, so it is found where it is whole.
    text = sys.stdin.buffer.read().decode("utf-8", "replace")
    if _vault_call(guard_state, settings) == "uninitialized":  # reads admin.json: 6 if damaged
        return  # no admin password: nothing to find

    if not _daemon_running(settings):
        fail("no daemon is running to check the text: start it (paddedcell serve), then "
             "run: pass_mgr admin guard", exits.NOT_READY)
    try:
        with DaemonClient(settings, timeout=300.0) as client:
            answer = client.call("POST", "/vault/check-leak", {"text": text, "source": source})
    except (DaemonError, OSError) as exc:
        fail(f"the daemon did not check the text ({exc})", exits.ERROR)
    if answer.get("leak"):
        fail("the admin password was found in the text; the vault is now locked "
             "(a human must run: pass_mgr admin init)", exits.LEAK)
    if answer.get("guard") == "waiting":
        fail("the text was not checked: the daemon's admin-password guard is waiting for a "
             "human; run: pass_mgr admin guard", exits.NOT_READY)


@admin.command("recover")
@click.option("--password-stdin", is_flag=True, help="Read the admin password from stdin.")
def admin_recover(password_stdin: bool) -> None:
    """The host key is lost: make a new one and re-open every known store with the admin password."""
    from ..vault.api import recover

    refuse_in_agent_context("pass_mgr admin recover")
    settings = load_settings()
    password = (_stdin_lines(1)[0] if password_stdin
                else _vault_call(read_tty, "Admin password: "))
    report = _vault_call(recover, password, settings)
    _arm_daemon(settings, password)
    for failure in report.failed:
        _say(f"warning: could not recover {failure}")
    _say(f"recovered: a new host key; {report.rewrapped} store(s) re-wrapped")
