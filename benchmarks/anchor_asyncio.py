"""The honest baseline for LLM throughput: a plain ``openai.AsyncOpenAI`` + ``asyncio.Semaphore(N)`` script.

It sends recorded chat-completion bodies (one JSON object a line, e.g. what ``python -m vista.shared.testing.synthetic_server
--record-bodies FILE`` received from a job: the job's own prompts, json_schema and limits) to an endpoint, at most
``--in-flight`` at once, parses each answer's content as JSON, and prints one JSON line: calls, answers that parsed,
failures, wall seconds. No cache, no ledger, no per-patient chain: what any job's request path is measured against
(`benchmarks.bench_anchor`).

    python -m benchmarks.anchor_asyncio --bodies bodies.jsonl --base-url http://127.0.0.1:8000/v1 --in-flight 64
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

import openai


async def replay(bodies: list[dict], base_url: str, in_flight: int, api_key: str, timeout_s: float) -> dict[str, float]:
    """Send every body, ``in_flight`` at most at once; count the answers whose content is JSON."""
    client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s)
    gate = asyncio.Semaphore(in_flight)
    parsed = failed = 0

    async def one(body: dict) -> None:
        nonlocal parsed, failed
        async with gate:
            try:
                reply = await client.chat.completions.create(**body)
                json.loads(reply.choices[0].message.content or "")
                parsed += 1
            except (openai.OpenAIError, ValueError):
                failed += 1

    started = time.perf_counter()
    try:
        await asyncio.gather(*(one(body) for body in bodies))
    finally:
        await client.close()
    return {"calls": len(bodies), "parsed": parsed, "failed": failed, "wall_s": round(time.perf_counter() - started, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bodies", type=Path, required=True, help="JSON-lines file of chat-completion request bodies")
    parser.add_argument("--base-url", required=True, help="the endpoint (http://HOST:PORT/v1)")
    parser.add_argument("--in-flight", type=int, default=64, help="requests in flight at once (default 64)")
    parser.add_argument("--api-key", default="EMPTY", help="API key (default EMPTY: local servers take any)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per request (default 600)")
    args = parser.parse_args(argv)
    bodies = [json.loads(line) for line in args.bodies.read_text(encoding="utf-8").splitlines() if line.strip()]
    print(json.dumps(asyncio.run(replay(bodies, args.base_url, args.in_flight, args.api_key, args.timeout))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
