"""Former name of :mod:`gma_teach.environment`, kept until every import names the new module.

``import gma_teach.scale`` gave the function :func:`gma_teach.scale` (the package re-exports it), so the module was
renamed; import from :mod:`gma_teach.environment`.
"""
from .environment import (  # noqa: F401  (re-exports for the modules that still import from here)
    SCALES,
    cache_dir,
    default_scale,
    device,
    env_report,
    preset,
    scale,
    seed_everything,
)
