"""`export_packets`: sample patients (seeded) from one or two prediction runs and write blinded review packets.

Writes, in ``out``: one ``<packet_id>.html`` per patient, ``index.html``, ``packets.json`` (the packets, for the
import) and ``answers_template.csv`` (one row per question; each reviewer fills ``reviewer`` and ``answer`` in a
copy). The key goes to ``key_path``, which must be outside ``out`` so the folder can be handed over as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from vista.shared.atomic import atomic_write_text
from trajonco.human_eval.excerpt import timeline_excerpt
from trajonco.human_eval.packets import (KeyEntry, KeyRun, Packet, PacketAnswer, PacketEvent, PacketKey, PacketSet,
                                         questions_for)
from trajonco.judge.errors import EvaluationInputError
from trajonco.judge.prompts import outcome_text
from trajonco.judge.runs import Candidate, Run, load_run, pair_runs


@dataclass(frozen=True)
class ExportSummary:
    """What an export wrote and what it left out."""

    out: Path
    key_path: Path
    n_packets: int
    n_available: int
    n_questions: int
    left_out: str

    def lines(self) -> list[str]:
        return [f"patients: {self.left_out}",
                f"{self.n_packets} packets sampled from {self.n_available} patients, {self.n_questions} questions, "
                f"written to {self.out} (index.html, one page per packet, answers_template.csv)",
                f"key written to {self.key_path}: keep it away from the reviewers"]


def _answer(side: str, candidate: Candidate) -> PacketAnswer:
    events = tuple(PacketEvent(number=i, timestamp=e.timestamp, description=e.description,
                               evidence=tuple(f"{s.event_id} ({s.shard} row {s.row})" for s in e.sources))
                   for i, e in enumerate(candidate.events, 1))
    return PacketAnswer(side=side, risk_score=candidate.risk_score,
                        trajectory=" -> ".join(s.risk_level or "?" for s in candidate.trajectory) or "(none)",
                        summary=(candidate.summary or "").strip(), reasoning=(candidate.reasoning or "").strip(),
                        events=events)


def _timelines(keys: list[tuple[int, datetime | None, str]], dataset: Path, profile: str | None,
               cited: list[set[str]], dates: list[set], max_chars: int) -> list[tuple[str, str]]:
    from vista.shared.meds.reader import MedsDataset
    from vista.shared.timeline import render_timeline

    meds = MedsDataset(dataset, profile=profile)
    records = meds.load_patients(sorted({k[0] for k in keys}))
    catalog = meds.code_catalog()
    out = []
    for key, ids, days in zip(keys, cited, dates):
        if key[0] not in records:
            raise EvaluationInputError(f"{dataset}: subject {key[0]} of the run is not in the dataset "
                                       "(pass the dataset the run read with --dataset)")
        out.append(timeline_excerpt(render_timeline(records[key[0]], catalog, key[1]), ids, days,
                                    max_chars=max_chars))
    return out


def _outside(key_path: Path, out: Path) -> None:
    key, folder = key_path.resolve(), out.resolve()
    if key == folder or folder in key.parents:
        raise EvaluationInputError(f"--key {key_path}: the key must be outside the packet folder {out} (reviewers "
                                   "receive the folder)")


def export_packets(run_paths: list[str | Path], out: Path, key_path: Path, *, n: int, seed: int = 0,
                   names: list[str] | None = None, dataset: Path | None = None, timeline: bool = True,
                   max_excerpt_chars: int = 20_000) -> ExportSummary:
    """Sample ``n`` patients (seeded) and write their packets; one run (event and summary questions) or two (also
    the rubrics; each run is A in half of the packets, drawn at random)."""
    from trajonco.human_eval.render import write_packet_files

    if not 1 <= len(run_paths) <= 2:
        raise EvaluationInputError(f"give one or two runs, got {len(run_paths)}")
    if n < 1:
        raise EvaluationInputError(f"the sample size must be at least 1, got {n}")
    _outside(key_path, out)
    runs: list[Run] = [load_run(p, (names or [None, None])[i] if names else None) for i, p in enumerate(run_paths)]
    if len(runs) == 2:
        if runs[0].name == runs[1].name:
            runs = [load_run(p, f"{r.name} ({Path(p).name})") for p, r in zip(run_paths, runs)]
        paired = pair_runs(runs[0], runs[1])
        groups = [(p.a, p.b) for p in paired.pairs]
        left_out = paired.pairing.sentence()
    else:
        groups = [(c,) for c in runs[0].candidates.values() if c.usable]
        groups.sort(key=lambda g: (g[0].subject_id, g[0].prediction_time or datetime.min, g[0].cancer))
        unusable = len(runs[0].candidates) - len(groups)
        left_out = f"{unusable} without a usable answer left out" if unusable else "none without a usable answer"
    if not groups:
        raise EvaluationInputError(f"no patient with a usable answer to review ({left_out})")
    rng = np.random.default_rng(seed)
    picked = np.sort(rng.choice(len(groups), size=min(n, len(groups)), replace=False))
    chosen = [groups[i] for i in picked]
    half = len(chosen) // 2  # balanced: each run is A in half of the packets (the odd one drawn), in random order
    swaps = ([bool(x) for x in rng.permutation([True] * half + [False] * (len(chosen) - half))] if len(runs) == 2
             else [False] * len(chosen))
    if len(runs) == 2 and len(chosen) % 2 and rng.random() < 0.5:
        swaps = [not x for x in swaps]

    keys = [g[0].key for g in chosen]
    cited = [{s.event_id for c in g for e in c.events for s in e.sources} for g in chosen]
    if timeline:
        source = dataset or runs[0].dataset
        if source is None:
            raise EvaluationInputError(f"{runs[0].path}: its job.json names no dataset: pass --dataset (or "
                                       "--no-timeline to export without timeline excerpts)")
        if not Path(source).exists():
            raise EvaluationInputError(f"dataset {source} not found: pass --dataset (or --no-timeline)")
        dates = [{e.timestamp for c in g for e in c.events} for g in chosen]
        excerpts = _timelines(keys, Path(source), runs[0].coding_profile, cited, dates, max_excerpt_chars)
    else:
        excerpts = [(None, "exported without a timeline excerpt (--no-timeline): check events against the full "
                     "record")] * len(chosen)

    packets, entries = [], []
    for i, (group, swap, (xml, note)) in enumerate(zip(chosen, swaps, excerpts), 1):
        order = list(zip(group, runs))[::-1] if swap else list(zip(group, runs))
        sides = ("A", "B")[:len(order)]
        answers = tuple(_answer(side, candidate) for side, (candidate, _) in zip(sides, order))
        first = group[0]
        packet_id = f"P{i:03d}"
        packets.append(Packet(packet_id=packet_id, cancer=first.cancer, horizon_days=runs[0].horizon_days,
                              outcome=outcome_text(first.cancer, runs[0].horizon_days, first.label),
                              timeline_excerpt=xml, timeline_note=note, answers=answers,
                              questions=questions_for(answers)))
        entries.append(KeyEntry(packet_id=packet_id, subject_id=first.subject_id,
                                prediction_time=first.prediction_time, cancer=first.cancer, label=first.label,
                                sides={side: KeyRun(name=run.name, path=str(run.path))
                                       for side, (_, run) in zip(sides, order)}))
    packet_set = PacketSet(seed=seed, n_runs=len(runs), packets=tuple(packets))
    key = PacketKey(seed=seed, runs=tuple(KeyRun(name=r.name, path=str(r.path)) for r in runs),
                    entries=tuple(entries))
    write_packet_files(packet_set, out)
    atomic_write_text(key_path, key.model_dump_json(indent=1))
    return ExportSummary(out=out, key_path=key_path, n_packets=len(packets), n_available=len(groups),
                         n_questions=sum(len(p.questions) for p in packets), left_out=left_out)
