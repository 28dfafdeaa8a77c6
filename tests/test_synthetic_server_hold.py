"""The synthetic endpoint's gate (``hold_until_in_flight``): it holds chat requests until that many are open at once,
then answers them all, so a concurrency test needs no long latency per call; a gate never reached opens after its
timeout, so a client that falls short still gets its answers (and the test its low peak)."""

from __future__ import annotations

import json
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from vista.shared.testing.synthetic_server import SyntheticLLMServer

BODY = json.dumps({"model": "synthetic", "messages": [{"role": "user", "content": "hello"}]}).encode()


def post(base_url: str) -> float:
    """Send one chat request; the time.monotonic() its answer came back."""
    request = urllib.request.Request(f"{base_url}/chat/completions", data=BODY,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200
    return time.monotonic()


def test_held_requests_are_answered_together_once_enough_are_open():
    with SyntheticLLMServer(hold_until_in_flight=4, hold_timeout_s=20) as server, ThreadPoolExecutor(4) as pool:
        first = [pool.submit(post, server.base_url) for _ in range(3)]
        time.sleep(0.5)
        assert not any(f.done() for f in first) and server.stats.in_flight == 3  # held: the gate wants 4
        opened = time.monotonic()
        last = pool.submit(post, server.base_url)
        answered = [f.result() for f in (*first, last)]
        later = post(server.base_url)  # the gate stays open
    assert max(answered) - opened < 5 and later - max(answered) < 5
    assert server.stats.max_in_flight == 4 and server.stats.requests == 5


def test_a_gate_never_reached_opens_after_its_timeout():
    with SyntheticLLMServer(hold_until_in_flight=4, hold_timeout_s=1.0) as server, ThreadPoolExecutor(2) as pool:
        sent = time.monotonic()
        answered = [f.result() for f in [pool.submit(post, server.base_url) for _ in range(2)]]
    assert all(0.9 <= t - sent < 10 for t in answered)
    assert server.stats.max_in_flight == 2 and server.stats.requests == 2
