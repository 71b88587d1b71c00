"""Tier roles are declared once: every class the config accepts has one, or is fuse or void."""

import pytest
from tierbench import matrix, tiers
from tierbench.tiers import LOCAL_DEVICE, NETWORK, RAM


def test_every_tier_class_of_the_config_has_its_role_here():
    classes = matrix._schema("config.schema.yaml")["$defs"]["tier"]["properties"]["class"]["enum"]
    roles = set(tiers.RAM_CLASSES + tiers.DEVICE_CLASSES)
    assert set(classes) == roles | {"fuse", "void"}


@pytest.mark.parametrize(
    ("tier_class", "expected"),
    [
        ("pmem-fsdax", RAM),
        ("shm", RAM),
        ("hdd", LOCAL_DEVICE),
        ("glusterfs", NETWORK),
        ("lustre", NETWORK),
        ("fuse", None),
        ("void", None),
    ],
)
def test_role(tier_class, expected):
    assert tiers.role(tier_class) == expected
