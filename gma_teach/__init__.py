"""gma_teach: Gaussian Mixture Attention from first principles.

The public API (a contract with the book and with courses; names are extended, never renamed):

* :func:`responsibilities`, :func:`log_responsibilities`, :class:`GaussianMixture` -- the GMM posterior (ch. 2);
* :func:`affinity`, :func:`gma`, :func:`gma_from_responsibilities` -- GMA itself in every form (ch. 3, 4, 6);
* :class:`GaussianMixtureAttention` -- the multi-head layer with recurrent decoding (ch. 5, 6), and
  :data:`~gma_teach.layer.SLOT_MEMORY_ROUTING`, the routing that gives each key of a sequence a slot of its own,
  chosen by the slot studies' declared rule (ch. 12), and :data:`~gma_teach.layer.LM_ROUTING_REMEDY`, the routing
  options a language model's remedy study chooses by the information the routing carries (ch. 11), now the slot
  memory's;
* :func:`make_mixer` -- GMA, the paper's comparators and two controls by name (ch. 8-10);
* :func:`~gma_teach.environment.scale`, :func:`preset`, :func:`env_report` -- the book's scale switch and environment
  report.
"""
__version__ = "0.1.0"

from .gmm import GaussianMixture, log_responsibilities, responsibilities
from .mixing import IMPLS, GMAState, affinity, gma, gma_from_responsibilities
from .layer import LM_ROUTING_REMEDY, SLOT_MEMORY_ROUTING, GaussianMixtureAttention
from .environment import cache_dir, device, env_report, preset, scale, seed_everything
from .baselines import make_mixer
from . import mixers  # registers every mixer (baselines.MIXERS is filled by its register() calls)
