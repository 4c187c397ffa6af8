"""Failure signatures: the same bug groups together whatever its line numbers, paths and ids;
different bugs do not; each infra cause is named and the user's own errors are the workload's."""

from __future__ import annotations

import pytest

from controlplane.diagnostics.triage import failure_signature, normalise, parse

LOST_TAIL = "(the Ray head restarted or the job was deleted)"
RAY_FAILED = "Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars):"


def recipe_keyerror(root: str, line: int, key: str = "reward", run: int = 12) -> str:
    return f"""2026-12-01 10:{line % 60:02d}:03,114 INFO barrel.recipe.grpo step 4 done
Traceback (most recent call last):
  File "{root}/workers/entrypoint.py", line {line + 180}, in run_job
    runner(config, ctx)
  File "{root}/workers/recipes/grpo/run.py", line {line}, in run
    trainer.step(batch)
  File "{root}/workers/recipes/grpo/run.py", line {line + 40}, in step
    scores = batch.extra["{key}"]
             ~~~~~~~~~~~^^^^^^^
KeyError: '{key}'
2026-12-01 10:{line % 60:02d}:04,001 ERROR barrel.recipe run {run} failed
"""


def user_valueerror(root: str, line: int, shape: int) -> str:
    return f"""Traceback (most recent call last):
  File "{root}/my_script.py", line {line}, in <module>
    main()
  File "{root}/my_script.py", line {line - 20}, in main
    data = load(path)
  File "{root}/my_script.py", line {line - 50}, in load
    raise ValueError(f"expected {shape} columns in {root}/data/part-{shape}.csv")
ValueError: expected {shape} columns in {root}/data/part-{shape}.csv
"""


def actor_died(actor: str, pid: int, ip: str) -> str:
    return f"""Traceback (most recent call last):
  File "/opt/venv/lib/python3.11/site-packages/ray/_private/worker.py", line {pid % 900 + 100}, in get
    raise value
ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.
\tclass_name: RolloutWorker
\tactor_id: {actor}
\tpid: {pid}
\tip: {ip}
"""


def ray_oom(node: str, ip: str, used: str) -> str:
    return f"""Traceback (most recent call last):
  File "/home/ray/anaconda3/lib/python3.11/site-packages/ray/_private/worker.py", line 2667, in get
    raise value
ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.
Memory on the node (IP: {ip}, ID: {node}) where the task (actor ID: {node[:32]}, name=Trainer.__init__, \
pid=4812, memory used={used}GB) was running was 30.1GB / 31.0GB (0.97)
"""


def cuda_oom(alloc: str, gpu: int) -> str:
    return f"""Traceback (most recent call last):
  File "/srv/barrel/workers/recipes/grpo/actors.py", line 301, in train_step
    loss.backward()
  File "/usr/lib/python3.11/site-packages/torch/_tensor.py", line 581, in backward
    torch.autograd.backward(
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {alloc} GiB. GPU {gpu} has a total capacity \
of 79.15 GiB of which 1.2 GiB is free.
"""


def engine_crash(line: int, addr: str) -> str:
    return f"""Traceback (most recent call last):
  File "/srv/barrel/workers/engines/vllm_engine.py", line {line}, in generate
    outputs = self.llm.generate(prompts, params)
  File "/opt/venv/lib/python3.11/site-packages/vllm/entrypoints/llm.py", line 1221, in generate
    return self._run_engine(use_tqdm=use_tqdm)
RuntimeError: CUDA error: an illegal memory access was encountered at {addr}
CUDA kernel errors might be asynchronously reported at some other API call.
"""


def sandbox_error(sandbox: str, port: int) -> str:
    return f"""Traceback (most recent call last):
  File "/srv/barrel/workers/rewards/code.py", line 77, in score
    result = self.sandbox.run(code, timeout_s=10)
  File "/srv/barrel/workers/sandbox/docker.py", line 133, in run
    raise SandboxError(f"container {sandbox} did not answer on port {port}")
workers.sandbox.docker.SandboxError: container {sandbox} did not answer on port {port}
"""


def same(a: tuple[str, str], b: tuple[str, str]) -> bool:
    return failure_signature(*a).fingerprint == failure_signature(*b).fingerprint


