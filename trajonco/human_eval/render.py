"""The reviewer-facing files of an export: one HTML page per packet, an index, ``packets.json`` and the answers CSV.

The HTML is self-contained (no script, no external file) and escapes everything it shows. Reviewers answer in
a copy of ``answers_template.csv`` (one row per question): they fill ``reviewer`` and ``answer`` (one of the
``choices``) and may write a ``note`` (e.g. the kind of error: temporal, interpretive, ...).
"""

from __future__ import annotations

import csv
import html
from pathlib import Path

from vista.shared.atomic import atomic_path, atomic_write_text
from trajonco.agents.prompts import horizon_text
from trajonco.human_eval.packets import Packet, PacketAnswer, PacketSet
from trajonco.judge.errors import read_json_model
from trajonco.judge.prompts import cancer_name

PACKETS_FILE = "packets.json"
TEMPLATE_FILE = "answers_template.csv"
CSV_COLUMNS = ("packet_id", "question_id", "question", "choices", "reviewer", "answer", "note")
"""Columns of the answers CSV; the import needs packet_id, question_id, reviewer and answer."""

_CSS = ("body{font-family:system-ui,sans-serif;max-width:1100px;margin:1.5rem auto;padding:0 1rem;line-height:1.4}"
        "pre{background:#f5f5f7;padding:.6rem;overflow-x:auto;font-size:.78rem;max-height:36rem}"
        "table{border-collapse:collapse;font-size:.85rem}td,th{border:1px solid #ccc;padding:.2rem .4rem;"
        "vertical-align:top;text-align:left}.answer{border-left:4px solid #0071e3;padding-left:.8rem;margin:1rem 0}"
        ".note{color:#666;font-size:.85rem}p,td{overflow-wrap:anywhere}")


def _e(text: object) -> str:
    return html.escape(str(text))


def _answer_html(answer: PacketAnswer) -> str:
    rows = "".join(f"<tr><td>{e.number}</td><td>{_e(e.timestamp.isoformat())}</td><td>{_e(e.description)}</td>"
                   f"<td>{_e('; '.join(e.evidence) or 'no element cited')}</td></tr>" for e in answer.events)
    events = (f"<table><thead><tr><th>#</th><th>date</th><th>event</th><th>evidence (timeline id, MEDS row)</th>"
              f"</tr></thead><tbody>{rows}</tbody></table>" if answer.events else "<p>No events.</p>")
    return (f'<div class="answer" id="model-{answer.side}"><h2>Model {answer.side}</h2>'
            f"<p><b>Risk score (1-10):</b> {_e(answer.risk_score if answer.risk_score is not None else 'none')}"
            f" &nbsp; <b>Risk per part of the record:</b> {_e(answer.trajectory)}</p>"
            f"<p><b>Summary:</b> {_e(answer.summary)}</p><p><b>Reasoning:</b> {_e(answer.reasoning)}</p>"
            f"<h3>Events</h3>{events}</div>")


def packet_html(packet: Packet) -> str:
    """One packet as a self-contained HTML page."""
    questions = "".join(f"<tr><td><code>{_e(q.question_id)}</code></td><td>{_e(q.text)}</td>"
                        f"<td>{_e(' / '.join(q.choices))}</td></tr>" for q in packet.questions)
    timeline = (f"<pre>{_e(packet.timeline_excerpt)}</pre>" if packet.timeline_excerpt is not None else "")
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>Review packet {_e(packet.packet_id)}"
            f"</title><style>{_CSS}</style></head><body><h1>Review packet {_e(packet.packet_id)}</h1>"
            f"<p>Task: risk of {_e(cancer_name(packet.cancer))} within {_e(horizon_text(packet.horizon_days))} of the "
            "prediction date. "
            f"True outcome: {_e(packet.outcome)}</p>"
            f"<p class=note>The models are shown under neutral labels; their order means nothing. Answer every "
            f"question in your copy of {TEMPLATE_FILE} (columns reviewer and answer).</p>"
            f"<h2>Timeline excerpt</h2><p class=note>{_e(packet.timeline_note)}</p>{timeline}"
            + "".join(_answer_html(a) for a in packet.answers)
            + f"<h2>Questions</h2><table><thead><tr><th>question_id</th><th>question</th><th>choices</th></tr>"
            f"</thead><tbody>{questions}</tbody></table></body></html>")


def index_html(packets: PacketSet) -> str:
    items = "".join(f'<li><a href="{_e(p.packet_id)}.html">{_e(p.packet_id)}</a> ({len(p.questions)} questions)'
                    "</li>" for p in packets.packets)
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>Review packets</title>"
            f"<style>{_CSS}</style></head><body><h1>Review packets</h1><p>{len(packets.packets)} patients. Fill a "
            f"copy of <code>{TEMPLATE_FILE}</code>: your name in <code>reviewer</code>, one of the choices in "
            f"<code>answer</code>, anything else in <code>note</code>.</p><ol>{items}</ol></body></html>")


def write_packet_files(packets: PacketSet, out: Path) -> None:
    """Every reviewer-facing file of an export into ``out``."""
    atomic_write_text(out / PACKETS_FILE, packets.model_dump_json(indent=1))  # patient text: private (vista.shared.atomic)
    for packet in packets.packets:
        atomic_write_text(out / f"{packet.packet_id}.html", packet_html(packet))
    atomic_write_text(out / "index.html", index_html(packets))
    with atomic_path(out / TEMPLATE_FILE) as tmp, tmp.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        for packet in packets.packets:
            for q in packet.questions:
                writer.writerow([packet.packet_id, q.question_id, q.text, "|".join(q.choices), "", "", ""])


def read_packets(folder: Path) -> PacketSet:
    """The `PacketSet` of an export folder (errors name the file)."""
    return read_json_model(Path(folder) / PACKETS_FILE, PacketSet,
                           missing=f"{folder}: no {PACKETS_FILE} (give the folder written by `trajonco review-export`)")
