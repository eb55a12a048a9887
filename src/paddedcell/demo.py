"""``make demo``: a throwaway vault, one secret, and pcexec printing it as ######.

Everything happens in a temporary PADDEDCELL_HOME and workspace that are
removed at the end; nothing on this machine is touched. The demo runs the real
console scripts (pass_mgr, pcexec, paddedcell redact) exactly as a user would.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

from . import AGENT_CONTEXT_VARIABLES



def _tool(name: str) -> str:
    """The console script installed beside this interpreter."""
    return str(Path(sys.executable).with_name(name))


def _run(argv: list[str], env: dict[str, str], stdin: str | None = None,
         cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=env, input=stdin, capture_output=True, text=True, timeout=60,
                          cwd=cwd)


def _say(text: str) -> None:
    print(f"\033[1m{text}\033[0m" if sys.stdout.isatty() else text, flush=True)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="paddedcell-demo-") as tmp:
        home, workspace = Path(tmp) / "home", Path(tmp) / "workspace"
        workspace.mkdir()
        human = {k: v for k, v in os.environ.items() if k not in AGENT_CONTEXT_VARIABLES}
        human["PADDEDCELL_HOME"] = str(home)
        admin_password = secrets.token_urlsafe(18)
        db_password = "hunter2-" + secrets.token_hex(8)

        _say("1. A human initialises a throwaway vault and stores a database password:")
        steps = [
            ([_tool("pass_mgr"), "admin", "init", "--password-stdin"], admin_password + "\n"),
            # "--": a random password may begin with "-" (token_urlsafe does, 1 time in 32),
            # which would read as an option.
            ([_tool("pass_mgr"), "set", "--", "demo-agent", str(workspace), "db", db_password,
              admin_password], None),
        ]
        for argv, stdin in steps:
            done = _run(argv, human, stdin)
            if done.returncode != 0:
                print(f"demo: {' '.join(argv[:3])} failed: {done.stderr.strip()}", file=sys.stderr)
                return 1
        print(f"   pass_mgr set demo-agent {workspace} db {db_password} ******")

        agent = dict(human, AGENT_ID="demo-agent", AGENT_WORKSPACE=str(workspace))
        command = ('echo "connecting as app with password $(pass_mgr get db)"; '
                   'printf "%s" "$(pass_mgr get db)" | base64')
        _say("\n2. The agent runs a command that uses the secret, through pcexec:")
        print(f"   $ pcexec '{command}'")
        # In the workspace, as an agent runs: the sandbox shows it nothing else.
        done = _run([_tool("pcexec"), command], agent, cwd=workspace)
        print("   " + done.stdout.rstrip("\n").replace("\n", "\n   "))
        leaked = db_password in done.stdout + done.stderr
        failing = _run([_tool("pcexec"), "echo $(pass_mgr get no-such-key)"], agent,
                       cwd=workspace)
        print("   A key that does not exist runs nothing:")
        print(f"   $ pcexec 'echo $(pass_mgr get no-such-key)'\n   exit {failing.returncode}: "
              f"{failing.stderr.strip() or failing.stdout.strip()}")

        _say("\n3. Any stream can be filtered, however its bytes are split:")
        redact = subprocess.Popen([_tool("paddedcell"), "redact", "--secret", db_password],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=human)
        half = len(db_password) // 2
        out, _ = redact.communicate(f"log: token={db_password[:half]}".encode()
                                    + f"{db_password[half:]} done\n".encode(), timeout=60)
        print("   " + out.decode(errors="replace").rstrip())
        leaked = leaked or db_password.encode() in out

        if leaked or done.returncode != 0 or "######" not in done.stdout or failing.returncode != 3:
            print("demo: FAILED — the secret was not masked as expected", file=sys.stderr)
            return 1
        _say("\nThe agent used the password; it never saw it. The vault is removed now.")
        return 0


if __name__ == "__main__":
    sys.exit(main())
