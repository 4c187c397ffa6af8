"""Ingest → websocket receive latency with many connected clients, one run:

    .venv/bin/python -m benchmarks.live [--clients 100] [--batches 200] [--points 100] [--rate 10]

A reporter POSTs a batch of `points` points `rate` times a second; `clients` websocket clients
watch the run. Latency = from just before the POST to the moment a client has parsed the
batch's message (one message per batch). The POST round trip alone is printed beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import httpx
import orjson
from websockets.asyncio.client import ClientConnection, connect

from benchmarks.common import Place, add_place_options, bench_stack, median, new_run, pct, token


async def watch(ws: ClientConnection, sent: dict[int, float], last: int, out: list[float], resyncs: list[int]) -> None:
    async for raw in ws:
        message = orjson.loads(raw)
        if message["type"] == "resync":
            resyncs.append(1)
        elif message["type"] == "metrics.points":
            step = message["series"][0]["steps"][0]
            out.append(time.perf_counter() - sent[step])
            if step == last:
                return


async def run_bench(url: str, tok: str, run_id: int, args: argparse.Namespace) -> None:
    ws_url = url.replace("http://", "ws://") + f"/ws/runs/{run_id}/"
    headers = {"Authorization": f"Bearer {tok}"}
    clients = [await connect(ws_url, additional_headers=headers, max_size=None) for _ in range(args.clients)]
    for ws in clients:
        assert orjson.loads(await ws.recv())["type"] == "run.snapshot"
    sent: dict[int, float] = {}
    latencies: list[float] = []
    resyncs: list[int] = []
    last = (args.batches - 1) * args.points
    watchers = [asyncio.create_task(watch(ws, sent, last, latencies, resyncs)) for ws in clients]
    posts: list[float] = []
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as http:
        bodies = [
            orjson.dumps({"points": [{"key": "live/x", "step": s, "value": 0.5} for s in range(b, b + args.points)]})
            for b in range(0, args.batches * args.points, args.points)
        ]
        started = time.perf_counter()
        for i, body in enumerate(bodies):
            # A steady rate, as a trainer reports: wait for the batch's slot, not just the last POST.
            await asyncio.sleep(max(0.0, started + i / args.rate - time.perf_counter()))
            sent[i * args.points] = t0 = time.perf_counter()
            response = await http.post(
                f"/api/v1/runs/{run_id}/metrics", content=body, headers={"Content-Type": "application/json"}
            )
            response.raise_for_status()
            posts.append(time.perf_counter() - t0)
    await asyncio.wait_for(asyncio.gather(*watchers), timeout=120)
    for ws in clients:
        await ws.close()
    print(f"{args.clients} websocket clients, {args.batches} batches of {args.points} points at {args.rate}/s")
    p50, p99, worst = median(latencies) * 1000, pct(latencies, 0.99) * 1000, max(latencies) * 1000
    print(
        f"  ingest → websocket receive : p50 {p50:6.1f} ms  p99 {p99:6.1f} ms  max {worst:6.1f} ms"
        f"  ({len(latencies)} deliveries, {len(resyncs)} resyncs)"
    )
    print(f"  POST round trip alone      : p50 {median(posts) * 1000:6.1f} ms  p99 {pct(posts, 0.99) * 1000:6.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--points", type=int, default=100)
    parser.add_argument("--rate", type=float, default=10.0)
    add_place_options(parser)
    args = parser.parse_args()
    stack = bench_stack(Place.of(args), with_ray=False)
    try:
        tok = token(stack)
        asyncio.run(run_bench(stack.url, tok, new_run(stack.url, tok, "bench/live"), args))
    finally:
        stack.stop()


if __name__ == "__main__":
    main()
