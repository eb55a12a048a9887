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
                         "daemon", "openclaw"}
    assert rows["openclaw"]["status"] == "ok"
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
