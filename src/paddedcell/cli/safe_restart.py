"""``safe-restart``: restart the gateway once every agent is frozen, with rollback.

It asks the daemon ``query-restart`` every ``--interval`` seconds until the
answer is OK (every agent frozen, seed §1.4.3), then returns. The restart job
itself (wait ``--delay``, restart command, status checks within
``--recover-timeout``, rollback on failure, notifications) runs inside the
daemon, because this process usually lives in the gateway it restarts.

Two faces:
- plain (agents, scripts, no terminal): prints ``NOT_READY …`` lines, then
  ``OK …`` or ``ALREADY_SCHEDULED …``, exit 0. Ctrl-C while waiting cancels
  the restart and unfreezes every agent.
- interactive (a human at a terminal, or ``--interactive``): a live table of
  the agents and their states, the countdown, the job's log as it streams, and
  the outcome (exit 0 ok, 1 rolled back). Ctrl-C before the restart command
  starts cancels cleanly; after it starts, it asks before leaving the job
  running.

Exit codes: 0 OK / ALREADY_SCHEDULED / restart ok · 1 restart failed, daemon
error or ``--timeout`` expired (plain mode) · 2 usage · 130 cancelled.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

import click

from .. import AGENT_CONTEXT_VARIABLES, config

STATE_STYLES = {"idle": "green", "busy": "yellow", "focus": "magenta", "freeze": "cyan",
                "pre-freeze": "blue", "pre-freeze-focus": "blue"}


class Cancelled(Exception):
    pass


def _in_agent_context() -> bool:
    return any(os.environ.get(name) for name in AGENT_CONTEXT_VARIABLES)


class Session:
    """One safe-restart run: the daemon client and the query body."""

    def __init__(self, client: Any, agent_id: str, session_key: str, job: dict[str, Any]):
        self.client = client
        self.agent_id = agent_id
        self.session_key = session_key
        self.job = job

    def query(self) -> dict[str, Any]:
        return self.client.call("POST", "/query-restart", {
            "requesterAgentId": self.agent_id, "requesterSessionKey": self.session_key,
            "job": self.job})

    def cancel(self, reason: str) -> dict[str, Any]:
        answer = self.client.call("POST", "/restart-cancel", {
            "requesterAgentId": self.agent_id, "requesterSessionKey": self.session_key,
            "reason": reason})
        if answer.get("cancelled") and answer.get("phase") == "waiting":
            # No job yet, so the daemon has no log to write to: we do.
            _log_line(self.job["log"], f"restart cancelled before OK ({reason}); "
                                       "every agent unfrozen")
        return answer

    def agents(self) -> dict[str, Any]:
        return self.client.call("GET", "/agents")


def _log_line(path: str, text: str) -> None:
    """One line in the job log's format (see paddedcell.restart.job.JobLog)."""
    import datetime as dt

    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"{now} [safe-restart {os.getpid()}] {text}\n")
    except OSError:
        pass


def _say(text: str) -> None:
    click.echo(text)
    sys.stdout.flush()


def run_plain(s: Session, interval: float, timeout: float = 0.0) -> int:
    deadline = time.monotonic() + timeout if timeout > 0 else None
    try:
        while True:
            answer = s.query()
            result = answer.get("result")
            if result == "OK":
                _say(f"OK: every agent is frozen; restart {answer.get('jobId')} runs in "
                     f"{s.job['delaySeconds']:g} s inside the paddedcell daemon; "
                     f"log: {s.job['log']}")
                return 0
            if result == "ALREADY_SCHEDULED":
                _say("ALREADY_SCHEDULED: another restart is already scheduled; not polling")
                return 0
            blocking = answer.get("blocking") or []
            _say(f"NOT_READY: waiting for {len(blocking)} agent(s) to freeze: "
                 f"{', '.join(blocking) or '-'}")
            if deadline is not None and time.monotonic() + interval > deadline:
                s.cancel(f"safe-restart --timeout {timeout:g} s expired")
                _say(f"TIMEOUT: not every agent froze within {timeout:g} s; the restart was "
                     "dropped and every agent unfrozen; try again later")
                return 1
            time.sleep(interval)
    except KeyboardInterrupt:
        s.cancel("safe-restart interrupted (Ctrl-C) while waiting")
        _say("cancelled: the restart was dropped and every agent unfrozen")
        return 130


# -- interactive ---------------------------------------------------------------------


