"""L2D routing dashboard. The pages are in ``pages/``; their frame (page config, navigation) and
shared widgets and caches in ``pages/ui/``. Run: ``streamlit run app.py``."""

from pages.ui.app import run_app

run_app()
