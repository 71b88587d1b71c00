"""Tier classes are declared once: every class the config accepts is declared, with its role."""

import pytest
from tierbench import schemas, tiers
from tierbench.tiers import LOCAL_DEVICE, NETWORK, RAM


def test_the_tier_classes_are_the_config_schema_s():
    classes = schemas.load("config.schema.yaml")["$defs"]["tier"]["properties"]["class"]["enum"]
    assert sorted(classes) == sorted(tiers.CLASSES)


def test_every_class_but_fuse_and_void_has_a_role_and_the_roles_part_the_classes():
    """fuse: what backs the mount decides; void: it stores nothing."""
    without = {name for name, declared in tiers.CLASSES.items() if declared.role is None}
    assert without == {"fuse", "void"}
    lists = (tiers.RAM_CLASSES, tiers.LOCAL_DEVICE_CLASSES, tiers.NETWORK_CLASSES)
    assert sorted(c for found in lists for c in found) == sorted(set(tiers.CLASSES) - without)
    assert tiers.DEVICE_CLASSES == tiers.LOCAL_DEVICE_CLASSES + tiers.NETWORK_CLASSES


def test_the_preflight_expects_a_file_system_for_every_class_that_stores_files():
    assert {name for name in tiers.CLASSES if not tiers.fs_types(name)} == {"void"}
    assert tiers.fs_types("glusterfs") == {"fuse.glusterfs"}
    assert tiers.fs_types("no-such-class") == frozenset()


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
        ("no-such-class", None),
    ],
)
def test_role(tier_class, expected):
    assert tiers.role(tier_class) == expected
