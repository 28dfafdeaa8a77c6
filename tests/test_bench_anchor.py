"""The anchor benchmark's parts: the whole-tree CPU counter, the plain-asyncio replay of recorded bodies, the synthetic
endpoint's body recording and concurrency count, and the fault proxy's truncated answers."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
import urllib.request

import openai
import pytest

from benchmarks.anchor_asyncio import replay
from benchmarks.bench_anchor import Run, compare, setting
from benchmarks.tree_cpu import run_counted
from vista.shared.testing.fault_proxy import FaultPlan, FaultProxy
from vista.shared.testing.synthetic_server import SyntheticLLMServer

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["risk"],
          "properties": {"risk": {"enum": ["Low", "Moderate", "High"]}}}


def body(i: int) -> dict:
    return {"model": "synthetic", "messages": [{"role": "user", "content": f"patient {i}: rate the risk"}],
            "max_tokens": 64, "temperature": 0.0,
            "response_format": {"type": "json_schema", "json_schema": {"name": "Risk", "schema": SCHEMA, "strict": True}}}


def test_the_counter_includes_an_orphaned_grandchild(tmp_path):
    """A daemon (double fork: its parent exits without waiting) is counted: what getrusage of the command misses."""
    script = tmp_path / "burn.py"
    script.write_text(textwrap.dedent("""
        import os, time
        def burn(s):
            t = time.process_time()
            while time.process_time() - t < s:
                pass
        if os.fork() == 0:
            if os.fork() == 0:
                time.sleep(0.3)  # outlives the command
                burn(0.8)
            os._exit(0)
        burn(0.1)
    """))
    counted = run_counted([sys.executable, str(script)], timeout_s=60)
    assert counted.usage.returncode == 0 and counted.usage.leftovers == 0
    assert counted.usage.cpu_s >= 0.85, counted.usage  # the grandchild's 0.8 s is in


def test_the_counter_includes_a_child_whose_parent_ignores_sigchld(tmp_path):
    """A parent that ignores SIGCHLD (as daemons do) has its children reaped by the kernel, their usage discarded: a
    subreaper never sees it (that lost three quarters of a Ray job's CPU); the cgroup count keeps it."""
    from benchmarks.tree_cpu import CPUACCT

    if not os.access(CPUACCT, os.W_OK):
        pytest.skip(f"no writable cpuacct cgroup at {CPUACCT} (the counter falls back to its subreaper)")
    script = tmp_path / "daemon.py"
    script.write_text(textwrap.dedent("""
        import os, signal, time
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)
        if os.fork() == 0:
            t = time.process_time()
            while time.process_time() - t < 0.8:
                pass
            os._exit(0)
        time.sleep(1.5)  # the child ended meanwhile, reaped by the kernel
    """))
    counted = run_counted([sys.executable, str(script)], timeout_s=60)
    assert counted.usage.method == "cgroup" and counted.usage.returncode == 0
    assert counted.usage.cpu_s >= 0.75, counted.usage


def test_the_server_records_bodies_and_counts_concurrency_and_the_anchor_replays_them(tmp_path):
    recorded = tmp_path / "bodies.jsonl"
    with SyntheticLLMServer(latency_s=0.2, record_bodies=recorded) as server:
        async def send():
            client = openai.AsyncOpenAI(base_url=server.base_url, api_key="EMPTY")
            await asyncio.gather(*(client.chat.completions.create(**body(i)) for i in range(6)))
            await client.close()
        asyncio.run(send())
        with urllib.request.urlopen(server.base_url.removesuffix("/v1") + "/stats") as answer:
            stats = json.load(answer)
    assert stats["requests"] == 6 and stats["max_in_flight"] == 6 and stats["in_flight"] == 0
    bodies = [json.loads(line) for line in recorded.read_text().splitlines()]
    assert sorted(b["messages"][0]["content"] for b in bodies) == sorted(body(i)["messages"][0]["content"] for i in range(6))

    with SyntheticLLMServer(latency_s=0.2) as server:
        result = asyncio.run(replay(bodies * 2, server.base_url, 4, "EMPTY", 30.0))
        assert server.stats.max_in_flight == 4 and server.stats.requests == 12  # the semaphore held, every call sent
    assert result["calls"] == 12 and result["parsed"] == 12 and result["failed"] == 0


def test_the_fault_proxy_truncates_answers_at_the_token_limit():
    async def go():
        with SyntheticLLMServer() as server:
            async with FaultProxy(server.base_url, FaultPlan(truncated=1.0)) as proxy:
                client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="EMPTY", max_retries=0)
                reply = await client.chat.completions.create(**body(1))
                await client.close()
                return reply, proxy.counts
    reply, counts = asyncio.run(go())
    assert reply.choices[0].finish_reason == "length" and counts["truncated"] == 1
    try:
        json.loads(reply.choices[0].message.content)
    except ValueError:
        pass
    else:
        raise AssertionError("a truncated answer parsed as JSON")


def test_the_comparison_lines():
    runs = [Run("job", 64, 0.5, 100, 3.0, 20.0, 10.0, 64, 0), Run("anchor", 64, 0.5, 100, 0.5, 11.0, 1.0, 64, 0),
            Run("job+faults", 64, 0.5, 100, 4.0, 26.0, 10.0, 40, 0)]
    assert runs[0].cpu_ms_per_call == 30.0 and runs[0].wall_over_bound == 2.0
    assert compare(runs) == [
        "64 @ 0.5 s: job CPU per call = 6.0 x the anchor's; server saw at most 64 of 64 from the job",
        "64 @ 0.5 s under the fault mix: job wall 26.0 s = 1.30 x its fault-free wall (20.0 s)"]
    assert setting("256:2") == (256, 2.0)


def test_the_chains_in_one_process_run_every_patient_against_the_endpoint(tmp_path):
    from benchmarks.bench_predict_throughput import make_inputs
    from benchmarks.chains_in_process import run_chains

    dataset, labels = make_inputs(tmp_path, subjects=6, patients=3)
    with SyntheticLLMServer(latency_s=0.01) as server:
        figures = asyncio.run(run_chains(labels, dataset, server.base_url, in_flight=4, chunk_tokens=4000,
                                         context_tokens=32768, cache_dir=tmp_path / "cache"))
        calls = server.stats.requests
    assert figures["patients"] == 3 and figures["failed"] == 0, figures
    assert calls >= 6  # at least one worker and the manager per patient
    assert server.stats.max_in_flight <= 4


def test_the_comparison_names_rays_share_when_the_chains_ran_in_one_process():
    runs = [Run("job", 64, 0.5, 100, 3.0, 20.0, 10.0, 64, 0), Run("anchor", 64, 0.5, 100, 0.5, 11.0, 1.0, 64, 0),
            Run("in-process", 64, 0.5, 100, 1.2, 12.0, 0.8, 64, 0)]
    assert compare(runs)[1] == ("64 @ 0.5 s: the same chains in one process without Ray cost 12.0 ms per call; "
                                "Ray's share of the job: 1.8 CPU-s (60%)")
