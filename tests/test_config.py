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


# --- Every bad setting, from its declaration (config.SETTINGS) ------------------------

ALL = [(section, key) for section, keys in config.SETTINGS.items() for key in keys]


def _wrong_type(setting):
    """A TOML value of another type than the declaration's."""
    return {bool: '"yes"', int: '"3"', float: "true", str: "3", list: "[1, 2]"}[setting.kind]


def _load_file(tmp_path, text):
    (tmp_path / "config.toml").write_text(text)
    return config.load({"PADDEDCELL_HOME": str(tmp_path)})


def test_every_default_is_valid_by_its_own_declaration(tmp_path):
    for section, key in ALL:
        setting = config.SETTINGS[section][key]
        assert setting.problem(setting.default) is None, (section, key)
    assert config.DEFAULTS["supervisor"]["max_live_sessions"] == 64


@pytest.mark.parametrize("section, key", ALL, ids=[f"{s}.{k}" for s, k in ALL])
def test_every_setting_of_the_wrong_type_is_one_line_naming_file_and_key(tmp_path, section, key):
    setting = config.SETTINGS[section][key]
    with pytest.raises(config.ConfigError) as caught:
        _load_file(tmp_path, f"[{section}]\n{key} = {_wrong_type(setting)}\n")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{tmp_path / 'config.toml'}: {section}.{key} = "), message
    assert message.endswith("; fix or unset it")
    assert caught.value.exit_code == 2


@pytest.mark.parametrize("section, key", ALL, ids=[f"{s}.{k}" for s, k in ALL])
def test_every_setting_from_the_environment_is_checked_the_same_way(tmp_path, section, key):
    setting = config.SETTINGS[section][key]
    name = "PADDEDCELL_" + f"{section}_{key}".upper()
    env = {"PADDEDCELL_HOME": str(tmp_path), name: "-1"}
    if setting.kind in (int, float):  # below every number's minimum
        with pytest.raises(config.ConfigError, match=f"^{name}: {section}.{key} = -1"):
            config.load(env)
    elif setting.kind is bool:
        with pytest.raises(config.ConfigError, match=f"^{name}: .* must be true or false"):
            config.load(env)
    elif setting.choices:
        with pytest.raises(config.ConfigError, match="must be one of|not one of"):
            config.load(env)
    else:  # a string or list: the environment's text as it is, unless a form is declared
        env[name] = "x"
        if setting.check is None:
            assert config.load(env)[f"{section}.{key}"] == "x"


@pytest.mark.parametrize("text, message", [
    ('[egress]\nmode = "sometimes"\n',
     'egress.mode = "sometimes" must be one of auto, always, off; fix or unset it'),
    ('[egress]\nmode = "alway"\n',
     'egress.mode = "alway" must be one of auto, always, off (did you mean always?); '
     "fix or unset it"),
    ('[supervisor]\nsandbox = "jail"\n',
     'supervisor.sandbox = "jail" must be one of auto, namespaces, user, none, rlimits, bwrap; '
     "fix or unset it"),
    ('[supervisor]\nsandbox_network = "hots"\n',
     'supervisor.sandbox_network = "hots" must be one of proxy, none, host '
     "(did you mean host?); fix or unset it"),
    ('[redactor]\nforms_off = "hex, urls"\n', "names 'urls', not one of crlf, base64, url"),
    ("[supervisor]\nmax_live_sessions = 0\n",
     "supervisor.max_live_sessions = 0 must be at least 1; fix or unset it"),
    ("[supervisor]\nkill_grace_seconds = -0.5\n", "must be at least 0"),
    ("[supervisor]\nscan_interval_seconds = 0\n", "must be more than 0"),
    ("[supervisor]\npty_rows = 70000\n", "supervisor.pty_rows = 70000 must be at most 65535"),
    ("[supervisor]\nkill_grace_seconds = nan\n", "must be a finite number"),
    ("[supervisor]\nmax_live_sessions = 3.5\n", "must be an integer"),
    ("[supervisor]\nmax_live_sessions = true\n", "must be an integer"),
    ('[supervisor]\nsandbox_uid_range = "12:x"\n', "must be START:COUNT"),
    ('[supervisor]\nsandbox_uid_range = "12:3"\n', "must start at 1000"),
    ('[daemon]\nsocket_name = "a/b"\n', "must be a file name"),
    ("[supervisor.extra]\nx = 1\n", "unknown setting supervisor.extra"),
    ('mode = "off"\n', 'mode = "off" is outside any [section]; did you mean egress.mode '
                      "(under [egress])?"),
    ('[supervisor]\nmode = "off"\n', "unknown setting supervisor.mode; did you mean egress.mode?"),
    ('{"supervisor": {}}\n', "not valid TOML ("),
    ("[supervisor]\nmax_live_sessions = 3\nmax_live_sessions = 4\n", "not valid TOML ("),
])
def test_bad_values_in_the_file_name_what_they_must_be(tmp_path, text, message):
    with pytest.raises(config.ConfigError) as caught:
        _load_file(tmp_path, text)
    assert message in str(caught.value)
    assert str(caught.value).startswith(f"{tmp_path / 'config.toml'}: ")
    assert "\n" not in str(caught.value)


