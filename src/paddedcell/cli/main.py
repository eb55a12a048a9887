"""``paddedcell``: the umbrella command (daemon control, redact, process)."""

from __future__ import annotations

import os
import signal
import sys
import time

import click

from .. import __version__, config


class _LazyGroup(click.Group):
    """Subcommands kept in their own modules are imported only when they run (or when
    ``--help`` lists them): start-up is what every ``paddedcell`` command pays, and
    importing them all cost ``remote list`` a tenth of it."""

    #: command name -> (module under paddedcell.cli, attribute)
    lazy = {"redact": ("redact", "redact"), "process": ("process", "process"),
            "remote": ("remote", "remote"), "doctor": ("doctor", "doctor")}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy and name not in self.commands:
            import importlib

            module, attribute = self.lazy[name]
            self.add_command(getattr(importlib.import_module(f".{module}", __package__), attribute), name)
        return super().get_command(ctx, name)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="paddedcell")
def cli() -> None:
    """PaddedCell: agents use secrets without seeing them."""


@cli.command()
def serve() -> None:
    """Run the daemon in the foreground (the CLIs start it on demand)."""
    from ..daemon import app

    sys.exit(app.main())


@cli.command()
def status() -> None:
    """Say whether the daemon runs, and its pid and version."""
    from ..daemon.client import DaemonClient, DaemonError

    try:
        with DaemonClient(timeout=5.0) as client:
            health = client.call("GET", "/healthz")
    except DaemonError as exc:
        click.echo(f"stopped ({exc.message})")
        sys.exit(1)
    click.echo(f"running (pid {health.get('pid')}, version {health.get('version')}, "
               f"up {health.get('uptimeSeconds')} s)")


@cli.command()
@click.option("--timeout", default=10.0, show_default=True, help="Seconds to wait for it to exit.")
def stop(timeout: float) -> None:
    """Stop the daemon (SIGTERM to the pid in its pidfile)."""
    from ..daemon.app import read_pid
    from ..daemon.client import DaemonClient

    settings = config.load()
    client = DaemonClient(settings, timeout=2.0)
    pid = read_pid(settings)
    if pid is None or not client.healthy():
        click.echo("not running")
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not client.healthy():
            click.echo(f"stopped (pid {pid})")
            return
        time.sleep(0.05)
    click.echo(f"paddedcell: daemon pid {pid} did not stop within {timeout} s (it ends its "
               f"sessions first); retry with a longer --timeout, or kill -KILL {pid}", err=True)
    sys.exit(1)


@cli.command()
@click.option("--agent-id", help="The agent whose secrets and sessions the tools use (default: $AGENT_ID).")
@click.option("--agent-workspace", type=click.Path(file_okay=False),
              help="That agent's workspace (default: $AGENT_WORKSPACE).")
def mcp(agent_id: str | None, agent_workspace: str | None) -> None:
    """Serve pcexec, pcprocess and list_keys to an MCP client over stdio."""
    agent_id = agent_id or os.environ.get("AGENT_ID")
    agent_workspace = agent_workspace or os.environ.get("AGENT_WORKSPACE")
    if not agent_id or not agent_workspace:
        raise click.UsageError("paddedcell mcp needs an identity: --agent-id ID --agent-workspace DIR "
                               "(or AGENT_ID and AGENT_WORKSPACE in the server's env in your client config)")
    from ..mcp import serve

    sys.exit(serve(agent_id, os.path.abspath(agent_workspace)))


def main() -> None:
    # A bad setting is one line and exit 2, as in every CLI (config.exit_on_bad_settings).
    config.exit_on_bad_settings("paddedcell", lambda: cli(prog_name="paddedcell"))


if __name__ == "__main__":
    main()
