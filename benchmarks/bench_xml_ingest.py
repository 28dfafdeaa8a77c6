"""Benchmark: reading one large ``<eventstream>`` patient XML file (the VISTA team's meds2text shape).

A seeded file of about ``--mb`` megabytes is generated (one patient, many encounters of vitals, conditions and notes
holding ``&nbsp;``, or ``--entity``), then read in a fresh process: ``read`` = `vista.graph.source_from_xml` alone (the XML reader),
``graph`` = ``vista graph --xml-dir DIR --store STORE`` (reader, graph build and store write). Printed: wall time
and peak resident memory (ru_maxrss of the child) of each. Figures only, no assertions.

    python -m benchmarks.bench_xml_ingest [--mb 200] [--steps read,graph] [--keep DIR]
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

_VITALS = (("LOINC/8480-6", "Systolic blood pressure", "mm[Hg]"), ("LOINC/8462-4", "Diastolic blood pressure", "mm[Hg]"),
           ("LOINC/8867-4", "Heart rate", "/min"), ("LOINC/29463-7", "Body weight", "kg"))
_CONDITIONS = (("ICD10/R05.9", "Cough, unspecified"), ("ICD10/C34.11", "Malignant neoplasm of upper lobe, right bronchus or lung"),
               ("ICD10/I10", "Essential (primary) hypertension"))
_WORDS = ("patient", "reports", "cough", "no", "fever", "chest", "clear", "plan", "follow", "up", "CT", "nodule", "stable")


def write_eventstream(path: Path, megabytes: float, seed: int = 0, entity: str = "&nbsp;") -> int:
    """Write one patient's ``<eventstream>`` of about ``megabytes`` MB at ``path``; the number of events."""
    rng = random.Random(seed)
    target = int(megabytes * 1024 * 1024)
    written = events = 0
    when = datetime(2000, 1, 3, 9, 0)
    visit = 1000
    with path.open("w", encoding="utf-8") as out:
        def put(text: str) -> None:
            nonlocal written
            out.write(text)
            written += len(text)

        put('<?xml version="1.0" encoding="utf-8"?>\n<eventstream person_id="77">\n')
        while written < target:
            visit += 1
            end = when + timedelta(hours=2)
            put(f'<encounter start_timestamp="{when:%Y-%m-%d %H:%M:%S}" end_timestamp="{end:%Y-%m-%d %H:%M:%S}">\n')
            if visit == 1001:
                put("<person><birthdate>1950-04-02</birthdate><demographics><gender>FEMALE</gender></demographics></person>\n")
            put(f'<events>\n<entry timestamp="{when:%Y-%m-%d %H:%M:%S}">'
                f'<event type="visit" code="Visit/OP" name="Outpatient Visit" visit_id="{visit}"/></entry>\n')
            events += 1
            for k in range(12):
                at = when + timedelta(minutes=5 * (k + 1))
                put(f'<entry timestamp="{at:%Y-%m-%d %H:%M:%S}">')
                code, name, unit = _VITALS[k % len(_VITALS)]
                put(f'<event type="measurement" code="{code}" name="{name}" visit_id="{visit}" unit="{unit}">'
                    f'{rng.randint(50, 150)}</event>')
                code, name = _CONDITIONS[k % len(_CONDITIONS)]
                put(f'<event type="condition" code="{code}" name="{name}" visit_id="{visit}"/>')
                events += 2
                if k % 4 == 0:
                    words = " ".join(rng.choice(_WORDS) for _ in range(60))
                    put(f'<event type="note" code="Note/11506-3" name="Progress note" visit_id="{visit}">'
                        f'Patient{entity}seen. {words}</event>')
                    events += 1
                put("</entry>\n")
            put("</events>\n</encounter>\n")
            when += timedelta(hours=8)
        put("</eventstream>\n")
    return events


_READ = """
import sys, time
from pathlib import Path
from vista.graph import source_from_xml
t = time.perf_counter()
source = source_from_xml(Path(sys.argv[1]).read_bytes(), path=sys.argv[1])
print(f"{len(source.events)} events in {time.perf_counter() - t:.1f} s", file=sys.stderr)
"""


_PEAK = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[2:], capture_output=True, text=True)
open(sys.argv[1], "w").write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.stdout.write(done.stdout); sys.stderr.write(done.stderr); sys.exit(done.returncode)
"""


def _measure(argv: list[str], limit_s: float, folder: Path) -> tuple[float, float, str]:
    """(seconds, peak RSS MB of the child alone, its last output line) of one child process."""
    peak_file = folder / "peak.txt"
    peak_file.unlink(missing_ok=True)
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-c", _PEAK, str(peak_file), *argv], capture_output=True, text=True,
                              timeout=limit_s)
        said = done.stdout.strip() if done.returncode == 0 else done.stderr.strip()
        tail = said.splitlines()[-1:] or [""]
        tail = f"exit {done.returncode}: {tail[0][:160]}"
    except subprocess.TimeoutExpired:
        tail = f"stopped after {limit_s:.0f} s"
    seconds = time.perf_counter() - start
    peak = float(peak_file.read_text()) / 1024 if peak_file.exists() else float("nan")
    return seconds, peak, tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=200.0)
    parser.add_argument("--steps", default="read,graph")
    parser.add_argument("--timeout", type=float, default=900.0, help="stop a step after this many seconds")
    parser.add_argument("--entity", default="&nbsp;", help="what the notes hold after their first word (&#160; reads on any version)")
    parser.add_argument("--keep", type=Path, help="write the file here (and keep it) instead of a temporary folder")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        (folder / "xml").mkdir(parents=True, exist_ok=True)
        path = folder / "xml" / "big.xml"
        events = write_eventstream(path, args.mb, entity=args.entity)
        print(f"{path.stat().st_size / 2**20:.0f} MB, {events:,} events")
        for step in args.steps.split(","):
            if step == "read":
                cmd = [sys.executable, "-c", _READ, str(path)]
            else:
                shutil.rmtree(folder / "store", ignore_errors=True)  # a fresh store: nothing skipped as unchanged
                cmd = [sys.executable, "-c", "import sys; from jobs.cli import vista_main; sys.exit(vista_main(sys.argv[1:]))", "graph", "--xml-dir", str(path.parent), "--store", str(folder / "store")]
            seconds, peak, tail = _measure(cmd, args.timeout, folder)
            print(f"{step:>5}: {seconds:7.1f} s, peak RSS {peak:7.0f} MB  ({tail})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