def test_a_file_that_is_not_utf8_or_not_readable_is_one_line(tmp_path):
    (tmp_path / "config.toml").write_bytes(b"\xff\xfe[egress]\n")
    with pytest.raises(config.ConfigError, match="config.toml: not valid TOML"):
        config.load({"PADDEDCELL_HOME": str(tmp_path)})
    import os
    if os.geteuid() != 0:  # root reads any file
        (tmp_path / "config.toml").chmod(0)
        with pytest.raises(config.ConfigError, match="config.toml: cannot read it"):
            config.load({"PADDEDCELL_HOME": str(tmp_path)})


def test_good_values_pass_and_enumerations_read_in_lower_case(tmp_path):
    settings = _load_file(tmp_path, '[supervisor]\nsandbox = " None "\nkill_grace_seconds = 1\n'
                                    'sandbox_bind_ro = ["/opt"]\nsandbox_proxy_allow = "a.b,c.d"\n'
                                    '[redactor]\nforms_off = "hex,url"\n[egress]\nmode = "OFF"\n')
    assert settings["supervisor.sandbox"] == "none"
    assert settings["egress.mode"] == "off"
    assert settings["supervisor.kill_grace_seconds"] == 1
    assert settings["supervisor.sandbox_bind_ro"] == ["/opt"]
    assert settings["redactor.forms_off"] == "hex,url"


def test_the_declared_choices_are_the_readers_own():
    from dataclasses import fields

    from paddedcell.redactor.variants import Variants
    from paddedcell.supervisor import spawn

    assert config.SETTINGS["redactor"]["forms_off"].choices == tuple(f.name for f in fields(Variants))
    assert spawn.SANDBOX_PROFILES is config.SANDBOX_PROFILES
    assert config.SETTINGS["supervisor"]["sandbox"].choices == config.SANDBOX_PROFILES


# --- The settings a pass_mgr get reads: config_base --------------------------------------


def test_the_get_settings_are_declared_once_in_config_base():
    """config.SETTINGS holds config_base's very declarations (no copied default), and
    config_base knows every section (a variable of any of them sends a get to config)."""
    from paddedcell import config_base

    assert config_base.SECTIONS == tuple(config.SETTINGS)
    for section, keys in config_base.EARLY.items():
        for key, setting in keys.items():
            assert config.SETTINGS[section][key] is setting, (section, key)
    assert config.Setting is config_base.Setting and config.Settings is config_base.Settings
    # the variables a get looks for are the ones config.load reads: one prefix per section
    assert config_base._ENV_PREFIXES == tuple(config._env_name(s, "") for s in config.SETTINGS)


def test_defaults_only_is_load_when_nothing_is_set(tmp_path):
    from paddedcell import config_base
    from paddedcell.vault.settings import VaultSettings

    env = {"PADDEDCELL_HOME": str(tmp_path / "home/"), "PADDEDCELL_AGENT": "1",
           "PADDEDCELL_HOMEWARD": "x", "PADDEDCELL_DAEMON": "1", "AGENT_ID": "a"}
    fast, full = config_base.defaults_only(env), config.load(env)
    assert fast is not None and fast.home_text == full.home_text
    for section, keys in config_base.EARLY.items():
        for key in keys:
            assert fast[f"{section}.{key}"] == full[f"{section}.{key}"], (section, key)
    typed = VaultSettings.of(fast)  # every setting the vault's read side types
    assert typed.lock_timeout == 30.0 and typed.mask == "######"
    with pytest.raises(KeyError, match="supervisor.max_live_sessions"):
        fast["supervisor.max_live_sessions"]  # only what a get reads


@pytest.mark.parametrize("variable", ["PADDEDCELL_VAULT_HISTORY_DEPTH", "PADDEDCELL_REDACTOR_MASK",
                                      "PADDEDCELL_MESSAGES_BUSY_REPLY", "PADDEDCELL_AUDIT_X"])
def test_defaults_only_leaves_any_setting_variable_to_load(tmp_path, variable):
    from paddedcell import config_base

    assert config_base.defaults_only({"PADDEDCELL_HOME": str(tmp_path), variable: "v"}) is None


def test_defaults_only_leaves_a_config_file_to_load(tmp_path):
    from paddedcell import config_base

    (tmp_path / "config.toml").write_text("")
    assert config_base.defaults_only({"PADDEDCELL_HOME": str(tmp_path)}) is None
    (tmp_path / "config.toml").unlink()
    (tmp_path / "config.toml").mkdir()  # not a file: load() ignores it too
    assert config_base.defaults_only({"PADDEDCELL_HOME": str(tmp_path)}) is not None
