"""Special functions the stock exporter cannot translate on torch 2.13: erfinv, lgamma, digamma.

The exporter decomposes ``torch.erfinv`` into ``prims::erf_inv`` (likewise lgamma, digamma)
before dispatch; registering the aten op keeps it whole, so these rules fire for the op the
user called. lgamma and digamma are computed in float64 inside the graph and cast back.
Accuracy (max error vs eager, float32) is in docs/rule-catalogue.md.
"""

from __future__ import annotations

import math

from onnxscript import ir
from onnxscript import opset18 as op

import fxport
from fxport.rewrites._helpers import as_double, const_like

# Giles, "Approximating the erfinv function" (GPU Computing Gems, 2010), single precision.
_ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                   0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _horner(coefficients, w):
    p = const_like(coefficients[0], w)
    for c in coefficients[1:]:
        p = op.Add(op.Mul(p, w), const_like(c, w))
    return p


@fxport.onnx_op("aten::erfinv", opset=18, priority=fxport.rules.BUILTIN_PRIORITY)
def erfinv(self):
    """Inverse error function (Giles + one Newton step); ±1 → ±inf, |x| > 1 → nan."""
    x = op.Cast(self, to=ir.DataType.FLOAT)
    one = const_like(1.0, x)
    w = op.Neg(op.Log(op.Mul(op.Sub(one, x), op.Add(one, x))))
    central = _horner(_ERFINV_CENTRAL, op.Sub(w, const_like(2.5, x)))
    tail = _horner(_ERFINV_TAIL, op.Sub(op.Sqrt(w), const_like(3.0, x)))
    y = op.Mul(op.Where(op.Less(w, const_like(5.0, x)), central, tail), x)
    # One Newton step on erf(y) = x sharpens the central region, where erf is well conditioned.
    two_over_sqrt_pi = const_like(2.0 / math.sqrt(math.pi), x)
    step = op.Div(op.Sub(op.Erf(y), x), op.Mul(two_over_sqrt_pi, op.Exp(op.Neg(op.Mul(y, y)))))
    y = op.Where(op.Less(op.Abs(x), const_like(0.9, x)), op.Sub(y, step), y)
    at_one = op.Equal(op.Abs(x), one)
    y = op.Where(at_one, op.Mul(x, const_like(math.inf, x)), y)
    return op.CastLike(y, self)


_STIRLING = (1.0 / 12, -1.0 / 360, 1.0 / 1260, -1.0 / 1680, 1.0 / 1188)
_SHIFT = 8  # lgamma/digamma of z are computed at z + 8 and shifted back (exact recurrences)


def _lgamma_positive(z):
    """lgamma(z) for z >= 0.5 (float64): Stirling series at z + 8, recurrence back."""
    y = op.Add(z, const_like(float(_SHIFT), z))
    log_product = op.Log(z)
    for k in range(1, _SHIFT):
        log_product = op.Add(log_product, op.Log(op.Add(z, const_like(float(k), z))))
    inv = op.Reciprocal(y)
    inv2 = op.Mul(inv, inv)
    series = const_like(_STIRLING[-1], z)
    for c in reversed(_STIRLING[:-1]):
        series = op.Add(op.Mul(series, inv2), const_like(c, z))
    series = op.Mul(series, inv)
    stirling = op.Add(
        op.Sub(op.Mul(op.Sub(y, const_like(0.5, z)), op.Log(y)), y),
        op.Add(const_like(0.5 * math.log(2 * math.pi), z), series),
    )
    return op.Sub(stirling, log_product)


def _distance_to_integer(x):
    """x - round(x), exact in floating point: |sin(pi x)| and tan(pi x) depend only on it."""
    return op.Sub(x, op.Round(x))


def _is_pole(x):
    """True at 0, -1, -2, ... (where Gamma has its poles)."""
    return op.And(op.LessOrEqual(x, const_like(0.0, x)), op.Equal(x, op.Floor(x)))


@fxport.onnx_op("aten::lgamma", opset=18, priority=fxport.rules.BUILTIN_PRIORITY)
def lgamma(self):
    """log|Gamma(x)|: Stirling series (float64) with reflection for x < 0.5; poles → inf."""
    x = as_double(self)
    half = const_like(0.5, x)
    reflected_arg = op.Sub(const_like(1.0, x), x)
    positive_arg = op.Where(op.Less(x, half), reflected_arg, x)
    positive = _lgamma_positive(positive_arg)
    reflection = op.Sub(
        op.Log(op.Div(const_like(math.pi, x),
                      op.Abs(op.Sin(op.Mul(const_like(math.pi, x), _distance_to_integer(x)))))),
        positive)
    y = op.Where(op.Less(x, half), reflection, positive)
    y = op.Where(op.Or(op.IsInf(x), _is_pole(x)), const_like(math.inf, x), y)
    exact_zero = op.Or(op.Equal(x, const_like(1.0, x)), op.Equal(x, const_like(2.0, x)))
    y = op.Where(exact_zero, const_like(0.0, x), y)  # lgamma(1) = lgamma(2) = 0 exactly
    return op.CastLike(y, self)


_DIGAMMA_SERIES = (-1.0 / 12, 1.0 / 120, -1.0 / 252, 1.0 / 240, -1.0 / 132)


def _digamma_positive(z):
    """digamma(z) for z >= 0.5 (float64): asymptotic series at z + 8, recurrence back."""
    y = op.Add(z, const_like(float(_SHIFT), z))
    correction = op.Reciprocal(z)
    for k in range(1, _SHIFT):
        correction = op.Add(correction, op.Reciprocal(op.Add(z, const_like(float(k), z))))
    inv2 = op.Reciprocal(op.Mul(y, y))
    series = const_like(_DIGAMMA_SERIES[-1], z)
    for c in reversed(_DIGAMMA_SERIES[:-1]):
        series = op.Add(op.Mul(series, inv2), const_like(c, z))
    series = op.Mul(series, inv2)
    asymptotic = op.Add(op.Sub(op.Log(y), op.Div(const_like(0.5, z), y)), series)
    return op.Sub(asymptotic, correction)


@fxport.onnx_op("aten::digamma", opset=18, priority=fxport.rules.BUILTIN_PRIORITY)
def digamma(self):
    """digamma(x): asymptotic series (float64), reflection for x < 0.5; 0 → -inf, -n → nan."""
    x = as_double(self)
    half = const_like(0.5, x)
    below = op.Less(x, half)
    positive = _digamma_positive(op.Where(below, op.Sub(const_like(1.0, x), x), x))
    angle = op.Mul(const_like(math.pi, x), _distance_to_integer(x))
    cot_term = op.Div(op.Mul(const_like(math.pi, x), op.Cos(angle)), op.Sin(angle))
    y = op.Where(below, op.Sub(positive, cot_term), positive)
    zero = const_like(0.0, x)
    is_zero = op.Equal(x, zero)
    negative_zero = op.And(is_zero, op.Less(op.Reciprocal(x), zero))
    y = op.Where(is_zero, op.Where(negative_zero, const_like(math.inf, x),
                                   const_like(-math.inf, x)), y)
    y = op.Where(op.And(_is_pole(x), op.Not(is_zero)), const_like(math.nan, x), y)
    y = op.Where(op.Equal(x, const_like(math.inf, x)), x, y)
    return op.CastLike(y, self)
