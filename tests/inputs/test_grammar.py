"""The grammars of sizes, counts, rates and numbers: what they accept and how they refuse."""

from __future__ import annotations

import argparse
import math

import pytest

from shoal.errors import ShoalError
from shoal.inputs import grammar, options
from shoal.inputs.grammar import Bounds, GrammarError


def test_sizes_are_powers_of_1024():
    assert grammar.size("4M") == 4 * 1024 * 1024
    assert grammar.size("1k") == 1024
    assert grammar.size("17") == 17


def test_default_range_is_powers_of_two_1B_to_4MiB():
    sizes = grammar.sizes("1..4M")
    assert sizes[0] == 1 and sizes[-1] == 4 * 1024 * 1024 and len(sizes) == 23


def test_range_with_factor_and_list_merge_sorted_unique():
    assert grammar.sizes("1K..16K:4,8,1K") == [8, 1024, 4096, 16384]


@pytest.mark.parametrize("bad", ["", "abc", "4X", "8..2", "1..8:1", "1..8:x", ",,", "1,,8",
                                 "-8", "2G", "1..4T", "nan"])
def test_malformed_sizes_raise_one_line(bad):
    with pytest.raises(GrammarError) as info:
        grammar.sizes(bad)
    assert "\n" not in str(info.value)


def test_counts_ranges_steps_and_lists():
    assert grammar.counts("1..4") == [1, 2, 3, 4]
    assert grammar.counts("1,2,4,6") == [1, 2, 4, 6]
    assert grammar.counts("2..8:2, 1") == [1, 2, 4, 6, 8]
    for bad in ("0..2", "4..1", "x", "1..", "", "2..8:0", "1.5", "-1"):
        with pytest.raises(GrammarError):
            grammar.counts(bad)
    with pytest.raises(GrammarError, match="more than the 4 available"):
        grammar.counts("1..6", hi=4)


def test_rates_are_decimal():
    assert grammar.rate("250k") == 250e3
    assert grammar.rate("1.5MB/s") == 1.5e6
    for bad in ("fast", "nan", "inf", "-1k", "1e999"):
        with pytest.raises(GrammarError):
            grammar.rate(bad)


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "0", "-1", "1e999"])
def test_positive_numbers_refuse_what_means_nothing(text):
    with pytest.raises(GrammarError):
        grammar.number(text, grammar.POSITIVE)


def test_number_bounds_and_whole_numbers():
    assert grammar.number("0.5", Bounds(0, 1)) == 0.5
    assert grammar.integer("3") == 3
    with pytest.raises(GrammarError, match="whole number"):
        grammar.integer("2.5")
    with pytest.raises(GrammarError, match="at most 1"):
        grammar.number("1.5", Bounds(0, 1))
    assert not math.isnan(grammar.number("1e-300", grammar.POSITIVE))


def test_parse_names_the_option():
    with pytest.raises(ShoalError, match=r"^--sizes 1\.\.x: "):
        grammar.parse("--sizes", grammar.sizes, "1..x")


def test_argparse_types_report_the_grammar_message():
    parser = argparse.ArgumentParser()
    parser.add_argument("--speed", type=options.POSITIVE_NUMBER)
    parser.add_argument("--out", type=options.out_dir)
    parser.error = lambda message: (_ for _ in ()).throw(ValueError(message))  # type: ignore
    with pytest.raises(ValueError, match=r"argument --speed: must be a finite number above 0, got nan"):
        parser.parse_args(["--speed", "nan"])
    with pytest.raises(ValueError, match=r"argument --out: is empty"):
        parser.parse_args(["--out", ""])
    with pytest.raises(ValueError, match=r"argument --out: has a name of 300 bytes"):
        parser.parse_args(["--out", "x" * 300])
