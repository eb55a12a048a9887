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


def test_home_text_is_the_home_path_without_pathlib():
    """pass_mgr get uses the text form; it must name the very same path as the Path form."""
    import itertools
    from pathlib import PurePosixPath

    from paddedcell.config import paddedcell_home, paddedcell_home_text, path_text

    for size in range(6):
        for parts in itertools.product(["/", "a", ".", "..", "//", "b/"], repeat=size):
            text = "".join(parts)
            assert path_text(text) == str(PurePosixPath(text)), text
    for home in ["/tmp//x/./y/", "~/x", "rel/x", "", "//srv/pc", "~root/pc"]:
        env = {"PADDEDCELL_HOME": home} if home else {}
        assert paddedcell_home_text(env) == str(paddedcell_home(env))
    settings = config.load({"PADDEDCELL_HOME": "/nonexistent//pc/./home/"})
    assert settings.home_text == "/nonexistent/pc/home" == str(settings.home)
