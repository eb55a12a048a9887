"""The daemon's HTTP core over a real Unix socket: routing, errors, peers, lifecycle."""

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

import pytest
import trio

from paddedcell import config
from paddedcell.daemon.client import DaemonClient, DaemonError, ensure_daemon, socket_path
from paddedcell.daemon.http import HTTPError, Request, Router, serve_unix


def _raw_exchange(path: str, data: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(5)
        sock.connect(path)
        sock.sendall(data)
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks)


async def test_routing_errors_and_keepalive(tmp_path):
    router = Router()

    @router.route("POST", "/echo")
    async def echo(request: Request):
        return {"got": request.require("name"), "q": request.query}

    @router.route("GET", "/boom")
    async def boom(request: Request):
        raise RuntimeError("secret-ish internals")

    @router.route("GET", "/teapot")
    async def teapot(request: Request):
        raise HTTPError(418, "short and stout")

    path = str(tmp_path / "s.sock")
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_unix, router, path)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600

        def client_calls():
            settings = config.load({"PADDEDCELL_HOME": str(tmp_path)})
            client = DaemonClient(settings)
            client.path = path
            results = [client.call("POST", "/echo?x=1", {"name": "n"})]
            for method, route, body in [("GET", "/boom", None), ("GET", "/teapot", None),
                                        ("POST", "/echo", {}), ("GET", "/missing", None),
                                        ("GET", "/echo", None)]:
                try:
                    client.call(method, route, body)
                except DaemonError as exc:
                    results.append((exc.status, exc.message))
            bad_json = _raw_exchange(path, b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 3\r\n"
                                           b"connection: close\r\n\r\n{x}")
            garbage = _raw_exchange(path, b"NOT HTTP AT ALL\r\n\r\n")
            return results, bad_json, garbage

        results, bad_json, garbage = await trio.to_thread.run_sync(client_calls)
        nursery.cancel_scope.cancel()

    assert results[0] == {"got": "n", "q": {"x": "1"}}
    assert results[1] == (500, "internal error in the paddedcell daemon; see its log")
    assert results[2] == (418, "short and stout")
    assert results[3][0] == 400 and "'name'" in results[3][1]
    assert results[4][0] == 404
    assert results[5][0] == 405
    assert b" 400 " in bad_json.split(b"\r\n")[0] and b"not valid JSON" in bad_json
    assert garbage.startswith(b"HTTP/1.1 400")


def test_daemon_single_instance_status_and_stop(tmp_path):
    env = {**os.environ, "PADDEDCELL_HOME": str(tmp_path)}
    for name in ("AGENT_ID", "AGENT_WORKSPACE", "PADDEDCELL_AGENT"):
        env.pop(name, None)
    settings = config.load(env)
    first = subprocess.Popen([sys.executable, "-m", "paddedcell.cli.main", "serve"], env=env,
                             stderr=subprocess.PIPE)
    try:
        client = DaemonClient(settings)
        deadline = time.monotonic() + 15
        while not client.healthy():
            assert time.monotonic() < deadline, "daemon did not start"
            time.sleep(0.05)
        assert stat.S_IMODE(os.stat(socket_path(settings)).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(tmp_path).st_mode) == 0o700
        second = subprocess.run([sys.executable, "-m", "paddedcell.cli.main", "serve"], env=env,
                                capture_output=True, text=True, timeout=30)
        assert second.returncode == 1
        assert "already running" in second.stderr and str(first.pid) in second.stderr
        status = subprocess.run([sys.executable, "-m", "paddedcell.cli.main", "status"], env=env,
                                capture_output=True, text=True, timeout=30)
        assert status.returncode == 0 and f"pid {first.pid}" in status.stdout
        stop = subprocess.run([sys.executable, "-m", "paddedcell.cli.main", "stop"], env=env,
                              capture_output=True, text=True, timeout=30)
        assert stop.returncode == 0, stop.stderr
        assert first.wait(timeout=10) == 0
        log_lines = [json.loads(line) for line in first.stderr.read().decode().splitlines() if line]
        assert any("listening" in entry["message"] for entry in log_lines)
        assert not socket_path(settings).exists()
    finally:
        if first.poll() is None:
            first.send_signal(signal.SIGKILL)
            first.wait()


