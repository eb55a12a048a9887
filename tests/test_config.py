"""Settings: defaults, config.toml, environment, overrides — in that order."""

import pytest

from paddedcell import config


def test_defaults_without_file_or_env(tmp_path):
    settings = config.load({"PADDEDCELL_HOME": str(tmp_path)})
    assert settings.home == tmp_path
    assert settings["supervisor.max_aggregated_chars"] == 200_000
    assert settings["redactor.mask"] == "######"


def test_file_then_env_then_overrides(tmp_path):
    (tmp_path / "config.toml").write_text(
        '[supervisor]\nmax_live_sessions = 10\nkill_grace_seconds = 0.5\n'
        '[messages]\nbusy_reply = "busy, sorry"\n'
    )
    env = {"PADDEDCELL_HOME": str(tmp_path), "PADDEDCELL_SUPERVISOR_MAX_LIVE_SESSIONS": "12"}
    settings = config.load(env)
    assert settings["supervisor.max_live_sessions"] == 12
    assert settings["supervisor.kill_grace_seconds"] == 0.5
    assert settings["messages.busy_reply"] == "busy, sorry"
    settings = config.load(env, overrides={"supervisor.max_live_sessions": 3})
    assert settings["supervisor.max_live_sessions"] == 3


@pytest.mark.parametrize("raw,expected", [("1", True), ("off", False), ("YES", True)])
def test_env_booleans(tmp_path, raw, expected):
    settings = config.load({"PADDEDCELL_HOME": str(tmp_path), "PADDEDCELL_REDACTOR_VARIANTS": raw})
    assert settings["redactor.variants"] is expected


def test_bad_values_name_the_setting(tmp_path):
    env = {"PADDEDCELL_HOME": str(tmp_path), "PADDEDCELL_SUPERVISOR_MAX_LIVE_SESSIONS": "many"}
    with pytest.raises(config.ConfigError, match="PADDEDCELL_SUPERVISOR_MAX_LIVE_SESSIONS"):
        config.load(env)
    (tmp_path / "config.toml").write_text("[supervisor]\nno_such = 1\n")
    with pytest.raises(config.ConfigError, match="supervisor.no_such"):
        config.load({"PADDEDCELL_HOME": str(tmp_path)})
    (tmp_path / "config.toml").write_text("[supervisor\n")
    with pytest.raises(config.ConfigError, match="config.toml"):
        config.load({"PADDEDCELL_HOME": str(tmp_path)})
    with pytest.raises(KeyError, match="nope.x"):
        config.load({"PADDEDCELL_HOME": str(tmp_path / "other")})["nope.x"]


def test_home_defaults_to_dot_paddedcell(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert config.paddedcell_home({}) == tmp_path / ".paddedcell"
