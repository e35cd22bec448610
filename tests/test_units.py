"""The one formatter: prefixes, scientific notation, rounding, arrays."""

import re

import numpy as np
import pytest
from hypothesis import given, strategies as st

import scalelib as sl
from scalelib import fmt

_PREFIX = {"p": 1e-12, "n": 1e-9, "µ": 1e-6, "m": 1e-3, "": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}


@pytest.mark.parametrize(
    "value, unit, text",
    [
        (1.3899e-3, "s", "1.39 ms"),
        (34.4e6, "B", "34.4 MB"),
        (1.97e14, "FLOP/s", "1.97e14 FLOP/s"),
        (8.2e11, "B/s", "820 GB/s"),
        (240.2439, "FLOP/B", "240 FLOP/B"),
        (999.95e-6, "s", "1 ms"),  # rounding carries into the next prefix
        (2e15, "FLOP", "2e15 FLOP"),
        (0, "s", "0 s"),
        (-2.5e-6, "s", "-2.5 µs"),
        (90, "s", "1.5 min"),
        (3 * 86400, "s", "3 days"),
        (0.1 + 0.2, "", "0.3"),  # float noise rounded away
    ],
)
def test_fmt_examples(value, unit, text):
    assert fmt(value, unit) == text


def test_fmt_binary_prefixes_for_bytes():
    assert fmt(160 * 1024, "B", binary=True) == "160 KiB"
    assert fmt(2**30, "B", binary=True) == "1 GiB"


def test_fmt_formats_arrays_elementwise():
    assert fmt(np.array([1e-3, 2.5e-3]), "s") == "[1 ms, 2.5 ms]"


def test_fmt_keeps_significant_digits_on_request():
    assert fmt(1.23456e-3, "s", sig=5) == "1.2346 ms"


@given(st.floats(min_value=1e-11, max_value=1e20, allow_nan=False))
def test_fmt_of_bytes_reads_back_within_rounding(x):
    text = fmt(x, "B")
    match = re.fullmatch(r"(-?[\d.]+(?:e-?\d+)?) ([pnµmkMGTPE]?)B", text)
    assert match, text
    back = float(match.group(1)) * _PREFIX[match.group(2)]
    assert back == pytest.approx(x, rel=5e-3)


@given(st.floats(min_value=1e-6, max_value=1e30, allow_nan=False))
def test_fmt_of_flops_is_scientific_with_three_digits(x):
    text = fmt(x, "FLOP/s")
    number = text.removesuffix(" FLOP/s")
    if x.is_integer() and x < 1e4:
        assert number == str(int(x))  # small whole numbers print exactly
        return
    assert float(number) == pytest.approx(x, rel=5e-3)
    mantissa = number.split("e")[0]
    digits = mantissa.replace("-", "").replace(".", "").lstrip("0")
    if "." not in mantissa:
        digits = digits.rstrip("0")  # 1000 has one significant digit
    assert len(digits) <= 3


def test_one_significant_digit_is_allowed_and_zero_is_not():
    assert sl.fmt(1.46e-3, "s", sig=1) == "1 ms"
    with pytest.raises(sl.InvalidValueError, match=r"^`sig` must be a whole number of significant digits from 1 to 17, got 0$"):
        sl.fmt(1.0, "s", sig=0)


@pytest.mark.parametrize("value, unit, text", [
    (999_950, "B", "1 MB"),          # rounds up into the next prefix
    (60, "s", "1 min"),              # a minute is a minute, not 60 s
    (59.9, "s", "59.9 s"),
    (1.5e-12, "s", "1.5 ps"),        # the smallest prefix
    (3 * 86400, "s", "3 days"),
])
def test_prefix_edges(value, unit, text):
    assert fmt(value, unit) == text


def test_negative_values_and_the_last_digits_before_a_prefix():
    assert fmt(-0.00123456, "s") == "-1.23 ms"
    assert fmt(999_400, "B") == "999 kB"
    with pytest.raises(sl.InvalidValueError, match=r"^`sig` must be a whole number of significant digits from 1 to 17, got 18$"):
        fmt(1.0, "s", sig=18)


def test_binary_prefixes_divide_by_1024():
    assert fmt(2**30, "B", binary=True, sig=4) == "1 GiB"
    assert fmt(3 * 2**20, "B/s", binary=True) == "3 MiB/s"