def test_status_when_stopped_and_ensure_daemon_starts_one(tmp_path, monkeypatch):
    monkeypatch.setenv("PADDEDCELL_HOME", str(tmp_path))
    for name in ("AGENT_ID", "AGENT_WORKSPACE", "PADDEDCELL_AGENT"):
        monkeypatch.delenv(name, raising=False)
    status = subprocess.run([sys.executable, "-m", "paddedcell.cli.main", "status"],
                            capture_output=True, text=True, timeout=30)
    assert status.returncode == 1 and status.stdout.startswith("stopped")
    settings = config.load()
    client = ensure_daemon(settings)
    try:
        health = client.call("GET", "/healthz")
        assert health["ok"] is True
    finally:
        os.kill(health["pid"], signal.SIGTERM)
        deadline = time.monotonic() + 10
        while client.healthy() and time.monotonic() < deadline:
            time.sleep(0.05)
    assert not client.healthy()


async def test_a_short_timeout_does_not_stick_to_the_kept_alive_connection(tmp_path):
    router = Router()

    @router.route("GET", "/slow")
    async def slow(request: Request):
        await trio.sleep(float(request.query["s"]))
        return {"ok": True}

    path = str(tmp_path / "s.sock")
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_unix, router, path)

        def calls():
            client = DaemonClient(config.load({"PADDEDCELL_HOME": str(tmp_path)}), timeout=10.0)
            client.path = path
            first = client.call("GET", "/slow?s=0", timeout=0.5)
            second = client.call("GET", "/slow?s=1")  # longer than the first call's timeout
            try:
                client.call("GET", "/slow?s=2", timeout=0.3)
                third = None
            except DaemonError as exc:
                third = exc.message
            return first, second, third

        first, second, third = await trio.to_thread.run_sync(calls)
        nursery.cancel_scope.cancel()
    assert first == second == {"ok": True}
    assert third is not None and "timed out" in third


def test_a_request_on_a_fresh_connection_is_never_sent_twice(tmp_path):
    # A POST /exec whose connection drops may already have started the
    # command: only a kept-alive connection that went stale is retried.
    path = str(tmp_path / "s.sock")
    requests = []
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(path)
        listener.listen(4)
        listener.settimeout(0.5)

        def drop_every_request():
            while True:
                try:
                    conn, _ = listener.accept()
                except (TimeoutError, OSError):
                    return
                with conn:
                    requests.append(conn.recv(65536))

        server = threading.Thread(target=drop_every_request)
        server.start()
        client = DaemonClient(config.load({"PADDEDCELL_HOME": str(tmp_path)}), timeout=5.0)
        client.path = path
        with pytest.raises(DaemonError):
            client.call("POST", "/exec", {"command": "touch once"})
        server.join()
    assert len(requests) == 1


def test_connection_refused_says_the_daemon_is_not_running(tmp_path):
    path = str(tmp_path / "stale.sock")
    with socket.socket(socket.AF_UNIX) as stale:
        stale.bind(path)  # bound, never listening: what a crashed daemon leaves
        client = DaemonClient(config.load({"PADDEDCELL_HOME": str(tmp_path)}), timeout=5.0)
        client.path = path
        with pytest.raises(DaemonError) as caught:
            client.call("GET", "/healthz")
    assert "not running" in caught.value.message and "paddedcell serve" in caught.value.message


