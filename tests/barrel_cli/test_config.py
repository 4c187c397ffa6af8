from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from barrel_cli.config import DEFAULT_URL, config_path, load_config, resolve_credentials, save_config
from barrel_cli.errors import CliError


def test_the_config_lives_in_barrel_config_or_the_xdg_folder(tmp_path: Path) -> None:
    assert config_path({"BARREL_CONFIG": str(tmp_path / "c.json")}) == tmp_path / "c.json"
    assert config_path({"XDG_CONFIG_HOME": str(tmp_path)}) == tmp_path / "barrel" / "config.json"
    assert config_path({}) == Path.home() / ".config" / "barrel" / "config.json"


def test_saved_credentials_are_private_and_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "config.json"
    save_config(path, url="http://cp:8000", token="brl_1")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {"url": "http://cp:8000", "token": "brl_1"}
    path.chmod(0o644)
    save_config(path, url="http://cp:8000", token="brl_2")  # rewriting tightens it again
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_config(path)["token"] == "brl_2"


def test_a_broken_config_file_says_how_to_fix_it(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("{not json")
    with pytest.raises(CliError, match="not valid JSON") as info:
        load_config(path)
    assert "barrel login" in info.value.hint


def test_a_missing_file_means_no_credentials(tmp_path: Path) -> None:
    creds = resolve_credentials({"BARREL_CONFIG": str(tmp_path / "none.json")})
    assert creds.url == DEFAULT_URL and creds.token is None


def test_environment_variables_override_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    save_config(path, url="http://saved:8000", token="brl_saved")
    base = {"BARREL_CONFIG": str(path)}
    assert resolve_credentials(base).token == "brl_saved"
    creds = resolve_credentials({**base, "BARREL_URL": "http://other:9000/", "BARREL_TOKEN": "brl_env"})
    assert (creds.url, creds.token) == ("http://other:9000", "brl_env")


def test_a_saved_token_is_not_sent_to_another_url(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    save_config(path, url="http://saved:8000", token="brl_saved")
    creds = resolve_credentials({"BARREL_CONFIG": str(path), "BARREL_URL": "http://elsewhere"})
    assert creds.token is None