@pytest.mark.parametrize(
    ("a", "b"),
    [
        pytest.param(
            (f"{RAY_FAILED} — KeyError: 'reward'", recipe_keyerror("/home/alice/barrel", 120, run=12)),
            (
                f"{RAY_FAILED} — KeyError: 'reward'",
                recipe_keyerror("/tmp/ray/session_2026/runtime_resources", 131, run=907),
            ),
            id="recipe KeyError, other paths, lines, run ids",
        ),
        pytest.param(
            ("", user_valueerror("/home/alice/proj", 88, 12)),
            ("", user_valueerror("/mnt/data/bob/work", 93, 7)),
            id="user script ValueError, numbers and paths in the message",
        ),
        pytest.param(
            ("", "step 9 done\n" + recipe_keyerror("/srv", 120)),
            ("", recipe_keyerror("/srv", 120).split("Traceback (most recent call last):\n")[1]),
            id="a tail that cut the traceback's header off",
        ),
        pytest.param(
            ("", actor_died("3f2a9c81d04b11e2b5a6c0ffee000001", 4242, "10.0.0.5")),
            ("", actor_died("ab99c81d04b11e2b5a6c0ffee0000777", 98, "172.31.4.19")),
            id="RayActorError, other actor ids, pids, ips",
        ),
        pytest.param(
            ("", ray_oom("9b1c" * 14, "10.0.0.3", "12.3")),
            ("", ray_oom("07de" * 14, "10.2.7.11", "29.9")),
            id="Ray OOM, other node ids and sizes",
        ),
        pytest.param(
            ("", cuda_oom("2.00", 0)),
            ("", cuda_oom("512.50", 3)),
            id="CUDA OOM, other sizes and GPUs",
        ),
        pytest.param(
            (
                f"lost: Ray no longer knows job 0b6f7f0e-1c1e-4d2a-9a59-2f0c8e5d7a11 {LOST_TAIL}",
                "",
            ),
            (
                f"lost: Ray no longer knows job 9d6c3e44-7a1b-4f3e-8b7e-55aa00c1e2f3 {LOST_TAIL}",
                "",
            ),
            id="lost job, other attempt uuids",
        ),
        pytest.param(
            ("", engine_crash(211, "0x7f3a2c001000")),
            ("", engine_crash(240, "0x7ffe00ab1230")),
            id="engine crash, other lines and addresses",
        ),
        pytest.param(
            ("", sandbox_error("sbx-3f9a1c2b7d", 41233)),
            ("", sandbox_error("sbx-aa01bc99e1", 50871)),
            id="sandbox error, other containers and ports",
        ),
        pytest.param(
            (
                "Job entrypoint command failed with exit code -9, last available logs (truncated to 20,000 chars):",
                "step 3\n",
            ),
            (
                "Job entrypoint command failed with exit code 137, last available logs (truncated to 20,000 chars):",
                "step 90\n",
            ),
            id="killed driver, -9 and 137 alike",
        ),
        pytest.param(
            ("Ray refused the job: 400 runtime_env: pip install failed at 2026-12-01T10:00:03Z", ""),
            ("Ray refused the job: 400 runtime_env: pip install failed at 2026-11-30T23:59:59.120Z", ""),
            id="dispatch refused, other timestamps",
        ),
    ],
)
def test_the_same_bug_gets_one_signature(a: tuple[str, str], b: tuple[str, str]) -> None:
    assert same(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        pytest.param(
            ("", recipe_keyerror("/srv", 120, key="reward")),
            ("", recipe_keyerror("/srv", 120, key="prompt")),
            id="KeyError on another key",
        ),
        pytest.param(
            ("", recipe_keyerror("/srv", 120)),
            ("", recipe_keyerror("/srv", 120).replace("KeyError: 'reward'", "ValueError: 'reward'")),
            id="another exception type",
        ),
        pytest.param(
            ("", recipe_keyerror("/srv", 120)),
            ("", recipe_keyerror("/srv", 120).replace("in step", "in rollout")),
            id="another call path",
        ),
        pytest.param(
            ("", ray_oom("9b1c" * 14, "10.0.0.3", "12.3")), ("", cuda_oom("2.00", 0)), id="host OOM vs CUDA OOM"
        ),
        pytest.param(
            ("Job entrypoint command failed with exit code -9, last available logs", ""),
            ("Job entrypoint command failed with exit code 1, last available logs", ""),
            id="SIGKILL vs exit 1",
        ),
        pytest.param(
            ("", actor_died("3f2a9c81d04b11e2b5a6c0ffee000001", 4242, "10.0.0.5")),
            ("", engine_crash(211, "0x7f3a2c001000")),
            id="actor died vs engine crash",
        ),
    ],
)
def test_different_bugs_get_different_signatures(a: tuple[str, str], b: tuple[str, str]) -> None:
    assert not same(a, b)


