import pytest
from tierbench.units import format_size, format_value, parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4k", 4096),
        ("4K", 4096),
        ("64MiB", 64 * 1024**2),
        ("1M", 1024**2),
        ("10M", 10 * 1024**2),
        ("1g", 1024**3),
        ("450MB", 450_000_000),
        ("1GB", 1_000_000_000),
        ("512", 512),
        (123, 123),
        ("1.5GiB", int(1.5 * 1024**3)),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["", "k", "12 parsecs", "-1", "1.2.3M", True, -5])
def test_parse_size_rejects(bad):
    with pytest.raises(ValueError):
        parse_size(bad)


def test_format_size():
    assert format_size(4096) == "4 KiB"
    assert format_size(10 * 1024**2) == "10 MiB"
    assert format_size(1.5 * 1024**3) == "1.5 GiB"
    assert format_size(100) == "100 B"


@pytest.mark.parametrize(
    ("value", "unit", "options", "expected"),
    [
        # three significant digits, never an exponent; the unit after a space
        (0.012345, "", {}, "0.0123"),
        (12.345, "s", {}, "12.3 s"),
        (999.6, "steps", {}, "1,000 steps"),
        (12345, "", {}, "12,300"),
        # bytes and seconds in their readable multiple; whole bytes
        (1_500_000, "B", {"scaled": True}, "1.5 MB"),
        (37.5, "B", {"scaled": True}, "38 B"),
        (0.0009996, "s", {"scaled": True}, "1 ms"),
        (2e-7, "s", {"scaled": True}, "0.2 us"),
        (1234, "s", {"scaled": True}, "1,230 s"),
        (1234, "MB/s", {"scaled": True}, "1.23 GB/s"),
        (12, "calls", {"scaled": True}, "12 calls"),
        # a ratio keeps two decimals near 1, two significant digits below 0.1
        (1.0, "", {"ratio": True}, "1.00"),
        (0.123, "", {"ratio": True}, "0.12"),
        (0.0123, "", {"ratio": True}, "0.012"),
        (12.34, "", {"ratio": True}, "12.3"),
        (1234.5, "", {"ratio": True}, "1,234"),
        (0, "", {"ratio": True}, "0.00"),
        # nothing to show
        (None, "s", {}, "n/a"),
        (float("nan"), "B", {"scaled": True}, "n/a"),
        (float("inf"), "", {"ratio": True}, "n/a"),
    ],
)
def test_format_value(value, unit, options, expected):
    assert format_value(value, unit, **options) == expected
