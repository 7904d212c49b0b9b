"""Deploy a router: save one of the registry's routers at a cost setting or budget as an artifact
(safetensors + JSON, no pickle), load it back, route and answer new queries, serve it over HTTP.

>>> from l2d_core.deploy import load_router              # doctest: +SKIP
>>> router = load_router("cache/exports/P3-live-cascade")  # doctest: +SKIP
>>> router.route("Who wrote Moby-Dick?", "Moby-Dick is by Herman Melville.")["agent"]  # doctest: +SKIP
"""

from .artifact import ARTIFACT_FORMAT, ArtifactError
from .deployed import DeployedRouter, deploy, export_problem, load_router, new_text_problem
from .export import export_folder, export_router, serve_commands, zip_folder
from .signals import QueryError

__all__ = [
    "ARTIFACT_FORMAT",
    "ArtifactError",
    "DeployedRouter",
    "QueryError",
    "deploy",
    "export_problem",
    "new_text_problem",
    "export_folder",
    "export_router",
    "serve_commands",
    "zip_folder",
    "load_router",
]
