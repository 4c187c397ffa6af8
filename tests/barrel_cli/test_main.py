"""Argument parsing and the command paths that fail before (or without) a control plane."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from barrel_cli.errors import api_error_from_response
from barrel_cli.main import build_parser, main


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_the_parser_knows_every_command() -> None:
    parser = build_parser()
    args = parser.parse_args(["submit", "r.yaml", "--project", "lab/p", "--set", "a=1", "--set", "b.c=x"])
    assert (args.command, args.file, args.project, args.overrides) == (
        "submit",
        Path("r.yaml"),
        "lab/p",
        ["a=1", "b.c=x"],
    )
    args = parser.parse_args(["runs", "--status", "running", "--limit", "5", "--json"])
    assert (args.status, args.limit, args.json) == ("RUNNING", 5, True)
    assert parser.parse_args(["watch", "12"]).run_id == "12"
    assert parser.parse_args(["cancel", "3"]).run_id == "3"
    args = parser.parse_args(["login", "--url", "http://cp", "--username", "u", "--password-stdin"])
    assert (args.url, args.username, args.password_stdin) == ("http://cp", "u", True)


@pytest.mark.parametrize(
    "argv",
    [[], ["watch", "abc"], ["runs", "--status", "DONE"], ["runs", "--limit", "0"], ["frobnicate"]],
)
def test_bad_usage_exits_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv, environ={})
    assert info.value.code == 2


def test_commands_need_a_login(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["runs"], environ={"BARREL_CONFIG": str(tmp_path / "none.json")})
    err = capsys.readouterr().err
    assert code == 1
    assert "not logged in" in err and "barrel login" in err


def test_a_bad_run_file_fails_before_any_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("recipe: smoke\nsteps: 3\n")
    assert main(["submit", str(path)], environ={"BARREL_CONFIG": str(tmp_path / "none.json")}) == 2
    assert "unknown top-level key(s) steps" in capsys.readouterr().err


def test_an_unreachable_control_plane_is_a_message_not_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["cancel", "4"], environ={"BARREL_URL": closed_port_url(), "BARREL_TOKEN": "brl_x"})
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("error: cannot reach http://127.0.0.1:")
    assert "hint:" in err and "Traceback" not in err


def test_api_errors_show_the_message_the_fields_and_a_hint() -> None:
    response = httpx.Response(
        400,
        json={
            "error": "invalid",
            "message": "The config is invalid.",
            "fields": {"config.steps": ["Input should be greater than or equal to 1"]},
        },
    )
    error = api_error_from_response(response)
    assert error.exit_code == 2
    assert error.render().splitlines() == [
        "error: The config is invalid. (HTTP 400)",
        "  config.steps: Input should be greater than or equal to 1",
    ]
    unauthorized = api_error_from_response(httpx.Response(401, json={"message": "Invalid token."}))
    assert "barrel login" in unauthorized.render()
    html = api_error_from_response(httpx.Response(502, text="<html>Bad Gateway</html>"))
    assert html.message == "Bad Gateway" and "control plane" in html.hint
