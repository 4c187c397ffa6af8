"""Two Barrel stacks on one machine (a demo beside a test run, or anyone's own Ray): each picks its
own ports, and both run jobs end to end at the same time."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from controlplane.devstack import Stack, check_end_to_end
from tests.e2e.conftest import Live

pytestmark = pytest.mark.e2e


def test_a_demo_shaped_stack_beside_the_tests_stack_runs_jobs_and_so_does_the_first(
    live: Live, tmp_path_factory: pytest.TempPathFactory
):
    # As `make demo` starts it: embedded PostgreSQL and Redis, a Ray head of its own.
    second = Stack(state_dir=tmp_path_factory.mktemp("second"), ray_cpus=1)
    second.start()
    try:
        assert second.web_port != live.stack.web_port
        second.bootstrap("demo", "demo-password", "demo")
        token = httpx.post(
            f"{second.url}/api/v1/tokens", json={"username": "demo", "password": "demo-password"}, timeout=30
        ).json()["token"]
        with ThreadPoolExecutor(2) as pool:
            both = [
                pool.submit(check_end_to_end, second.url, token, "demo/stack-check"),
                pool.submit(check_end_to_end, live.url, live.token, "lab/stack-check"),
            ]
            for future in both:
                future.result()  # raises with the failed run's reason and log tail
    finally:
        second.stop()