class LogTail:
    """New lines of the job log since we started (the daemon appends to it)."""

    def __init__(self, path: str, keep: int = 14):
        self.path = path
        self.keep = keep
        self.lines: list[str] = []
        try:
            self.offset = os.path.getsize(path)
        except OSError:
            self.offset = 0

    def poll(self) -> list[str]:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except OSError:
            return []
        if b"\n" not in data:
            return []
        data = data[:data.rindex(b"\n") + 1]
        self.offset += len(data)
        new = data.decode("utf-8", "replace").splitlines()
        self.lines = (self.lines + new)[-self.keep:]
        return new


def _render(view: dict[str, Any], headline: str, tail: LogTail | None):
    from rich.console import Group
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    table = Table(title="agents", expand=False)
    for column in ("agent", "state", "workflow", "active sessions"):
        table.add_column(column)
    agents = view.get("agents", [])
    for agent in agents[:40]:
        state = agent["state"]
        # Text, not str: ids and log lines are data, never rich markup.
        table.add_row(Text(agent["agentId"]), Text(state, style=STATE_STYLES.get(state, "")),
                      Text(agent.get("workflow") or ""),
                      Text(", ".join(agent.get("activeSessions") or [])))
    if len(agents) > 40:
        frozen = sum(a["state"] == "freeze" for a in agents)
        table.add_row(f"… {len(agents) - 40} more", f"{frozen}/{len(agents)} frozen", "", "")
    parts: list[Any] = [Text(headline, style="bold"), table]
    if tail is not None:
        parts.append(Panel(Text("\n".join(tail.lines) or "(no output yet)"), title=Text(tail.path)))
    return Group(*parts)


def _ask_leave(console: Any) -> bool:
    console.print("\nThe restart command already started; it can not be cancelled.")
    try:
        return click.confirm("Leave the restart job running in the daemon and exit?", default=False)
    except (click.Abort, EOFError):
        return True


def run_interactive(s: Session, interval: float) -> int:
    from rich.console import Console
    from rich.live import Live

    console = Console(markup=False, highlight=False)  # paths and ids are data
    job_id: str | None = None
    due_at = 0.0
    tail = LogTail(s.job["log"])  # before the first query: OK writes the first line
    next_query = 0.0
    try:
        with Live(console=console, refresh_per_second=8, transient=False) as live:
            # 1. Freeze the fleet.
            while job_id is None:
                try:
                    if time.monotonic() >= next_query:
                        answer = s.query()
                        next_query = time.monotonic() + interval
                        if answer["result"] == "ALREADY_SCHEDULED":
                            live.update(_render(s.agents(), "ALREADY_SCHEDULED: another restart "
                                                "is already scheduled", None))
                            return 0
                        if answer["result"] == "OK":
                            job_id, due_at = answer["jobId"], float(answer["dueAt"])
                            break
                    left = max(0.0, next_query - time.monotonic())
                    live.update(_render(s.agents(), f"NOT_READY: waiting for every agent to "
                                        f"freeze (next query in {left:.0f} s) · Ctrl-C cancels",
                                        None))
                    time.sleep(0.25)
                except KeyboardInterrupt:
                    s.cancel("safe-restart interrupted (Ctrl-C) while waiting")
                    raise Cancelled from None
            # 2. Countdown, job output, outcome.
            outcome = _follow(s, live, job_id, due_at, tail, console)
    except Cancelled:
        console.print("cancelled: the restart was dropped and every agent unfrozen")
        return 130
    if outcome is None:
        console.print(f"left running: restart {job_id} continues in the daemon; follow "
                      f"{s.job['log']}")
        return 0
    if outcome.get("outcome") == "ok":
        console.print(f"restart {job_id} finished: ok; every agent unfrozen")
        return 0
    console.print(f"restart {job_id} {outcome.get('outcome')}: "
                  f"{outcome.get('detail') or ''}; see {s.job['log']}")
    return 1


def _follow(s: Session, live: Any, job_id: str, due_at: float, tail: LogTail,
            console: Any) -> dict[str, Any] | None:
    """Show the job until it ends; None when the user leaves it running."""
    while True:
        try:
            tail.poll()
            view = s.agents()
            g = view["global"]
            last = g.get("lastJob") or {}
            if last.get("jobId") == job_id:
                tail.poll()
                live.update(_render(view, f"restart {job_id}: {last.get('outcome')}", tail))
                return last
            job = g.get("job") or {}
            phase = job.get("phase", "?")
            if phase == "delay":
                left = max(0.0, due_at - float(g.get("now") or time.time()))
                headline = f"OK: every agent frozen · restart in {left:.1f} s · Ctrl-C cancels"
            else:
                headline = f"restart {job_id}: phase {phase} · Ctrl-C asks before leaving"
            live.update(_render(view, headline, tail))
            time.sleep(0.2)
        except KeyboardInterrupt:
            from ..daemon.client import DaemonError

            try:
                answer = s.cancel("safe-restart interrupted (Ctrl-C) before the restart command")
            except DaemonError as exc:
                if exc.status != 409:
                    raise
            else:
                if answer.get("cancelled"):
                    raise Cancelled from None
                continue  # the job already ended: the next pass shows its outcome
            live.stop()
            if _ask_leave(console):
                return None
            live.start()


