"""The ``vista serve`` web app (Starlette + Jinja2): the cohort page, the patient pages, source drill-down and the
question box, read-only over a graph store.

Security, by default:

- every request needs the server's random token: the ``token`` query parameter (then kept in an HttpOnly,
  SameSite=Strict cookie), or that cookie; none → 401, a wrong one → 403;
- the only write is the question box, a POST whose form must carry the token itself (a cookie alone is not enough,
  so another site cannot post on the user's behalf);
- templates autoescape every value (note text, model output, ids), and a Content-Security-Policy allows only the
  app's own script and style, so a note holding ``<script>`` shows as text and could not run anyway;
- a subject id is an integer the store holds; anything else gets the 404 page;
- patient text is never logged at INFO (the access log is off: it would log URLs with the token).

The store is opened lazily (its manifest on the first request); a patient's graph is read per request.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import re
import threading
from collections.abc import Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from pathlib import Path
from urllib.parse import parse_qs

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from vista.query.errors import QueryError
from vista.serve.cohort import STATUSES, Cohort, StoreManifest
from vista.serve.patient import patient_page, source_panel
from vista.serve.urls import ServerUrls
from vista.serve.question import MAX_QUESTION_CHARS, answer_question
from vista.shared.errors import UserError
from vista.shared.llm import LLMGateway
from vista.toa.errors import StaleProvenanceError

logger = logging.getLogger(__name__)
COOKIE = "vista_serve_token"
SUBJECT = re.compile(r"^[0-9]{1,18}$")
IDS = re.compile(r"^e[0-9]{1,10}$")
MAX_FORM_BYTES = 8192
SIMILAR_MAX_PATIENTS = 20_000
"""Largest store whose similarity matrix the server builds (once, on the first ask): above it the box names the
`vista similar` command instead (the matrix of every patient's tokens grows with the store)."""
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
           "Cache-Control": "no-store", "X-Frame-Options": "DENY"}


def templates() -> Environment:
    """The page templates, autoescaping every value."""
    env = Environment(loader=PackageLoader("vista.serve", "templates"), autoescape=select_autoescape(
        enabled_extensions=("html", "j2"), default_for_string=True, default=True))
    env.filters["thousands"] = lambda n: f"{n:,}" if isinstance(n, int) else n
    return env


def asset(name: str) -> str:
    """A static file shipped in the package (the page script and style sheet)."""
    return resources.files("vista.serve").joinpath("static", name).read_text(encoding="utf-8")


@dataclass
class ServeState:
    """What the app serves: the store (opened on first use), the token and how to reach a model for questions."""

    root: Path
    token: str
    gateway_factory: Callable[[], LLMGateway] | None = None

    def __post_init__(self):
        self._lock = threading.Lock()
        self._gateway: LLMGateway | None = None
        self._gateway_lock = asyncio.Lock()
        self._similar = None

    @cached_property
    def store(self) -> StoreManifest:
        with self._lock:
            return StoreManifest(self.root)

    @cached_property
    def cohort(self) -> Cohort:
        return Cohort(self.root, self.store)

    async def gateway(self, stack: AsyncExitStack) -> LLMGateway | None:
        async with self._gateway_lock:
            if self._gateway is None and self.gateway_factory is not None:
                self._gateway = await stack.enter_async_context(self.gateway_factory())
        return self._gateway

    def similar(self, subject_id: int, k: int = 8):
        """The patients most similar to ``subject_id`` (`vista.patient_search`, default method); the token matrix
        is built once per server, on first use."""
        from vista.patient_search import open_source
        from vista.patient_search.similarity import similarity_matrix

        if len(self.store) > SIMILAR_MAX_PATIENTS:
            raise ValueError(f"the store holds {len(self.store):,} patients, more than the server ranks on the fly "
                             f"({SIMILAR_MAX_PATIENTS:,}); run `vista similar --store {self.root} --subject {subject_id}`")
        with self._lock:
            if self._similar is None:
                self._similar = similarity_matrix(open_source(self.root))
        return self._similar.neighbours(subject_id, k)


def subject_of(request: Request, state: ServeState) -> int | None:
    """The path's subject id when it is an integer the store holds, else None (→ the 404 page)."""
    raw = request.path_params.get("sid", "")
    if not SUBJECT.match(raw):
        return None
    sid = int(raw)
    return sid if sid in state.store else None


