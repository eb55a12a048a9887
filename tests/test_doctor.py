"""``paddedcell doctor`` (cli/doctor.py): each line of what the host gives, with its fix."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner

from paddedcell.cli.doctor import namespace_findings
from paddedcell.cli.main import cli
from paddedcell.supervisor import sandbox


def test_each_reason_namespaces_are_off_comes_with_its_fix():
    facts = {"/proc/sys/kernel/unprivileged_userns_clone": "0",
             "/proc/sys/user/max_user_namespaces": "0",
             "/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1",
             "/.dockerenv": ""}
    found = namespace_findings(facts.get)
    assert len(found) == 4
    assert "kernel.unprivileged_userns_clone=1" in found[0]
    assert "user.max_user_namespaces=" in found[1]
    assert "AppArmor" in found[2] and "apparmor_restrict_unprivileged_userns=0" in found[2]
    assert "container" in found[3]
    assert namespace_findings({"/proc/1/cgroup": "0::/init.scope"}.get) == []


def test_doctor_json_lists_every_check(tmp_path, monkeypatch):
    monkeypatch.setenv("PADDEDCELL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENCLAW_CONFIG_PATH", str(tmp_path / "openclaw.json"))
    (tmp_path / "openclaw.json").write_text(json.dumps(
        {"plugins": {"entries": {"paddedcell": {"enabled": True}}}}))
    result = CliRunner().invoke(cli, ["doctor", "--json"])
    rows = {row["check"]: row for row in json.loads(result.output)}
    assert set(rows) == {"namespaces", "sandbox", "network", "cgroups", "root", "redaction",
                         "daemon", "guard", "openclaw"}
    assert rows["openclaw"]["status"] == "ok"
    assert rows["guard"]["status"] == "warn" and rows["guard"]["fix"] == "pass_mgr admin init"
    assert rows["daemon"]["status"] == "warn" and rows["daemon"]["fix"]
    assert rows["namespaces"]["status"] == ("ok" if sandbox.available()[0] else rows["namespaces"]["status"])


def test_an_ordinary_user_without_namespaces_gets_a_failure_and_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("PADDEDCELL_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(sandbox, "_AVAILABLE", {False: (False, "unshare: Operation not permitted")})
    monkeypatch.setattr(sandbox, "host_root", lambda: False)
    result = CliRunner().invoke(cli, ["doctor"])
    assert result.exit_code == 1
    assert "FAIL  namespaces: unavailable: unshare: Operation not permitted" in result.output
    assert "FAIL  sandbox: agent commands refused" in result.output
    assert "fix:" in result.output


def test_what_an_agent_uid_cannot_reach_is_named_with_its_fix():
    """User mode (no namespaces, agents as their own uids): a 0700 directory on the way to
    pass_mgr, a file only its owner may read, an interpreter inside a closed home."""
    import stat as st

    from paddedcell.supervisor.sandbox_plan import unreachable

    def fake(tree):
        def stat_of(path):
            mode, uid, gid = tree[path]
            return os.stat_result((mode, 0, 0, 0, uid, gid, 0, 0, 0, 0))
        return stat_of

    d, f = st.S_IFDIR, st.S_IFREG
    tree = {"/": (d | 0o755, 0, 0), "/root": (d | 0o700, 0, 0),
            "/root/venv": (d | 0o755, 0, 0), "/root/venv/pass_mgr": (f | 0o755, 0, 0),
            "/opt": (d | 0o755, 0, 0), "/opt/pc": (d | 0o755, 0, 0),
            "/opt/pc/pass_mgr": (f | 0o755, 0, 0), "/opt/pc/secret": (f | 0o700, 0, 0),
            "/srv": (d | 0o750, 0, 7000), "/srv/pass_mgr": (f | 0o755, 0, 0)}
    why = unreachable(["/root/venv/pass_mgr"], 7000, 7000, fake(tree))
    assert "/root is mode 0700" in why and "chmod o+rx /root" in why
    assert unreachable(["/opt/pc/pass_mgr", "/opt/pc"], 7000, 7000, fake(tree)) is None
    assert "/opt/pc/secret is mode 0700" in unreachable(["/opt/pc/secret"], 7000, 7000,
                                                        fake(tree))
    # The group may pass where others may not; its owner passes by the owner bits.
    assert unreachable(["/srv/pass_mgr"], 7000, 7000, fake(tree)) is None
    assert "/srv is mode 0750" in unreachable(["/srv/pass_mgr"], 7001, 7001, fake(tree))
