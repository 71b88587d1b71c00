"""Expected ways for a point to end without a number; anything else is a bug."""


class TierbenchError(Exception):
    """Base class: the message is written for the person running the study."""


class ConfigError(TierbenchError):
    """The configuration names something that does not exist or cannot work."""


class PointNotApplicable(TierbenchError):
    """The point cannot be measured on this tier (e.g. O_DIRECT on a tmpfs that refuses it)."""


class PointSkipped(TierbenchError):
    """The point was not run on purpose (a tool or device is missing here)."""


class PointFailed(TierbenchError):
    """The point ran and failed in a way worth reporting (e.g. the tier filled up)."""
