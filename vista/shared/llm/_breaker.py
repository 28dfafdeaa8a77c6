"""`CircuitBreaker`: tells, from the outcomes of a job's requests, that the endpoint is failing systematically.

A job that pays for every patient against a wrong URL, an unknown model, a refused key or a model whose answers
never validate wastes hours and exits as if it had worked. The breaker watches every request of the job (all
actors report to one `vista.shared.llm._budget.RequestBudget`) and trips, with one line saying what is wrong and what to
check, when:

* the same endpoint-level failure repeats on consecutive requests with no answer in between (connection refused,
  key refused, model unknown, HTTP 404, server errors/timeouts) — for connection and server failures of an endpoint
  that has answered before, only when the streak also lasts ``outage_s`` (a server restarting mid-job is waited
  out by the retries; a wrong URL at the start stops the job at once);
* the quota is exhausted (OpenAI's ``insufficient_quota``) — at once: waiting does not bring credit back;
* the first ``invalid_answers`` answers of the job all failed validation (none ever validated).

An answer (valid or not) resets the consecutive counts: the endpoint is reachable, accepts the key and serves the
model. Rate limits (429) and per-request rejections (400, context overflow) are neutral: they say something about
the request or the pace, not about the endpoint.

>>> from vista.shared.llm.errors import ErrorKind
>>> breaker = CircuitBreaker(BreakerPolicy(connection_failures=3), endpoint="http://127.0.0.1:9/v1", model="m")
>>> refused = AttemptReport(error_kind=ErrorKind.CONNECTION_ERROR, message="http://127.0.0.1:9/v1 (m): connection refused")
>>> breaker.observe(refused), breaker.observe(refused)
(None, None)
>>> breaker.observe(refused)
'LLM endpoint http://127.0.0.1:9/v1: connection refused on 3 consecutive calls — check base_url'
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from vista.shared.llm.errors import ErrorKind
from vista.shared.llm._pacing import Clock, SystemClock


@dataclass(frozen=True, slots=True)
class AttemptReport:
    """What one request to the endpoint gave (reported when its grant is released)."""

    answer_valid: bool | None = None  # True/False: an answer came back and did (not) validate; None: no answer
    error_kind: ErrorKind | None = None  # why there was no answer
    status: int | None = None  # HTTP status of the failure, when there was one
    retry_after_s: float | None = None  # the cool-down the endpoint asked for (429/503 Retry-After)
    tokens_used: int | None = None  # prompt + completion tokens the request really cost (None: unknown)
    completion_tokens: int | None = None  # of which completion tokens (priced apart; None: unknown)
    cached_prompt_tokens: int | None = None  # prompt tokens the endpoint served from its own prompt cache (priced apart)
    message: str = ""  # the failure's message (for the breaker's line)

    @property
    def answered(self) -> bool:
        return self.answer_valid is not None


@dataclass(frozen=True, slots=True)
class BreakerPolicy:
    """How many consecutive failures of each kind mean "the endpoint is broken", and what to tell the user."""

    connection_failures: int = 12
    auth_failures: int = 3
    unknown_model_failures: int = 3
    not_found_failures: int = 6  # HTTP 404 that does not name the model (e.g. a base URL without its /v1)
    server_failures: int = 40  # 5xx, timeouts, unreadable bodies
    invalid_answers: int = 24  # answers before the first valid one of the job
    outage_s: float = 120.0  # once the endpoint has answered: how long connection/server failures must last to stop
    hint_url: str = "check base_url"
    hint_model: str = "check model"
    hint_key: str = "check the API key (the variable named by api_key_env)"
    hint_answers: str = "check schema_mode (does the endpoint enforce JSON schemas?) and the model"


_CATEGORY = {
    ErrorKind.CONNECTION_ERROR: "connection",
    ErrorKind.AUTH_ERROR: "auth",
    ErrorKind.UNKNOWN_MODEL: "model",
    ErrorKind.QUOTA_EXCEEDED: "quota",
    ErrorKind.SERVER_ERROR: "server",
    ErrorKind.TIMEOUT: "server",
    ErrorKind.BAD_RESPONSE: "server",
}


def _category(report: AttemptReport) -> str | None:
    if report.error_kind is ErrorKind.HTTP_ERROR and report.status == 404:
        return "not_found"
    return _CATEGORY.get(report.error_kind) if report.error_kind is not None else None


def _detail(message: str) -> str:
    """The message without its ``<source>: `` prefix (backends write ``"<url> (<model>): <what happened>"``)."""
    head, sep, tail = message.partition("): ")
    return (tail if sep else message).strip() or "no detail"


class CircuitBreaker:
    """Counts the job's request outcomes; `observe` returns the one-line reason when it trips (then stays tripped)."""

    def __init__(self, policy: BreakerPolicy | None = None, *, endpoint: str, model: str, clock: Clock | None = None):
        self.policy = policy or BreakerPolicy()
        self.endpoint = endpoint
        self.model = model
        self.tripped: str | None = None
        self.quota_exhausted = False
        self._clock = clock or SystemClock()
        self._consecutive: Counter[str] = Counter()
        self._streak_start: dict[str, float] = {}
        self._answered = False  # the endpoint has answered at least once (valid or not)
        self._valid_seen = False
        self._invalid_before_valid = 0

    def observe(self, report: AttemptReport) -> str | None:
        """Count one request's outcome; the stop message if this outcome trips the breaker (else None)."""
        if self.tripped is not None:
            return None
        if report.answered:
            self._answered = True
            self._consecutive.clear()
            if report.answer_valid:
                self._valid_seen = True
            elif not self._valid_seen:
                self._invalid_before_valid += 1
                if self._invalid_before_valid >= self.policy.invalid_answers:
                    return self._trip(self._invalid_message(report))
            return None
        category = _category(report)
        if report.status is not None and category != "connection":
            self._consecutive.pop("connection", None)  # it answered over HTTP: it is reachable
        if category is None:
            return None
        self._consecutive[category] += 1
        now = self._clock.monotonic()
        if self._consecutive[category] == 1:
            self._streak_start[category] = now
        if category == "quota":
            self.quota_exhausted = True
            return self._trip(f"LLM endpoint {self.endpoint}: quota exhausted (insufficient_quota: "
                              f"{_detail(report.message)}) — add credit or raise the quota, then rerun")
        count = self._consecutive[category]
        lasting = now - self._streak_start[category]
        if category in ("connection", "server") and self._answered and lasting < self.policy.outage_s:
            return None  # it worked before: an outage shorter than outage_s is the retries' business
        if count >= self._threshold(category):
            return self._trip(self._message(category, count, report, lasting if self._answered else None))
        return None

    def _threshold(self, category: str) -> int:
        p = self.policy
        return {"connection": p.connection_failures, "auth": p.auth_failures, "model": p.unknown_model_failures,
                "not_found": p.not_found_failures, "server": p.server_failures}[category]

    def _message(self, category: str, count: int, report: AttemptReport, lasting: float | None) -> str:
        p, where = self.policy, f"LLM endpoint {self.endpoint}"
        status = f"HTTP {report.status}" if report.status is not None else "no HTTP status"
        during = f" over {lasting:.0f} s" if lasting is not None else ""
        if category == "connection":
            return f"{where}: {_detail(report.message)} on {count} consecutive calls{during} — {p.hint_url}"
        if category == "auth":
            return f"{where}: the API key was refused ({status}) on {count} consecutive calls — {p.hint_key}"
        if category == "model":
            return (f"{where}: model {self.model!r} is not served there ({status}: {_detail(report.message)}) on "
                    f"{count} consecutive calls — {p.hint_model}")
        if category == "not_found":
            return (f"{where}: HTTP 404 on {count} consecutive calls (no chat completions at this URL) — {p.hint_url}")
        return (f"{where}: {count} consecutive calls failed{during} with no answer in between (last: "
                f"{report.error_kind}, {_detail(report.message)}) — is the server up and not overloaded?")

    def _invalid_message(self, report: AttemptReport) -> str:
        detail = f" (last: {_detail(report.message)})" if report.message else ""
        return (f"LLM endpoint {self.endpoint}: none of the first {self._invalid_before_valid} answers of model "
                f"{self.model!r} validated{detail} — {self.policy.hint_answers}")

    def _trip(self, message: str) -> str:
        self.tripped = message
        return message
