"""App. B.1 of Khatri et al. (2024), as far as it is checked today: Bahdanau et al.'s
decoder cell is specialised *inside* its loop (rewriting inside a scan), the loop that then
carries nothing becomes a SIMD box (``simd_scan_copied``, an iteration law), the bi-RNN's
cells are specialised to ignore their carries and both loops become a SIMD feed-forward
(``scan_map``), and the score function is specialised to a scaled dot product.

Not yet here (see NOTES-iter.md): the reversal pair cancelling, the large SIMD box shrunk,
the invertible learner absorbed into keys and values, and the closing boundary change to
``attention.diag:SelfAttention``; ``gallery/bahdanau_to_vaswani.deriv`` still takes the
route its header describes."""
from __future__ import annotations

from pathlib import Path

import pytest

from stringdiag.derive.derivation import EQ, RED, load_derivation

GALLERY = Path(__file__).resolve().parents[1] / "gallery"

B1 = f"""start {GALLERY}/bahdanau.diag:Bahdanau
use "{GALLERY}/derivations.diag"
# break the decoder cell apart inside its loop: the state passes on, the output reads the context
specialise Dec(st, yp, ctx) := {{ return st, Out(ctx) }}
# the loop now carries nothing: the decoder runs in parallel
apply simd_scan_copied
unfold BiRNN
# the bi-RNN's cells drop their recurrence; both loops become SIMD feed-forwards
specialise Fwd(hh, xx) := {{
  learn Ef : [d] -> [h]
  return hh, Ef(xx)
}}
specialise Bwd(hh, xx) := {{
  learn Eb : [d] -> [h]
  return hh, Eb(xx)
}}
apply scan_map everywhere
unfold AttendStepMap
# the score: a scaled dot product of W_Q q and W_K k_j
specialise Score(q, kj) := {{
  qq[f] = sum_a Wq()[f, a] * q[a]
  kk[f] = sum_b Wk()[f, b] * kj[b]
  return (sum_f qq[f] * kk[f]) / sqrt(k)
}}
"""


def scans(d) -> int:
    return sum(1 for b in d.boxes() if d.box(b).get("scan"))


@pytest.fixture(scope="module")
def derivation(tmp_path_factory):
    path = tmp_path_factory.mktemp("b1") / "b1.deriv"
    path.write_text(B1)
    return load_derivation(path, verify=True)


def test_the_steps_and_their_relations(derivation):
    rel = [s.relation for s in derivation.steps[1:]]
    assert rel == [RED, EQ, EQ, RED, RED, EQ, EQ, RED]
    assert all(s.verified is not None and s.verified < 1e-9 for s in derivation.steps if s.relation == EQ)


def test_the_decoder_cell_is_specialised_inside_its_loop(derivation):
    start, first = derivation.steps[0].diagram, derivation.steps[1]
    assert "inside the loop's cell (AttendStep)" in first.note
    (cell,) = [first.diagram.box(b)["ref"] for b in first.diagram.boxes() if first.diagram.box(b).get("scan")]
    ops = {cell.box(b)["op"] for b in cell.boxes()}
    assert "Dec" not in ops and "Out" in ops  # Dec opened into its specialisation, in the cell
    assert scans(start) == 1 and scans(first.diagram) == 1  # still a loop


def test_the_loops_become_simd_boxes(derivation):
    assert scans(derivation.steps[2].diagram) == 0  # the decoder
    bi = derivation.steps[3].diagram.expand()
    assert scans(bi) == 2  # the bi-RNN, opened: its two loops
    assert scans(derivation.steps[6].diagram.expand()) == 0


def test_a_loop_that_still_carries_is_refused(tmp_path):
    """Without the decoder cell broken apart, its state is carried: the law does not apply."""
    path = tmp_path / "bad.deriv"
    path.write_text(f'start {GALLERY}/bahdanau.diag:Bahdanau\napply simd_scan_copied\n')
    from stringdiag.errors import DiagError

    with pytest.raises(DiagError, match="does not match here"):
        load_derivation(path)
