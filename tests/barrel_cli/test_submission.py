from __future__ import annotations

from pathlib import Path

import pytest

from barrel_cli.errors import EXIT_USAGE, CliError
from barrel_cli.submission import apply_override, build_submission, load_run_file, parse_override

RUN_FILE = """\
project: lab/default
name: smoke-1
recipe: smoke
config:
  steps: 20
  interval_s: 0.2
  nested:
    lr: 0.001
  wd: 1e-2
tags: [ci]
"""


@pytest.fixture
def run_file(tmp_path: Path) -> Path:
    path = tmp_path / "smoke.yaml"
    path.write_text(RUN_FILE)
    return path


def test_it_builds_the_post_body_from_the_file(run_file: Path) -> None:
    assert build_submission(run_file) == {
        "project": "lab/default",
        "name": "smoke-1",
        "recipe": "smoke",
        "config": {"steps": 20, "interval_s": 0.2, "nested": {"lr": 0.001}, "wd": 0.01},
        "tags": ["ci"],
    }


def test_set_overrides_are_yaml_typed_and_default_to_config(run_file: Path) -> None:
    body = build_submission(
        run_file,
        overrides=["steps=5", "config.nested.lr=3e-4", "fail_at_step=null", "new.deep.key=true", "tags=[a, b]"],
    )
    assert body["config"]["steps"] == 5
    assert body["config"]["nested"]["lr"] == 3e-4
    assert body["config"]["fail_at_step"] is None
    assert body["config"]["new"] == {"deep": {"key": True}}
    assert body["tags"] == ["a", "b"]


def test_names_stay_strings(run_file: Path) -> None:
    body = build_submission(run_file, overrides=["name=007", "recipe=smoke"])
    assert body["name"] == "007"


def test_flags_win_over_the_file_and_over_set(run_file: Path) -> None:
    body = build_submission(run_file, project="lab/other", name="n2", overrides=["name=n1"])
    assert (body["project"], body["name"]) == ("lab/other", "n2")


def test_a_numeric_project_is_sent_as_an_id(run_file: Path) -> None:
    assert build_submission(run_file, project="42")["project"] == 42


def test_missing_name_and_tags_get_defaults(tmp_path: Path) -> None:
    path = tmp_path / "my-run.yml"
    path.write_text("project: lab/p\nrecipe: smoke\n")
    body = build_submission(path)
    assert body == {"project": "lab/p", "name": "my-run", "recipe": "smoke", "config": {}, "tags": []}


def test_comma_separated_tags_become_a_list(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("project: lab/p\nrecipe: smoke\ntags: a, b ,c\n")
    assert build_submission(path)["tags"] == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("project: lab/p\nrecipe: smoke\nsteps: 3\n", "unknown top-level key"),
        ("- a\n- b\n", "should hold a mapping"),
        ("project: [unclosed\n", "not valid YAML"),
        ("recipe: smoke\n", "no project"),
        ("project: lab/p\n", "no recipe"),
        ("project: lab/p\nrecipe: smoke\nconfig: 3\n", "`config` should be a mapping"),
    ],
)
def test_bad_files_are_usage_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(CliError, match=message) as info:
        build_submission(path)
    assert info.value.exit_code == EXIT_USAGE


def test_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(CliError, match="cannot read"):
        load_run_file(tmp_path / "nope.yaml")


@pytest.mark.parametrize("expr", ["steps", "=5", "a..b=1", ".a=1"])
def test_malformed_set_expressions_are_rejected(expr: str) -> None:
    with pytest.raises(CliError):
        parse_override(expr)


def test_set_keeps_text_after_the_first_equals_sign() -> None:
    assert parse_override("note=a=b") == (["config", "note"], "a=b")
    assert parse_override("empty=") == (["config", "empty"], "")


def test_set_cannot_descend_into_a_scalar() -> None:
    doc = {"config": {"steps": 3}}
    with pytest.raises(CliError, match=r"config\.steps is int"):
        apply_override(doc, ["config", "steps", "x"], 1)


@pytest.mark.django_db(transaction=True)
def test_quiet_submit_prints_only_the_new_runs_id_for_scripts(
    live_url: str, owner, project, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from barrel_cli.main import main
    from controlplane.runs.models import Run

    run_file = tmp_path / "smoke.yaml"
    run_file.write_text("project: lab/default\nname: smoke-1\nrecipe: smoke\nconfig: {steps: 2}\n")

    env = {"BARREL_URL": live_url, "BARREL_TOKEN": owner.token, "BARREL_CONFIG": str(tmp_path / "none.json")}
    assert main(["submit", str(run_file), "--quiet"], environ=env) == 0
    out = capsys.readouterr().out
    assert out == f"{Run.objects.get(name='smoke-1').id}\n"
    with pytest.raises(SystemExit):
        main(["submit", str(run_file), "--quiet", "--json"], environ=env)
