"""An analytic FLOP count of a jitted function from its jaxpr, independent of XLA's cost
analysis: 2·M·N·K per `dot_general` (batch dims multiply), 2·(output size)·(kernel size per
output) per convolution, summed through nested jaxprs (jit, remat, custom_vjp, while/scan
bodies times their trip count where it is static, the larger branch of a cond). Elementwise
work is not counted: for transformer steps it is a few percent of the matmuls, which is why
the benchmark shows both counts side by side.
"""

from __future__ import annotations

import math
from typing import Any

import jax


def _dot(eqn: Any) -> float:
    a, b = (v.aval.shape for v in eqn.invars[:2])
    (ca, cb), (ba, bb) = eqn.params["dimension_numbers"]
    contract = math.prod(a[d] for d in ca)
    batch = math.prod(a[d] for d in ba)
    free_a = math.prod(s for d, s in enumerate(a) if d not in (*ca, *ba))
    free_b = math.prod(s for d, s in enumerate(b) if d not in (*cb, *bb))
    return 2.0 * batch * free_a * free_b * contract


def _conv(eqn: Any) -> float:
    lhs, rhs = (v.aval.shape for v in eqn.invars[:2])
    out = eqn.outvars[0].aval.shape
    dn = eqn.params["dimension_numbers"]
    rhs_spec = dn.rhs_spec  # (out feature dim, in feature dim, *spatial)
    per_output = rhs[rhs_spec[1]] * math.prod(rhs[d] for d in rhs_spec[2:])
    return 2.0 * math.prod(out) * per_output / max(eqn.params.get("feature_group_count", 1), 1)


def _subjaxprs(eqn: Any) -> list[tuple[Any, float]]:
    """(jaxpr, multiplicity) of the jaxprs nested in one equation."""
    out = []
    name = eqn.primitive.name
    if name == "cond":
        branches = [jaxpr_flops(b.jaxpr) for b in eqn.params["branches"]]
        return [(None, max(branches, default=0.0))]
    times = float(eqn.params.get("length", 1)) if name == "scan" else 1.0
    for value in eqn.params.values():
        for v in value if isinstance(value, list | tuple) else (value,):
            if isinstance(v, jax.extend.core.ClosedJaxpr):
                out.append((v.jaxpr, times))
            elif isinstance(v, jax.extend.core.Jaxpr):
                out.append((v, times))
    return out


def jaxpr_flops(jaxpr: Any) -> float:
    """Matmul and convolution FLOPs of a (closed) jaxpr."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    total = 0.0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "dot_general":
            total += _dot(eqn)
        elif name == "conv_general_dilated":
            total += _conv(eqn)
        else:
            for sub, times in _subjaxprs(eqn):
                total += times if sub is None else times * jaxpr_flops(sub)
    return total


def count(fn: Any, *args: Any) -> float:
    """Analytic FLOPs of one call of `fn(*args)` (a jitted function or a plain one)."""
    return jaxpr_flops(jax.make_jaxpr(fn)(*args))


def matmul_eqns(jaxpr: Any, times: float = 1.0) -> list[tuple[Any, float]]:
    """Every `dot_general` / convolution equation of a (closed) jaxpr with how many times
    one call runs it (scan trip counts multiply; both branches of a cond are listed once)."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    out = []
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in ("dot_general", "conv_general_dilated"):
            out.append((eqn, times))
            continue
        if name == "cond":
            for b in eqn.params["branches"]:
                out += matmul_eqns(b.jaxpr, times)
            continue
        for sub, n in _subjaxprs(eqn):
            out += matmul_eqns(sub, times * n)
    return out


def eqn_flops(eqn: Any) -> float:
    return _dot(eqn) if eqn.primitive.name == "dot_general" else _conv(eqn)
