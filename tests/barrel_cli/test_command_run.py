"""`barrel submit --command`: the body it builds, and the working directory's zip."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from barrel_cli.command_run import zip_working_dir
from barrel_cli.main import _submission, build_parser, main


def args(*argv: str):
    return build_parser().parse_args(["submit", *argv])


def test_a_command_line_becomes_a_command_run() -> None:
    body = _submission(
        args("--project", "lab/byo", "--command", "python train.py --lr 1e-6", "--pip", "trl==0.19.1",
             "--env", "HF_HOME=/cache", "--env", "X=a=b", "--cpus", "2", "--set", "reserve_in_entrypoint=false")
    )  # fmt: skip
    assert body == {
        "project": "lab/byo",
        "recipe": "command",
        "tags": [],
        "config": {
            "command": "python train.py --lr 1e-6",
            "pip": ["trl==0.19.1"],
            "env": {"HF_HOME": "/cache", "X": "a=b"},
            "cpus": 2.0,
            "reserve_in_entrypoint": False,
        },
    }


def test_a_command_run_can_declare_the_folders_its_watchers_read() -> None:
    body = _submission(
        args("--project", "lab/byo", "--command", "python train.py", "--metrics-dir", "./runs/",
             "--metrics-format", "tensorboard", "--checkpoint-dir", "out")
    )  # fmt: skip
    assert body["config"] == {
        "command": "python train.py",
        "metrics_dir": "./runs/",
        "metrics_format": "tensorboard",
        "checkpoint_dir": "out",
    }
    assert "metrics_dir" not in _submission(args("--project", "lab/byo", "--command", "x"))["config"]


def test_a_run_file_is_the_base_of_a_command_run(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("project: lab/byo\nname: trl\nconfig: {pip: [trl==0.19.1], gpus: 1}\n")
    body = _submission(args(str(path), "--command", "python t.py", "--pip", "peft"))
    assert body["name"] == "trl" and body["recipe"] == "command"
    assert body["config"] == {"pip": ["trl==0.19.1", "peft"], "gpus": 1, "command": "python t.py"}


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--command", "python t.py"], "no project"),
        ([], "give a run file"),
        (["--project", "lab/p", "--command", "x", "--env", "NOVALUE"], "NAME=VALUE"),
        (["--project", "lab/p", "--command", "x", "--metrics-dir", "/tmp/runs"], "relative to the working directory"),
        (["--project", "lab/p", "--command", "x", "--checkpoint-dir", "../out"], "inside the working directory"),
        (["run.yaml", "--checkpoint-dir", "out"], "go with --command"),
    ],
)
def test_bad_command_submissions_fail_before_any_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    assert main(["submit", *argv], environ={"BARREL_CONFIG": str(tmp_path / "none.json")}) == 2
    assert says in capsys.readouterr().err


def test_the_working_directory_zip_leaves_out_vcs_caches_and_ignored_files(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    for name, text in {
        "train.py": "print(1)",
        "conf/a.yaml": "lr: 1",
        ".gitignore": "data/\n*.ckpt\n/out.log\n# a comment\n",
        ".barrelignore": "secret.txt\n",
        "data/big.bin": "x",
        "model.ckpt": "x",
        "out.log": "x",
        "logs/out.log": "kept: only /out.log at the root is ignored",
        "secret.txt": "x",
        ".git/HEAD": "ref",
        "pkg/__pycache__/m.pyc": "x",
        ".venv/bin/python": "x",
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "train.py").chmod(0o755)
    first, second = io.BytesIO(), io.BytesIO()
    assert zip_working_dir(root, first)[0] == 5
    zip_working_dir(root, second)
    assert first.getvalue() == second.getvalue()  # the same content hashes the same
    with zipfile.ZipFile(first) as archive:
        assert archive.namelist() == [".barrelignore", ".gitignore", "conf/a.yaml", "logs/out.log", "train.py"]
        assert archive.getinfo("train.py").external_attr >> 16 & 0o777 == 0o755


def test_secrets_are_set_from_standard_input_and_listed_without_values(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    import httpx

    from barrel_cli import main as cli
    from barrel_cli.client import Api

    seen: list[tuple[str, str, object]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        seen.append((request.method, request.url.path, body))
        if request.url.path == "/api/v1/teams":
            return httpx.Response(200, json={"results": [{"id": 4, "slug": "lab"}], "next": None})
        if request.method == "GET":
            return httpx.Response(
                200, json=[{"name": "HF_TOKEN", "updated_at": "2026-12-04T21:00:00Z", "updated_by": "alice"}]
            )
        return httpx.Response(201, json={"name": "HF_TOKEN"})

    monkeypatch.setattr(
        cli, "_api", lambda environ: (Api("http://cp", "t", transport=httpx.MockTransport(answer)), "t")
    )
    monkeypatch.setattr("sys.stdin", io.StringIO("hf_value_123\n"))
    assert main(["secrets", "set", "HF_TOKEN", "--team", "lab"], environ={}) == 0
    assert ("PUT", "/api/v1/teams/4/secrets/HF_TOKEN", {"value": "hf_value_123"}) in seen
    assert main(["secrets", "list", "--team", "lab"], environ={}) == 0
    out = capsys.readouterr().out
    assert "HF_TOKEN" in out and "alice" in out and "hf_value_123" not in out