@pytest.mark.parametrize(
    ("reason", "log", "fault", "cause"),
    [
        (
            "lost: Ray no longer knows job 0b6f7f0e-1c1e-4d2a-9a59-2f0c8e5d7a11 (the Ray head restarted)",
            "",
            "infra",
            "lost_job",
        ),
        (
            "Ray did not take the job: connection refused (tried 5 times over 60 s at http://ray:8265)",
            "",
            "infra",
            "dispatch",
        ),
        ("", ray_oom("9b1c" * 14, "10.0.0.3", "12.3"), "infra", "oom"),
        ("", cuda_oom("2.00", 0), "infra", "oom"),
        (
            "Job entrypoint command failed with exit code -9",
            "Out of memory: Killed process 4812 (python)\n",
            "infra",
            "oom",
        ),
        ("", engine_crash(211, "0x7f3a2c001000"), "infra", "engine_crash"),
        ("", "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.\n", "infra", "engine_crash"),
        ("", sandbox_error("sbx-3f9a1c2b7d", 41233), "infra", "sandbox"),
        ("Job entrypoint command failed with exit code 137", "step 3 done\n", "infra", "killed"),
        ("Job entrypoint command failed with exit code -9", "", "infra", "killed"),
        ("", actor_died("3f2a9c81d04b11e2b5a6c0ffee000001", 4242, "10.0.0.5"), "infra", "ray"),
        ("", "ray.exceptions.NodeDiedError: Node 10.0.0.3 died.\n", "infra", "ray"),
        ("", recipe_keyerror("/srv", 120), "workload", ""),
        ("", user_valueerror("/home/a", 88, 12), "workload", ""),
        (
            "",
            "ray.exceptions.RayTaskError(ZeroDivisionError): ray::Reward.score() (pid=12, ip=10.0.0.2)\n"
            '  File "/srv/my_reward.py", line 9, in score\n    return a / b\nZeroDivisionError: division by zero\n',
            "workload",
            "",
        ),
        ("Job entrypoint command failed with exit code 1", "", "workload", ""),
    ],
)
def test_each_failure_is_classified(reason: str, log: str, fault: str, cause: str) -> None:
    found = failure_signature(reason, log)
    assert (found.fault, found.cause) == (fault, cause)


def test_the_final_exception_and_its_frames_are_read_from_the_log() -> None:
    found = failure_signature("", recipe_keyerror("/home/alice/barrel", 120))
    assert found.exception == "KeyError"
    assert found.message == "'reward'"
    assert found.frames == ("entrypoint.py:run_job", "run.py:run", "run.py:step")
    assert found.traceback.splitlines()[-1] == "KeyError: 'reward'"


def test_a_ray_task_error_is_filed_under_the_remote_exception() -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "/opt/venv/lib/python3.11/site-packages/ray/_private/worker.py", line 2667, in get\n'
        "ray.exceptions.RayTaskError(KeyError): ray::Trainer.step() "
        "(pid=4321, ip=10.0.0.5, actor_id=abc123def4567890abc123def4567890)\n"
        '  File "/srv/recipes/trainer.py", line 88, in step\n'
        "KeyError: 'advantages'\n"
    )
    parsed = parse("", log)
    assert (parsed.exception, parsed.message) == ("KeyError", "'advantages'")
    assert [str(f) for f in parsed.frames] == ["worker.py:get", "trainer.py:step"]


def test_the_reason_names_the_exception_when_the_log_has_none() -> None:
    found = failure_signature("Job failed — ValueError: bad lr 0.3", "")
    assert (found.exception, found.message) == ("ValueError", "bad lr <n>")


def test_normalise_strips_what_varies() -> None:
    text = (
        "at 2026-12-01T10:00:03.123Z job raysubmit_AbC123 attempt 0b6f7f0e-1c1e-4d2a-9a59-2f0c8e5d7a11 "
        "actor 3f2a9c81d04b11e2b5a6c0ffee000001 at 0x7f3a2c001000 on 10.0.0.5:6379 used 12.5GiB "
        "in /home/alice/runs/12/model.py line 44"
    )
    assert normalise(text) == (
        "at <time> job <job> attempt <uuid> actor <id> at <hex> on <ip> used <size> in model.py line <n>"
    )


def test_an_empty_failure_still_has_a_signature() -> None:
    found = failure_signature("", "")
    assert found.message and len(found.fingerprint) == 64


def test_a_chained_exception_is_filed_under_the_last_one_raised() -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "/srv/user/reward.py", line 10, in score\n'
        "KeyError: 'answer'\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\n"
        '  File "/srv/user/reward.py", line 14, in score\n'
        "ValueError: sample 4412 has no answer\n"
    )
    found = failure_signature("", log)
    assert (found.exception, found.message, found.frames) == (
        "ValueError",
        "sample <n> has no answer",
        ("reward.py:score",),
    )
