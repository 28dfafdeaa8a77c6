"""Test and benchmark support, never used by a job: stand-ins for an LLM endpoint and for time.

* `synthetic_server.SyntheticLLMServer` — an OpenAI-compatible server on 127.0.0.1 with made-up, schema-valid answers
  (``python -m vista.shared.testing.synthetic_server`` for dry runs and benchmarks);
* `fault_proxy.FaultProxy` — a proxy that breaks a seeded share of chat requests (429, 500, garbage, slow, truncated);
* `scripted.ScriptedBackend` — a gateway backend answering from a script, for unit tests of code that calls an LLM;
* `clocks` — a fake clock and an event loop on virtual time, for tests of pacing, retries and budgets.

Installed with the package because benchmarks and CI steps start these servers; nothing under ``jobs/`` or a
system's pipeline imports it.
"""
