"""Quiet on node loss: Ray's raylet-death dumps stay in Ray's logs; the job prints one line per node it lost.

When a node's raylet dies, that node's dashboard agent and its runtime-env agent each publish "Raylet is terminated.
Termination is unexpected. ... Last 20 lines of the Raylet logs: ..." to every driver (``ray._private.
process_watcher``; both agents also write it to their own logs), and Ray's driver prints every published error to
stdout: a raylet log tail, twice, in the middle of the job's progress lines. `watch_node_loss` wraps Ray's driver-side
printer of published errors (``ray._private.worker.print_to_stdstream``) for exactly that message — any other
message is printed by Ray as before — logs the dump at DEBUG and, once per death, waits for the GCS to mark the node
dead and says which node it was and what the job does about it (Ray Data runs the blocks the node's actors held
again on the other nodes; answers already paid come back from the LLM response cache). ``--verbose`` skips it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping

log = logging.getLogger(__name__)

RAYLET_DIED = "Raylet is terminated. Termination is unexpected."
"""How the dump starts (``ray._private.process_watcher.report_raylet_error_logs``)."""
RERUN = ("the patients its actors held are run again on the other nodes (answers already paid come from the LLM "
         "response cache)")

NodeTable = Callable[[], Iterable[Mapping[str, object]]]


class NodeLossReporter:
    """One line per lost node: which node (address, id) the GCS marked dead after a raylet-death message."""

    def __init__(self, say: Callable[[str], None], nodes: NodeTable, *, wait_s: float = 90.0, poll_s: float = 1.0):
        self.say, self.nodes, self.wait_s, self.poll_s = say, nodes, wait_s, poll_s
        self.known_dead = self._dead()
        self._lock = threading.Lock()
        self._looking: threading.Thread | None = None

    def _dead(self) -> dict[str, Mapping[str, object]]:
        try:
            return {str(n.get("NodeID")): n for n in self.nodes() if not n.get("Alive", True)}
        except Exception:  # noqa: BLE001 - the GCS is unreachable (the job is ending): nothing to report
            return {}

    def raylet_died(self) -> None:
        """A raylet-death message arrived: look for the node it was (one search at a time: each agent of the dead
        node sends the same message)."""
        with self._lock:
            if self._looking is not None and self._looking.is_alive():
                return
            self._looking = threading.Thread(target=self._find, name="node-loss", daemon=True)
            self._looking.start()

    def _find(self) -> None:
        deadline = time.monotonic() + self.wait_s
        while True:
            new = {k: v for k, v in self._dead().items() if k not in self.known_dead}
            if new:
                for node_id, node in new.items():
                    self.known_dead[node_id] = node
                    self.say(f"lost Ray node {node.get('NodeManagerAddress', '?')} (id {node_id[:8]}): {RERUN}")
                return
            if time.monotonic() > deadline:
                self.say(f"lost a Ray node (its raylet ended; the GCS has not said which yet): {RERUN}")
                return
            time.sleep(self.poll_s)

    def wait(self, timeout_s: float | None = None) -> None:
        """Block until the current search has said its line (tests)."""
        looking = self._looking
        if looking is not None:
            looking.join(timeout_s)


def is_node_loss_dump(data: Mapping[str, object]) -> bool:
    """Whether a message Ray's driver would print is the raylet-death dump.

    >>> is_node_loss_dump({"pid": "raylet", "lines": ["Raylet is terminated. Termination is unexpected. ..."]})
    True
    >>> is_node_loss_dump({"pid": "raylet", "lines": ["Raylet is terminated. Termination is graceful."]})
    False
    """
    lines = data.get("lines") or []
    return data.get("pid") == "raylet" and any(RAYLET_DIED in str(line) for line in lines)  # type: ignore[union-attr]


def watch_node_loss(say: Callable[[str], None], nodes: NodeTable | None = None) -> NodeLossReporter:
    """Divert Ray's raylet-death dumps from the driver's stdout to DEBUG logs and say one line per lost node (call
    once connected: the nodes already dead are not reported)."""
    import ray
    import ray._private.worker as ray_worker

    reporter = NodeLossReporter(say, nodes or ray.nodes)
    printer = getattr(ray_worker.print_to_stdstream, "__wrapped__", ray_worker.print_to_stdstream)

    def print_to_stdstream(data, ignore_prefix: bool):
        if is_node_loss_dump(data):
            log.debug("Ray published a raylet-death message:\n%s", "\n".join(str(line) for line in data["lines"]))
            reporter.raylet_died()
            return None
        return printer(data, ignore_prefix)

    print_to_stdstream.__wrapped__ = printer  # type: ignore[attr-defined]
    ray_worker.print_to_stdstream = print_to_stdstream
    return reporter
