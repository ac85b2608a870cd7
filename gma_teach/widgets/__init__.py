"""Interactive explorers (ipywidgets) for the chapters.

Each explorer draws a static figure first (so the HTML book shows a sensible picture) and then wires sliders to
redraw it when a live kernel is attached.
"""
from .gmm_explorer import GMMExplorer, gmm_explorer
from .query_explorer import QueryExplorer, query_explorer
from .routing_explorer import RoutingExplorer, routing_explorer
