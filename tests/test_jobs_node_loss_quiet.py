"""Quiet on node loss, without a cluster: the message Ray's own code publishes when a raylet dies (built by
``ray._private.process_watcher.report_raylet_error_logs`` from a raylet log), delivered twice (one per agent of the
dead node) to Ray's driver-side printer, never reaches stdout; the job says one line naming the node. (The whole
path, a worker node killed mid-job: tests/test_jobs_multinode.py.)"""

from __future__ import annotations

import ray._private.worker as ray_worker
from ray._private.process_watcher import report_raylet_error_logs

from jobs.ray_node_loss import watch_node_loss


class CapturingGcs:
    """What `publish_error_to_driver` hands the GCS: the message every driver receives."""

    def __init__(self):
        self.messages: list[str] = []

    def publish_error(self, key, error_type, message, job_id, timeout):
        self.messages.append(message)


def raylet_death_message(tmp_path) -> str:
    (tmp_path / "raylet.out").write_text("".join(f"[2026-12-03 10:00:{i:02d},000 I 4242 4242] node_manager.cc:{i}: "
                                                 f"state line {i}\n" for i in range(40)))
    gcs = CapturingGcs()
    report_raylet_error_logs(str(tmp_path), gcs)
    assert len(gcs.messages) == 1 and gcs.messages[0].count("\n") >= 20  # Ray's dump: a 20-line raylet log tail
    return gcs.messages[0]


def test_a_raylet_death_dump_stays_off_stdout_and_the_job_says_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(ray_worker, "print_to_stdstream", ray_worker.print_to_stdstream)  # restored afterwards
    message = raylet_death_message(tmp_path)
    alive = [{"NodeID": "head" + "0" * 52, "Alive": True, "NodeManagerAddress": "127.0.0.1"},
             {"NodeID": "ab12cd34" + "f" * 48, "Alive": True, "NodeManagerAddress": "127.0.0.2"}]
    table = [alive]
    said: list[str] = []
    reporter = watch_node_loss(said.append, nodes=lambda: table[0])
    reporter.poll_s = 0.05
    for _agent in ("dashboard agent", "runtime env agent"):
        ray_worker.print_to_stdstream({"lines": [message], "pid": "raylet", "is_err": False}, ignore_prefix=False)
    table[0] = [alive[0], alive[1] | {"Alive": False}]  # the GCS marks the node dead a little later
    reporter.wait(timeout_s=10)
    printed = capsys.readouterr()
    assert "Raylet is terminated" not in printed.out + printed.err and "state line" not in printed.out
    assert said == ["lost Ray node 127.0.0.2 (id ab12cd34): the patients its actors held are run again on the other "
                    "nodes (answers already paid come from the LLM response cache)"]


def test_other_published_errors_still_print(capsys, monkeypatch):
    monkeypatch.setattr(ray_worker, "print_to_stdstream", ray_worker.print_to_stdstream)
    watch_node_loss(lambda text: None, nodes=lambda: [])
    ray_worker.print_to_stdstream({"lines": ["The autoscaler failed with the following error: boom"], "pid": "raylet",
                                   "is_err": False}, ignore_prefix=False)
    assert "The autoscaler failed with the following error: boom" in capsys.readouterr().out