async def test_a_peer_whose_uid_cannot_be_read_is_refused(tmp_path, monkeypatch):
    # Same-uid peers only: a connection that SO_PEERCRED cannot vouch for is
    # closed unanswered, like one from another uid (was: served).
    from paddedcell.daemon import http

    monkeypatch.setattr(http, "peer_credentials", lambda sock: (None, None))
    router = Router()

    @router.route("GET", "/healthz")
    async def healthz(request: Request):
        return {"ok": True}

    path = str(tmp_path / "s.sock")
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_unix, router, path)
        def ask():
            try:
                return _raw_exchange(path, b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            except (ConnectionResetError, BrokenPipeError):  # closed, our request unread
                return b""

        answer = await trio.to_thread.run_sync(ask)
        nursery.cancel_scope.cancel()
    assert answer == b""


async def test_a_request_carries_the_peer_pid(tmp_path):
    # SO_PEERCRED's pid reaches the handler as request.peer_pid: here the
    # client is this very process, so the pid is ours.
    router = Router()

    @router.route("GET", "/who")
    async def who(request: Request):
        return {"pid": request.peer_pid, "uid": request.peer_uid}

    path = str(tmp_path / "s.sock")
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_unix, router, path)
        answer = await trio.to_thread.run_sync(
            _raw_exchange, path, b"GET /who HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        nursery.cancel_scope.cancel()
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1]) == {"pid": os.getpid(), "uid": os.getuid()}


async def test_big_bodies_are_parsed_by_a_child_with_the_same_answers(tmp_path):
    """A body over PARSE_IN_THREAD_BYTES goes to the bigbody child as it arrives: the
    route gets the same body; bad JSON, a lone surrogate and a NUL in a too-long /exec
    command get the same refusals as small bodies; an /exec command no shell can take
    comes back cut to MAX_ARG_STRLEN (still too long), nothing else is changed."""
    import json as _json

    from paddedcell.daemon.bigbody import MAX_ARG_STRLEN
    from paddedcell.daemon.http import PARSE_IN_THREAD_BYTES

    router = Router()
    seen = []

    @router.route("POST", "/echo")
    async def echo(request: Request):
        seen.append(request.body)
        return {"n": len(request.body.get("text", ""))}

    @router.route("POST", "/exec")
    async def exec_(request: Request):
        seen.append(request.body)
        return {"n": len(request.body["command"])}

    def post(route: str, body: bytes) -> bytes:
        return _raw_exchange(path, b"POST %s HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n"
                                   b"connection: close\r\n\r\n" % (route.encode(), len(body))
                             + body)

    big = "x" * (PARSE_IN_THREAD_BYTES * 2)
    path = str(tmp_path / "s.sock")
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_unix, router, path)

        def calls():
            return [post("/echo", _json.dumps({"text": big, "k": [1, 2.5, None]}).encode()),
                    post("/exec", _json.dumps({"command": big, "env": {"A": "b"}}).encode()),
                    post("/echo", b'{"text": "' + big.encode() + b'"'),
                    post("/echo", b'{"text": "' + big.encode() + b'\\ud800"}'),
                    post("/exec", _json.dumps({"command": big + "\x00"}).encode())]

        answers = await trio.to_thread.run_sync(calls)
        nursery.cancel_scope.cancel()
    assert answers[0].endswith(b'{"n": %d}' % len(big)), answers[0][:300]
    assert seen[0] == {"text": big, "k": [1, 2.5, None]}
    assert answers[1].endswith(b'{"n": %d}' % MAX_ARG_STRLEN), answers[1][:300]
    assert seen[1] == {"command": big[:MAX_ARG_STRLEN], "env": {"A": "b"}}
    assert b" 400 " in answers[2].split(b"\r\n")[0] and b"not valid JSON" in answers[2]
    assert b" 400 " in answers[3].split(b"\r\n")[0] and b"surrogate" in answers[3]
    assert seen[2]["command"].endswith("\x00") and len(seen) == 3


def test_a_home_too_deep_for_a_unix_socket_is_one_line_and_exit_2(tmp_path):
    """The daemon's socket lives under PADDEDCELL_HOME; past 107 bytes no socket can be
    bound there, and the daemon says so in one line instead of a traceback."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    env = {**os.environ, "PADDEDCELL_HOME": str(deep)}
    result = subprocess.run([sys.executable, "-m", "paddedcell.cli.main", "serve"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "shorter directory" in lines[0] and "PADDEDCELL_HOME" in lines[0], lines
