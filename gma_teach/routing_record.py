"""Chapter 11's recorded table: ``python -m gma_teach.routing_record``. The code lives in
``gma_teach.runs.routing_record``.
"""
from __future__ import annotations

from .runs.routing_record import main, record_routing

__all__ = ["main", "record_routing"]


if __name__ == "__main__":
    main()
