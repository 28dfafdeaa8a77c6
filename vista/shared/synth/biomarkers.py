"""Tumour biomarkers per cancer (drivers, receptors, mismatch repair, grade, cytogenetics) and the flags they imply.

`sample_biomarkers` returns the results as (name, result) pairs, written into the pathology/molecular reports, and
the flags treatment choice reads (``egfr``, ``hr_pos``, ``dmmr`` ...). Frequencies are rough literature figures.

>>> import random
>>> results, flags = sample_biomarkers(random.Random(3), "breast", {"invasive"}, 1, smoker=False, asian=False, brca=True)
>>> [name for name, _ in results][:3], "brca" in flags
(['Estrogen receptor', 'Progesterone receptor', 'HER2'], True)
"""

from __future__ import annotations

import random


def _pick(rng: random.Random, options: list[tuple[str, float]]) -> str:
    total = sum(w for _, w in options)
    u = rng.random() * total
    acc = 0.0
    for name, w in options:
        acc += w
        if u < acc:
            return name
    return options[-1][0]


def sample_biomarkers(rng: random.Random, cancer: str, flags: set[str], bucket: int, *, smoker: bool, asian: bool,
                      brca: bool) -> tuple[list[tuple[str, str]], set[str]]:
    """Biomarker results for one case and the flags they add (``bucket`` 0-3 = stage I-IV)."""
    out: list[tuple[str, str]] = []
    new: set[str] = set()
    if brca:
        new.add("brca")
    if cancer == "lung":
        if "nsclc" in flags:
            if "nonsquamous" in flags:
                if not smoker:
                    opts = [("egfr19", 0.2), ("egfr858", 0.15), ("alk", 0.07), ("ros1", 0.02), ("kras12c", 0.06), ("kras", 0.04), ("none", 0.46)]
                else:
                    opts = [("egfr19", 0.06), ("egfr858", 0.04), ("alk", 0.03), ("ros1", 0.01), ("kras12c", 0.14), ("kras", 0.13), ("none", 0.59)]
                if asian:
                    opts = [(k, w * (3.0 if k.startswith("egfr") else 1.0)) for k, w in opts]
                driver = _pick(rng, opts)
                out.append(("EGFR", {"egfr19": "exon 19 deletion detected", "egfr858": "exon 21 L858R mutation detected"}.get(driver, "no mutation detected")))
                out.append(("ALK", "rearrangement detected" if driver == "alk" else "no rearrangement detected"))
                out.append(("ROS1", "fusion detected" if driver == "ros1" else "no fusion detected"))
                out.append(("KRAS", {"kras12c": "G12C mutation detected", "kras": "G12D mutation detected"}.get(driver, "wild type")))
                if driver.startswith("egfr"):
                    new.add("egfr")
                if driver == "alk":
                    new.add("alk")
            tps = _pick(rng, [("0", 0.3), ("low", 0.38), ("high", 0.32)])
            value = {"0": "<1%", "low": f"{rng.choice([5, 10, 20, 30, 40])}%", "high": f"{rng.choice([50, 60, 70, 80, 90])}%"}[tps]
            out.append(("PD-L1 (22C3) tumor proportion score", value))
            if tps == "high":
                new.add("pdl1_high")
    elif cancer == "breast":
        subtype = _pick(rng, [("hr+her2-", 0.7), ("hr+her2+", 0.1), ("hr-her2+", 0.06), ("tnbc", 0.14)])
        hr = subtype.startswith("hr+")
        her2 = "her2+" in subtype
        er = rng.choice([80, 90, 95, 100]) if hr else 0
        pr = rng.choice([10, 40, 70, 90]) if hr and rng.random() < 0.85 else 0
        out.append(("Estrogen receptor", f"positive ({er}%)" if er else "negative (<1%)"))
        out.append(("Progesterone receptor", f"positive ({pr}%)" if pr else "negative"))
        out.append(("HER2", "positive (IHC 3+)" if her2 else rng.choice(["negative (IHC 0)", "negative (IHC 1+)", "negative (IHC 2+, FISH not amplified)"])))
        out.append(("Ki-67", f"{rng.choice([5, 10, 15, 20, 30, 40, 60]) if subtype != 'tnbc' else rng.choice([40, 60, 80])}%"))
        out.append(("Germline BRCA1/2", "pathogenic variant detected" if brca else "no pathogenic variant"))
        new.update({"hr_pos"} if hr else set())
        new.update({"her2_pos"} if her2 else set())
        if subtype == "tnbc":
            new.add("tnbc")
    elif cancer == "prostate":
        gleason = _pick(rng, [[("3+3", 0.7), ("3+4", 0.3)], [("3+4", 0.5), ("4+3", 0.3), ("3+3", 0.2)], [("4+3", 0.3), ("4+4", 0.4), ("4+5", 0.3)],
                              [("4+4", 0.3), ("4+5", 0.5), ("5+5", 0.2)]][bucket])
        group = {"3+3": 1, "3+4": 2, "4+3": 3, "4+4": 4, "4+5": 5, "5+5": 5}[gleason]
        a, b = gleason.split("+")
        out.append(("Gleason score", f"{gleason}={int(a) + int(b)} (Grade Group {group})"))
        if bucket == 0 and group == 1:
            new.add("low_risk")
    elif cancer == "colorectal":
        dmmr = rng.random() < (0.15 if bucket < 3 else 0.05)
        kras = rng.random() < 0.4
        out.append(("Mismatch repair", "deficient (loss of MLH1/PMS2)" if dmmr else "proficient"))
        out.append(("KRAS", rng.choice(["G12D mutation", "G12V mutation", "G13D mutation"]) if kras else "wild type"))
        out.append(("NRAS", "Q61K mutation" if (not kras and rng.random() < 0.07) else "wild type"))
        out.append(("BRAF", "V600E mutation" if (not kras and rng.random() < 0.12) else "wild type"))
        if dmmr:
            new.add("dmmr")
    elif cancer == "bladder":
        out.append(("PD-L1 (22C3) combined positive score", f"{rng.choice([1, 5, 10, 20, 50])}"))
        if bucket == 3:
            out.append(("FGFR3", "S249C alteration detected" if rng.random() < 0.15 else "no alteration detected"))
    elif cancer == "cervical":
        out.append(("p16", "positive (block-type)" if rng.random() < 0.92 else "negative"))
        out.append(("PD-L1 (22C3) combined positive score", f"{rng.choice([0, 1, 5, 10, 30])}"))
    elif cancer in ("esophageal", "gastric"):
        her2 = "squamous" not in flags and rng.random() < (0.2 if cancer == "esophageal" else 0.15)
        out.append(("HER2", "positive (IHC 3+)" if her2 else "negative (IHC 0-1+)"))
        out.append(("PD-L1 (28-8) combined positive score", f"{rng.choice([0, 1, 3, 5, 10, 20])}"))
        dmmr = rng.random() < (0.03 if cancer == "esophageal" else 0.06)
        out.append(("Mismatch repair", "deficient" if dmmr else "proficient"))
        if her2:
            new.add("her2_pos")
        if dmmr:
            new.add("dmmr")
    elif cancer == "endometrial":
        dmmr = rng.random() < 0.28
        p53 = rng.random() < (0.8 if "high_grade" in flags else 0.1)
        out.append(("Mismatch repair", "deficient (loss of MLH1/PMS2)" if dmmr else "proficient"))
        out.append(("p53", "abnormal (mutant pattern)" if p53 else "wild-type pattern"))
        out.append(("Estrogen receptor", "positive" if rng.random() < 0.7 else "negative"))
        if dmmr:
            new.add("dmmr")
    elif cancer == "ovarian":
        germline = brca or rng.random() < 0.12
        out.append(("Germline BRCA1/2", "BRCA1 pathogenic variant detected" if germline else "no pathogenic variant"))
        out.append(("Homologous recombination deficiency", "positive" if germline or rng.random() < 0.35 else "negative"))
        if germline:
            new.add("brca")
    elif cancer == "pancreatic":
        germline = brca or rng.random() < 0.05
        out.append(("Germline BRCA1/2", "BRCA2 pathogenic variant detected" if germline else "no pathogenic variant"))
        out.append(("KRAS", rng.choice(["G12D mutation", "G12V mutation", "G12R mutation"]) if rng.random() < 0.9 else "wild type"))
        if germline:
            new.add("brca")
    elif cancer == "liver":
        child = _pick(rng, [("A", 0.65), ("B", 0.28), ("C", 0.07)])
        out.append(("Child-Pugh class", child))
        out.append(("BCLC stage", ["A", "B", "C", "C" if child != "C" else "D"][bucket]))
    elif cancer == "leukemia":
        if "cll" in flags:
            out.append(("IGHV", "mutated" if rng.random() < 0.55 else "unmutated"))
            out.append(("del(17p)", "detected" if rng.random() < 0.07 else "not detected"))
        elif "aml" in flags:
            out.append(("FLT3-ITD", "detected" if rng.random() < 0.25 else "not detected"))
            out.append(("NPM1", "mutated" if rng.random() < 0.3 else "wild type"))
        elif "cml" in flags:
            out.append(("BCR-ABL1", "p210 transcript detected"))
        elif "all" in flags:
            out.append(("BCR-ABL1", "detected" if rng.random() < 0.25 else "not detected"))
    elif cancer == "myeloma":
        out.append(("Cytogenetics (FISH)", _pick(rng, [("standard risk", 0.8), ("t(4;14) detected", 0.12), ("del(17p) detected", 0.08)])))
    elif cancer == "lymphoma":
        if "dlbcl" in flags:
            out.append(("Cell of origin (Hans)", "germinal center B-cell type" if rng.random() < 0.55 else "non-germinal center type"))
            out.append(("MYC rearrangement", "detected" if rng.random() < 0.1 else "not detected"))
        elif "follicular" in flags:
            out.append(("Grade", "grade 1-2" if rng.random() < 0.8 else "grade 3A"))
        elif "hodgkin" in flags:
            out.append(("CD30", "positive"))
        elif "mantle" in flags:
            out.append(("Cyclin D1", "positive"))
        if "hodgkin" not in flags:
            out.append(("CD20", "positive"))
    return out, new
