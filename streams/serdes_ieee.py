"""IEEE-754 bits to and from Spark DOUBLE/FLOAT columns with built-in SQL functions only.

Spark has no function reinterpreting bits as a floating-point number. The value is computed from
its fields, each step exact: ``(1 + m·2^-M) · 2^(e-bias)`` for normal numbers and
``(m·2^-M) · 2^(1-bias)`` for subnormal ones, where every factor is a double with an exact value
and each product is a power-of-two scaling (no rounding). Going back, the exponent is
``floor(log2(|x|))`` corrected by one either way (``log2`` may round across a power of two), and
the mantissa is ``(|x|/2^e - 1)·2^M``, again exact. NaN is written as Java's canonical NaN
(``Double.doubleToLongBits``; for floats ``7fc00000``); -0.0 keeps its sign bit.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    width: int          # bytes
    exponent_bits: int
    mantissa_bits: int
    nan: int            # the bits written for any NaN
    spark: str

    @property
    def bias(self) -> int:
        return (1 << (self.exponent_bits - 1)) - 1


DOUBLE = Layout(8, 11, 52, 0x7FF8000000000000, "double")
FLOAT = Layout(4, 8, 23, 0x7FC00000, "float")


def _pow2(k):
    from pyspark.sql import functions as F
    return F.pow(F.lit(2.0), k)


def bits_to_float(col, layout: Layout):
    """An ``layout.width``-byte BINARY column (checked by the caller) as the number it encodes."""
    from pyspark.sql import functions as F
    M, bias = layout.mantissa_bits, layout.bias
    if layout.width == 8:
        bits = F.conv(F.hex(col), 16, -10).cast("bigint")
        negative = bits < 0
    else:
        bits = F.conv(F.hex(col), 16, 10).cast("bigint")
        negative = bits >= (1 << 31)
    exponent = F.shiftright(bits, M).bitwiseAND(F.lit((1 << layout.exponent_bits) - 1))
    mantissa = bits.bitwiseAND(F.lit((1 << M) - 1))
    fraction = mantissa.cast("double") * F.lit(2.0 ** -M)
    magnitude = (F.when(exponent == (1 << layout.exponent_bits) - 1,
                        F.when(mantissa == 0, F.lit(float("inf"))).otherwise(F.lit(float("nan"))))
                 .when(exponent == 0, fraction * F.lit(2.0 ** (1 - bias)))
                 .otherwise((fraction + F.lit(1.0)) * _pow2(exponent - bias)))
    return F.when(negative, -magnitude).otherwise(magnitude).cast(layout.spark)


def float_to_bytes(col, layout: Layout):
    """A DOUBLE/FLOAT column as its big-endian IEEE-754 bytes (BINARY of ``layout.width``)."""
    from pyspark.sql import functions as F
    M, bias, E = layout.mantissa_bits, layout.bias, layout.exponent_bits
    x = col.cast(layout.spark).cast("double")
    a = F.abs(x)
    # -0.0 = 0.0 in SQL comparisons; only its text tells them apart.
    negative = (x < 0) | ((x == 0) & F.startswith(x.cast("string"), F.lit("-")))
    e0 = F.floor(F.log2(a)).cast("int")
    exponent = (F.when(_pow2(e0) > a, e0 - 1).when(_pow2(e0 + 1) <= a, e0 + 1).otherwise(e0))
    smallest_normal = 2.0 ** (1 - bias)
    magnitude_bits = (
        F.when(F.isnan(x), F.lit(layout.nan))
        .when(a == float("inf"), F.lit(((1 << E) - 1) << M))
        .when(a == 0, F.lit(0))
        .when(a < smallest_normal, (a * F.lit(2.0 ** (bias - 1)) * F.lit(2.0 ** M)).cast("bigint"))
        .otherwise(F.shiftleft((exponent + bias).cast("bigint"), M)
                   .bitwiseOR(((a / _pow2(exponent) - F.lit(1.0)) * F.lit(2.0 ** M)).cast("bigint"))))
    sign = F.lit(-(1 << 63) if layout.width == 8 else 1 << 31)
    bits = F.when(negative & ~F.isnan(x), magnitude_bits.bitwiseOR(sign)).otherwise(magnitude_bits)
    return F.unhex(F.lpad(F.hex(bits), 2 * layout.width, "0"))
