import pytest

from shoal.bench.sizes import parse_size, parse_sizes
from shoal.errors import ShoalError


def test_units_are_powers_of_1024():
    assert parse_size("4M") == 4 * 1024 * 1024
    assert parse_size("1k") == 1024
    assert parse_size("17") == 17


def test_default_range_is_powers_of_two_1B_to_4MiB():
    sizes = parse_sizes("1..4M")
    assert sizes[0] == 1 and sizes[-1] == 4 * 1024 * 1024 and len(sizes) == 23


def test_range_with_factor_and_list_merge_sorted_unique():
    assert parse_sizes("1K..16K:4,8,1K") == [8, 1024, 4096, 16384]


@pytest.mark.parametrize("bad", ["", "abc", "4X", "8..2", "1..8:1", "1..8:x", ",,"])
def test_malformed_sizes_raise_one_line(bad):
    with pytest.raises(ShoalError) as info:
        parse_sizes(bad)
    assert "\n" not in str(info.value)