# -- entry point ---------------------------------------------------------------------


def _default_session_key() -> str:
    return os.environ.get("PADDEDCELL_SESSION_KEY") or f"cli:{socket.gethostname()}:{os.getpid()}"


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--rollback", "rollback", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Script run when the gateway does not come back.")
@click.option("--log", "log_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="File every step of the restart job is appended to.")
@click.option("--agent-id", default=None, help="Requesting agent (default $AGENT_ID, else 'operator').")
@click.option("--session-key", default=None,
              help="Requesting session; it is not frozen (default $PADDEDCELL_SESSION_KEY).")
@click.option("--interval", type=float, default=None, help="Seconds between query-restart polls [restart.interval_seconds].")
@click.option("--delay", type=float, default=None, help="Seconds from OK to the restart command [restart.delay_seconds].")
@click.option("--recover-timeout", type=float, default=None,
              help="Seconds for the status command to succeed [restart.recover_timeout_seconds].")
@click.option("--restart-cmd", default=None, help="Restart command [restart.restart_cmd].")
@click.option("--status-cmd", default=None, help="Status command [restart.status_cmd].")
@click.option("--timeout", type=float, default=0.0, show_default=True,
              help="Give up (and unfreeze everyone) when not OK after this many seconds; 0 = never.")
@click.option("--interactive/--no-interactive", default=None,
              help="Live view (default: on at a terminal outside agent context).")
def cli(rollback: Path, log_path: Path, agent_id: str | None, session_key: str | None,
        interval: float | None, delay: float | None, recover_timeout: float | None,
        restart_cmd: str | None, status_cmd: str | None, timeout: float,
        interactive: bool | None) -> None:
    """Restart the gateway once every agent is frozen; roll back if it does not recover."""
    from ..daemon.client import DaemonError, ensure_daemon

    settings = config.load()
    interval = settings["restart.interval_seconds"] if interval is None else interval
    if interval <= 0:
        raise click.BadParameter("must be > 0", param_hint="--interval")
    for name, value in (("--delay", delay), ("--recover-timeout", recover_timeout)):
        if value is not None and value < 0:
            raise click.BadParameter("must be >= 0", param_hint=name)
    log_path = log_path.expanduser().absolute()
    if not log_path.parent.is_dir():
        raise click.BadParameter(f"directory {log_path.parent} does not exist", param_hint="--log")
    job = {"rollback": str(rollback.expanduser().absolute()), "log": str(log_path),
           "delaySeconds": float(settings["restart.delay_seconds"] if delay is None else delay),
           "recoverTimeoutSeconds": float(settings["restart.recover_timeout_seconds"]
                                          if recover_timeout is None else recover_timeout),
           "restartCmd": restart_cmd or settings["restart.restart_cmd"],
           "statusCmd": status_cmd or settings["restart.status_cmd"]}
    if interactive is None:
        interactive = sys.stdin.isatty() and sys.stdout.isatty() and not _in_agent_context()
    try:
        client = ensure_daemon(settings)
        s = Session(client, agent_id or os.environ.get("AGENT_ID") or "operator",
                    session_key or _default_session_key(), job)
        if interactive:
            # The human at this terminal expects Ctrl-C to cancel, whatever SIGINT
            # disposition we inherited (a shell's background job, nohup or a CI
            # runner start us with SIGINT ignored).
            signal.signal(signal.SIGINT, signal.default_int_handler)
        code = (run_interactive(s, float(interval)) if interactive
                else run_plain(s, float(interval), timeout))
    except DaemonError as exc:
        click.echo(f"safe-restart: {exc.message}", err=True)
        code = 1
    sys.exit(code)


def main() -> None:
    # A bad setting is one line and exit 2, as in every CLI (config.exit_on_bad_settings).
    config.exit_on_bad_settings("safe-restart", lambda: cli(prog_name="safe-restart"))


if __name__ == "__main__":
    main()