def create_app(root: str | Path, token: str, *, gateway_factory: Callable[[], LLMGateway] | None = None) -> Starlette:
    """The app serving the store at ``root`` to holders of ``token``; ``gateway_factory`` opens the model the
    question box asks (None: the box says questions are off)."""
    state = ServeState(Path(root), token, gateway_factory)
    env = templates()
    stack = AsyncExitStack()

    def page(name: str, code: int = 200, *, urls: ServerUrls = ServerUrls(), **context) -> HTMLResponse:
        html = env.get_template(name).render(exported=False, urls=urls, **context)
        return HTMLResponse(html, status_code=code, headers=HEADERS)

    def not_found(what: str) -> HTMLResponse:
        return page("error.html.j2", 404, title="Not found", message=what)

    def cohort(request: Request) -> Response:
        q = request.query_params
        status = q.get("status", "") if q.get("status", "") in STATUSES else ""
        number = int(q["page"]) if q.get("page", "").isdigit() else 1
        after = int(q["after"]) if q.get("after", "").isdigit() else None
        result = state.cohort.page(query=q.get("q", "")[:100], status=status, page=number, after=after)
        return page("cohort.html.j2", cohort=result, query=q.get("q", "")[:100], status=status, statuses=STATUSES,
                    store=str(state.root))

    def patient(request: Request) -> Response:
        sid = subject_of(request, state)
        if sid is None:
            return not_found(f"No patient {request.path_params.get('sid', '')!r} in this store.")
        view = patient_page(state.root, state.store.load(sid))
        return page("patient.html.j2", urls=ServerUrls(sid, view.version), p=view, token=state.token,
                    questions=gateway_factory is not None, similar=None)

    def source(request: Request) -> Response:
        sid = subject_of(request, state)
        if sid is None:
            return not_found("No such patient.")
        ids = [i for i in request.query_params.get("ids", "").split(",") if i]
        if not ids or len(ids) > 50 or not all(IDS.match(i) for i in ids):
            return not_found("No such source event.")
        pinned = request.query_params.get("v", "")
        graph = state.store.load(sid)
        try:
            panel = source_panel(graph, "fetched", request.query_params.get("claim", "")[:200], ids,
                                 pinned=pinned if re.fullmatch(r"[0-9a-f]{8,32}", pinned) else None)
        except StaleProvenanceError as exc:
            return page("fragment_message.html.j2", 409, message=str(exc), kind="stale")
        except QueryError as exc:
            return page("fragment_message.html.j2", 404, message=str(exc), kind="error")
        return page("fragment_panel.html.j2", pn=panel)

    def similar(request: Request) -> Response:
        sid = subject_of(request, state)
        if sid is None:
            return not_found("No such patient.")
        try:
            neighbours = state.similar(sid)
        except (ValueError, OSError, UserError) as exc:  # too large, or an index that cannot rank: say so in the box
            logger.warning("similar patients of subject %d: %s", sid, type(exc).__name__)
            return page("fragment_message.html.j2", message=f"Similar patients unavailable: {exc}", kind="error")
        return page("fragment_similar.html.j2", similar=neighbours)

    async def question(request: Request) -> Response:
        sid = subject_of(request, state)
        if sid is None:
            return not_found("No such patient.")
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            return page("fragment_message.html.j2", 413, message="Question too long.", kind="error")
        form = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
        if not hmac.compare_digest(form.get("token", "").encode(), state.token.encode()):
            return page("error.html.j2", 403, title="Forbidden", message="The question form must carry the token.")
        text = form.get("question", "").strip()[:MAX_QUESTION_CHARS]
        if not text:
            return page("fragment_message.html.j2", 400, message="Type a question first.", kind="error")
        gateway = await state.gateway(stack)
        if gateway is None:
            return page("fragment_message.html.j2", message="Questions are off on this server.", kind="error")
        answer = await answer_question(state.root, sid, text, gateway)
        panel = None
        if answer.cited:
            graph = await asyncio.to_thread(state.store.load, sid)
            panel = source_panel(graph, "answer", f"{text} {answer.answer}", answer.cited, timeline=answer.timeline)
        return page("fragment_answer.html.j2", question=text, answer=answer, panel=panel)

    def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ("app.js", "app.css"):
            return not_found("No such file.")
        kind = "text/javascript" if name.endswith(".js") else "text/css"
        return Response(asset(name), media_type=kind, headers=HEADERS)

    def refused(request: Request) -> Response | None:
        """401 without the token (query parameter, then cookie), 403 with a wrong one, else None."""
        given = request.query_params.get("token", request.cookies.get(COOKIE))
        if given is None:
            return page("error.html.j2", 401, title="Token required",
                        message="Open the URL `vista serve` printed (it carries the token).")
        if not hmac.compare_digest(given.encode(), state.token.encode()):
            return page("error.html.j2", 403, title="Forbidden", message="Wrong token.")
        return None

    def guard(endpoint):
        """The token check in front of an endpoint (see the module docstring); a token given in the URL is kept
        in a cookie so the page's links and requests carry it."""

        async def checked(request: Request) -> Response:
            if (refusal := refused(request)) is not None:
                return refusal
            if asyncio.iscoroutinefunction(endpoint):
                response = await endpoint(request)
            else:
                response = await asyncio.to_thread(endpoint, request)
            if "token" in request.query_params:
                response.set_cookie(COOKIE, state.token, httponly=True, samesite="strict", path="/")
            return response

        return checked

    async def missing(request: Request, exc: Exception) -> Response:
        return refused(request) or not_found("No such page.")

    @asynccontextmanager
    async def lifespan(app):
        async with stack:
            yield

    routes = [Route("/", guard(cohort)), Route("/patient/{sid}", guard(patient)),
              Route("/patient/{sid}/source", guard(source)), Route("/patient/{sid}/similar", guard(similar)),
              Route("/patient/{sid}/ask", guard(question), methods=["POST"]),
              Route("/static/{name}", guard(static))]
    return Starlette(routes=routes, exception_handlers={404: missing}, lifespan=lifespan)
