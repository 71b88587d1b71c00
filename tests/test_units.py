import pytest
from tierbench.units import format_size, parse_size


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
