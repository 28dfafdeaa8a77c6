"""A seeded 2-D map of patient embeddings: UMAP (cosine) when umap-learn is installed, PCA otherwise (with a notice).

UMAP with a ``random_state`` runs single-threaded and is reproducible; its neighbourhood is capped by the number of
patients (the map needs ``min_patients_for_map`` of them, checked by the caller). umap-learn compiles its numba
functions afresh in every process (about 25 s of CPU on 2 slow cores, against 0.1 s for the fit itself); `load_umap`
turns numba's on-disk cache on for them, so only the first map on a machine pays it.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Literal

import numpy as np
from sklearn.decomposition import PCA

UMAP_MISSING = "umap-learn is not installed: the map is a PCA projection (install umap-learn for UMAP)."


def umap_available() -> bool:
    return importlib.util.find_spec("umap") is not None


@functools.cache
def load_umap() -> ModuleType:
    """umap-learn, with numba's on-disk cache on for every compiled function of umap and pynndescent (the ones they
    leave uncached: all of umap's). The cache lives next to the packages' sources, or in numba's user-wide folder
    when those are read-only; a function numba cannot cache (it builds some at run time) compiles as before. Once
    per process."""
    import umap  # lazy: importing numba takes seconds
    from numba.core.dispatcher import Dispatcher

    for name, module in list(sys.modules.items()):
        if name.partition(".")[0] not in ("umap", "pynndescent") or module is None:
            continue
        for value in vars(module).values():
            if isinstance(value, Dispatcher):
                try:
                    value.enable_caching()
                except RuntimeError:  # numba found no writable place for this function's cache
                    pass
    return umap


def project_2d(vectors: np.ndarray, method: Literal["umap", "pca"], seed: int
               ) -> tuple[np.ndarray, Literal["umap", "pca"], str | None]:
    """(n, 2) coordinates, the method used and a one-line notice when it is not the one asked for.

    >>> coords, used, notice = project_2d(np.eye(4), "pca", seed=0)
    >>> coords.shape, used, notice
    ((4, 2), 'pca', None)
    """
    if method == "umap" and umap_available():
        umap = load_umap()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "n_jobs overridden by random_state", spectral-init fallbacks
            reducer = umap.UMAP(n_components=2, n_neighbors=max(2, min(15, len(vectors) - 1)), min_dist=0.1,
                                metric="cosine", init="pca", random_state=seed)
            return np.asarray(reducer.fit_transform(vectors), dtype=np.float64), "umap", None
    notice = UMAP_MISSING if method == "umap" else None
    components = min(2, *vectors.shape)
    coords = PCA(n_components=components, random_state=seed).fit_transform(vectors)
    if components < 2:
        coords = np.column_stack([coords, np.zeros(len(coords))])
    return coords, "pca", notice
