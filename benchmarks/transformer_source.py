"""Generate the source of an N-layer transformer encoder, for benchmarks and tests.

Each layer has ``heads`` attention heads written as separate uses of a ``Head``
definition (each use has its own weights), W_O, two layer norms and a feed-forward
block, with residuals. ``flat=True`` writes every layer out inline in one diagram,
so that the parser and type checker see every box in the source; ``repeat=True`` writes the
stack as one line, ``x = repeat N Layer(x0)`` (each copy with weights of its own).
"""
from __future__ import annotations

HEADER = """\
dim s : seq
dim v, dm, dh, df : fixed

diagram Head(x: [s, dm]) -> [s, dh] {
  learn Q, K, V : [dm] -> [dh]
  q = Q(x)
  k = K(x)
  w = V(x)
  e[i, j] = sum_f q[i, f] * k[j, f]
  a = softmax(e / sqrt(dh))
  y[i] = sum_j a[i, j] * w[j]
  return y
}

diagram FeedForward(x: [s, dm]) -> [s, dm] {
  learn W1 : [dm] -> [df]
  learn W2 : [df] -> [dm]
  return W2(relu(W1(x)))
}
"""


def _layer_body(heads: int, x: str, tag: str) -> list[str]:
    lines = [f"  h{tag}_{k} = Head({x})" for k in range(heads)]
    cat = f"h{tag}_0"
    for k in range(1, heads):
        lines.append(f"  c{tag}_{k} = cat({cat}, h{tag}_{k})")
        cat = f"c{tag}_{k}"
    lines += [
        f"  o{tag} = WO{tag}({cat})",
        f"  r{tag} = layernorm({x} + o{tag})",
        f"  f{tag} = FeedForward(r{tag})",
        f"  z{tag} = layernorm(r{tag} + f{tag})",
    ]
    return lines


def transformer_source(layers: int = 48, heads: int = 8, flat: bool = False, repeat: bool = False) -> str:
    """The .diag source; the encoder is called ``Encoder``."""
    hdims = " + ".join(["dh"] * heads)
    out = [HEADER]
    if not flat:
        out.append(f"diagram Layer(x: [s, dm]) -> [s, dm] {{\n  learn WO : [{hdims}] -> [dm]")
        out += _layer_body(heads, "x", "")
        out.append("  return z\n}\n")
    out.append("learn E : -> [v, dm]\nlearn U : [dm] -> [v]\n")
    out.append("diagram Encoder(tokens: [s, v]) -> [s, v] {")
    out.append("  emb = E()")
    out.append("  e0[i] = sum_t tokens[i, t] * emb[t]")
    out.append("  x0 = e0 + posenc<s, dm>()")
    prev = "x0"
    if repeat and not flat:
        out.append(f"  x = repeat {layers} Layer(x0)")
        prev, layers = "x", 0
    for n in range(1, layers + 1):
        if flat:
            out.append(f"  learn WO{n} : [{hdims}] -> [dm]")
            out += _layer_body(heads, prev, str(n))
            prev = f"z{n}"
        else:
            out.append(f"  x{n} = Layer({prev})")
            prev = f"x{n}"
    out.append(f"  return U({prev})\n}}\n")
    src = "\n".join(out)
    return src
