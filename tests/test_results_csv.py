"""A study's results.csv read back (``study --report``) keeps what it was written with: a peak
memory of some hundred million bytes stays that whole number, not six significant digits of it."""
from __future__ import annotations

import csv
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from stringdiag.cli.main import main
from stringdiag.study import results as R

ROOT = Path(__file__).resolve().parents[1]
PILOT = ROOT / "gallery" / "study" / "lm-gpu-pilot"  # three runs, written by `stringdiag study` itself


def one_row(peak) -> dict:
    return {"mechanism": "M1", "family": "dot", "layers": 1, "seed": 0, "parameters": 10, "steps": 5,
            "test_ppl": 200.0, "seconds_per_epoch": 1.5, "seconds_per_epoch_std": 0.1, "peak_memory_bytes": peak,
            "peak_memory_std": 3.0, "timing_repeats": 3, "device": "cuda"}


@settings(max_examples=50, deadline=None)
@given(st.integers(min_value=0, max_value=2 ** 50))
def test_a_byte_count_survives_a_round_trip(tmp_path_factory, peak):
    path = tmp_path_factory.mktemp("csv") / "results.csv"
    R.write_csv(path, [one_row(peak)])
    back = R.read_csv(path)[0]["peak_memory_bytes"]
    assert back == peak and isinstance(back, int)


def test_a_fractional_byte_count_still_reads_as_a_number(tmp_path):
    """Tables written before the count was kept whole (``500357000.0``) still load."""
    path = tmp_path / "results.csv"
    R.write_csv(path, [one_row(500357000.0)])
    assert R.read_csv(path)[0]["peak_memory_bytes"] == 500357000.0


def test_report_keeps_the_peak_memory_the_study_wrote(tmp_path):
    assert main(["study", "--report", str(PILOT), "-o", str(tmp_path / "r")]) == 0

    def peaks(path: Path) -> dict:
        return {(r["mechanism"], r["layers"], r["seed"]): r["peak_memory_bytes"] for r in csv.DictReader(path.open())}

    want = peaks(PILOT / "results.csv")
    assert len(want) == 3 and all(v.isdigit() for v in want.values())
    assert peaks(tmp_path / "r" / "results.csv") == want
