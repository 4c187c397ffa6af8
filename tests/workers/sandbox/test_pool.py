"""The sandbox pool on a real Ray head: programs run and are counted; sandbox faults (a sandbox
that cannot start, a worker killed mid-execution) are retried once on another or a fresh
worker, program outcomes never; a sample whose sandbox fails twice reaches the step as masked."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import ray

from workers.engines.base import Generation
from workers.models.tiny import TinySpec, ensure_tiny_model
from workers.recipes.grpo import actors
from workers.recipes.grpo import metrics as grpo_metrics
from workers.sandbox.base import ExecResult, Limits, Outcome, Program
from workers.sandbox.pool import SandboxPool

BROKEN = {"tier": "bubblewrap", "bwrap": "/nonexistent/bwrap"}  # every execution a start_failure
LIMITS = Limits(wall_s=20, cpu_s=10)


# A Ray cluster of the test's own, started in-process as the other worker tests start theirs (the
# ray_address fixture's head answers on its dashboard's HTTP address, which ray.init cannot join).
# The tests that use it are marked e2e: the fast loop starts no Ray.
@pytest.fixture(scope="module")
def on_ray() -> Iterator[None]:
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    yield
    ray.shutdown()


def pool(**kw: Any) -> SandboxPool:
    return SandboxPool(**{"workers": 2, "num_cpus": 0.1, "slots_per_worker": 2, "limits": LIMITS, **kw})


@pytest.mark.e2e
def test_the_pool_runs_programs_and_never_retries_their_own_outcomes(on_ray: None):
    sandboxes = pool()
    try:
        codes = {
            "ok": "print(input()[::-1])",
            "error": "raise SystemExit(3)",
            "timeout": "while True: pass",
            "output": "print('x' * 100_000)",
        }
        results: dict[str, Any] = {}

        def run(name: str) -> None:
            limits = Limits(wall_s=2, cpu_s=10, max_output_bytes=1000) if name != "ok" else None
            results[name] = sandboxes.run(codes[name], stdin="abc\n", limits=limits)

        threads = [threading.Thread(target=run, args=(name,)) for name in codes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results["ok"].outcome is Outcome.OK and results["ok"].stdout == "cba\n"
        assert results["error"].outcome is Outcome.PROGRAM_ERROR and results["error"].exit_code == 3
        assert results["timeout"].outcome is Outcome.TIMEOUT
        assert results["output"].outcome is Outcome.OUTPUT_LIMIT
        stats = sandboxes.take_stats()
        assert stats.executions == 4 and stats.retries == 0 and stats.failures == 0
        assert stats.timeouts == 1 and len(stats.start_ms) == len(stats.exec_ms) == 4
        assert stats.pool_size == 2 and 1 <= stats.busy <= 4
        assert sandboxes.take_stats().executions == 0  # taken: counting starts again
        described = sandboxes.describe()
        assert described["tier"] and described["pool"] == {
            "kind": "cold",
            "workers": 2,
            "slots_per_worker": 2,
            "num_cpus": 0.1,
        }
    finally:
        sandboxes.close()


@pytest.mark.e2e
def test_a_sandbox_that_cannot_start_is_retried_once_on_another_worker(on_ray: None):
    half = pool(options=[BROKEN, {}])
    both = pool(options=[BROKEN, BROKEN])
    try:
        result = half.run("print('hi')")
        assert result.ok and result.stdout == "hi\n"
        stats = half.take_stats()
        assert (stats.executions, stats.failures, stats.retries) == (2, 1, 1)

        result = both.run("print('hi')")
        assert result.outcome is Outcome.START_FAILURE and "retried after" in result.reason
        stats = both.take_stats()
        assert (stats.executions, stats.failures, stats.retries) == (2, 2, 1)
    finally:
        half.close()
        both.close()


@pytest.mark.e2e
def test_a_worker_killed_mid_execution_is_a_crash_retried_on_a_fresh_worker(on_ray: None):
    one = pool(workers=1)
    try:
        first = one.handles[0]
        out: list[Any] = []
        runner = threading.Thread(target=lambda: out.append(one.run("import time; time.sleep(2); print('done')")))
        runner.start()
        while not one.take_stats().busy:  # in flight on the worker
            time.sleep(0.05)
        ray.kill(first, no_restart=True)
        runner.join()
        assert out[0].ok and out[0].stdout == "done\n"
        stats = one.take_stats()
        assert (stats.failures, stats.retries, stats.replaced) == (1, 1, 1)
        assert one.handles[0] is not first
    finally:
        one.close()


@pytest.mark.e2e
def test_samples_whose_sandbox_fails_twice_reach_the_step_as_masked(on_ray: None, tmp_path_factory):
    model_path = str(ensure_tiny_model(TinySpec(), cache_dir=tmp_path_factory.mktemp("models")))
    task = {"name": "code", "options": {"train_size": 4, "held_out_size": 2, "warm_start_size": 0}, "seed": 0}
    spec = {"workers": 2, "num_cpus": 0.1, "slots_per_worker": 2, "limits": LIMITS}
    weights = {"tests_passed": 1.0, "format": 0.0}
    broken = actors.RewardWorker(
        task=task, model_path=model_path, weights=weights, threads=1, sandbox={**spec, "options": [BROKEN, BROKEN]}
    )
    half = actors.RewardWorker(
        task=task, model_path=model_path, weights=weights, threads=1, sandbox={**spec, "options": [BROKEN, {}]}
    )
    try:
        prompt = broken.task.train_prompts()[0]
        tok = broken.tokenizer
        texts = [prompt.answer, "x*x*x*x", prompt.answer]
        responses = [[*tok(t, add_special_tokens=False)["input_ids"], tok.eos_token_id] for t in texts]
        chunk = actors.RolloutChunk(
            [[Generation(tok(prompt.text)["input_ids"], r, [-0.1] * len(r), 0, False) for r in responses]],
            [prompt.id],
            time.time(),
            0.1,
        )
        masked = broken.score(chunk)
        assert [s.masked for s in masked.groups[0]] == [True, True, True]
        assert all("start_failure" in s.mask_reason for s in masked.groups[0])
        groups = [[s.as_dict() for s in g] for g in masked.groups]
        times = grpo_metrics.StepTimes(
            train_start_wall=time.time(), weight_sync_s=0.0, trainer_wait_s=0.0, rollout_idle_s=0.0, queue_depth=1
        )
        step = grpo_metrics.pipeline_metrics(
            groups, [masked], version=1, dropped=0, times=times, rollout_workers=1, reward_workers=1
        )
        assert step["reward_pipeline/masked"] == 3.0 and step["reward_pipeline/errors"] == 0.0
        assert step["sandbox/failures"] == 6.0 and step["sandbox/retries"] == 3.0

        # With one worker that works, every fault is retried there: nothing masked, rewards exact.
        scored = half.score(chunk)
        assert [(s.masked, s.reward) for s in scored.groups[0]] == [(False, 1.0), (False, 0.0), (False, 1.0)]
        assert scored.masked == 0 and scored.sandbox is not None and scored.sandbox.retries >= 1
    finally:
        for worker in (broken, half):
            assert worker.pool is not None
            worker.pool.close()


@pytest.mark.e2e
def test_a_warm_pool_is_one_option_away(on_ray: None):
    warm = pool(workers=1, kind="warm")
    try:
        result = warm.run("print(6 * 7)")
        assert result.ok and result.stdout == "42\n"
        described = warm.describe()
        assert "warm_pool" in described and described["pool"]["kind"] == "warm"
        assert ray.get(warm.handles[0].stats.remote())["pool_size"] == 2  # slots_per_worker
    finally:
        warm.close()


@pytest.mark.e2e
def test_reused_sandboxes_are_one_option_away(on_ray: None):
    """kind reuse: the worker's ReusePool serves several executions per sandbox, max_uses among the
    options (the GRPO recipe's sandbox.kind: reuse and sandbox.max_uses)."""
    reused = pool(workers=1, kind="reuse", options={"max_uses": 5})
    try:
        results = [reused.run("import os; print(len(os.listdir('.')))") for _ in range(6)]
        assert [r.stdout for r in results] == ["1\n"] * 6, results  # main.py only: each as fresh
        described = reused.describe()
        assert described["pool"]["kind"] == "reuse"
        reuse = described["warm_pool"]["reuse"]
        stats = ray.get(reused.handles[0].stats.remote())
        if reuse["enabled"]:
            assert reuse["max_uses"] == 5 and stats["reused"] >= 1, stats
        else:  # not root here: one execution per sandbox, and the reason said
            assert reuse["unavailable"] and stats["reused"] == 0
    finally:
        reused.close()


def test_the_grpo_recipe_asks_for_reused_sandboxes_by_kind():
    from workers.recipes.grpo.config import GRPOConfig
    from workers.recipes.grpo.setup import sandbox_spec

    code = {"task": {"name": "code"}}
    assert GRPOConfig.model_validate(code).sandbox.kind == "cold"  # the default stays one sandbox per execution
    spec = sandbox_spec(GRPOConfig.model_validate({**code, "sandbox": {"kind": "reuse", "max_uses": 50}})) or {}
    assert (spec["kind"], spec["options"]) == ("reuse", {"max_uses": 50})
    assert "options" not in (sandbox_spec(GRPOConfig.model_validate({**code, "sandbox": {"kind": "warm"}})) or {})


# ---------------------------------------------------------------------- without Ray
class FakeWorker:
    """A worker handle whose ``execute.remote`` answers at once (``ray.get`` is the identity here)."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.calls = 0
        self.execute = self

    def remote(self, program: Program, limits: Limits) -> ExecResult:
        self.calls += 1
        answer = self.answer(program) if callable(self.answer) else self.answer
        if isinstance(answer, BaseException):
            raise answer
        return answer


def ok_result() -> ExecResult:
    return ExecResult(Outcome.OK, 0, "fine\n", "", 1.0, 2.0)


@pytest.fixture
def fake_ray(monkeypatch: pytest.MonkeyPatch) -> list[FakeWorker]:
    """Workers started by the pool are taken from the list this returns, in order."""
    queue: list[FakeWorker] = []
    monkeypatch.setattr(ray, "get", lambda ref, timeout=None: ref)
    monkeypatch.setattr(ray, "kill", lambda handle, no_restart=True: None)
    monkeypatch.setattr(SandboxPool, "_start", lambda self, index: queue.pop(0))
    return queue


def test_program_outcomes_are_never_retried(fake_ray: list[FakeWorker]):
    error = ExecResult(Outcome.PROGRAM_ERROR, 1, "", "boom", 1.0, 1.0)
    fake_ray += [FakeWorker(error), FakeWorker(ok_result())]
    sandboxes = SandboxPool(workers=2)
    assert sandboxes.run("raise SystemExit(1)").outcome is Outcome.PROGRAM_ERROR
    assert [w.calls for w in sandboxes.handles] == [1, 0]
    assert sandboxes.take_stats().retries == 0


def test_a_dead_worker_is_replaced_and_the_execution_retried_on_another(fake_ray: list[FakeWorker]):
    from ray.exceptions import RayActorError

    dead, alive, fresh = FakeWorker(RayActorError()), FakeWorker(ok_result()), FakeWorker(ok_result())
    fake_ray += [dead, alive, fresh]
    sandboxes = SandboxPool(workers=2)
    assert sandboxes.run("print('fine')").ok
    assert (dead.calls, alive.calls) == (1, 1) and sandboxes.handles == [fresh, alive]
    stats = sandboxes.take_stats()
    assert (stats.failures, stats.retries, stats.replaced, stats.executions) == (1, 1, 1, 2)


def test_a_saturated_pool_makes_the_caller_wait_then_gives_up(fake_ray: list[FakeWorker]):
    release = threading.Event()
    started = threading.Event()

    def slow(program: Program) -> ExecResult:
        started.set()
        release.wait(30)
        return ok_result()

    fake_ray.append(FakeWorker(slow))
    sandboxes = SandboxPool(workers=1, slots_per_worker=1, acquire_timeout_s=0.2)
    first: list[ExecResult] = []
    runner = threading.Thread(target=lambda: first.append(sandboxes.run("pass")))
    runner.start()
    started.wait(30)
    waited = sandboxes.run("pass")  # no slot: waits, then a start_failure, not retried
    release.set()
    runner.join()
    assert waited.outcome is Outcome.START_FAILURE and "no sandbox slot free" in waited.reason
    assert first[0].ok and sandboxes.handles[0].calls == 1
    stats = sandboxes.take_stats()
    assert (stats.failures, stats.retries, stats.busy) == (1, 0, 1)


def test_executions_go_to_the_worker_with_fewest_in_flight(fake_ray: list[FakeWorker]):
    gate = threading.Event()
    entered = threading.Semaphore(0)

    def held(program: Program) -> ExecResult:
        entered.release()
        gate.wait(30)
        return ok_result()

    fake_ray += [FakeWorker(held), FakeWorker(held)]
    sandboxes = SandboxPool(workers=2, slots_per_worker=2)
    threads = [threading.Thread(target=sandboxes.run, args=("pass",)) for _ in range(4)]
    for t in threads:
        t.start()
    for _ in threads:
        entered.acquire(timeout=30)
    gate.set()
    for t in threads:
        t.join()
    assert [w.calls for w in sandboxes.handles] == [2, 2]
    assert sandboxes.take_stats().busy == 4


def test_busy_time_is_the_wall_time_some_execution_was_in_flight(
    fake_ray: list[FakeWorker], monkeypatch: pytest.MonkeyPatch
):
    """time/sandbox_s: executions one after another add up, idle time between them does not, and
    executions at once count once (the union of their times, not the sum)."""
    clock = [0.0]
    monkeypatch.setattr("workers.sandbox.pool.time.monotonic", lambda: clock[0])
    gate, entered = threading.Event(), threading.Semaphore(0)

    def answer(program: Program) -> ExecResult:
        if "held" in program.files["main.py"]:
            entered.release()
            gate.wait(30)
        else:
            clock[0] += 2.0
        return ok_result()

    fake_ray += [FakeWorker(answer)]
    sandboxes = SandboxPool(workers=1, slots_per_worker=2)
    sandboxes.run("pass")
    clock[0] += 10.0  # idle
    sandboxes.run("pass")
    assert sandboxes.take_stats().busy_s == 4.0
    threads = [threading.Thread(target=sandboxes.run, args=("held",)) for _ in range(2)]
    for t in threads:
        t.start()
    for _ in threads:
        entered.acquire(timeout=30)
    clock[0] += 3.0
    assert sandboxes.take_stats().busy_s == 3.0  # both in flight: counted once, up to now
    clock[0] += 1.0
    gate.set()
    for t in threads:
        t.join()
    assert sandboxes.take_stats().busy_s == 1.0


# ---------------------------------------------------------------------- sessions through the pool
def session_pool(**kw: Any) -> SandboxPool:
    return pool(**{"workers": 1, "sessions_per_worker": 1, "acquire_timeout_s": 2.0, **kw})


@pytest.mark.e2e
def test_a_sessions_files_persist_across_its_calls_and_are_gone_once_it_is_closed(on_ray: None):
    sessions = session_pool()
    try:
        with sessions.open_session() as s:
            assert s.run("open('notes.txt', 'w').write('hi')").ok
            again = s.run("print(open('notes.txt').read())")
            assert again.ok and again.stdout == "hi\n"
            # The worker's one session is held: another open waits, then fails every call, not raises.
            busy = sessions.open_session()
            refused = busy.run("print(1)")
            assert busy.dead and refused.outcome is Outcome.START_FAILURE
            assert "no session free" in refused.reason
        s.close()  # idempotent
        with pytest.raises(RuntimeError, match="closed"):
            s.run("print(1)")
        with sessions.open_session() as fresh:  # the released sandbox was torn down: nothing is left
            seen = fresh.run("import os; print(sorted(os.listdir('.')))")
            assert seen.ok and "notes.txt" not in seen.stdout, seen
        # Session calls are counted as executions: sandbox/* include them.
        stats = sessions.take_stats()
        assert (stats.executions, stats.failures, stats.retries) == (4, 1, 0)
        assert len(stats.exec_ms) == len(stats.start_ms) == 3 and stats.busy == 1 and stats.busy_s > 0
        assert stats.outcomes == {"ok": 3, "start_failure": 1}

        expiring = sessions.open_session(lease_s=0.3)
        time.sleep(0.8)
        expired = expiring.run("print(1)")
        assert expired.outcome is Outcome.START_FAILURE and "lease" in expired.reason, expired
        expiring.close()

        renewed = sessions.open_session(lease_s=0.3)
        assert renewed.renew(5.0) == 5.0
        time.sleep(0.8)
        assert renewed.run("print(1)").ok  # past the lease it opened with
        renewed.close()
        assert renewed.renew() is None
    finally:
        sessions.close()


@pytest.mark.e2e
def test_a_session_whose_worker_dies_is_a_crash_and_stays_dead(on_ray: None):
    sessions = session_pool()
    try:
        s = sessions.open_session()
        assert s.run("open('n', 'w').write('1')").ok
        first = sessions.handles[0]
        ray.kill(first, no_restart=True)
        crashed = s.run("print(open('n').read())")
        assert crashed.outcome is Outcome.CRASH and "files and processes are gone" in crashed.reason
        assert s.dead and s.run("print(1)").outcome is Outcome.CRASH  # never retried on a fresh worker
        s.close()
        stats = sessions.take_stats()
        assert (stats.executions, stats.failures, stats.retries, stats.replaced) == (3, 2, 0, 1)
        assert sessions.handles[0] is not first
        with sessions.open_session() as fresh:  # the replacement worker serves sessions
            assert fresh.run("print(2)").stdout == "2\n"
    finally:
        sessions.close()
